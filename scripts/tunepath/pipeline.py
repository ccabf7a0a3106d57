"""What a step's notebook calls: load runs, parse, chart, publish.

A notebook stays a page of narrative around three calls::

    result = pipeline.replay_step("baseline", runs_dir=..., run_ids=...)
    charts = pipeline.draw_charts(result, site_dir=...)
    pipeline.publish(result, charts, site_dir=...)

In ``mode="replay"`` the step reads recorded runs. In ``mode="live"`` :func:`step`
first runs the step on the hosts of the inventory (through :mod:`tunepath.live`),
recording into the run being recorded, then parses that run like any other; the site
itself is rebuilt from all runs once the live run is complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import charts as chartlib
from .errors import TunepathError
from .export import historical_for, step_document, summary_document, write_json
from .results import measurements_frame
from .runstore import Run, RunStore
from .steps import MEASURED_SEQUENCE, get_step, plan

__all__ = ["MODES", "check_mode", "StepResult", "replay_step", "replay_summary", "draw_charts",
           "publish", "notebook_links", "table"]

MODES = ("replay", "live")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise TunepathError(f"unknown mode {mode!r}: use 'replay' (recorded runs) or 'live'")


def step(name: str, mode: str, runs_dir, run_ids=None, hosts_file=None, profile: str = "quick",
         apply: bool = False, allow_reboot: bool = False, **live_options) -> "StepResult":
    """A notebook's one call: in live mode run the step and record it, then parse the run(s)."""
    check_mode(mode)
    if mode == "live":
        from .live import LiveOptions, run_step
        from .recorder import INPROGRESS

        if not run_ids:
            raise TunepathError("live mode needs the id of the run being recorded (start it with "
                                "`tunepath run` / scripts/run)")
        options = LiveOptions(hosts_file=hosts_file, profile=profile, apply=apply,
                              allow_reboot=allow_reboot, **live_options)
        run_id = run_ids[0] if not isinstance(run_ids, str) else run_ids
        run_step(name, runs_dir, run_id, options)
        return replay_step(name, Path(runs_dir) / INPROGRESS, [run_id], allow_empty=True)
    if name == "summary":
        return replay_summary(runs_dir, run_ids)
    return replay_step(name, runs_dir, run_ids)


@dataclass
class StepResult:
    step: str
    runs: list[Run]
    frame: pd.DataFrame
    all_rows: pd.DataFrame = field(repr=False, default=None)   # every measurement of the runs

    def commands(self, run_id: str | None = None) -> list:
        run = self.run(run_id)
        return plan(self.step, run.context)

    def run(self, run_id: str | None = None) -> Run:
        for run in self.runs:
            if run_id is None or run.run_id == run_id:
                return run
        raise TunepathError(f"step {self.step!r} has no run {run_id!r}")


def _load(runs_dir, run_ids) -> list[Run]:
    store = RunStore(Path(runs_dir))
    if isinstance(run_ids, str):
        run_ids = [r.strip() for r in run_ids.split(",") if r.strip()]
    if run_ids is None or len(run_ids) == 0:
        # every run, except failed ones: they stay in runs/ as evidence, not on the pages
        runs = [r for r in store.load_all() if r.record["status"] != "failed"]
    else:
        runs = store.load_all(list(run_ids))
    # the published reference runs first (the pages' prose describes them), then live runs
    runs.sort(key=lambda r: (r.kind != "reference", r.run_id))
    if not runs:
        raise TunepathError(f"no recorded runs in {runs_dir}: record one, or check runs_dir")
    return runs


def replay_step(step: str, runs_dir, run_ids=None, mode: str = "replay",
                allow_empty: bool = False) -> StepResult:
    """Parse the recorded measurements of ``step`` from every selected run that has it."""
    check_mode(mode)
    get_step(step)
    loaded = _load(runs_dir, run_ids)
    runs = [r for r in loaded if step in r.steps()]
    if not runs and allow_empty:
        runs = loaded
    elif not runs:
        raise TunepathError(f"none of the selected runs recorded step {step!r}")
    everything = measurements_frame(runs)
    return StepResult(step, runs, everything[everything.step == step].reset_index(drop=True), everything)


