"""Run store, steps and pipeline: validation, derived figures, and errors meant for people."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from conftest import FIXTURES, ROOT
from tunepath import pipeline
from tunepath.steps import REGISTRY
from tunepath.errors import TunepathError
from tunepath.analysis.frames import measurements_frame, offered_rate
from tunepath.evidence.store import RunError, RunStore
from tunepath.model.context import HostContext, brace_ranges, cpu_ranges, parse_cpu_list
from tunepath.steps import plan

pytestmark = pytest.mark.fast

RUNS = ROOT / "runs"


@pytest.fixture
def runs_copy(tmp_path):
    dst = tmp_path / "runs"
    shutil.copytree(RUNS, dst)
    return dst


def test_reference_raw_outputs_are_the_published_bytes():
    """Reference runs hold the shared outputs byte for byte: the published ones
    (``original_file`` under reference/published/) and the recorded sandbox sweep."""
    reference = FIXTURES.parent / "reference"
    checked = 0
    for run in RunStore(RUNS).load_all():
        if run.kind != "reference":
            continue
        original = json.loads((run.path / "run.json").read_text())
        for m in run.measurements:
            entry = next(x for x in original["measurements"] if x["step"] == m.step and x["variant"] == m.variant)
            source = (reference / "published" / entry["original_file"] if "original_file" in entry
                      else reference / entry["source"])
            assert m.stdout.read_bytes() == source.read_bytes(), source
            checked += 1
    assert checked >= 17      # 8 published outputs + the 10-point sandbox sweep (one is the smoke test)


def test_recorded_sweep_matches_its_commands_and_plan():
    """The imported sandbox sweep: each command as its .cmd file says, and as the step's plan renders it."""
    from tunepath.steps import plan

    run = RunStore(RUNS).load("sandbox-wrk2-rate-sweep")
    blocks = {b.id: b.text for b in plan("rate-sweep", run.context)}
    sweep = FIXTURES.parent / "reference" / "sandbox-wrk2-rate-sweep"
    assert len(run.measurements) == len(list(sweep.glob("rate-*.cmd"))) == 10
    for m in run.measurements:
        cmd = (sweep / f"{m.variant}.cmd").read_text().splitlines()[0]
        assert m.command == cmd == blocks[f"load-{m.variant}"]


def test_derived_figures_stay_within_a_run():
    frame = measurements_frame(RunStore(RUNS).load_all(), REGISTRY)
    c8g = frame[frame.run_id == "reference-aws-c8g"].set_index(["step", "variant"])
    assert c8g.loc[("baseline", "stock"), "speedup_vs_stock"] == 1.0
    assert c8g.loc[("iommu", "iommu-passthrough"), "speedup_vs_stock"] == pytest.approx(428628.50 / 244449.62)
    assert c8g.loc[("numa", "numa-local"), "change_vs_previous_pct"] == pytest.approx((363744.39 / 378782.37 - 1) * 100)
    assert c8g.loc[("numa", "numa-local"), "previous_variant"] == "nic-queues/queues-8"
    grace = frame[frame.run_id == "reference-grace"].iloc[0]
    assert pd.isna(grace["speedup_vs_stock"]) and pd.isna(grace["change_vs_previous_pct"])
    smoke = c8g.loc[("setup", "smoke")]
    assert smoke["order"] == -1 and pd.isna(smoke["speedup_vs_stock"]) and smoke["offered_rate"] == 50000


def test_offered_rate_from_commands():
    assert offered_rate("wrk -c1280 -t128 -R500000 -d60 http://x/") == 500000
    assert offered_rate("wrk2 -t2 -c16 -d20 -R 5k -U http://x/") == 5000
    assert offered_rate("wrk --rate=2000 http://x/") == 2000
    assert offered_rate("wrk -t2 -c10 -d5 http://x/") is None


