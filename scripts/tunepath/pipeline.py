"""What a step's notebook calls: load runs, parse, chart, publish.

A notebook stays a page of narrative around three calls::

    result = pipeline.replay_step("baseline", runs_dir=..., run_ids=...)
    charts = pipeline.draw_charts(result, site_dir=...)
    pipeline.publish(result, charts, site_dir=...)

In ``mode="replay"`` the step reads recorded runs. In ``mode="live"`` :func:`step`
first runs the step on the hosts of the inventory (through :mod:`tunepath.live.session`),
recording into the run being recorded, then parses that run like any other; the site
itself is rebuilt from all runs once the live run is complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tunepath.publish import charts as chartlib
from tunepath.errors import TunepathError
from tunepath.publish.hugo_data import historical_for, step_document, summary_document, write_json
from tunepath.analysis.frames import measurements_frame
from tunepath.evidence.store import Run, RunStore
from tunepath.steps.legacy import MEASURED_SEQUENCE, get_step, plan

__all__ = ["MODES", "check_mode", "StepResult", "replay_step", "replay_summary", "draw_charts",
           "publish", "notebook_links", "table", "flags", "capacity", "best_threads"]

MODES = ("replay", "live")


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise TunepathError(f"unknown mode {mode!r}: use 'replay' (recorded runs) or 'live'")


def step(name: str, mode: str, runs_dir, run_ids=None, hosts_file=None, profile: str = "quick",
         apply: bool = False, allow_reboot: bool = False, slo_ms: float = 10.0, slo_percentile: str = "99",
         **live_options) -> "StepResult":
    """A notebook's one call: in live mode run the step and record it, then parse the run(s).

    ``slo_ms`` / ``slo_percentile``: the latency objective the rate sweep's capacity is
    read at (default p99 ≤ 10 ms)."""
    check_mode(mode)
    result = _step(name, mode, runs_dir, run_ids, hosts_file, profile, apply, allow_reboot, **live_options)
    result.options.update(slo_ms=float(slo_ms), slo_percentile=str(slo_percentile))
    return result


def _step(name, mode, runs_dir, run_ids, hosts_file, profile, apply, allow_reboot, **live_options):
    if mode == "live":
        from tunepath.live.session import LiveOptions, run_step
        from tunepath.evidence.recorder import INPROGRESS

        if not run_ids:
            raise TunepathError("live mode needs the id of the run being recorded (start it with "
                                "`tunepath run` / scripts/run)")
        options = LiveOptions(hosts_file=hosts_file, profile=profile, apply=apply,
                              allow_reboot=allow_reboot, **live_options)
        run_id = run_ids[0] if not isinstance(run_ids, str) else run_ids
        run_step(name, runs_dir, run_id, options)
        return replay_step(name, Path(runs_dir) / INPROGRESS, [run_id], allow_empty=True)
    if name in ("summary", "compare"):
        result = replay_summary(runs_dir, run_ids)
        result.step = name
        return result
    return replay_step(name, runs_dir, run_ids)


@dataclass
class StepResult:
    step: str
    runs: list[Run]
    frame: pd.DataFrame
    all_rows: pd.DataFrame = field(repr=False, default=None)   # every measurement of the runs
    options: dict = field(default_factory=lambda: {"slo_ms": 10.0, "slo_percentile": "99"})

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
    """A compact view for the notebook's readers: medians over the repetitions (n), the 95 %
    interval and coefficient of variation of throughput, server CPU per request, and flags."""
    cols = ["run_id", "server", "step", "variant", "tool", "n", "requests_per_sec", "rps_low", "rps_high",
            "rps_cv", "server_cpu_us_per_req", "speedup_vs_stock", "change_vs_previous_pct", "vs_step_first",
            "vs_first_significant", "latency_avg_ms", "p99_ms", "errors", "non_2xx_3xx"]
    out = result.frame[cols].copy()
    out["flags"] = [", ".join(sorted({f["code"] for f in fl})) for fl in result.frame["flags"]]
    return out


def flags(result: StepResult) -> pd.DataFrame:
    """Every noise flag of the step's measurements, one row each (what, where, which repetition)."""
    rows = [{"run_id": r["run_id"], "variant": r["variant"], "repetition": f.get("repetition"), "code": f["code"],
             "host": f.get("host"), "concerns": f["field"], "text": f["text"]}
            for r in result.frame.to_dict("records") for f in r["flags"]]
    return pd.DataFrame(rows, columns=["run_id", "variant", "repetition", "code", "host", "concerns", "text"])


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


def capacity(result: StepResult, run: Run):
    """The rate sweep of ``run`` read at the result's latency objective (a ``sweep.Capacity``)."""
    from tunepath.analysis.sweep import SweepPoint, capacity as read_capacity

    rows = result.frame[result.frame.run_id == run.run_id].sort_values("offered_rate")
    points = [SweepPoint(r["offered_rate"], r["requests_per_sec"],
                         {"50": r["p50_ms"], "90": r["p90_ms"], "99": r["p99_ms"], "99.9": r["p99.9_ms"]},
                         r["label"]) for r in rows.to_dict("records") if r["offered_rate"]]
    if not points:
        return None
    return read_capacity(points, slo_ms=result.options["slo_ms"], percentile=result.options["slo_percentile"])


