"""The path benchmark reads wall time, precision, the key comparison, where the time went and how many
comparisons are decided from recorded runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.bench.path import bench_path, render
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
WRK2_RUN = "live-20261124-081847-vm"       # wrk2 -d21: 11 s of calibration (10.16 s, rounded up), 10 s counted
WRK_RUN = "live-20261122-075337-vm"        # Debian's wrk -d10, a fixed 10 s warm-up, a 4 + 4 thread sweep
EMULATED = "live-20261124-135634-tunepath-vm"


def one(tmp_path, run_id: str, edit=None) -> tuple[dict, dict]:
    shutil.copytree(ROOT / "runs" / run_id, tmp_path / run_id)
    meta = tmp_path / run_id / "run.json"
    record = json.loads(meta.read_text(encoding="utf-8"))
    if edit:
        edit(record)
        meta.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    [entry] = bench_path(tmp_path, REGISTRY)
    return entry, record


def test_a_recorded_run_gives_its_wall_time_precision_and_key_comparison(tmp_path):
    entry, record = one(tmp_path, WRK_RUN)
    assert entry["run_id"] == WRK_RUN and entry["measurements"] == len(record["measurements"])
    assert entry["wall_s"] > 0
    assert entry["median_halfwidth_pct"] > 0 and 0.5 < entry["median_level"] <= 1
    key = entry["key_comparison"]
    stock = sum(1 for m in record["measurements"] if (m["step"], m["variant"]) == ("baseline", "stock"))
    assert key["n"][0] <= stock


def test_an_older_run_derives_its_phases_and_they_add_up_to_its_wall_time(tmp_path):
    entry, record = one(tmp_path, WRK2_RUN)
    p = entry["phases"]
    assert p["source"] == "derived"
    median, total = p["median_s"], p["total_s"]
    assert median["counted_s"] == 10 and median["calibration_s"] == pytest.approx(11.6, abs=0.1)   # window 21.6 s
    assert total["probe_s"] is None                    # not recorded apart: inside orchestration
    warmups = sum(m["warmup"]["seconds"] for m in record["measurements"] if m.get("warmup"))
    assert total["warmup_s"] == pytest.approx(warmups, abs=0.1)
    assert total["restart_s"] == pytest.approx(sum(m["ready_after_s"] for m in record["measurements"]), abs=0.1)
    assert sum(v for v in total.values() if v is not None) == pytest.approx(p["measurements_wall_s"], abs=0.5)
    assert p["outside_s"] == pytest.approx(entry["wall_s"] - p["measurements_wall_s"], abs=0.1) and p["outside_s"] > 0
    assert p["wall_per_counted_s"] == pytest.approx(entry["wall_s"] / p["counted_s"], abs=0.01)
    assert p["wall_per_counted_s"] > 1      # the physical limit is 1.0


def test_a_closed_loop_run_counts_its_whole_load(tmp_path):
    entry, _ = one(tmp_path, WRK_RUN)
    p = entry["phases"]
    assert p["median_s"]["counted_s"] == 10 and p["total_s"]["calibration_s"] == 0
    assert p["median_s"]["warmup_s"] == 10            # the context's fixed warm-up run


def test_recorded_phases_are_taken_as_recorded(tmp_path):
    def phases(record):
        for m in record["measurements"]:
            m["counted_s"] = 10.0
            m["phases"] = {"wall_s": 40.0, "restart_s": 2.0, "warmup_s": 15.0, "probe_s": 1.0, "calibration_s": 0.0,
                           "stop_s": 1.5, "orchestration_s": 10.5}
        record["finished"] = record["started"][:-6].replace("08:18:51", "09:18:51") + "+00:00"
    entry, record = one(tmp_path, WRK2_RUN, phases)
    p, n = entry["phases"], len(record["measurements"])
    assert p["source"] == "recorded" and p["run_wall_s"] == 3600
    assert p["total_s"] == {"restart_s": 2.0 * n, "warmup_s": 15.0 * n, "calibration_s": 0.0, "counted_s": 10.0 * n,
                            "probe_s": 1.0 * n, "stop_s": 1.5 * n, "orchestration_s": 10.5 * n}
    assert p["measurements_wall_s"] == 40.0 * n and p["outside_s"] == 3600 - 40.0 * n
    assert p["wall_per_counted_s"] == round(3600 / (10.0 * n), 2)
    assert "derived from an older run's record" not in render([entry])


def test_the_comparisons_decided_and_why_the_others_are_not(tmp_path):
    entry, _ = one(tmp_path, WRK_RUN)
    assert entry["comparisons"]["made"] == entry["comparisons"]["decided"] == 20     # 4 + 4 and 5 + 5 throughout
    wrk2, _ = one(tmp_path / "b", WRK2_RUN)
    c = wrk2["comparisons"]
    assert c["made"] == 24 and c["decided"] == 0
    assert c["undecided"] == {"too few repetitions to test at 95 %": 23, "measured in different steps' rounds": 1}
    text = render([wrk2])
    assert "comparisons on its step pages: 24, 0 with a 95 % verdict" in text
    assert "23 too few repetitions to test at 95 %" in text and "derived from an older run's record" in text


def test_an_emulated_run_gets_its_line_but_no_phases_or_verdicts(tmp_path):
    entry, _ = one(tmp_path, EMULATED)
    assert entry["emulated"] and entry["phases"] is None and entry["comparisons"] is None
    assert "Where the time went" not in render([entry]) and EMULATED in render([entry])


def test_no_live_run_gives_nothing(tmp_path):
    assert bench_path(tmp_path, REGISTRY) == []
