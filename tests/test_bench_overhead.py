"""The orchestration-overhead benchmark counts as load every block that generated load: the rate
sweep's rates (variants that exist only in the run), the capacity probe and the warm-ups; and it
estimates warm-ups the record left out only for runs recorded before every one was kept."""

from __future__ import annotations

import json

import pytest

from harness.bench.overhead import bench_overhead

pytestmark = pytest.mark.fast


def _write(runs, run_id: str, blocks: list[dict], measurements: list[dict], wall: dict[str, float]) -> None:
    (runs / run_id).mkdir(parents=True)
    record = {"run_id": run_id, "kind": "live", "profile": "quick", "blocks": blocks, "measurements": measurements,
              "step_timings": {step: {"wall_s": w} for step, w in wall.items()}}
    (runs / run_id / "run.json").write_text(json.dumps(record))


def _block(step, block, seconds, repetition=None):
    b = {"step": step, "block": block, "duration_s": seconds}
    if repetition:
        b["repetition"] = repetition
    return b


def _steps(runs):
    return {r["run_id"]: {s["step"]: s for s in r["steps"]} for r in bench_overhead(runs)["runs"]}


def test_a_rate_sweeps_rates_and_its_probe_are_load(tmp_path):
    kept = [_block("baseline", "warm-up", 10.0), _block("baseline", "load", 20.0),
            _block("baseline", "warm-up", 10.0, 2), _block("baseline", "load", 20.0, 2)]
    blocks = [*kept, _block("rate-sweep", "restart-tomcat", 2.0), _block("rate-sweep", "warm-up", 30.0),
              _block("rate-sweep", "capacity-probe", 10.0), _block("rate-sweep", "load-rate-24000", 21.0),
              _block("rate-sweep", "load-rate-28000", 21.0), _block("rate-sweep", "load-rate-24000", 21.0, 2)]
    measurements = [{"step": "rate-sweep", "variant": v} for v in ("rate-24000", "rate-28000", "rate-24000")]
    _write(tmp_path, "live-1", blocks, measurements, {"baseline": 65.0, "rate-sweep": 110.0})
    row = _steps(tmp_path)["live-1"]["rate-sweep"]
    assert row["load_s"] == 103.0 and row["other_blocks_s"] == 2.0
    assert row["overhead_s"] == 7.0
    # a run that kept every repetition's warm-up: nothing to estimate, although the sweep (one JVM)
    # has no warm-up of its own for repetition 2 of a rate
    assert row["unrecorded_warmups"] == 0


def test_a_block_named_load_but_of_no_variant_is_not_load(tmp_path):
    blocks = [_block("baseline", "load", 20.0), _block("baseline", "load-balancer-check", 5.0)]
    _write(tmp_path, "live-1", blocks, [{"step": "baseline", "variant": "stock"}], {"baseline": 30.0})
    row = _steps(tmp_path)["live-1"]["baseline"]
    assert (row["load_s"], row["other_blocks_s"]) == (20.0, 5.0)


def test_warm_ups_are_estimated_only_for_runs_that_kept_the_first_one_alone(tmp_path):
    old = [_block("baseline", "warm-up", 10.0), _block("baseline", "load", 20.0), _block("baseline", "load", 20.0, 2)]
    new = [*old, _block("baseline", "warm-up", 12.0, 2)]
    _write(tmp_path, "live-old", old, [], {"baseline": 70.0})
    _write(tmp_path, "live-new", new, [], {"baseline": 70.0})
    rows = _steps(tmp_path)
    assert rows["live-old"]["baseline"]["unrecorded_warmups"] == 1
    assert rows["live-old"]["baseline"]["overhead_adjusted_s"] == 70.0 - 50.0 - 10.0
    assert rows["live-new"]["baseline"]["unrecorded_warmups"] == 0
    assert rows["live-new"]["baseline"]["overhead_s"] == 70.0 - 62.0
