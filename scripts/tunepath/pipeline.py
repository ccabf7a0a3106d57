"""What a step's notebook calls: load runs, parse, chart, publish.

A notebook stays a page of narrative around a few calls::

    result = pipeline.step("baseline", **pipeline.parameters(globals()))
    pipeline.table(result)
    charts = pipeline.draw_charts(result, site_dir)
    pipeline.show_charts(result, charts)
    pipeline.publish(result, charts, site_dir, mode)

In ``mode="replay"`` the step reads recorded runs. In ``mode="live"`` :func:`step` first
runs the step on the hosts of the inventory. Executed by ``tunepath run`` (which passes the
id of the run it is recording), it records into that run (:mod:`tunepath.live.execute`) and
the site is rebuilt from all runs once the run is complete. Run by hand, in JupyterLab or
with Papermill and no run id, it records a run of this one step the way ``tunepath run``
does (:mod:`tunepath.live.runner`), then shows it and prints the command that rebuilds the
site. Everything step-specific is the step object's business (:mod:`tunepath.steps`); this
module only asks it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.result import StepResult
from tunepath.errors import TunepathError
from tunepath.evidence.store import Run, RunStore
from tunepath.evidence.supersede import check_superseding
from tunepath.publish.charts import Chart
from tunepath.publish.frame_display import install as _show_frames_for_readers
from tunepath.memo import shared
from tunepath.project import project_dir
from tunepath.publish.hugo_data import write_json
from tunepath.publish.reader_words import host_label, loopback_words
from tunepath.settings import LIVE, resolve_paths
from tunepath.steps import REGISTRY

__all__ = ["MODES", "check_mode", "StepResult", "step", "parameters", "replay_step", "draw_charts", "show_charts",
           "publish", "notebook_links", "table", "flags", "analysis", "show_commands"]

MODES = ("replay", "live")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise TunepathError(f"unknown mode {mode!r}: use 'replay' (recorded runs) or 'live'")


class StepInterrupted(KeyboardInterrupt):
    """The kernel's stop button (or Ctrl-C) ended a step this notebook was recording."""


def _short_errors() -> None:
    """In a notebook, a problem the user can fix (:class:`TunepathError`) and an interrupted run
    show as their one-line message, not a traceback through the package. They stay errors: the
    cell fails, and Papermill stops there."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc"):
        shell.set_custom_exc((TunepathError, StepInterrupted), _one_line)


def _one_line(shell, etype, value, tb, tb_offset=None) -> None:
    shell.showtraceback((etype, value, tb), exception_only=True)


def parameters(namespace: dict) -> dict:
    """The arguments of :func:`step` from a notebook's variables: its parameters by name (those of
    :mod:`tunepath.settings` and the steps' own), so the call stays one line however many there are."""
    names = {"mode", "run_ids", "runs_dir", *(s.name for s in LIVE),
             *(name for definition in REGISTRY for name, _, _ in definition.notebook_parameters)}
    return {name: value for name, value in namespace.items() if name in names}


def step(name: str, mode: str = "replay", runs_dir=None, run_ids=None, hosts_file=None, profile: str = "quick",
         apply: bool = False, allow_reboot: bool = False, slo_ms: float = 10.0, slo_percentile: str = "99",
         **live_options) -> StepResult:
    """A notebook's one call: in live mode run the step and record it, then parse the run(s).

    ``runs_dir``: None is the project's ``runs/``. ``slo_ms`` / ``slo_percentile``: the latency
    objective the rate sweep's capacity is read at (default p99 ≤ 10 ms). The live settings are
    those of :mod:`tunepath.settings`."""
    _short_errors()
    _show_frames_for_readers()
    check_mode(mode)
    definition = REGISTRY.get(name)
    runs_dir = Path(runs_dir) if runs_dir is not None else project_dir() / "runs"
    if mode == "live":
        settings = dict(live_options, hosts_file=hosts_file, profile=profile, apply=apply, allow_reboot=allow_reboot)
        result = _live(definition, runs_dir, run_ids, settings)
    else:
        result = replay_step(name, runs_dir, run_ids)
    result.options.update(slo_ms=float(slo_ms), slo_percentile=str(slo_percentile))
    return result


