"""`tunepath export --upstream DIR`: the path in the layout of Arm's learning-paths repository,
checked against that repository's contributor rules (tunepath/publish/upstream/check.py,
docs/upstream.md), its figures equal to the data of the chosen run, and a validator that fails
when a rule is broken."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tunepath import cli
from tunepath.errors import TunepathError
from tunepath.publish.upstream import rules
from tunepath.publish.upstream.check import check_path, front_matter, images, shortcode_names
from tunepath.publish.upstream.export import export_upstream, page_file
from tunepath.publish.upstream.freeze import NO_ARM_RUN
from tunepath.publish.upstream.freeze import SHORTCODE

pytestmark = pytest.mark.docs

SLUG = "tomcat-tuning"                   # our path's directory; the export's is rules.UPSTREAM_SLUG


@pytest.fixture(scope="module")
def project(built_site, tmp_path_factory) -> Path:
    """The built site's sources and data: content/, data/, static/charts/ (nothing else is read)."""
    root = tmp_path_factory.mktemp("project")
    for part in ("content", "data", "static/charts"):
        shutil.copytree(built_site.site_dir / part, root / part)
    return root


def _steps(project: Path) -> list[dict]:
    return json.loads((project / "data/path.json").read_text())["steps"]


def _data(project: Path, step: str) -> dict:
    return json.loads((project / "data/steps" / f"{step}.json").read_text())


def _second_run(project: Path) -> str:
    """A run that is not the primary run of most steps: the live run present in most steps."""
    counts: dict[str, int] = {}
    for s in _steps(project):
        f = project / "data/steps" / f"{s['name']}.json"
        if f.is_file():
            d = json.loads(f.read_text())
            for r in d.get("runs") or ():
                if r["kind"] == "live" and r["run_id"] != d.get("primary_run"):
                    counts[r["run_id"]] = counts.get(r["run_id"], 0) + 1
    return max(counts, key=counts.get)


