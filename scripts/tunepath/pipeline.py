"""What a step's notebook calls: load runs, parse, chart, publish.

A notebook stays a page of narrative around a few calls::

    result = pipeline.step("baseline", mode, runs_dir, run_ids, ...)
    pipeline.table(result)
    charts = pipeline.draw_charts(result, site_dir)
    pipeline.publish(result, charts, site_dir, mode)

In ``mode="replay"`` the step reads recorded runs. In ``mode="live"`` :func:`step` first
runs the step on the hosts of the inventory (:mod:`tunepath.live.execute`), recording into
the run being recorded, then parses that run like any other; the site itself is rebuilt
from all runs once the live run is complete. Everything step-specific is the step
object's business (:mod:`tunepath.steps`); this module only asks it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.result import StepResult
from tunepath.errors import TunepathError
from tunepath.evidence.store import Run, RunStore
from tunepath.evidence.supersede import check_superseding
from tunepath.publish.charts import Chart
from tunepath.memo import shared
from tunepath.publish.hugo_data import write_json
from tunepath.steps import REGISTRY

__all__ = ["MODES", "check_mode", "StepResult", "step", "replay_step", "draw_charts", "publish",
           "notebook_links", "table", "flags", "analysis", "show_commands"]

MODES = ("replay", "live")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise TunepathError(f"unknown mode {mode!r}: use 'replay' (recorded runs) or 'live'")


def step(name: str, mode: str, runs_dir, run_ids=None, hosts_file=None, profile: str = "quick",
         apply: bool = False, allow_reboot: bool = False, slo_ms: float = 10.0, slo_percentile: str = "99",
         **live_options) -> StepResult:
    """A notebook's one call: in live mode run the step and record it, then parse the run(s).

    ``slo_ms`` / ``slo_percentile``: the latency objective the rate sweep's capacity is
    read at (default p99 ≤ 10 ms)."""
    check_mode(mode)
    definition = REGISTRY.get(name)
    if mode == "live":
        result = _live(definition, runs_dir, run_ids, hosts_file, profile, apply, allow_reboot, live_options)
    else:
        result = replay_step(name, runs_dir, run_ids)
    result.options.update(slo_ms=float(slo_ms), slo_percentile=str(slo_percentile))
    return result


def _live(definition, runs_dir, run_ids, hosts_file, profile, apply, allow_reboot, live_options) -> StepResult:
    from tunepath.evidence.recorder import INPROGRESS
    from tunepath.live.execute import run_step
    from tunepath.live.session import LiveOptions

    if not run_ids:
        raise TunepathError("live mode needs the id of the run being recorded (start it with "
                            "`tunepath run` / scripts/run)")
    run_id = run_ids if isinstance(run_ids, str) else run_ids[0]
    options = LiveOptions(hosts_file=hosts_file, profile=profile, apply=apply, allow_reboot=allow_reboot,
                          **live_options)
    run_step(definition, runs_dir, run_id, options)
    return replay_step(definition.name, Path(runs_dir) / INPROGRESS, [run_id], allow_empty=True)


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
    """A compact view for the notebook's readers: medians over the repetitions (n), the 95 %
    interval and coefficient of variation of throughput, server CPU per request, and flags."""
    cols = ["run_id", "server", "step", "variant", "tool", "n", "requests_per_sec", "rps_low", "rps_high",
            "rps_cv", "server_cpu_us_per_req", "speedup_vs_stock", "change_vs_previous_pct", "vs_step_first",
            "vs_first_significant", "latency_avg_ms", "p99_ms", "errors", "non_2xx_3xx"]
    out = result.frame[cols].copy()
    out["flags"] = [", ".join(sorted({f.code for f in fl})) for fl in result.frame["flags"]]
    return out


def flags(result: StepResult) -> pd.DataFrame:
    """Every noise flag of the step's measurements, one row each (what, where, which repetition)."""
    rows = [{"run_id": r["run_id"], "variant": r["variant"], "repetition": f.repetition, "code": f.code,
             "host": f.host, "concerns": f.field, "text": f.text}
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


def draw_charts(result: StepResult, site_dir) -> list[Chart]:
    """The step's charts, one set per run (never one series across hosts)."""
    return result.definition.charts(result, Path(site_dir) / "static")


def notebook_links(name: str) -> dict:
    notebook = REGISTRY.get(name).notebook
    return {"ipynb": f"notebooks/{notebook}", "html": f"notebooks/{notebook.removesuffix('.ipynb')}.html"}


def publish(result: StepResult, charts: list[Chart], site_dir, mode: str = "replay") -> Path | None:
    """Write the step's Hugo data; returns the file written (nothing in live mode: the site
    is rebuilt from every run once the live run is complete)."""
    if mode == "live":
        print("live mode: recorded in the run; the site is rebuilt from all runs when the run completes")
        return None
    definition = result.definition
    historical = Path(result.runs[0].path).parent / "historical" if result.runs else None
    doc = definition.document(result, [c.to_dict() for c in charts], notebook_links(result.step), historical)
    path = Path(site_dir) / definition.data_file
    write_json(path, doc)
    return path
