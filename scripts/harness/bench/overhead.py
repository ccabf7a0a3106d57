"""Benchmark 3 of ``python -m harness.bench``: the orchestration overhead of live steps.

Per recorded live run and step: wall time (``step_timings[STEP].wall_s``, else the Papermill
duration of the step's executed notebook kept in the run, an estimate) minus the time its
load-generating blocks took (``load``, ``load-VARIANT``, ``warm-up``, ``smoke-test``,
``capacity-probe``); adjusted, also minus the estimated warm-ups of repetitions 2… that runs
recorded before every repetition's blocks were kept leave out.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness import ROOT

__all__ = ["LOAD_BLOCKS", "bench_overhead"]

LOAD_BLOCKS = ("load", "warm-up", "smoke-test", "capacity-probe")   # plus load-VARIANT


def _load_block(step: str, block_id: str, measured: frozenset = frozenset()) -> bool:
    """Whether a recorded block generated load: a load, warm-up, smoke test or capacity probe, or
    ``load-VARIANT`` of one of the step's variants (the registry's, or ``measured``: the variants the
    run measured, such as the rate sweep's rates, which depend on the run)."""
    if block_id in LOAD_BLOCKS:
        return True
    if not block_id.startswith("load-"):
        return False
    if block_id.removeprefix("load-") in measured:
        return True
    try:
        from tunepath.steps import get_step

        return block_id.removeprefix("load-") in {v.name for v in get_step(step).variants}
    except Exception:   # noqa: BLE001 - a step no longer defined: judge by the name alone
        return True


def _notebook_duration(run_dir: Path, step: str) -> float | None:
    """Papermill's duration of the step's executed notebook kept in the run, if any."""
    for nb in sorted((run_dir / "notebooks").glob(f"[0-9][0-9]-{step}.ipynb")):
        try:
            meta = json.loads(nb.read_text(encoding="utf-8"))["metadata"].get("papermill", {})
        except (OSError, ValueError, KeyError):
            continue
        if isinstance(meta.get("duration"), (int, float)):
            return float(meta["duration"])
    return None


def _live_records(runs_dir: Path):
    """``(run directory, run record)`` of every live run under ``runs_dir``, by name."""
    for meta in sorted(runs_dir.glob("*/run.json")):
        if meta.parent.name.startswith("."):
            continue
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if record.get("kind") == "live":
            yield meta.parent, record


def _step_order(blocks: list[dict], timings: dict) -> list[str]:
    """The run's steps in the order their blocks were recorded, then those with timings only."""
    order: list[str] = []
    for name in [b.get("step") for b in blocks] + list(timings):
        if name and name not in order:
            order.append(name)
    return order


def _step_wall(run_dir: Path, step: str, timings: dict) -> tuple[float | None, str]:
    """The step's wall seconds, and where they come from."""
    wall = (timings.get(step) or {}).get("wall_s")
    if isinstance(wall, (int, float)):
        return wall, "recorded (step_timings)"
    wall = _notebook_duration(run_dir, step)
    return wall, ("estimated (Papermill duration of the run's executed notebook)"
                  if wall is not None else "not recorded")


def _unrecorded_warmups(step: str, mine: list[dict], measured: frozenset, all_kept: bool) -> tuple[int, int, float]:
    """``(repeated load blocks, warm-ups not kept, their estimated seconds)`` of one step.

    Repetitions after the first restart Tomcat and warm up again; runs recorded before
    live.py kept every repetition's blocks hold the first repetition's only: estimate
    the warm-ups not kept (one per repeated load block, at the mean warm-up duration)."""
    warmups = [b["duration_s"] for b in mine if b.get("block") == "warm-up"]
    repeated = sum(1 for b in mine if _load_block(step, b.get("block", ""), measured)
                   and b.get("block") != "warm-up" and (b.get("repetition") or 1) > 1)
    if all_kept:     # a run that kept every repetition's warm-up (one JVM for a sweep has one)
        return repeated, 0, 0.0
    kept = sum(1 for b in mine if b.get("block") == "warm-up" and (b.get("repetition") or 1) > 1)
    unrecorded = max(0, repeated - kept) if warmups else 0
    unrecorded_s = sum(warmups) / len(warmups) * unrecorded if warmups else 0.0
    return repeated, unrecorded, unrecorded_s


def _step_overhead(run_dir: Path, step: str, blocks: list[dict], timings: dict,
                   measured: frozenset = frozenset(), all_kept: bool = False) -> dict:
    """One step's row: wall, load, other blocks, overhead (plain and adjusted)."""
    mine = [b for b in blocks if b.get("step") == step and isinstance(b.get("duration_s"), (int, float))]
    load = sum(b["duration_s"] for b in mine if _load_block(step, b.get("block", ""), measured))
    other = sum(b["duration_s"] for b in mine if not _load_block(step, b.get("block", ""), measured))
    wall, source = _step_wall(run_dir, step, timings)
    repeated, unrecorded, unrecorded_s = _unrecorded_warmups(step, mine, measured, all_kept)
    row = {"step": step, "wall_s": wall, "wall_source": source, "load_s": round(load, 3),
           "other_blocks_s": round(other, 3), "repeated_loads": repeated,
           "unrecorded_warmups": unrecorded, "unrecorded_warmup_s_est": round(unrecorded_s, 3),
           "timestamps_in_blocks": any("started" in b or "finished" in b for b in mine)}
    if wall is not None:
        row["overhead_s"] = round(wall - load, 3)
        row["overhead_pct"] = round((wall - load) / wall * 100, 1) if wall > 0 else None
        adjusted = wall - load - unrecorded_s
        row["overhead_adjusted_s"] = round(adjusted, 3)
        row["overhead_adjusted_pct"] = round(adjusted / wall * 100, 1) if wall > 0 else None
    return row


def _run_total(steps: list[dict]) -> dict:
    """The sums over the steps whose wall time is known."""
    with_wall = [s for s in steps if s["wall_s"] is not None]
    total = {"wall_s": round(sum(s["wall_s"] for s in with_wall), 3),
             "load_s": round(sum(s["load_s"] for s in with_wall), 3),
             "unrecorded_warmup_s_est": round(sum(s["unrecorded_warmup_s_est"] for s in with_wall), 3)}
    total["overhead_s"] = round(total["wall_s"] - total["load_s"], 3)
    total["overhead_adjusted_s"] = round(total["overhead_s"] - total["unrecorded_warmup_s_est"], 3)
    return total


def bench_overhead(runs_dir: Path | None = None) -> dict:
    """Per live run and step: wall, load, other commands, overhead = wall − load."""
    runs_dir = Path(runs_dir) if runs_dir else ROOT / "runs"
    runs = []
    for run_dir, record in _live_records(runs_dir):
        blocks = record.get("blocks") or []
        timings = record.get("step_timings") or {}
        measured = record.get("measurements") or []
        # runs recorded since every repetition's blocks are kept need no estimate of warm-ups
        all_kept = any(b.get("block") == "warm-up" and (b.get("repetition") or 1) > 1 for b in blocks)
        steps = [_step_overhead(run_dir, step, blocks, timings,
                                frozenset(m.get("variant") for m in measured if m.get("step") == step), all_kept)
                 for step in _step_order(blocks, timings)]
        runs.append({"run_id": record.get("run_id", run_dir.name), "profile": record.get("profile"),
                     "started": record.get("started"), "finished": record.get("finished"),
                     "steps": steps, "total_with_wall": _run_total(steps)})
    return {"runs": runs}


