"""Each comparison a step's page makes, as data (analysis/verdicts.py): the figure it is judged on
(never requests/s where a side offered a fixed rate), the 95 % rule, and why a comparison has no verdict."""

from __future__ import annotations

import statistics

import json

import pytest

from conftest import ROOT
from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.verdicts import CPU, RPS, step_verdicts
from tunepath.evidence.store import RunStore
from tunepath.publish.hugo_data import run_block
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

LAB = "live-20261124-081847-vm"            # the lab's namespaces, wrk2, 3 repetitions in the baseline
ONE_MACHINE = "live-20261122-075337-vm"    # server and client on one VM, Debian's wrk, a 4 + 4 thread sweep
EMULATED = "live-20261124-135634-tunepath-vm"
REFERENCES = ("reference-aws-c8g", "reference-grace")


@pytest.fixture(scope="module")
def recorded():
    runs = RunStore(ROOT / "runs", REGISTRY.names).load_all([LAB, ONE_MACHINE, EMULATED, *REFERENCES])
    return {r.run_id: r for r in runs}, measurements_frame(runs, REGISTRY)


def verdicts_of(recorded, run_id: str, step: str):
    runs, frame = recorded
    rows = frame[frame.run_id == run_id]
    return step_verdicts(REGISTRY.get(step), runs[run_id], rows[rows.step == step], rows)


def every_verdict(recorded, run_id: str):
    return [v for s in REGISTRY for v in verdicts_of(recorded, run_id, s.name)]


def test_reference_runs_say_they_cannot_be_tested(recorded):
    found = every_verdict(recorded, "reference-aws-c8g")
    assert len(found) == 5       # the tuning sequence: each measurement against the previous one
    for v in found:
        assert v.significant is None and v.why == "reference" and v.low_pct is None
        assert v.sentence.endswith("no verdict: a reference run is a single measurement"), v.sentence
        assert v.figure == RPS   # wrk2 offered -R500000, far past what it served: requests/s is a measurement


def test_the_emulated_run_gives_no_verdict(recorded):
    found = every_verdict(recorded, EMULATED)
    assert len(found) > 20
    assert all(v.significant is None and v.why == "emulated" for v in found)
    assert {v.reason for v in found} == {"emulated server: checks that commands work, not performance"}


def test_four_and_four_repetitions_get_a_verdict(recorded):
    sweep = verdicts_of(recorded, ONE_MACHINE, "thread-sweep")
    assert [v.change for v in sweep] == [f"maxThreads {n}" for n in (2, 4, 8, 16, 32, 64, 200)]
    assert {v.against for v in sweep} == {"maxThreads 1"}        # each count against the first
    for v in sweep:
        assert (v.n_a, v.n_b) == (4, 4) and v.significant is not None and v.level >= 0.95
        assert v.figure == RPS and v.low_pct <= v.change_pct <= v.high_pct     # wrk: closed loop
        assert v.sentence.endswith(f"{'significant' if v.significant else 'not significant'} on vm"), v.sentence
    assert any(v.significant for v in sweep) and not all(v.significant for v in sweep)


def test_three_and_three_repetitions_do_not_and_say_why(recorded):
    first, second = verdicts_of(recorded, LAB, "baseline")
    assert (first.change, first.against) == ("Access log off", "Stock configuration")
    assert (first.n_a, first.n_b) == (3, 3) and first.significant is None and first.why == "too-few"
    assert first.reason == "3 and 3 repetitions cannot be tested at 95 %; 4 each are needed"
    assert first.level == pytest.approx(0.9) and first.low_pct < first.high_pct    # the interval it does reach
    assert first.figure == CPU and first.p99_a_ms > 0 and first.p99_b_ms > 0        # wrk2: CPU, p99 beside it
    assert "p99 latency" in first.sentence and "\u2212" in first.sentence and "-" not in first.sentence.split(":")[1]
    assert second.against == "Access log off"


def test_a_comparison_across_steps_has_no_verdict(recorded):
    [queues] = verdicts_of(recorded, LAB, "nic-queues")
    assert queues.why == "other-rounds" and queues.significant is None and queues.low_pct is None
    assert "measured in a different step's rounds" in queues.sentence
    assert queues.change_pct is not None and queues.figure == CPU    # the change against the baseline's last, on CPU


def test_steps_that_compare_nothing_give_none(recorded):
    for step in ("setup", "rate-sweep", "summary", "compare"):
        assert verdicts_of(recorded, LAB, step) == []


def test_the_step_data_carries_the_verdicts(recorded):
    runs, frame = recorded
    block = run_block(runs[LAB], REGISTRY.get("connectors"), frame, REGISTRY)
    expected = [v.to_data() for v in verdicts_of(recorded, LAB, "connectors")]
    assert block["verdicts"] == expected and len(expected) == 1
    json.dumps(block["verdicts"], allow_nan=False)
    assert set(expected[0]) >= {"change", "figure", "change_pct", "low_pct", "high_pct", "level", "significant",
                                "n_a", "n_b", "p99_a_ms", "p99_b_ms", "sentence", "reason"}


