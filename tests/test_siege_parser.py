"""siege and JMeter 5.6.3 reports: real captured outputs (tests/data/siege, tests/data/jmeter),
exact values, cut and damaged copies, and the `tunepath parse` contract."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_DATA
from tunepath.parse.problems import ParseError
from tunepath.parse.record import PERCENTILE_KEYS, WrkReport
from tunepath.parse.reports import parse_report, parse_report_file, recognise_tool
from tunepath.parse.siege import parse_siege

pytestmark = pytest.mark.fast

SIEGE, JMETER = TEST_DATA / "siege", TEST_DATA / "jmeter"
C16 = (SIEGE / "c16-t10s.out").read_text()
DASHBOARD = (JMETER / "dashboard.out").read_text()


def _reject(token):
    raise AssertionError(f"non-standard JSON constant {token}")


def test_captures_are_present_with_their_commands():
    names = {p.stem for p in SIEGE.glob("*.out")}
    assert {"c8-t5s", "c16-t10s", "c16-t10s-json", "first-run", "refused", "aborted", "not-found"} <= names
    assert all((SIEGE / f"{n}.cmd").is_file() for n in names)
    assert {p.stem for p in JMETER.glob("*.out")} >= {"dashboard", "refused", "summary-only"}


@pytest.mark.parametrize("path", sorted(SIEGE.glob("*.out")) + sorted(JMETER.glob("*.out")), ids=lambda p: p.name)
def test_every_capture_is_recognised_and_keeps_the_cli_contract(path):
    tool = path.parent.name
    assert recognise_tool(path.read_text()) == tool
    proc = subprocess.run([sys.executable, "-m", "tunepath.cli", "parse", str(path)], capture_output=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=_reject)          # strict JSON: NaN became null
    assert set(data) == set(WrkReport().to_dict()) and data["tool"] == tool
    assert list(data["percentiles_ms"]) == list(PERCENTILE_KEYS)
    assert data["requests_per_sec_trusted"] and data["problems"] == []


# --- siege: exact figures ---------------------------------------------------------------------
def test_a_timed_run_gives_siege_s_own_figures():
    r = parse_siege(C16)
    assert (r.tool, r.threads, r.connections) == ("siege", 16, 16)
    assert (r.requests, r.duration_s, r.requests_per_sec) == (263398, 9.98, 26392.59)
    assert r.bytes_read == pytest.approx(97.21 * 1024 ** 2) and r.transfer_per_sec_bytes == pytest.approx(9.74 * 1024 ** 2)
    # Response time prints 0.00 s; the mean is Concurrency ÷ Transaction rate, siege's same sum
    assert r.latency_ms.avg == pytest.approx(15.71 / 26392.59 * 1000) and 0.5 < r.latency_ms.avg < 0.7
    assert r.latency_ms.max == 20.0 and math.isnan(r.latency_ms.stdev)
    assert r.percentiles_ms == {**{k: None for k in PERCENTILE_KEYS}, "100": 20.0}     # no other percentile
    assert r.socket_errors == {"connect": 0, "read": 2625, "write": 0, "timeout": 0} and r.non_2xx_3xx == 0
    assert any("maxKeepAliveRequests" in w for w in r.warnings)      # why a kept-alive run shows failures


def test_the_json_form_gives_the_same_figures():
    r = parse_report_file(SIEGE / "c16-t10s-json.out")
    assert (r.tool, r.requests, r.duration_s, r.requests_per_sec) == ("siege", 294060, 9.98, 29464.93)
    assert r.threads is None and r.latency_ms.avg == pytest.approx(15.69 / 29464.93 * 1000)
    assert r.socket_errors["read"] == 2932


def test_zero_transactions_refused_and_aborted():
    for name in ("refused", "aborted"):
        r = parse_report_file(SIEGE / f"{name}.out")
        assert (r.requests, r.duration_s, r.requests_per_sec) == (0, 0.0, 0.0)
        assert r.socket_errors["connect"] == 4 and r.socket_errors["read"] == 0
        assert math.isnan(r.latency_ms.avg) and all(v is None for v in r.percentiles_ms.values())
        assert any("unable to connect" in w for w in r.warnings) and r.requests_per_sec_trusted
    assert any("aborted" in w for w in parse_report_file(SIEGE / "aborted.out").warnings)


def test_error_statuses_are_transactions_but_not_successful():
    r = parse_report_file(SIEGE / "not-found.out")
    assert r.requests == r.non_2xx_3xx == 25908 and r.requests_per_sec == 13354.64


def test_a_first_run_s_template_notice_is_not_an_unknown_line():
    r = parse_report_file(SIEGE / "first-run.out")
    assert r.requests == 81398 and not any("unrecognised" in w for w in r.warnings)


# --- siege: cut, damaged, edited ---------------------------------------------------------------
def _cut_after(text: str, label: str, keep: str = "") -> str:
    """The text up to (not including) the line starting with ``label``, plus ``keep`` of that line."""
    head, _, rest = text.partition("\n" + label)
    return head + ("\n" + label + rest.split("\n")[0][:len(keep)] if keep else "") + "\n"


def test_a_report_cut_before_its_rate_derives_it_and_says_so():
    r = parse_siege(_cut_after(C16, "Transaction rate:"))
    assert r.requests_per_sec == pytest.approx(263398 / 9.98) and not r.requests_per_sec_trusted
    codes = {(p.code, p.field) for p in r.problems}
    assert ("derived", "requests_per_sec") in codes and ("cut", "requests_per_sec") in codes


def test_a_cut_count_on_the_last_line_is_not_used():
    text = C16.split("Successful transactions:")[0] + "Successful transactions:        2633"   # of 263398
    r = parse_siege(text)
    assert r.non_2xx_3xx == 0                                        # not 263398 − 2633
    assert any(p.code == "cut" and p.field == "non_2xx_3xx" for p in r.problems)
    assert r.requests_per_sec == 26392.59 and r.requests_per_sec_trusted


def test_a_cut_rate_fragment_is_flagged():
    r = parse_siege(C16.split("Transaction rate:")[0] + "Transaction rate:\t    2639")
    assert not r.requests_per_sec_trusted and r.requests_per_sec == pytest.approx(263398 / 9.98)


def test_an_edited_rate_is_replaced_by_transactions_over_elapsed_time():
    r = parse_siege(C16.replace("26392.59 trans/sec", "36392.59 trans/sec"))
    assert r.requests_per_sec == pytest.approx(263398 / 9.98)
    assert [p.code for p in r.problems] == ["inconsistent"] and not r.requests_per_sec_trusted


def test_an_edited_response_time_disagrees_with_concurrency_over_rate():
    r = parse_siege(C16.replace("Response time:\t\t        0.00 secs", "Response time:\t\t        0.20 secs"))
    assert any(p.code == "inconsistent" and p.field == "latency_ms" for p in r.problems)
    assert r.latency_ms.avg == 200.0 and r.requests_per_sec_trusted


def _siege_with(text: str, **figures: str) -> str:
    """The siege report with the figures of the named lines (Transactions=…, Elapsed_time=…) replaced."""
    for label, value in figures.items():
        line = next(ln for ln in text.splitlines() if ln.startswith(label.replace("_", " ") + ":"))
        head, _, tail = line.partition(":")
        old = tail.split()[0]
        text = text.replace(line, head + ":" + tail.replace(old, value, 1), 1)
    return text


@pytest.mark.parametrize("name, old, new", [
    ("c16-t10s.out", "Elapsed time:\t\t        9.98 secs", "Elapsed time:\t\t        0.00 secs"),
    ("c16-t10s-json.out", '"elapsed_time":\t\t\t        9.98,', '"elapsed_time":\t\t\t        0.00,'),
])
def test_many_transactions_in_no_time_are_not_a_trusted_rate(name, old, new):
    text = (SIEGE / name).read_text()
    assert old in text
    r = parse_siege(text.replace(old, new))
    assert not r.requests_per_sec_trusted
    [problem] = [p for p in r.problems if p.field == "requests_per_sec"]
    assert problem.code == "absurd" and "0 s for" in problem.text


def test_a_concurrency_of_zero_leaves_the_mean_unknown_not_zero():
    r = parse_siege(_siege_with(C16, Concurrency="0.00"))          # 263,398 transactions at 26,392.59/s
    assert math.isnan(r.latency_ms.avg) and r.latency_ms.max == 20.0
    assert [(p.code, p.field) for p in r.problems] == [("absurd", "latency_ms")]   # one problem, not two
    assert "below 0.00019 ms" in r.problems[0].text
    # three transactions in ten seconds: 0.00 is only siege's resolution, so no problem, but no 0 ms either
    few = _siege_with(C16, Transactions="3", Availability="100.00", Data_transferred="0.00", Transaction_rate="0.30",
                      Throughput="0.00", Concurrency="0.00", Successful_transactions="3", Failed_transactions="0",
                      Longest_transaction="0.01")
    r = parse_siege(few)
    assert r.problems == [] and math.isnan(r.latency_ms.avg) and r.requests_per_sec_trusted
    assert any("mean latency is not known" in w for w in r.warnings)


def test_damaged_bytes_are_named_and_two_reports_refused():
    damaged = C16.replace("Concurrency:", "Conc\x00urrency:")
    r = parse_siege(damaged)
    assert {(p.code, p.field) for p in r.problems} == {("damaged", "report"), ("damaged", "latency_ms")}
    assert r.latency_ms.avg == 0.0 and not r.requests_per_sec_trusted    # Response time 0.00 s is all that is left
    with pytest.raises(ParseError, match="more than one report"):
        parse_report(C16 + C16)
    with pytest.raises(ParseError, match="more than one report"):
        parse_report(C16 + "  100 requests in 1.00s, 10.00KB read\nRequests/sec:    100.00\n", "siege")


def test_no_summary_is_one_line():
    with pytest.raises(ParseError, match="no siege summary"):
        parse_siege("** SIEGE 4.0.7\n** Preparing 8 concurrent users for battle.\nThe server is now under siege...")
    with pytest.raises(ParseError, match="2>&1"):
        parse_report("", "siege")


# --- JMeter 5.6.3 --------------------------------------------------------------------------------
def test_jmeter_summary_and_dashboard():
    r = parse_report(DASHBOARD)
    assert (r.tool, r.requests, r.duration_s, r.requests_per_sec) == ("jmeter", 100576, 10.0, 9992.6)
    assert r.latency_ms.avg == pytest.approx(0.7377704422526282) and r.latency_ms.max == 44.0
    assert {k: v for k, v in r.percentiles_ms.items() if v is not None} == {"50": 1.0, "90": 1.0, "99": 5.0,
                                                                            "100": 44.0}
    assert r.problems == [] and r.socket_errors["read"] == 0


def test_jmeter_without_dashboard_keeps_the_summariser_s_figures():
    r = parse_report_file(JMETER / "summary-only.out")
    assert (r.requests, r.duration_s, r.requests_per_sec, r.latency_ms.avg) == (2140, 5.0, 411.8, 7.0)
    assert r.percentiles_ms["99"] is None and r.percentiles_ms["100"] == 180.0
    assert any("no dashboard statistics" in w for w in r.warnings)


def test_jmeter_errors_count_as_failed_samples():
    r = parse_report_file(JMETER / "refused.out")
    assert r.requests == r.socket_errors["read"] == 7898 and r.requests_per_sec == 2550.2


def _in_total(old: str, new: str) -> str:
    """The dashboard output with ``old`` replaced in statistics.json's Total entry (its last one)."""
    head, found, tail = DASHBOARD.rpartition(old)
    assert found and DASHBOARD.rfind('"Total"') < len(head)
    return head + new + tail