def _live(definition, runs_dir: Path, run_ids, settings: dict) -> StepResult:
    """Run the step live. With a run id (``tunepath run`` executes this notebook), into that run;
    without one (a notebook run by hand), as a run of its own, which this returns finished."""
    from tunepath.evidence.recorder import INPROGRESS
    from tunepath.live.execute import run_step
    from tunepath.live.session import LiveOptions

    unknown = sorted(set(settings) - {s.name for s in LIVE})
    if unknown:
        raise TunepathError(f"unknown live setting(s) {', '.join(unknown)}: the settings are "
                            f"{', '.join(s.name for s in LIVE)}")
    options = LiveOptions(**resolve_paths(settings))
    if not run_ids:
        return _record_run(definition, runs_dir, options)
    run_id = run_ids if isinstance(run_ids, str) else run_ids[0]
    run_step(definition, runs_dir, run_id, options)
    return replay_step(definition.name, runs_dir / INPROGRESS, [run_id], allow_empty=True)


def _record_run(definition, runs_dir: Path, options) -> StepResult:
    """A run of this one step, recorded as ``tunepath run --steps NAME --no-build`` records it (the
    step's notebook executed inside the run, facts, the hosts restored, complete or failed);
    a failure or an interrupt restores the hosts and records the run as failed, then raises."""
    from tunepath.live.runner import run_path

    if not definition.live:
        raise TunepathError(f"step {definition.name!r} runs nothing on any host: it reads recorded runs; use "
                            "mode = \"replay\"")
    try:
        path = run_path(options, steps=[definition.name], runs_dir=runs_dir, build=False)
    except KeyboardInterrupt:
        raise StepInterrupted(f"the hosts were put back and the run is recorded as failed (\"interrupted\") in "
                              f"{runs_dir}; the published site is unchanged") from None
    result = replay_step(definition.name, runs_dir, [path.name])
    result.recorded = path
    return result


def _selection(run_ids) -> list[str] | None:
    if isinstance(run_ids, str):
        return [r.strip() for r in run_ids.split(",") if r.strip()]
    return None if run_ids is None else list(run_ids)


def _where(runs_dir) -> list[str]:
    """What a shared value read from ``runs_dir`` depends on besides the selection (the
    directory as given, relative paths in the results, and where it resolves)."""
    return [str(runs_dir), os.getcwd(), str(Path(runs_dir).resolve())]


def _load(runs_dir, run_ids) -> list[Run]:
    """The selected runs, read and validated (once per replay build: :mod:`tunepath.memo`)."""
    run_ids = _selection(run_ids)
    return shared("runs", [*_where(runs_dir), run_ids], lambda: _read(runs_dir, run_ids))


def _read(runs_dir, run_ids: list[str] | None) -> list[Run]:
    store = RunStore(Path(runs_dir), REGISTRY.names)
    if run_ids is None or len(run_ids) == 0:
        # every run, except failed and superseded ones: they stay in runs/ as evidence, not on the pages
        everything = store.load_all()
        check_superseding(everything, {r.run_id for r in everything})
        runs = [r for r in everything if r.info.status != "failed" and not r.info.superseded_by]
    else:
        runs = store.load_all(list(run_ids))
    # the published reference runs first (the pages' prose describes them), then live runs
    runs.sort(key=lambda r: (r.kind != "reference", r.run_id))
    if not runs:
        raise TunepathError(f"no recorded runs in {runs_dir}: record one, or check runs_dir")
    return runs


def replay_step(name: str, runs_dir, run_ids=None, mode: str = "replay", allow_empty: bool = False) -> StepResult:
    """Parse the recorded measurements of step ``name`` from every selected run that has it
    (a step that reads every run, such as the summary, gets them all)."""
    check_mode(mode)
    definition = REGISTRY.get(name)
    loaded = _load(runs_dir, run_ids)
    runs = loaded if definition.reads_all_runs else [r for r in loaded if name in r.steps()]
    if not runs and allow_empty:
        runs = loaded
    elif not runs:
        raise TunepathError(f"none of the selected runs recorded step {name!r}")
    everything = shared("frame", [*_where(runs_dir), _selection(run_ids), [r.run_id for r in runs]],
                        lambda: measurements_frame(runs, REGISTRY))
    return StepResult(name, definition, REGISTRY, runs, definition.select(everything), everything)


def table(result: StepResult) -> pd.DataFrame:
    """A compact view for the notebook's readers: medians over the repetitions (n), the interval of
    throughput with the confidence it reaches (``interval_level``, a fraction), its coefficient of variation,
    server CPU per request, and flags."""
    cols = ["run_id", "server", "step", "variant", "tool", "n", "requests_per_sec", "rps_low", "rps_high",
            "interval_level", "rps_cv", "server_cpu_us_per_req", "speedup_vs_stock", "change_vs_previous_pct", "vs_step_first",
            "vs_first_significant", "latency_avg_ms", "p99_ms", "errors", "non_2xx_3xx"]
    out = result.frame[cols].copy()
    out["flags"] = [", ".join(sorted({f.code for f in fl})) for fl in result.frame["flags"]]
    return out