# --- synthetic pairs: which figure decides -------------------------------------------------------------

def row(variant: str, rps: list[float], cpu: list[float], *, tool: str = "wrk2", dropped: int = 0, p99: float = 2.0,
        offered: float | None = None):
    """A frame row; wrk2 offered what it served unless ``offered`` says more."""
    served = statistics.median(rps)
    rate = (offered or served) if tool == "wrk2" else None
    return {"run_id": LAB, "step": "connectors", "variant": variant, "label": variant.upper(), "tool": tool,
            "offered_rate": rate, "requests_per_sec": served,
            "rps_values": rps, "cpu_values": cpu, "n": len(rps), "dropped": dropped,
            "p99_ms": p99, "previous_variant": None, "previous_label": None}


LOW, HIGH, FLAT = [10.0, 10.1, 10.2, 10.3], [20.0, 20.1, 20.2, 20.3], [1000.0] * 4


def pair(recorded, a: dict, b: dict, run_id: str = LAB):
    runs, _ = recorded
    [v] = step_verdicts(REGISTRY.get("connectors"), runs[run_id], [a, b])
    return v


def test_an_open_loop_pair_is_decided_on_cpu_per_request_never_on_requests_per_second(recorded):
    cpu_differs = pair(recorded, row("nio", FLAT, LOW), row("nio2", FLAT, HIGH))
    assert cpu_differs.figure == CPU and cpu_differs.significant is True
    assert cpu_differs.change_pct == pytest.approx((20.15 / 10.15 - 1) * 100)
    assert cpu_differs.sentence.startswith("NIO2 against NIO: +98.52 % server CPU per request (")
    assert "significant on the lab" in cpu_differs.sentence
    rps_differs = pair(recorded, row("nio", LOW, FLAT), row("nio2", HIGH, FLAT))
    assert rps_differs.figure == CPU and rps_differs.significant is False and rps_differs.change_pct == 0
    assert "not significant on the lab" in rps_differs.sentence


def test_a_closed_loop_pair_is_decided_on_requests_per_second(recorded):
    closed = pair(recorded, row("nio", LOW, FLAT, tool="wrk"), row("nio2", HIGH, FLAT, tool="wrk"))
    assert closed.figure == RPS and closed.significant is True and "requests/s" in closed.sentence
    flat = pair(recorded, row("nio", FLAT, LOW, tool="wrk"), row("nio2", FLAT, HIGH, tool="wrk"))
    assert flat.figure == RPS and flat.significant is False


def test_an_offered_rate_the_server_fell_far_short_of_is_judged_on_requests_per_second(recorded):
    """As in the original's reference runs: wrk2's rate far past capacity, so requests/s is what was served."""
    short = pair(recorded, row("nio", LOW, FLAT, offered=500000.0), row("nio2", HIGH, FLAT, offered=500000.0))
    assert short.figure == RPS and short.significant is True
    one_served = pair(recorded, row("nio", LOW, FLAT, offered=500000.0), row("nio2", HIGH, FLAT))
    assert one_served.figure == CPU


def test_an_open_and_a_closed_loop_variant_are_compared_on_cpu(recorded):
    mixed = pair(recorded, row("nio", FLAT, LOW), row("nio2", HIGH, LOW, tool="wrk"))
    assert mixed.figure == CPU and mixed.significant is False
    assert pair(recorded, row("nio", LOW, LOW, tool="ab"), row("nio2", HIGH, HIGH)).figure == CPU


def test_disturbed_repetitions_left_out_and_missing_figures_are_said(recorded):
    disturbed = pair(recorded, row("nio", FLAT, LOW), row("nio2", FLAT[:2], HIGH[:2], dropped=2))
    assert disturbed.why == "disturbed" and disturbed.significant is None
    assert "repetitions left out as disturbed" in disturbed.reason
    missing = pair(recorded, row("nio", FLAT, LOW), row("nio2", FLAT, [None] * 4))
    assert missing.why == "no-figure" and missing.reason == "server CPU per request was not recorded for NIO2"
    assert "on vm" in pair(recorded, row("nio", FLAT, LOW), row("nio2", FLAT, HIGH), ONE_MACHINE).sentence


def test_a_side_whose_responses_were_mostly_errors_gets_no_verdict(recorded):
    """A load that met HTTP 403s (the examples webapp refusing remote clients) measured an error page."""
    refused = row("nio2", FLAT, HIGH) | {"requests": 60000.0, "non_2xx_3xx": 60000.0}
    found = pair(recorded, row("nio", FLAT, LOW) | {"requests": 60000.0, "non_2xx_3xx": 0.0}, refused)
    assert found.why == "errors" and found.significant is None
    assert found.reason == ("NIO2: over 1% of the responses were HTTP errors, so it measured an error page, not "
                            "the servlet")
    few = row("nio2", FLAT, HIGH) | {"requests": 60000.0, "non_2xx_3xx": 600.0}      # 1 %: still the servlet
    assert pair(recorded, row("nio", FLAT, LOW), few).significant is True
