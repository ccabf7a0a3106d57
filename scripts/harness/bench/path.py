"""Benchmark of a recorded path run: how long it took, where the time went, how precise it came out.

For every complete live run under ``runs/``: its profile, hosts label, wall time (``started`` to
``finished``), how many measurements it recorded and how many of them were left out, the median
relative half-width of the configurations' intervals (and the median level those intervals really
have: few repetitions cannot reach 95 %), and the baseline's key comparison (stock against the
thread-count variant). The figure is the one each configuration is compared on: requests per
second for a closed-loop tool, and Tomcat's CPU time per request where wrk2 offered a constant rate
(its throughput is the rate). Everything is read from the recorded runs through the same frames
the pages use; nothing is measured here.

For each complete run on a real (not emulated) server, also:

- **where the time went** (:class:`Phases`), summed over its measurements and as the median per
  measurement: Tomcat's restart, the warm-up, wrk2's uncounted calibration, the counted load, the
  orchestration (the rest of a measurement's wall time), and what lies outside the measurements
  (the run's wall time less theirs: set-up, probes, step transitions). A run that recorded
  ``phases`` and ``counted_s`` per measurement gives them as recorded; an older run's are
  *derived* (:func:`derived_phases`);
- **wall time per counted second of load**: the run's wall time over the counted seconds (1.0 is
  the physical limit);
- **comparisons**: how many its step pages make and how many carry a 95 % verdict (significant or
  not), with the reasons of the others, counted (:mod:`tunepath.analysis.verdicts`).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path

from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.noise import requested_duration
from tunepath.analysis.stats import clean, compare
from tunepath.analysis.verdicts import WHY, step_verdicts
from tunepath.evidence.store import RunStore
from tunepath.live.loadgen import calibration_s

__all__ = ["bench_path", "render", "KEY_STEP", "KEY_VARIANT", "Phases", "derived_phases", "recorded_phases",
           "phase_figures", "comparisons", "DERIVED"]

KEY_STEP, KEY_VARIANT = "baseline", "threads"      # the key comparison: stock against the thread count

DERIVED = ("derived from an older run's record: restart = Tomcat's start until it answered (ready_after_s); "
           "warm-up = the steady-state warm-up's seconds (warmup.seconds), or the fixed warm-up run of the context's "
           "warmup_s; counted = the load's -d, less wrk2's calibration (10 s + 5 ms per connection of a thread, "
           "rounded up as the run added it); calibration = the load window (window_s) less counted; orchestration = "
           "the time from the previous measurement's record to this one's, less the rest. A measurement's `started` "
           "is written when it is recorded, right after its load and before Tomcat stops, so that gap holds the "
           "previous measurement's stop and this one's configuration, restart, warm-up, capacity probe and load "
           "(timestamps to the second). A step's first measurement has no earlier record in its step: its "
           "orchestration falls outside the measurements, with the step's transitions. stop = the JVM's own stop "
           "(SIGTERM until the process is gone), recorded apart since 2026-12-02; before, inside orchestration")


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Phases:
    """Where one measurement's wall time went, in seconds (``wall_s`` is their sum)."""

    restart_s: float
    warmup_s: float
    calibration_s: float
    counted_s: float
    probe_s: float | None          # the capacity probe (None: not recorded apart, inside orchestration)
    stop_s: float | None           # the JVM's own stop (None: not recorded apart, inside orchestration)
    orchestration_s: float
    recorded_wall_s: float | None = None     # the measurement's wall time as recorded (None: their sum)

    @property
    def wall_s(self) -> float:
        if self.recorded_wall_s is not None:
            return self.recorded_wall_s
        return sum(getattr(self, k) or 0.0 for k in PHASES)


PHASES = [f.name for f in fields(Phases) if f.name != "recorded_wall_s"]
PHASE_WORDS = {"restart_s": "restart", "warmup_s": "warm-up", "calibration_s": "calibration",
               "counted_s": "counted", "probe_s": "probe", "stop_s": "stop",
               "orchestration_s": "orchestration"}


def recorded_phases(m: dict) -> Phases | None:
    """The phases a measurement recorded (``phases`` and ``counted_s``), or None: an older run."""
    p = m.get("phases")
    if not isinstance(p, dict) or m.get("counted_s") is None:
        return None
    return Phases(p.get("restart_s") or 0.0, p.get("warmup_s") or 0.0, p.get("calibration_s") or 0.0,
                  float(m["counted_s"]), p.get("probe_s") or 0.0, p.get("stop_s"), p.get("orchestration_s") or 0.0,
                  p.get("wall_s"))