def flags(result: StepResult) -> pd.DataFrame:
    """Every noise flag of the step's measurements, one row each (what, where, which repetition)."""
    rows = [{"run_id": r["run_id"], "variant": r["variant"], "repetition": f.repetition, "code": f.code,
             "host": host_label(f.host) if f.host else f.host, "concerns": f.field, "text": loopback_words(f.text)}
            for r in result.frame.to_dict("records") for f in r["flags"]]
    return pd.DataFrame(rows, columns=["run_id", "variant", "repetition", "code", "host", "concerns", "text"])


def analysis(result: StepResult) -> dict:
    """What the step reads beyond the table: the sweeps' best thread count and capacity, by run;
    the comparison's default pair, by pair."""
    return result.definition.readings(result)


def show_commands(result: StepResult) -> None:
    """Print the step's exact commands for each run's hosts: what its page shows."""
    for run in result.runs:
        print(f"### {run.run_id} (server {run.server.name})")
        for block in result.commands(run.run_id):
            print(f"# [{block.id}] on the {block.host}: {block.title}")
            print(block.text, end="\n\n")


def _site(site_dir) -> Path:
    """The site the notebook writes into: ``site_dir``, else the project. A given directory is made
    if missing, and must be one this user may write: else one line that says so, not a traceback."""
    if site_dir is None:
        return Path(project_dir())
    site = Path(site_dir)
    try:
        site.mkdir(parents=True, exist_ok=True)
        if not os.access(site, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
    except OSError as exc:
        raise TunepathError(f"site_dir {site_dir}: cannot write there ({exc.strerror or exc}); give a directory "
                            "you may write, or leave site_dir unset to write into the project") from None
    return site


def draw_charts(result: StepResult, site_dir=None) -> list[Chart]:
    """The step's charts, one set per run (never one series across hosts), written under
    ``site_dir``'s ``static/`` (None: the project's). A run this notebook recorded by itself is
    drawn into a directory of its own: the site's charts are the build's to write."""
    if result.recorded is not None:
        static = Path(tempfile.mkdtemp(prefix=f"tunepath-{result.recorded.name}-charts-"))
        atexit.register(shutil.rmtree, static, ignore_errors=True)
    else:
        static = _site(site_dir) / "static"
    result.chart_dir = static
    return result.definition.charts(result, static)


def show_charts(result: StepResult, charts: list[Chart]) -> None:
    """Display the charts :func:`draw_charts` drew, in the notebook."""
    from IPython.display import SVG, display

    for chart in charts:
        display(SVG(filename=str(result.chart_dir / chart.src)))


def notebook_links(name: str) -> dict:
    notebook = REGISTRY.get(name).notebook
    return {"ipynb": f"notebooks/{notebook}", "html": f"notebooks/{notebook.removesuffix('.ipynb')}.html"}


def publish(result: StepResult, charts: list[Chart], site_dir=None, mode: str = "replay") -> None:
    """Write the step's Hugo data (under ``site_dir``; None: the project) and say which file, relative
    to the site (the executed notebook is published: no path of the building machine belongs in it).
    In live mode nothing is written: the site is rebuilt from every run, and this says how."""
    if mode == "live":
        print(_rebuild_note(result))
        return
    definition = result.definition
    historical = Path(result.runs[0].path).parent / "historical" if result.runs else None
    doc = definition.document(result, [c.to_dict() for c in charts], notebook_links(result.step), historical)
    write_json(_site(site_dir) / definition.data_file, doc)
    print(f"wrote {definition.data_file} for Hugo")


def _rebuild_note(result: StepResult) -> str:
    if result.recorded is None:
        return "live mode: recorded in the run; the site is rebuilt from all runs when the run completes"
    runs_dir = result.recorded.parent
    option = "" if runs_dir.resolve() == (project_dir() / "runs").resolve() else f" --runs-dir {runs_dir}"
    return (f"Recorded run {result.recorded.name} in {result.recorded}. To show it on the site, rebuild it from "
            f"every recorded run, from the project's directory:\n\n    scripts/build{option}\n\n"
            f"(its page: {result.definition.page}/; to leave the run off the pages, `tunepath supersede` it or "
            "remove its directory)")
