"""Noise flags, repetitions and run-to-run comparison, from recorded evidence.

Flags are computed from real load-generator outputs (shared fixtures) and the CPU
figures a run records; the frames and documents from runs written with the recorder."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES, ROOT
from tunepath.analysis.noise import Thresholds, flags_for, requested_duration
from tunepath.steps import REGISTRY
from tunepath.parse.wrk import parse_file
from tunepath.evidence.recorder import RunRecorder
from tunepath.evidence.store import RunStore

pytestmark = pytest.mark.fast


def codes(flags):
    return sorted(f.code for f in flags)


def flags(report, entry=None, **kw):
    base = dict(tool=report.tool, command=kw.pop("command", ""), offered_rate=None, server_cpus=2, client_cpus=2,
                same_machine=True)
    base.update(kw)
    return flags_for(report, entry or {}, **base)


@pytest.fixture
def plain():
    return parse_file(FIXTURES / "wrk2" / "plain_15s_calibrated.txt")


def test_a_quiet_measurement_has_no_flag(plain):
    entry = {"cpu_utilisation": {"server": {"steal": 0.2, "busy": 60.0}}, "tomcat_cpu_s": 10.0,
             "client_cpu_s": 7.0, "window_s": 15.0}
    cmd = (FIXTURES / "wrk2" / "plain_15s_calibrated.cmd").read_text().splitlines()[0]
    assert flags(plain, entry, command=cmd) == []


def test_steal_and_foreign_load_are_flagged_on_the_host_they_concern(plain):
    # 2 CPUs × 15 s = 30 CPU-s; busy 90 % less 12.5 % stolen = 23.25 CPU-s; Tomcat 10 + client 7
    # → 6.25 CPU-s (21 %) unaccounted: steal is its own flag, not "other load"
    entry = {"cpu_utilisation": {"server": {"steal": 12.5, "busy": 90.0}}, "tomcat_cpu_s": 10.0,
             "client_cpu_s": 7.0, "window_s": 15.0}
    got = flags(plain, entry)
    assert codes(got) == ["foreign-load", "steal"]
    steal = next(f for f in got if f.code == "steal")
    assert steal.host == "server" and steal.field == "requests_per_sec" and "12.5 %" in steal.text
    foreign = next(f for f in got if f.code == "foreign-load")
    assert foreign.text.startswith("21 %")
    # the thresholds are parameters
    assert flags(plain, entry, thresholds=Thresholds(steal_pct=20, foreign_pct=40)) == []


def test_a_proxy_under_test_is_not_called_foreign_load(plain):
    entry = {"cpu_utilisation": {"server": {"steal": 0.0, "busy": 90.0}}, "tomcat_cpu_s": 10.0,
             "client_cpu_s": 7.0, "window_s": 15.0}
    [flag] = flags(plain, entry, proxied=True)
    assert flag.severity == "info" and "httpd" in flag.text


def test_a_saturated_client_is_flagged(plain):
    # two wrk threads on two CPUs for 15 s: 28.5 CPU-s is 95 % of what they can use
    got = flags(plain, {"client_cpu_s": 28.5, "window_s": 15.0})
    assert codes(got) == ["client-saturated"] and got[0].host == "client"
    assert flags(plain, {"client_cpu_s": 20.0, "window_s": 15.0}) == []


def test_several_clients_are_judged_one_by_one(plain):
    # two client hosts, each 2 CPUs × 15 s; client-1 used 28 CPU-s of its 30 (saturated), client-2 6
    entry = {"cpu_utilisation": {"server": {"steal": 0.0, "busy": 40.0},
                                 "client-1": {"steal": 0.0, "busy": 95.0},
                                 "client-2": {"steal": 0.0, "busy": 60.0}},
             "tomcat_cpu_s": 12.0, "client_cpu_s": 34.0, "window_s": 15.0,
             "parts": [{"client": "a", "client_cpu_s": 28.0}, {"client": "b", "client_cpu_s": 6.0}]}
    got = flags(plain, entry, same_machine=False)
    # client-2: 18 CPU-s busy, 6 its own → 40 % foreign; client-1: 28.5 busy, 28 own → none
    assert [(f.code, f.host) for f in got] == [("foreign-load", "client-2"), ("client-saturated", "client")]


def test_overload_calibration_duration_and_errors():
    over = parse_file(FIXTURES / "wrk2" / "overload_R1M.txt")
    cmd = (FIXTURES / "wrk2" / "overload_R1M.cmd").read_text().splitlines()[0]
    got = flags(over, command=cmd, offered_rate=1_000_000)
    assert "rate-short" in codes(got)
    short = parse_file(FIXTURES / "wrk2" / "plain.txt")          # shorter than wrk2's calibration
    assert "calibration" in codes(flags(short, command=(FIXTURES / "wrk2" / "plain.cmd").read_text()))
    notfound = parse_file(FIXTURES / "wrk2" / "notfound_404.txt")
    got = flags(notfound)
    assert "non-2xx" in codes(got) and next(f for f in got if f.code == "non-2xx").field == "non_2xx_3xx"
    said = next(f for f in got if f.code == "non-2xx").text
    assert notfound.errors and said.startswith(f"{notfound.non_2xx_3xx:,} of {notfound.requests:,} responses")
    assert "measured an error page, not the servlet" in said
    c8g = parse_file(ROOT / "runs" / "reference-aws-c8g" / "raw" / "baseline-stock.txt")
    got = flags(c8g, offered_rate=500_000)
    assert codes(got) == ["rate-short", "socket-errors"]
    assert next(f for f in got if f.code == "socket-errors").field == "errors"


def test_requested_duration_reads_each_tool():
    assert requested_duration("wrk -c8 -t1 -d3 --latency http://x/", "wrk") == 3
    assert requested_duration("wrk2 -t2 -c16 -d1m -R5 http://x/", "wrk2") == 60
    assert requested_duration("ab -k -c 8 -t 15 -n 1 http://x/", "ab") == 15
    assert requested_duration("jmeter -n -t p.jmx -Jduration=20", "jmeter") == 20
    assert requested_duration("wrk http://x/", "wrk") is None


# --- repetitions ------------------------------------------------------------------------
def _record(tmp_path, reps: dict[str, list[str]]):
    """A run with the baseline's configurations repeated, each repetition a real wrk output."""
    src = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record = {k: src[k] for k in ("kind", "status", "label", "date", "date_note", "source", "same_machine",
                                  "hosts", "context")}
    record.update(run_id="reps-test", kind="live", status="partial", measurements=[])
    rec = RunRecorder(tmp_path, record)
    for variant, files in reps.items():
        for i, name in enumerate(files, 1):
            text = (FIXTURES / "wrk" / name).read_text()
            rec.measurement("baseline", variant, text, "", 0, "wrk -c50 -t2 -d10 --latency http://x/", "wrk",
                            repetition=i, tomcat_cpu_s=1.0 * i)
    rec.repetitions("baseline", rounds=3, reason="test", rule={}, order=list(reps))
    rec.finish()
    return RunStore(tmp_path).load("reps-test")