@pytest.fixture(scope="module")
def exported(project, tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("upstream") / "arm-learning-paths"
    result = export_upstream(project, dest)
    assert result.path == dest / "content/learning-paths" / rules.CATEGORY / rules.UPSTREAM_SLUG
    return result.path


def test_export_passes_the_repository_rules(exported, capsys):
    assert check_path(exported) == []
    assert cli.main(["export", "--check", str(exported.parents[3])]) == 0
    assert "passes" in capsys.readouterr().out


def test_layout_names_and_weights(exported, project):
    steps = _steps(project)
    pages = {p.name for p in exported.glob("*.md")}
    assert pages == {rules.INDEX_FILE, rules.NEXT_STEPS_FILE, "method.md"} | {page_file(s["name"]) for s in steps}
    # a revision of the existing path: its own page names for the steps it has
    assert {"1_setup.md", "2_baseline.md", "3_nic-queue.md", "4_local-numa.md", "5_iommu.md", "6_summary.md"} <= pages
    weights = {p: front_matter((exported / p).read_text())[0]["weight"] for p in pages}
    assert weights[rules.INDEX_FILE] == 1
    in_order = [weights[page_file(s["name"])] for s in steps]       # the set-up first, as upstream's own path
    assert in_order == sorted(in_order) and len(set(in_order)) == len(in_order) and in_order[0] == 2
    assert weights["method.md"] > max(in_order) and weights[rules.NEXT_STEPS_FILE] > weights["method.md"]
    for p in pages:
        assert front_matter((exported / p).read_text())[0]["layout"] == rules.LAYOUT


def test_index_front_matter_has_every_required_field_from_the_closed_lists(exported, project):
    meta, _ = front_matter((exported / rules.INDEX_FILE).read_text())
    assert set(rules.INDEX_REQUIRED) <= set(meta)
    assert meta["skilllevels"] in rules.SKILL_LEVELS
    assert meta["subjects"] in rules.SUBJECTS[rules.CATEGORY]
    assert set(meta["operatingsystems"]) <= rules.OPERATING_SYSTEMS
    assert meta["learning_path_main_page"] == "yes"
    # the theme shows no _index.md body, and the revised path's first page is its set-up: no overview page
    assert not re.sub(r"<!--.*?-->", "", front_matter((exported / rules.INDEX_FILE).read_text())[1]).strip()


def test_the_sources_are_credited_on_the_exported_method_page(exported):
    method = (exported / "method.md").read_text()
    for credit in (rules.UPSTREAM_AUTHORS.replace(", R", " and R"), "Tune network workloads on Arm-based bare-metal",
                   "Jason Brittain and Ian F. Darwin", "VMware"):
        assert credit in method, credit


def test_the_projects_lab_is_left_out_and_a_page_without_arm_figures_says_so_once(exported, project):
    lab_marked = 0
    for page in exported.glob("*.md"):
        body = page.read_text()
        prose = re.sub(r"^```.*?^```", "", body, flags=re.M | re.S)     # a file's own text (the wrk2 patch) stays
        found = re.search(r".{0,80}\b(lab|lab's|QEMU|emulated)\b.{0,80}", prose, re.I)
        assert not found, (page.name, found[0])
        assert body.count(NO_ARM_RUN) <= 1, page.name
    for page in (project / "content/learning-paths" / rules.CATEGORY / SLUG).glob("*.md"):
        lab_marked += page.read_text().count("{{% lab %}}")
    assert lab_marked >= 10                    # the site keeps that prose: only the export leaves it out


def test_only_the_repository_shortcodes_and_images_beside_the_pages(exported):
    referenced = set()
    for page in exported.glob("*.md"):
        body = page.read_text()
        assert set(shortcode_names(body)) <= rules.SHORTCODES, page.name
        for alt, target, _ in images(body):
            assert "#center" in alt and len(alt.split()) >= 4
            assert (exported / target).is_file() and "/" not in target
            referenced.add(target)
    files = {f.name for f in exported.iterdir() if f.suffix != ".md"}
    assert files and files == referenced            # every chart referenced, nothing else shipped


def test_no_path_of_the_building_machine(exported, project):
    for f in exported.iterdir():
        text = f.read_text(errors="replace")
        assert str(project) not in text and str(project.parent) not in text, f.name
        assert not rules.MACHINE_PATH.search(text), f.name


def _results_rows(body: str) -> dict[str, str]:
    """Variant label → Requests/s cell of every results table on an exported page."""
    rows, head = {}, None
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if not cells:
            head = None
        elif head is None:
            head = cells
        elif "Requests/s" in head and head[0] == "Variant" and not set(cells[0]) <= set("-"):
            rows[cells[0]] = cells[head.index("Requests/s")]
    return rows


def _arm_run(d: dict, run: str | None) -> dict | None:
    """The run an export shows for a step: the chosen one, else the primary, else the first, of the
    runs on an Arm server (Arm's repository shows no other host's figures)."""
    arm = [r for r in d.get("runs") or () if r.get("arm")]
    return next((r for i in (run, d.get("primary_run")) for r in arm if r["run_id"] == i), arm[0] if arm else None)


@pytest.mark.parametrize("which", ["primary", "second"])
def test_every_figure_is_an_arm_servers(project, tmp_path, which):
    """Issue 29, item 9: figures from Arm hosts only (the reference runs; a live run only where its
    server is Arm). A step no Arm server measured says so in place of its figures."""
    run = _second_run(project) if which == "second" else None
    lp = export_upstream(project, tmp_path / "repo", run).path
    assert check_path(lp) == []
    steps = [s for s in _steps(project) if (project / "data/steps" / f"{s['name']}.json").is_file()]
    arm = {r["run_id"] for s in steps for r in _data(project, s["name"]).get("runs") or () if r.get("arm")}
    assert arm == {"reference-aws-c8g", "reference-grace"}
    for s in steps:
        body = (lp / page_file(s["name"])).read_text()
        comment = rules.PROVENANCE.search(body)
        assert comment, s["name"]
        shown = set(re.findall(r"run (\S+) \(server", comment.group("text")))
        assert shown <= arm, (s["name"], shown - arm)
        d = _data(project, s["name"])
        chosen = _arm_run(d, run)
        if chosen is None:
            assert "{{< results" not in _source(project, s["name"]) or NO_ARM_RUN in body, s["name"]
            continue
        rows = _results_rows(body)
        for m in chosen["measurements"] if "{{< results" in _source(project, s["name"]) else ():
            label = next(k for k in rows if k.startswith(f"{m['label'] or m['variant']} ("))
            assert rows[label].split(" ")[0] == m["display"]["requests_per_sec"], (s["name"], label)


def test_the_export_credits_the_original_and_links_its_pages(exported):
    meta, _ = front_matter((exported / rules.INDEX_FILE).read_text())
    assert meta["author"].startswith(rules.UPSTREAM_AUTHORS)
    links = {m for p in exported.glob("*.md") for m in re.findall(r"\]\(\.\./([^/)]+)/", p.read_text())}
    names = {p.stem for p in exported.glob("*.md")}
    assert links and links <= names, links - names           # every link between pages reaches a page
    baseline = (exported / "2_baseline.md").read_text()
    assert baseline.index("**Change:**") < baseline.index("## ")      # the answer first, as on the site


def _source(project: Path, step: str) -> str:
    return (project / "content/learning-paths" / rules.CATEGORY / SLUG / f"{step}.md").read_text()


def _break(lp: Path, page: str, old: str, new: str, count: int = 1) -> None:
    f = lp / page
    text = f.read_text()
    assert old in text, (page, old)
    f.write_text(text.replace(old, new, count))


def _same_weight(lp: Path, page: str, like: str) -> None:
    weight = front_matter((lp / like).read_text())[0]["weight"]
    own = front_matter((lp / page).read_text())[0]["weight"]
    _break(lp, page, f"\nweight: {own}\n", f"\nweight: {weight}\n")


def _with_image(lp: Path) -> tuple[str, str, str]:
    for page in sorted(lp.glob("*.md")):
        found = images(page.read_text())
        if found:
            return page.name, found[0][0], found[0][1]
    raise AssertionError("no image in the export")


VIOLATIONS = {
    "subject of another category": (lambda lp: _break(lp, rules.INDEX_FILE, "\nsubjects: ", "\nsubjects: Gaming #"), "subjects"),
    "objective read as a mapping": (lambda lp: _break(lp, rules.INDEX_FILE, "learning_objectives:\n- ", "learning_objectives:\n- Do: "), "learning_objectives[0]"),
    "required field missing": (lambda lp: _break(lp, rules.INDEX_FILE, "\nauthor:", "\nwriter:"), "'author'"),
    "our own shortcode": (lambda lp: _break(lp, "jvm.md", "\n## ", '\n{{< value step="jvm" >}}\n\n## '), "shortcode"),
    "duplicate weight": (lambda lp: _same_weight(lp, "4_local-numa.md", "2_baseline.md"), "is also the weight of"),
    "no description": (lambda lp: _break(lp, "4_local-numa.md", "\ndescription:", "\nsummary:"), "description"),
    "machine path": (lambda lp: _break(lp, "1_setup.md", "\n## ", "\nSee /home/alice/tunepath/.venv/x.\n\n## "), "machine path"),
    "placeholder alt text": (lambda lp: _break(lp, _with_image(lp)[0], _with_image(lp)[1], "alt text#center"), "alt text"),
    "image missing": (lambda lp: (lp / _with_image(lp)[2]).unlink(), "missing"),
    "a body in _index.md": (lambda lp: (lp / rules.INDEX_FILE).write_text((lp / rules.INDEX_FILE).read_text() + "\n## Lost\n\nText.\n"), "body"),
    "next steps missing": (lambda lp: (lp / rules.NEXT_STEPS_FILE).unlink(), rules.NEXT_STEPS_FILE),
    "british spelling": (lambda lp: _break(lp, "jvm.md", "\n## ", "\nThe collector's behaviour is optimised.\n\n## "),
                         "British spelling (behaviour, optimised)"),
    "a page over the guidance's size": (lambda lp: _break(lp, "jvm.md", "\n## ", "\n" + "word " * 3600 + "\n\n## "),
                                        "words: the review guidance flags"),
    "a caption the image audit misreads": (lambda lp: _break(lp, _with_image(lp)[0], f"]({_with_image(lp)[2]})",
                                                             f"]({_with_image(lp)[2]} \"run (a) x\")"), "image audit"),
    "the original authors dropped": (lambda lp: _break(lp, rules.INDEX_FILE, f"author: {rules.UPSTREAM_AUTHORS}, ", "author: "),
                                     "drops the path's own authors"),
    "minutes below the reading time": (lambda lp: _break(lp, rules.INDEX_FILE, "\nminutes_to_complete: ",
                                                         "\nminutes_to_complete: 1 #"), "less than the time to read"),
    "further reading that links to itself": (lambda lp: _break(lp, rules.INDEX_FILE, "further_reading:\n",
                                                               "further_reading:\n- resource:\n    title: This path\n"
                                                               f"    link: https://x.example/{rules.UPSTREAM_SLUG}/\n"
                                                               "    type: website\n"), "own address"),
    "too many objectives": (lambda lp: _break(lp, rules.INDEX_FILE, "learning_objectives:\n- ",
                                              "learning_objectives:\n- One more objective.\n- "), "3 to 4 items"),
}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_a_violation_is_caught(exported, tmp_path, name, capsys):
    lp = tmp_path / rules.CATEGORY / rules.UPSTREAM_SLUG
    shutil.copytree(exported, lp)
    breaker, expected = VIOLATIONS[name]
    breaker(lp)
    problems = [str(p) for p in check_path(lp)]
    assert any(expected in p for p in problems), problems
    assert cli.main(["export", "--check", str(lp)]) == 2
    assert expected in capsys.readouterr().out


def test_a_failed_export_leaves_the_directory_as_it_was(project, exported, tmp_path):
    broken = tmp_path / "project"
    shutil.copytree(project, broken)
    dest = tmp_path / "repo"
    lp = export_upstream(broken, dest).path
    before = {f.name: f.read_bytes() for f in lp.iterdir()}
    index = broken / "content/learning-paths" / rules.CATEGORY / SLUG / rules.INDEX_FILE
    index.write_text(index.read_text().replace("\nsubjects: ", "\nsubjects: Gaming #", 1))
    with pytest.raises(TunepathError, match="nothing written"):
        export_upstream(broken, dest)
    assert {f.name: f.read_bytes() for f in lp.iterdir()} == before
    with pytest.raises(TunepathError, match="nothing written"):
        export_upstream(broken, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tunepath-export-")]


def test_an_unknown_shortcode_or_run_is_an_error_for_people(project, tmp_path):
    with pytest.raises(TunepathError, match="--run no-such-run"):
        export_upstream(project, tmp_path / "a", "no-such-run")
    broken = tmp_path / "project"
    shutil.copytree(project, broken)
    page = broken / "content/learning-paths" / rules.CATEGORY / SLUG / "baseline.md"
    page.write_text(page.read_text() + '\n{{< value step="baseline" variant="no-such-variant" field="requests_per_sec" >}}\n')
    with pytest.raises(TunepathError, match="no-such-variant"):
        export_upstream(broken, tmp_path / "b")
    assert not (tmp_path / "b").exists()
    assert SHORTCODE.search('{{< value step="jvm" >}}').group(3) == "value"


def test_without_a_build_the_export_says_to_build_first(project, tmp_path):
    bare = tmp_path / "project"
    shutil.copytree(project / "content", bare / "content")
    with pytest.raises(TunepathError, match="tunepath build"):
        export_upstream(bare, tmp_path / "repo")
    assert not (tmp_path / "repo").exists()


def test_an_export_into_the_project_itself_is_refused_and_writes_nothing(tmp_path):
    """Issue 30 (hostile-input review, finding 2): `tunepath export --upstream .` run in the project
    would have replaced the site's own content/…/tomcat-tuning/ with the export."""
    from conftest import ROOT

    pages = sorted(p.stat().st_mtime_ns for p in (ROOT / "content").rglob("*.md"))
    for dest in (ROOT, ROOT / "runs" / "x", ROOT / "layouts"):
        with pytest.raises(TunepathError, match="inside the project's own"):
            export_upstream(ROOT, dest)
    assert sorted(p.stat().st_mtime_ns for p in (ROOT / "content").rglob("*.md")) == pages
    assert not (ROOT / "runs" / "x").exists() and not (ROOT / "layouts" / "content").exists()
    assert not list(ROOT.glob(".tunepath-export-*")) and not list((ROOT / "content").rglob(".tunepath-export-*"))


# --- hostile pages: `export --check` reads each page once, through one guarded reader --------------

def _mkfifo(f: Path) -> None:
    os.mkfifo(f)


def _sparse(f: Path, size: int) -> None:
    with open(f, "wb") as handle:
        handle.truncate(size)


HOSTILE_PAGES = {      # file, what makes it, what its one problem says (most from the census, docs/census.md)
    "invalid UTF-8": ("01-page.md", lambda f: f.write_bytes(b"---\n\xff\xfe\n---\n"), "not UTF-8 (byte 0xff at offset 4)"),
    "a directory": ("01-page.md", lambda f: f.mkdir(), "not a regular file (a directory)"),
    "a FIFO": ("01-page.md", _mkfifo, "not a regular file (a FIFO)"),
    "no front matter": ("01-page.md", lambda f: f.write_text("Just prose.\n"), "no front matter"),
    "16 MiB of NUL bytes": ("01-page.md", lambda f: _sparse(f, 16 << 20), "larger than 1 MiB"),
    "1 MiB of NUL bytes (the most a page may have)": ("01-page.md", lambda f: _sparse(f, 1 << 20), "no front matter"),
    "a NUL byte in the front matter": ("01-page.md", lambda f: f.write_bytes(b"---\na: \0\n---\n"), "not YAML"),
    "front matter nested 10,000 deep": (rules.INDEX_FILE, lambda f: f.write_text(
        "---\na: " + "[" * 10_000 + "]" * 10_000 + "\n---\n"), "nested too deeply"),
    "an image that is a FIFO": ("chart.png", _mkfifo, "not a regular file (a FIFO)"),
    "an image that links to nothing": ("chart.png", lambda f: f.symlink_to(f.with_name("gone.png")), "cannot be read"),
    "YAML that never closes its list": ("01-page.md", lambda f: f.write_text("---\ntitle: [unclosed\n---\n"),
                                        "not YAML: expected ',' or ']', but got '<stream end>' (line 2, column 17)"),
}


@pytest.mark.fast
@pytest.mark.parametrize("name", sorted(HOSTILE_PAGES))
def test_a_hostile_page_is_one_problem_of_the_check_never_a_traceback_or_a_hang(tmp_path, name):
    """Issue 30, item 6 (the census): `export --check` read a page again for the attribution search
    (UnicodeDecodeError) and for the reading time (ValueError: no front matter), opened a directory
    (IsADirectoryError) or a FIFO (it waited for ever), and let PyYAML's RecursionError through."""
    from conftest import ROOT

    lp = tmp_path / "content/learning-paths" / rules.CATEGORY / rules.UPSTREAM_SLUG   # the attribution check runs
    lp.mkdir(parents=True)
    (lp / rules.INDEX_FILE).write_text("---\ntitle: A path\nminutes_to_complete: 30\n---\n")
    (lp / rules.NEXT_STEPS_FILE).write_text("---\ntitle: Next Steps\n---\n")
    page, make, expected = HOSTILE_PAGES[name]
    (lp / page).unlink(missing_ok=True)
    make(lp / page)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))
    proc = subprocess.run([sys.executable, "-m", "tunepath.cli", "export", "--check", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "problem(s) against the contributor rules" in proc.stderr
    about = [line for line in proc.stdout.splitlines() if line.startswith(f"{lp}/{page}: ")]
    assert len(about) == 1 and expected in about[0], proc.stdout
    problems = [p.message for p in check_path(lp) if p.file == page]
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.fast
def test_staging_is_beside_the_destination_and_a_killed_exports_leftovers_go(tmp_path):
    """Issue 34, item 9: a killed export left `.tunepath-export-*` in the destination's nearest existing
    ancestor, which could be `/`. The staging is in the destination's parent or nowhere, and the next
    export removes the stale ones there (their process gone, or older than a day)."""
    import time

    from tunepath.publish.upstream.staging import PREFIX, make_staging

    with pytest.raises(TunepathError, match="does not exist") as refused:
        make_staging(tmp_path / "typo" / "deeper" / "repo")
    assert "\n" not in str(refused.value) and not list(tmp_path.glob(f"{PREFIX}*"))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    dead = tmp_path / f"{PREFIX}{gone}-abc"           # its process has ended
    old = tmp_path / f"{PREFIX}{os.getpid()}-old"      # a live process, but two days old
    mine = tmp_path / f"{PREFIX}{os.getpid()}-new"     # a live export's: kept
    odd = tmp_path / f"{PREFIX}note"                   # a file of that name: not a staging directory
    for d in (dead, old, mine):
        (d / "x").mkdir(parents=True)
    odd.write_text("x")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    work = make_staging(tmp_path / "repo")
    assert work.parent == tmp_path and work.name.startswith(f"{PREFIX}{os.getpid()}-")
    assert not dead.exists() and not old.exists() and mine.exists() and odd.exists()
    if os.geteuid() != 0:                              # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(TunepathError, match="not writable"):
            make_staging(locked / "repo")
