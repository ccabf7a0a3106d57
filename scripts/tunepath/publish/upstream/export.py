"""``tunepath export --upstream DIR``: the learning path in the layout of Arm's learning-paths
repository, ``DIR/content/learning-paths/servers-and-cloud-computing/<slug>/``: ``_index.md``
(front matter only: the repository's theme shows no body there, and the revised path's own first
page is its set-up), one page per step in the registry's order (``weight`` 2, 3, …), the pages
that are no step (the method page), ``_next-steps.md``, and the charts of the chosen run beside
the pages. Prose about the project's own lab (``{{% lab %}}``) is left out. Figures are frozen from the built data
(``data/``, ``static/charts/``), one run per step (``freeze.py``).

The path is written into a staging directory beside DIR (``staging.py``), checked against the repository's rules
(``check.py``) and only then moved into place: a failed export leaves DIR as it was.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tunepath.errors import TunepathError
from tunepath.publish.upstream import escape, rules, tables
from tunepath.publish.upstream.check import check_path, find_path, front_matter, read_page
from tunepath.publish.upstream.freeze import Freezer, Frozen, SiteData
from tunepath.publish.upstream.staging import make_staging

__all__ = ["ExportResult", "export_upstream", "page_file"]


@dataclass(frozen=True)
class ExportResult:
    path: Path                # the learning path's directory under DIR
    pages: int
    images: int
    notes: tuple[str, ...]    # steps that do not have the chosen run, and what they show instead


def page_file(step: str) -> str:
    """The file name of a step's page upstream: the revised path's own name for a step it has
    (``2_baseline.md``), else ours (``connectors.md``)."""
    return f"{rules.UPSTREAM_PAGES.get(step, step)}.md"


def relink(text: str, pages: dict[str, str]) -> str:
    """Links between our pages (``../baseline/``, ``summary/`` from the index, ``#anchor`` kept)
    pointed at the pages' names upstream; ``pages``: our page name → its file name there."""
    def swap(m: re.Match) -> str:
        name = pages.get(m.group(2))
        return f"]({'../'}{name.removesuffix('.md')}/{m.group(3) or ''})" if name else m.group(0)
    return re.sub(r"\]\((\.\./)?([a-z0-9-]+)/(#[^)\s]*)?\)", swap, text)


def _commit(project: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(project), "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _provenance(frozen: Frozen, commit: str) -> str:
    runs = "; ".join(f"run {r['run_id']} (server {r.get('server') or 'not recorded'}, "
                     f"date {r.get('date') or 'not recorded'})" for r in frozen.runs)
    text = f"figures from {runs or 'no run (this page has no figures)'}; tunepath commit {commit}"
    return f"<!-- tunepath export: {escape.comment(text)} -->"      # "--" may not appear in a comment


def _page(meta: dict, frozen: Frozen, commit: str, pages: dict[str, str] | None = None) -> str:
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=1000)
    text = relink(frozen.text.strip(), pages or {})
    return f"---\n{head}---\n\n{_provenance(frozen, commit)}\n\n{text}\n"


def _source_page(f: Path) -> tuple[dict, str]:
    """A page of our path: its front matter and body, read as the check reads a page (:func:`read_page`)."""
    try:
        return front_matter(read_page(f))
    except ValueError as e:
        raise TunepathError(f"{f}: {e}") from None


def _sources(lp: Path) -> tuple[dict, str, dict[str, tuple[dict, str]], dict[str, tuple[dict, str]]]:
    """Our _index.md (front matter, body), every step page by step name, and the pages that are no
    step (``extra: true``, the method page) by file name."""
    index_meta, index_body = _source_page(lp / rules.INDEX_FILE)
    pages: dict[str, tuple[dict, str]] = {}
    extras: dict[str, tuple[dict, str]] = {}
    for f in sorted(lp.glob("*.md")):
        if f.name == rules.INDEX_FILE:
            continue
        meta, body = _source_page(f)
        if meta.get("extra") is True:
            extras[f.name] = (meta, body)
            continue
        if not meta.get("step"):
            raise TunepathError(f"{f}: the page names no step (step: … in its front matter, or extra: true)")
        pages[meta["step"]] = (meta, body)
    return index_meta, index_body, pages, extras


def _write(staged: Path, project: Path, freezer: Freezer, commit: str) -> tuple[int, int, list[str]]:
    src = find_path(project)
    index_meta, _, pages, extras = _sources(src)
    lp_title = index_meta.get("title", "")
    # the revised path's own address is this page once the export replaces it: no link to itself
    index_meta["further_reading"] = [r for r in index_meta.get("further_reading") or ()
                                     if rules.UPSTREAM_SLUG not in str((r.get("resource") or {}).get("link", ""))]
    index_meta.update(weight=1, layout=rules.LAYOUT, learning_path_main_page="yes",
                      author=f"{rules.UPSTREAM_AUTHORS}, {index_meta['author']}" if index_meta.get("author")
                      else rules.UPSTREAM_AUTHORS)
    names = {s["page"]: page_file(s["name"]) for s in freezer.data.order}     # our page → its file there
    names.update({f.removesuffix(".md"): f for f in extras})
    # the repository's theme shows only the front matter of _index.md (our landing page's body is
    # the site's: the method page, exported, says where the figures come from and credits them)
    (staged / rules.INDEX_FILE).write_text(_page(index_meta, Frozen(""), commit), encoding="utf-8")
    images: dict[str, Path] = {}
    notes, weight = [], 1
    for step in freezer.data.order:
        name = step["name"]
        if name not in pages:
            raise TunepathError(f"step {name!r} has no page in {src} (a page with step: {name})")
        meta, body = pages[name]
        weight += 1
        frozen = freezer.page(body, name, f"{src.name}/{page_file(name)}")
        opening = tables.answer(freezer.data.steps.get(name, {}).get("answer"))
        if opening:          # the answer first, as on the site
            frozen.text = f"{opening}\n\n{frozen.text.lstrip()}"
        chosen = freezer.chosen
        if chosen and frozen.runs and all(r["run_id"] != chosen for r in frozen.runs):
            notes.append(f"{name}: run {chosen} has no figures here; shown: "
                         + ", ".join(r["run_id"] for r in frozen.runs))
        title = meta.get("title") or step["title"]
        out = {"title": title,
               "description": meta.get("description") or f"Step {step['number']} of {lp_title}: {title}.",
               "weight": weight, "layout": rules.LAYOUT}
        (staged / page_file(name)).write_text(_page(out, frozen, commit, names), encoding="utf-8")
        images.update(frozen.images)
    for file_name, (meta, body) in extras.items():      # after the steps, as on the site
        weight += 1
        frozen = freezer.page(body, "", f"{src.name}/{file_name}")
        out = {"title": meta.get("title") or file_name, "description": meta.get("description") or lp_title,
               "weight": weight, "layout": rules.LAYOUT}
        (staged / file_name).write_text(_page(out, frozen, commit, names), encoding="utf-8")
        images.update(frozen.images)
    nxt = {"title": rules.NEXT_STEPS_TITLE, "weight": weight + 1, "layout": rules.LAYOUT}
    (staged / rules.NEXT_STEPS_FILE).write_text(
        "---\n" + yaml.safe_dump(nxt, sort_keys=False) + "---\n", encoding="utf-8")
    for file_name, source in images.items():
        shutil.copyfile(source, staged / file_name)
    return weight + 1, len(images), notes


# what the project is made of: an export never lands inside any of these (issue 30, item 5.2)
PROJECT_SOURCES = ("config.toml", "content", "layouts", "static", "data", "notebooks", "scripts", "runs", "docs",
                   "tests", ".ci")


def export_upstream(project: Path, dest: Path, run: str | None = None) -> ExportResult:
    project, dest = Path(project).resolve(), Path(dest).resolve()
    if dest.exists() and not dest.is_dir():
        raise TunepathError(f"--upstream {dest} is a file, not a directory")
    find_path(project)
    slug = rules.UPSTREAM_SLUG
    target = dest / "content" / "learning-paths" / rules.CATEGORY / slug
    for name in PROJECT_SOURCES:
        if target.is_relative_to(project / name) or (project / name).is_relative_to(target):
            raise TunepathError(f"--upstream {dest} would write the export to {target}, inside the project's "
                                f"own {name}: nothing written. Give a checkout of {rules.REPOSITORY} "
                                "outside the project")
    freezer = Freezer(SiteData.load(project), run)
    work = make_staging(dest)
    try:
        staged = work / rules.CATEGORY / slug
        staged.mkdir(parents=True)
        pages, images, notes = _write(staged, project, freezer, _commit(project))
        problems = check_path(staged)
        if problems:
            shown = "; ".join(str(p) for p in problems[:12])
            more = f" (and {len(problems) - 12} more)" if len(problems) > 12 else ""
            raise TunepathError(f"the export breaks the rules of {rules.REPOSITORY}, nothing written to "
                                f"{dest}: {shown}{more}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.rename(work / "previous")
        try:
            staged.rename(target)
        except OSError:
            if (work / "previous").exists():
                (work / "previous").rename(target)
            raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ExportResult(target, pages, images, tuple(notes))