def test_repetitions_are_recorded_apart_and_summarised_as_medians(tmp_path):
    from tunepath.analysis.frames import measurements_frame, repetitions_frame

    run = _record(tmp_path, {"stock": ["plain.txt", "latency.txt", "max_load_c50.txt"],
                             "access-log-off": ["max_load_c50.txt", "max_load_c50.txt", "latency.txt"]})
    assert [(m.variant, m.repetition) for m in run.measurements][:3] == [("stock", 1), ("stock", 2), ("stock", 3)]
    assert len({m.stdout for m in run.measurements}) == 6          # one raw file per repetition
    reps = repetitions_frame([run], REGISTRY)
    frame = measurements_frame([run], REGISTRY).set_index("variant")
    for variant in ("stock", "access-log-off"):
        values = sorted(reps[reps.variant == variant].requests_per_sec)
        row = frame.loc[variant]
        assert row["n"] == 3 and row["requests_per_sec"] == values[1]           # the median
        assert row["rps_low"] <= row["requests_per_sec"] <= row["rps_high"]
        assert values[0] <= row["rps_low"] and row["rps_high"] <= values[2]
        assert row["rps_cv"] > 0
    off = frame.loc["access-log-off"]
    assert off["speedup_vs_stock"] == pytest.approx(off["requests_per_sec"] / frame.loc["stock", "requests_per_sec"])
    # three repetitions on each side reach a 90 % interval at most: shown, but not tested at 95 %
    assert off["change_significant"] is None and off["change_level"] == pytest.approx(0.9)
    assert off["change_low"] <= off["change_vs_previous_pct"] <= off["change_high"]
    assert row["interval_level"] == pytest.approx(0.75)         # three values: [min, max] is a 75 % interval


