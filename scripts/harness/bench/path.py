"""Benchmark of a recorded path run: how long it took and how precise it came out.

For every live run under ``runs/``: its profile, hosts label, wall time (``started`` to
``finished``), how many measurements it recorded and how many of them were left out, the
median relative half-width of the configurations' intervals (and the median level those
intervals really have: few repetitions cannot reach 95 %), and the baseline's key comparison
(stock against the thread-count variant). The figure is the one each configuration is
compared on: requests per second for a closed-loop tool, and Tomcat's CPU time per request
where wrk2 offered a constant rate (its throughput is the rate). Everything is read from the
recorded runs through the same frames the pages use; nothing is measured here.
"""

from __future__ import annotations

import datetime as dt
import statistics
from pathlib import Path

from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.stats import clean, compare
from tunepath.evidence.store import RunStore

__all__ = ["bench_path", "render", "KEY_STEP", "KEY_VARIANT"]

KEY_STEP, KEY_VARIANT = "baseline", "threads"      # the key comparison: stock against the thread count


def _seconds(start: str | None, end: str | None) -> float | None:
    try:
        return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _halfwidth(row: dict, figure: str) -> tuple[float | None, float | None]:
    """(relative half-width in %, level) of one configuration's figure, or (None, None)."""
    low, high, mid, level = ((row["cpu_low"], row["cpu_high"], row["server_cpu_us_per_req"], row["cpu_level"])
                             if figure == "cpu" else
                             (row["rps_low"], row["rps_high"], row["requests_per_sec"], row["interval_level"]))
    if low is None or high is None or not mid or low != low or high != high:
        return None, None
    return (high - low) / 2 / abs(mid) * 100, level


def _one(run, frame) -> dict:
    rows = frame[frame.run_id == run.run_id].to_dict("records")
    figure = "cpu" if any(r["tool"] == "wrk2" for r in rows) else "rps"
    widths = [w for w in (_halfwidth(r, figure) for r in rows if r["n"] and r["n"] >= 3) if w[0] is not None]
    pick = {(r["step"], r["variant"]): r for r in rows}
    column = "cpu_values" if figure == "cpu" else "rps_values"
    key = None
    if (KEY_STEP, "stock") in pick and (KEY_STEP, KEY_VARIANT) in pick:
        a, b = (clean(pick[(KEY_STEP, v)][column]) for v in ("stock", KEY_VARIANT))
        key = {"variant": KEY_VARIANT, "n": [int(a.size), int(b.size)], "significant": None, "ratio": None,
               "level": None}
        if a.size and b.size:
            d = compare(a, b)
            key.update(significant=d.significant, ratio=round(d.ratio, 4), level=d.level)
    record = run.record
    return {
        "run_id": run.run_id, "profile": record.get("profile"), "label": record.get("label", ""),
        "wall_s": _seconds(record.get("started"), record.get("finished")),
        "measurements": len(record.get("measurements") or []),
        "left_out": int(sum(r.get("dropped") or 0 for r in rows)),
        "figure": "server CPU µs per request" if figure == "cpu" else "requests per second",
        "configurations": len(rows), "with_interval": len(widths),
        "median_halfwidth_pct": round(statistics.median(w for w, _ in widths), 2) if widths else None,
        "median_level": round(statistics.median(lv for _, lv in widths), 4) if widths else None,
        "key_comparison": key,
    }


def bench_path(runs_dir: Path, path) -> list[dict]:
    """One entry per complete live run, oldest first (``path``: the step registry)."""
    store = RunStore(Path(runs_dir), path.names)
    runs = [r for r in store.load_all() if r.kind == "live" and r.record.get("status") == "complete"]
    if not runs:
        return []
    frame = measurements_frame(runs, path)
    return [_one(run, frame) for run in sorted(runs, key=lambda r: r.run_id)]


def render(entries: list[dict]) -> str:
    """The table `scripts/bench` prints: one line per recorded live run."""
    lines = ["Recorded path runs (wall time; median half-width of the configurations' intervals, at the level "
             "they reach; the baseline's stock against its thread-count variant)",
             f"  {'run':<26} {'profile':<7} {'wall':>8} {'meas.':>5} {'left out':>8} {'median ±':>9} {'level':>6}"
             "  key comparison"]
    for e in entries:
        wall = f"{e['wall_s'] / 60:.1f} min" if e["wall_s"] else "—"
        width = f"{e['median_halfwidth_pct']:.1f} %" if e["median_halfwidth_pct"] is not None else "none"
        level = f"{e['median_level'] * 100:.1f}%" if e["median_level"] is not None else "—"
        key = e["key_comparison"]
        verdict = ("—" if not key else
                   f"{key['ratio']}× ({key['n'][0]} vs {key['n'][1]}; "
                   + ("significant" if key["significant"] else "not significant" if key["significant"] is False
                      else "too few to test") + ")")
        lines.append(f"  {e['run_id']:<26} {e['profile'] or '—':<7} {wall:>8} {e['measurements']:>5} "
                     f"{e['left_out']:>8} {width:>9} {level:>6}  {verdict}; figure: {e['figure']}")
    return "\n".join(lines)

