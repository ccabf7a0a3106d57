"""Issue 29, items 2 and 3: a run is read by what it measures.

Where the load offered a fixed rate and Tomcat served it, requests/s is that rate for every
configuration: the tables' and charts' comparisons are then on server CPU per request, never on
requests/s. The original's references (wrk2 at -R500000, far past what the server served) keep
requests/s. An emulated server's figures are function checks: no ratio, no chart, no "best".
"""

from __future__ import annotations

import math

import pytest

from conftest import ROOT
from tunepath.analysis.frames import measurements_frame, rate_is_offered
from tunepath.analysis.result import StepResult
from tunepath.evidence.store import RunStore
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

LAB = "live-20261202-070808-vm"            # the lab, wrk2 at a fixed rate every configuration served
EMULATED = "live-20261124-135634-tunepath-vm"
REFERENCE = "reference-aws-c8g"            # wrk2 at -R500000: requests/s is what the server served


@pytest.fixture(scope="module")
def recorded():
    runs = RunStore(ROOT / "runs", REGISTRY.names).load_all([LAB, EMULATED, REFERENCE])
    return {r.run_id: r for r in runs}, measurements_frame(runs, REGISTRY)


def rows_of(recorded, run_id: str) -> list[dict]:
    _, frame = recorded
    return frame[frame.run_id == run_id].to_dict("records")


def number(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def test_a_served_fixed_rate_is_never_compared_on_requests_per_second(recorded):
    rows = rows_of(recorded, LAB)
    served = [r for r in rows if rate_is_offered(r)]
    assert len(served) >= 20
    for r in served:
        for column in ("speedup_vs_stock", "change_vs_previous_pct", "change_low", "vs_step_first", "vs_first_low"):
            assert not number(r[column]), (r["step"], r["variant"], column, r[column])
    sequence = [r for r in served if r["order"] > 0]
    assert sequence and all(number(r["cpu_vs_stock"]) for r in sequence)
    changed = [r for r in sequence if number(r["cpu_change_vs_previous_pct"])]
    assert len(changed) == len(sequence)
    # within one step's interleaved rounds, the change on CPU per request has its interval
    same_step = [r for r in changed if r["previous_variant"].split("/")[0] == r["step"]]
    assert same_step and all(number(r["cpu_change_low"]) and number(r["cpu_change_high"]) for r in same_step)
    assert all(r["cpu_change_low"] <= r["cpu_change_vs_previous_pct"] <= r["cpu_change_high"] for r in same_step)
    compared = [r for r in served if number(r["cpu_vs_first"]) and r["cpu_vs_first"] != 1.0]
    assert compared                                         # the steps that compare variants: on CPU too


def test_the_references_keep_requests_per_second(recorded):
    rows = [r for r in rows_of(recorded, REFERENCE) if r["order"] >= 0]   # its tuning sequence
    assert rows and not any(rate_is_offered(r) for r in rows)   # offered 500,000 req/s, served far fewer
    assert any(number(r["speedup_vs_stock"]) and r["speedup_vs_stock"] > 1.2 for r in rows)
    assert not any(number(r["cpu_vs_stock"]) for r in rows)


def test_an_emulated_server_has_no_ratio(recorded):
    rows = rows_of(recorded, EMULATED)
    assert len(rows) > 10
    for r in rows:
        for column in ("speedup_vs_stock", "change_vs_previous_pct", "vs_step_first", "cpu_vs_stock",
                       "cpu_change_vs_previous_pct", "cpu_vs_first"):
            assert not number(r[column]), (r["step"], r["variant"], column)


def test_rate_is_offered_reads_the_served_share():
    assert rate_is_offered({"offered_rate": 28000.0, "requests_per_sec": 27896.0})
    assert not rate_is_offered({"offered_rate": 28000.0, "requests_per_sec": 20000.0})   # fell behind
    assert not rate_is_offered({"offered_rate": None, "requests_per_sec": 27896.0})      # closed loop
    assert not rate_is_offered({"offered_rate": float("nan"), "requests_per_sec": 27896.0})


def test_charts_read_cpu_per_request_and_skip_the_emulated_server(recorded, tmp_path):
    from tunepath.publish import charts

    runs, frame = recorded
    lab = [r for r in rows_of(recorded, LAB) if r["step"] == "baseline"]
    chart = charts.headline_chart(lab, {f"baseline/{r['variant']}" for r in lab}, tmp_path, "baseline", LAB)
    assert "-cpu-" in chart.src and "CPU time per request" in chart.caption and "µs" in chart.alt
    ref = rows_of(recorded, REFERENCE)
    chart = charts.headline_chart(ref, set(), tmp_path, "summary", REFERENCE)
    assert "-throughput-" in chart.src and "Requests per second" in chart.caption

    def Result(step):       # what Step.charts reads of a step's results
        return StepResult(step, REGISTRY.get(step), REGISTRY, [runs[EMULATED], runs[LAB]],
                          frame[frame.step == step], frame)

    for step in ("baseline", "thread-sweep"):
        drawn = REGISTRY.get(step).charts(Result(step), tmp_path)
        assert drawn and {c.run_id for c in drawn} == {LAB}, step
    assert REGISTRY.get("thread-sweep").best(Result("thread-sweep"), runs[EMULATED]) is None


def test_requests_per_second_at_a_served_rate_says_it_was_the_offered_rate(recorded):
    """Item 2: where a row served the fixed rate it was offered, its requests/s is shown as
    "served of offered"; a reference row (wrk2 far past what it served) is not."""
    from tunepath.publish.display import display

    lab = [r for r in rows_of(recorded, LAB) if rate_is_offered(r)]
    assert lab
    for r in lab:
        assert display(r).served_of_offered.startswith("of ") and display(r).served_of_offered.endswith(" offered")
    reference = rows_of(recorded, REFERENCE)
    assert all(bool(display(r).served_of_offered) == rate_is_offered(r) for r in reference)
    assert all(display(r).served_of_offered == "" for r in reference if r["step"] == "baseline")