def test_a_difference_within_the_noise_is_not_significant(tmp_path):
    from tunepath.analysis.frames import measurements_frame

    # overlapping samples: access-log-off's fastest run is slower than stock's fastest
    run = _record(tmp_path, {"stock": ["max_load_c50.txt", "latency.txt", "plain.txt", "max_load_c50.txt"],
                             "access-log-off": ["latency.txt", "plain.txt", "max_load_c50.txt", "latency.txt"]})
    off = measurements_frame([run], REGISTRY).set_index("variant").loc["access-log-off"]
    assert off["change_significant"] == False  # noqa: E712  (4 + 4 repetitions can be tested at 95 %)
    assert off["change_low"] < 0 < off["change_high"]


def test_pages_get_intervals_flags_and_the_stopping_reason(tmp_path):
    from tunepath.publish.hugo_data import run_block
    from tunepath.analysis.frames import measurements_frame

    run = _record(tmp_path, {"stock": ["plain.txt", "latency.txt", "max_load_c50.txt"]})
    block = run_block(run, REGISTRY.get("baseline"), measurements_frame([run], REGISTRY), REGISTRY)
    [m] = block["measurements"]
    assert m["n"] == 3 and len(m["repetitions"]) == 3
    assert m["display"]["repetitions"] == "3" and " – " in m["display"]["rps_interval"]
    assert m["display"]["rps_cv"].endswith(" %")
    assert block["repetitions_info"]["rounds"] == 3


# --- two modes and different shapes ------------------------------------------------------
def test_two_modes_are_flagged_beside_the_figure():
    from tunepath.analysis.noise import mode_flags

    [flag] = mode_flags({"requests_per_sec": [100.0, 101.0, 150.0, 151.0, 100.5], "server_cpu_per_req": [20.0, 21.0]})
    assert (flag.code, flag.field, flag.severity) == ("two-modes", "requests_per_sec", "warning")
    assert "cannot be trusted" in flag.text and "not necessarily its median" in flag.text
    assert mode_flags({"requests_per_sec": [100.0, 103.0, 106.0, 109.0, 112.0]}) == []      # evenly spread
    assert mode_flags({"requests_per_sec": [100.0, 150.0, None, float("nan")]}) == []         # two values: untested


def test_shapes_differ_when_cvs_are_far_apart_or_a_side_has_two_modes():
    from tunepath.analysis.noise import SHAPE_CV_RATIO, shape_flag

    [flag] = shape_flag("vs_step_first", "b against a", 0.09, 0.01, False)
    assert (flag.code, flag.field, flag.severity) == ("shapes-differ", "vs_step_first", "info")
    assert flag.text.startswith("b against a: the two spread differently (CVs 9 % and 1 %)")
    assert "distributions differ, not that their medians do" in flag.text
    assert shape_flag("vs_step_first", "b", 0.01 * (SHAPE_CV_RATIO - 0.1), 0.01, False) == []
    assert shape_flag("vs_step_first", "b", None, 0.01, False) == [] and shape_flag("x", "b", 0.0, 0.01, False) == []
    assert shape_flag("change_vs_previous_pct", "b", 0.01, 0.01, True)[0].text.count("two modes") == 1