def test_cpu_lists_and_plans():
    assert parse_cpu_list("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert cpu_ranges([3, 1, 2, 7]) == "1-3,7"
    assert brace_ranges([c for c in range(192) if not 96 <= c <= 103]) == "{0..95} {104..191}"
    with pytest.raises(TunepathError, match="runs backwards"):
        parse_cpu_list("7-0")
    grace = HostContext.from_dict({"total_cpus": 144, "numa_cpus": "72-79", "tomcat_home": "~/apache-tomcat-11.0.9"})
    move = next(b for b in plan("numa", grace) if b.id == "move-cpus")
    assert move.text.splitlines() == [
        'for no in {72..79}; do sudo bash -c "echo 1 > /sys/devices/system/cpu/cpu${no}/online"; done',
        'for no in {0..71} {80..143}; do sudo bash -c "echo 0 > /sys/devices/system/cpu/cpu${no}/online"; done']
    assert move.disruptive
    assert "~/apache-tomcat-11.0.9/bin/startup.sh" in next(b for b in plan("numa", grace) if b.id == "restart-tomcat").text
    with pytest.raises(TunepathError, match="unknown host context"):
        HostContext.from_dict({"cpus": 4})


def test_corrupt_run_json_is_a_clear_error(runs_copy):
    (runs_copy / "reference-grace" / "run.json").write_text("{ not json")
    with pytest.raises(RunError, match=r"reference-grace/run.json: not valid JSON .*restore"):
        RunStore(runs_copy).load("reference-grace")


def test_missing_raw_output_and_missing_fact_reason(runs_copy):
    (runs_copy / "reference-grace" / "raw" / "numa-numa-local.txt").unlink()
    with pytest.raises(RunError, match="raw output .* is missing"):
        RunStore(runs_copy).load("reference-grace")
    meta = runs_copy / "reference-aws-c8g" / "run.json"
    record = json.loads(meta.read_text())
    record["hosts"]["server"]["facts"]["kernel"] = None
    meta.write_text(json.dumps(record))
    with pytest.raises(RunError, match="facts.kernel is null without a reason"):
        RunStore(runs_copy).load("reference-aws-c8g")


def test_unknown_run_names_the_known_ones(runs_copy):
    with pytest.raises(RunError, match="recorded runs: .*reference-aws-c8g, reference-grace"):
        RunStore(runs_copy).load("nope")


def test_write_is_atomic_and_never_overwrites(tmp_path):
    store = RunStore(tmp_path)
    record = json.loads((RUNS / "reference-grace" / "run.json").read_text())
    record["run_id"] = "copy"
    files = {p.relative_to(RUNS / "reference-grace").as_posix(): p.read_bytes()
             for p in (RUNS / "reference-grace").rglob("*") if p.is_file() and p.name != "run.json"}
    store.write(record, files)
    assert store.run_ids() == ["copy"]
    with pytest.raises(RunError, match="never overwritten"):
        store.write(record, files)
    bad = dict(record, run_id="broken")
    with pytest.raises(RunError, match="raw output"):
        store.write(bad, {})            # invalid: no raw files
    assert store.run_ids() == ["copy"]
    assert [p.name for p in tmp_path.iterdir()] == ["copy"]   # no temporary left behind


def test_modes_and_steps_fail_clearly():
    with pytest.raises(TunepathError, match="unknown mode"):
        pipeline.step("baseline", "fast", RUNS)
    with pytest.raises(TunepathError, match="unknown mode"):
        pipeline.replay_step("baseline", RUNS, mode="fast")
    with pytest.raises(TunepathError, match="unknown step 'http3'; the steps are: setup, baseline"):
        pipeline.replay_step("http3", RUNS)
    with pytest.raises(TunepathError, match="none of the selected runs recorded step 'baseline'"):
        pipeline.replay_step("baseline", RUNS, run_ids=["reference-grace"])


def test_cli_errors_are_one_line(tmp_path):
    env = {"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"}
    for args in (["plan", "http3"], ["plan", "numa", "--run", "nope"],
                 ["build", "--site-dir", str(tmp_path), "--steps", "http3", "--no-hugo"]):
        proc = subprocess.run([sys.executable, "-m", "tunepath.cli", *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_failing_notebook_keeps_its_output_and_names_the_step(tmp_path, runs_copy):
    from tunepath.publish.build import execute_step

    (runs_copy / "reference-grace" / "run.json").write_text("{ broken")
    with pytest.raises(TunepathError) as info:
        execute_step("numa", tmp_path, runs_copy)
    message = str(info.value)
    assert "step 'numa'" in message and "not valid JSON" in message
    assert (tmp_path / "static" / "notebooks" / "04-numa.ipynb").is_file()