def best_threads(result: StepResult, run: Run) -> dict | None:
    """The thread count with the highest median throughput, and the ones not distinguishable from it."""
    from tunepath.analysis import stats

    rows = result.frame[result.frame.run_id == run.run_id].to_dict("records")
    rows = [r for r in rows if r["requests_per_sec"] and r["requests_per_sec"] > 0]
    if not rows:
        return None
    best = max(rows, key=lambda r: r["requests_per_sec"])
    ties = []
    for r in rows:
        if r is best:
            continue
        d = stats.compare(best["rps_values"], r["rps_values"])
        if d.significant is False:
            ties.append(r["label"])
    n = min(int(r["n"] or 1) for r in rows)
    return {"variant": best["variant"], "label": best["label"], "ties": ties, "min_repetitions": n}


def _sweep_charts(result: StepResult, static: Path) -> list[chartlib.Chart]:
    out = []
    for run in result.runs:
        rows = result.frame[result.frame.run_id == run.run_id].to_dict("records")
        if not rows:
            continue
        if result.step == "thread-sweep":
            best = best_threads(result, run)
            out.append(chartlib.thread_sweep_chart(rows, static, f"thread-sweep-{run.run_id}", run.run_id,
                                                   best["variant"] if best else None))
        else:
            cap = capacity(result, run)
            if cap is not None:
                out.append(chartlib.rate_sweep_chart(rows, cap, static, f"rate-sweep-{run.run_id}", run.run_id))
    return out


def _compare_charts(result: StepResult, static: Path) -> list[chartlib.Chart]:
    from tunepath.analysis.compare import default_pair, step_rows
    from tunepath.steps.legacy import STEPS

    out = []
    pair = default_pair(result.runs)
    if not pair:
        return out
    a, b = pair
    rows = []
    for s in STEPS:
        for r in step_rows(a, b, result.all_rows, s.name):
            rows.append(dict(r, label=f"{s.title.split(':')[0]}: {r['label']}", run_id=f"{a.run_id}--{b.run_id}"))
    if rows:
        chart = chartlib.ratio_chart(
            rows, static, f"compare-{a.run_id}--{b.run_id}",
            f"{b.run_id} ÷ {a.run_id}", f"Dot chart of the ratio of requests per second, run {b.run_id} over "
            f"run {a.run_id}, per measurement both made",
            f"Requests per second of {b.run_id} ({b.server['name']}) divided by those of {a.run_id} "
            f"({a.server['name']}), for each measurement both runs made. Different machines and load settings: "
            "the ratio says how far apart the results are, not why.")
        out.append(chart)
    return out


def draw_charts(result: StepResult, site_dir) -> list[chartlib.Chart]:
    """Throughput and latency charts, one pair per run (never one series across hosts)."""
    static = Path(site_dir) / "static"
    if result.step in ("thread-sweep", "rate-sweep"):
        return _sweep_charts(result, static)
    if result.step == "compare":
        return _compare_charts(result, static)
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
    if result.step == "compare":
        from tunepath.analysis.compare import compare_document

        by_pair = {c["run_id"]: c for c in chart_dicts}
        doc = compare_document(result.runs, result.all_rows, by_pair, notebook_links("compare"))
        path = data_dir / "steps" / "compare.json"
    elif result.step == "summary":
        by_run: dict[str, list[dict]] = {}
        for c in chart_dicts:
            by_run.setdefault(c["run_id"], []).append(c)
        doc = summary_document(result.runs, result.all_rows, by_run, notebook_links("summary"))
        path = data_dir / "summary.json"
    else:
        hist = Path(result.runs[0].path).parent / "historical" if result.runs else None
        doc = step_document(result.step, result.runs, result.all_rows, chart_dicts,
                            notebook_links(result.step), historical_for(result.step, hist))
        _add_analysis(result, doc)
        path = data_dir / "steps" / f"{result.step}.json"
    write_json(path, doc)
    return path


def _add_analysis(result: StepResult, doc: dict) -> None:
    """The sweeps' readings per run: the best thread count, the capacity at the objective."""
    from tunepath.publish import formatting as fmt

    for block in doc["runs"]:
        run = result.run(block["run_id"])
        if result.step == "thread-sweep":
            best = best_threads(result, run)
            if best:
                block["analysis"] = {"best_variant": best["variant"], "best_label": best["label"],
                                     "ties": best["ties"], "min_repetitions": best["min_repetitions"]}
        elif result.step == "rate-sweep":
            cap = capacity(result, run)
            if cap is not None:
                rate = fmt.offered
                block["analysis"] = {
                    "slo_ms": cap.slo_ms, "percentile": cap.percentile,
                    "capacity_rate": cap.capacity_rate, "max_throughput": cap.max_throughput,
                    "sentence": cap.sentence(),
                    "display": {"objective": f"p{cap.percentile} ≤ {cap.slo_ms:g} ms",
                                "capacity_rate": rate(cap.capacity_rate),
                                "capacity_achieved": fmt.rate(cap.capacity_achieved),
                                "capacity_latency": fmt.latency(cap.capacity_latency_ms),
                                "max_throughput": fmt.rate(cap.max_throughput),
                                "max_throughput_offered": rate(cap.max_throughput_offered),
                                "first_violation": rate(cap.first_violation),
                                "sustained_rate": rate(cap.sustained_rate),
                                "suspect": ", ".join(rate(v) for v in cap.suspect)},
                    "meets": {r["variant"]: ok for r, ok in zip(
                        sorted(result.frame[result.frame.run_id == run.run_id].to_dict("records"),
                               key=lambda r: r["offered_rate"] or 0), cap.meets)},
                }