def test_frames_flag_a_bimodal_configuration_and_its_comparisons(tmp_path):
    from tunepath.analysis.frames import measurements_frame

    # stock: 32,967 and 43,343 req/s twice each, a gap of 31 %; access-log-off: one mode
    run = _record(tmp_path, {"stock": ["latency.txt", "max_load_c50.txt", "latency.txt", "max_load_c50.txt"],
                             "access-log-off": ["plain.txt", "plain.txt", "plain.txt", "plain.txt"]})
    frame = measurements_frame([run], REGISTRY).set_index("variant")
    stock, off = frame.loc["stock"], frame.loc["access-log-off"]
    assert [(f.code, f.field) for f in stock["flags"] if f.code == "two-modes"] == [("two-modes", "requests_per_sec")]
    assert not [f for f in off["flags"] if f.code == "two-modes"]
    assert [f.field for f in off["flags"] if f.code == "shapes-differ"] == ["change_vs_previous_pct"]


def test_no_interval_records_no_level(tmp_path):
    from tunepath.analysis.frames import measurements_frame

    run = _record(tmp_path, {"stock": ["plain.txt"], "access-log-off": ["latency.txt"]})
    frame = measurements_frame([run], REGISTRY).set_index("variant")
    assert frame.loc["stock", "interval_level"] is None and frame.loc["access-log-off", "change_level"] is None


# --- comparison across runs ---------------------------------------------------------------
def test_two_runs_side_by_side_with_ratios_and_differing_facts():
    from tunepath.analysis.compare import compare_document
    from tunepath.analysis.frames import measurements_frame

    runs = RunStore(ROOT / "runs").load_all()
    doc = compare_document(runs, measurements_frame(runs, REGISTRY), REGISTRY, REGISTRY.get("compare"))
    ids = {p["id"] for p in doc["pairs"]}
    real = sum(not r.emulated and r.info.matrix is None for r in runs)
    # every pair of real runs, once; a run on an emulated server is in none (tests/test_emulated_server.py),
    # not even with another emulated run: its figures are never a ratio; a version matrix's cells are
    # compared on the history page instead (tests/test_compare_page.py)
    assert sum(r.emulated for r in runs) >= 2 and any(r.info.matrix for r in runs)
    assert len(ids) == real * (real - 1) // 2
    pair = next(p for p in doc["pairs"] if p["a"]["run_id"] == "reference-aws-c8g" and p["b"]["run_id"] == "reference-grace")
    [numa] = [s for s in pair["steps"] if s["step"] == "numa"]
    [row] = numa["rows"]
    assert row["ratio"] == pytest.approx(235505.32 / 363744.39, rel=1e-6)
    assert row["low"] is None and row["significant"] is None        # single runs: no interval
    differs = {f["key"] for f in pair["facts"] if f["differs"]}
    assert "server.cpu_model" in differs and "server.tomcat_version" in differs
    assert "context.rate" not in differs                              # both drove -R500000
    assert doc["pairs"][0]["default"] is True


def test_compare_command_prints_ratios_and_refuses_unknown_runs(capsys):
    from tunepath.cli import main

    assert main(["compare", "reference-aws-c8g", "reference-grace"]) == 0
    out = capsys.readouterr().out
    assert "0.65×" in out and "fact(s) differ" in out and "server: CPUs: 192  |  144" in out
    assert main(["compare", "reference-aws-c8g", "no-such-run"]) == 2
    assert "no recorded run 'no-such-run'" in capsys.readouterr().err
