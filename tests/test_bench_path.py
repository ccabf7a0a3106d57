"""The path benchmark reads wall time, precision and the key comparison from recorded runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.bench.path import bench_path
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]


def test_a_recorded_run_gives_its_wall_time_precision_and_key_comparison(tmp_path):
    run = next(p for p in sorted((ROOT / "runs").glob("live-*")) if (p / "run.json").is_file())
    shutil.copytree(run, tmp_path / run.name)
    record = json.loads((run / "run.json").read_text(encoding="utf-8"))
    [entry] = bench_path(tmp_path, REGISTRY)
    assert entry["run_id"] == run.name and entry["measurements"] == len(record["measurements"])
    assert entry["wall_s"] > 0
    if entry["with_interval"]:
        assert entry["median_halfwidth_pct"] > 0 and 0.5 < entry["median_level"] <= 1
    key = entry["key_comparison"]
    stock = sum(1 for m in record["measurements"] if (m["step"], m["variant"]) == ("baseline", "stock"))
    assert key is None or key["n"][0] <= stock


def test_no_live_run_gives_nothing(tmp_path):
    assert bench_path(tmp_path, REGISTRY) == []