def _counted(m: dict, ctx: dict, smoke_profile: bool, smoke: bool) -> float:
    """The seconds a measurement counted: its -d (wrk2 with its calibration taken off, as the run added it)."""
    asked = requested_duration(m.get("command") or "", m.get("tool")) or float(
        ctx.get("smoke_duration_s" if smoke else "duration_s") or 0)
    if m.get("tool") == "wrk2" and not (smoke or smoke_profile):
        calibration = math.ceil(calibration_s(int(ctx.get("threads") or 1), int(ctx.get("connections") or 1)))
        if asked > calibration:
            return asked - calibration
    return asked


def derived_phases(record: dict, path) -> list[Phases]:
    """Each measurement's phases, derived from what an older run recorded (see :data:`DERIVED`)."""
    ctx, out, previous = record.get("context") or {}, [], None
    fixed_warmup = 0.0 if ctx.get("warmup_window_s") else float(ctx.get("warmup_s") or 0)
    for m in record.get("measurements") or []:
        smoke = path.get(m["step"]).kind == "setup"
        restart = float(m.get("ready_after_s") or 0)
        warm = m.get("warmup") if isinstance(m.get("warmup"), dict) else None
        warmup = float(warm.get("seconds") or 0) if warm else (fixed_warmup if restart and not smoke else 0.0)
        window = float(m.get("window_s") or 0)
        counted = min(window, _counted(m, ctx, record.get("profile") == "smoke", smoke)) if window else 0.0
        calibration = window - counted if m.get("tool") == "wrk2" else 0.0
        known = restart + warmup + window
        same_step = previous is not None and previous["step"] == m["step"]
        gap = _seconds(previous.get("started"), m.get("started")) if same_step else None
        rest = max(0.0, gap - known) if gap is not None else 0.0
        out.append(Phases(restart, warmup, calibration, counted, None, None, rest + window - counted - calibration))
        previous = m
    return out