def replay_summary(runs_dir, run_ids=None, mode: str = "replay") -> StepResult:
    check_mode(mode)
    runs = _load(runs_dir, run_ids)
    everything = measurements_frame(runs)
    seq = everything[everything.order >= 0].sort_values(["run_id", "order"]).reset_index(drop=True)
    return StepResult("summary", runs, seq, everything)


def table(result: StepResult) -> pd.DataFrame:
    """A compact view for the notebook's readers."""
    cols = ["run_id", "server", "step", "variant", "tool", "requests_per_sec", "speedup_vs_stock",
            "change_vs_previous_pct", "latency_avg_ms", "p99_ms", "errors", "non_2xx_3xx"]
    return result.frame[cols]


def _history(result: StepResult, run: Run) -> list[dict]:
    """This run's measurements up to and including the step (its tuning sequence so far)."""
    rows = result.all_rows[result.all_rows.run_id == run.run_id]
    if result.step == "summary":
        upto = len(MEASURED_SEQUENCE)
    else:
        mine = rows[rows.step == result.step]
        upto = max(mine.order.max(), -1) + 1 if not mine.empty else 0
        if (mine.order < 0).all():   # e.g. the smoke test: outside the sequence
            return mine.to_dict("records")
    return rows[(rows.order >= 0) & (rows.order < upto)].sort_values("order").to_dict("records")


def draw_charts(result: StepResult, site_dir) -> list[chartlib.Chart]:
    """Throughput and latency charts, one pair per run (never one series across hosts)."""
    static = Path(site_dir) / "static"
    highlight = ({f"{r.step}/{r.variant}" for r in result.frame.itertuples()}
                 if result.step != "summary" else set())
    out = []
    for run in result.runs:
        rows = _history(result, run)
        if not rows:
            continue
        if result.step == "summary":
            highlight = {f"{r['step']}/{r['variant']}" for r in rows}
        note = ("Bars labelled with the speed-up over this run's stock configuration."
                if result.step == "summary" else "Highlighted bars are this step's measurements.")
        out.append(chartlib.throughput_chart(rows, highlight, static, f"{result.step}-throughput-{run.run_id}",
                                             run.run_id, caption_note=note))
        out.append(chartlib.latency_chart(rows, highlight, static, f"{result.step}-latency-{run.run_id}",
                                          run.run_id))
    return out


def notebook_links(step: str) -> dict:
    name = get_step(step).notebook
    return {"ipynb": f"notebooks/{name}", "html": f"notebooks/{name.removesuffix('.ipynb')}.html"}


def publish(result: StepResult, charts: list[chartlib.Chart], site_dir, mode: str = "replay") -> Path | None:
    """Write the step's Hugo data; returns the file written (nothing in live mode: the site
    is rebuilt from every run once the live run is complete)."""
    if mode == "live":
        print("live mode: recorded in the run; the site is rebuilt from all runs when the run completes")
        return None
    data_dir = Path(site_dir) / "data"
    chart_dicts = [c.to_dict() for c in charts]
    if result.step == "summary":
        by_run: dict[str, list[dict]] = {}
        for c in chart_dicts:
            by_run.setdefault(c["run_id"], []).append(c)
        doc = summary_document(result.runs, result.all_rows, by_run, notebook_links("summary"))
        path = data_dir / "summary.json"
    else:
        hist = Path(result.runs[0].path).parent / "historical" if result.runs else None
        doc = step_document(result.step, result.runs, result.all_rows, chart_dicts,
                            notebook_links(result.step), historical_for(result.step, hist))
        path = data_dir / "steps" / f"{result.step}.json"
    write_json(path, doc)
    return path