@pytest.mark.parametrize("old, new, problem", [
    ('"meanResTime" : 0.7377704422526282', '"meanResTime" : 500.0', ("absurd", "latency_ms")),
    ('"errorCount" : 0,', '"errorCount" : 200000,', ("absurd", "socket_errors")),     # of 100,576 samples
    ('"errorPct" : 0.0', '"errorPct" : 150.0', ("absurd", "socket_errors")),
    ('"errorCount" : 0,', '"errorCount" : 5,', ("inconsistent", "socket_errors")),     # the summary says Err: 0
    ('"errorPct" : 0.0', '"errorPct" : 2.5', ("inconsistent", "socket_errors")),       # not 0 ÷ 100,576
])
def test_a_jmeter_dashboard_that_contradicts_itself_or_the_summary_is_set_aside(old, new, problem):
    r = parse_report(_in_total(old, new))
    assert problem in {(p.code, p.field) for p in r.problems}, r.problems
    assert r.latency_ms.avg == 0.0 and r.percentiles_ms["99"] is None      # the summariser's figures
    assert r.requests_per_sec_trusted and r.socket_errors["read"] == 0      # the summary line is whole


def test_a_jmeter_summary_whose_avg_is_above_its_max_is_flagged():
    r = parse_report(DASHBOARD.replace("summary = 100576 in 00:00:10 = 9992.6/s Avg:     0",
                                       "summary = 100576 in 00:00:10 = 9992.6/s Avg:    90"))
    assert ("absurd", "latency_ms") in {(p.code, p.field) for p in r.problems}


def test_jmeter_rate_is_checked_against_its_rounded_seconds():
    edited = DASHBOARD.replace("= 9992.6/s", "= 19992.6/s")
    r = parse_report(edited)
    assert not r.requests_per_sec_trusted and any(p.code == "inconsistent" for p in r.problems)
    other = DASHBOARD.replace('"sampleCount" : 100576', '"sampleCount" : 100')
    r = parse_report(other)
    assert r.percentiles_ms["99"] is None and any(p.field == "percentiles_ms" for p in r.problems)
    cut = parse_report(DASHBOARD[:DASHBOARD.index('"Total"') + 40])
    assert cut.percentiles_ms["99"] is None and any(p.code == "cut" for p in cut.problems)
    assert cut.requests_per_sec_trusted                       # the summary line itself is whole