def _sum(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(sum(values), 1) if values else None


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def phase_figures(record: dict, path) -> dict:
    """A run's phases: summed, the median per measurement, outside the measurements, and the wall
    time per counted second (``path``: the step registry)."""
    ms = record.get("measurements") or []
    recorded = [recorded_phases(m) for m in ms]
    source = "recorded" if all(recorded) else "derived" if not any(recorded) else "partly derived"
    phases = [r or d for r, d in zip(recorded, derived_phases(record, path))]
    wall = _seconds(record.get("started"), record.get("finished"))
    inside = sum(p.wall_s for p in phases)
    counted = sum(p.counted_s for p in phases)
    return {"source": source, "total_s": {k: _sum(getattr(p, k) for p in phases) for k in PHASES},
            "median_s": {k: _median(getattr(p, k) for p in phases) for k in PHASES},
            "measurements_wall_s": round(inside, 1), "run_wall_s": wall,
            "outside_s": round(wall - inside, 1) if wall is not None else None,
            "counted_s": round(counted, 1),
            "wall_per_counted_s": round(wall / counted, 2) if wall and counted else None}


def comparisons(run, frame, path) -> dict:
    """How many comparisons the run's step pages make, how many carry a 95 % verdict, and why the
    others do not (:data:`tunepath.analysis.verdicts.WHY`'s words, counted)."""
    rows = frame[frame.run_id == run.run_id]
    found = [v for step in path if step.name in run.steps()
             for v in step_verdicts(step, run, rows[rows.step == step.name], rows)]
    undecided = Counter(WHY.get(v.why, v.why) for v in found if not v.decided)
    return {"made": len(found), "decided": sum(v.decided for v in found),
            "significant": sum(v.significant is True for v in found), "undecided": dict(undecided.most_common())}


def _halfwidth(row: dict, figure: str) -> tuple[float | None, float | None]:
    """(relative half-width in %, level) of one configuration's figure, or (None, None)."""
    low, high, mid, level = ((row["cpu_low"], row["cpu_high"], row["server_cpu_us_per_req"], row["cpu_level"])
                             if figure == "cpu" else
                             (row["rps_low"], row["rps_high"], row["requests_per_sec"], row["interval_level"]))
    if low is None or high is None or not mid or low != low or high != high:
        return None, None
    return (high - low) / 2 / abs(mid) * 100, level


def _key(pick: dict, column: str) -> dict | None:
    if (KEY_STEP, "stock") not in pick or (KEY_STEP, KEY_VARIANT) not in pick:
        return None
    a, b = (clean(pick[(KEY_STEP, v)][column]) for v in ("stock", KEY_VARIANT))
    key = {"variant": KEY_VARIANT, "n": [int(a.size), int(b.size)], "significant": None, "ratio": None, "level": None}
    if a.size and b.size:
        d = compare(a, b)
        key.update(significant=d.significant, ratio=round(d.ratio, 4), level=d.level)
    return key


def _one(run, frame, path) -> dict:
    rows = frame[frame.run_id == run.run_id].to_dict("records")
    figure = "cpu" if any(r["tool"] == "wrk2" for r in rows) else "rps"
    widths = [w for w in (_halfwidth(r, figure) for r in rows if r["n"] and r["n"] >= 3) if w[0] is not None]
    record = run.record
    return {
        "run_id": run.run_id, "profile": record.get("profile"), "label": record.get("label", ""),
        "emulated": run.emulated, "wall_s": _seconds(record.get("started"), record.get("finished")),
        "measurements": len(record.get("measurements") or []),
        "left_out": int(sum(r.get("dropped") or 0 for r in rows)),
        "figure": "server CPU µs per request" if figure == "cpu" else "requests per second",
        "configurations": len(rows), "with_interval": len(widths),
        "median_halfwidth_pct": round(statistics.median(w for w, _ in widths), 2) if widths else None,
        "median_level": round(statistics.median(lv for _, lv in widths), 4) if widths else None,
        "key_comparison": _key({(r["step"], r["variant"]): r for r in rows},
                               "cpu_values" if figure == "cpu" else "rps_values"),
        # an emulated server's times and comparisons say nothing about a real host's
        "phases": None if run.emulated else phase_figures(record, path),
        "comparisons": None if run.emulated else comparisons(run, frame, path),
    }


def bench_path(runs_dir: Path, path) -> list[dict]:
    """One entry per complete live run, oldest first (``path``: the step registry)."""
    store = RunStore(Path(runs_dir), path.names)
    runs = [r for r in store.load_all() if r.kind == "live" and r.record.get("status") == "complete"]
    if not runs:
        return []
    frame = measurements_frame(runs, path)
    return [_one(run, frame, path) for run in sorted(runs, key=lambda r: r.run_id)]


def _run_line(e: dict) -> str:
    wall = f"{e['wall_s'] / 60:.1f} min" if e["wall_s"] else "—"
    width = f"{e['median_halfwidth_pct']:.1f} %" if e["median_halfwidth_pct"] is not None else "none"
    level = f"{e['median_level'] * 100:.1f}%" if e["median_level"] is not None else "—"
    key = e["key_comparison"]
    verdict = ("—" if not key else
               f"{key['ratio']}× ({key['n'][0]} vs {key['n'][1]}; "
               + ("significant" if key["significant"] else "not significant" if key["significant"] is False
                  else "too few to test") + ")")
    return (f"  {e['run_id']:<26} {e['profile'] or '—':<7} {wall:>8} {e['measurements']:>5} "
            f"{e['left_out']:>8} {width:>9} {level:>6}  {verdict}; figure: {e['figure']}")


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _phase_lines(e: dict) -> list[str]:
    p, c = e["phases"], e["comparisons"]
    per = (f"{p['wall_per_counted_s']:.2f} s of wall time per counted second" if p["wall_per_counted_s"]
           else "no counted load")
    head = "".join(f"{PHASE_WORDS[k]:>{max(9, len(PHASE_WORDS[k]) + 1)}}" for k in PHASES) + f"{'outside':>9}"
    row = lambda what, values, spec, outside: (f"    {what:<15}" + "".join(  # noqa: E731
        f"{_fmt(values[k], spec):>{max(9, len(PHASE_WORDS[k]) + 1)}}" for k in PHASES) + f"{_fmt(outside, spec):>9}")
    undecided = "; ".join(f"{n} {why}" for why, n in c["undecided"].items())
    return [f"  {e['run_id']} ({p['source']}): {p['counted_s']:,.0f} s counted in {_fmt(p['run_wall_s'], ',.0f')} s of "
            f"wall time: {per}",
            f"    {'seconds':<15}{head}",
            row("total", p["total_s"], ".0f", p["outside_s"]),
            row("median / meas.", p["median_s"], ".1f", None),
            f"    comparisons on its step pages: {c['made']}, {c['decided']} with a 95 % verdict "
            f"({c['significant']} significant)" + (f"; without one: {undecided}" if undecided else "")]


def render(entries: list[dict]) -> str:
    """The tables `scripts/bench` prints: one line per recorded live run, then where each real
    host's run spent its time and how many of its comparisons are decided."""
    lines = ["Recorded path runs (wall time; median half-width of the configurations' intervals, at the level "
             "they reach; the baseline's stock against its thread-count variant)",
             f"  {'run':<26} {'profile':<7} {'wall':>8} {'meas.':>5} {'left out':>8} {'median ±':>9} {'level':>6}"
             "  key comparison"]
    lines += [_run_line(e) for e in entries]
    timed = [e for e in entries if e.get("phases")]
    if timed:
        lines += ["", "Where the time went (seconds: summed over the run's measurements, and the median per "
                      "measurement; outside = the run's wall time less its measurements'), and its comparisons"]
        for e in timed:
            lines += _phase_lines(e)
        if any(e["phases"]["source"] != "recorded" for e in timed):
            lines += [f"  note: {DERIVED}."]
    return "\n".join(lines)
