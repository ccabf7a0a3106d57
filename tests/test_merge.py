"""Several clients' latency merged (tunepath.parse.merge)."""

from __future__ import annotations

import copy

import pytest
from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, REFERENCE
from tunepath.errors import TunepathError
from tunepath.parse.merge import MERGE_KEYS, MergedLatency, _Reader, merge_reports, spectrum_buckets
from tunepath.parse.wrk import Histogram, WrkReport
from tunepath.parse.reports import parse_report_file

pytestmark = pytest.mark.fast

SWEEP = REFERENCE / "sandbox-wrk2-rate-sweep"
SPECTRUM_FILES = [
    FIXTURES / "wrk2" / "latency.txt",
    FIXTURES / "wrk2" / "overload_R1M.txt",
    FIXTURES / "wrk2" / "realistic_60s_U_latency.txt",
    FIXTURES / "wrk2" / "ulatency.txt",
    SWEEP / "rate-2000.txt",
    SWEEP / "rate-25000.txt",
    SWEEP / "rate-40000.txt",
]


def load(path, tool=None) -> WrkReport:
    return parse_report_file(path, tool)


def print_tolerance(ms: float) -> float:
    """wrk2 prints percentiles with two decimals in us/ms/s: half the last digit."""
    return 5.0 if ms >= 850 else 0.005


# --- spectrum ---------------------------------------------------------------------
@pytest.mark.parametrize("path", SPECTRUM_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_merging_a_report_with_itself_reproduces_its_percentiles(path):
    report = load(path, "wrk2")
    merged = merge_reports([report, report])
    assert merged.method == "spectrum"
    assert merged.total_count == 2 * report.histogram.spectrum[-1][2]
    for key in MERGE_KEYS:
        printed = report.percentiles_ms[key]
        est, low, high = merged.percentiles[key]
        tol = print_tolerance(printed)
        assert low - tol <= printed <= high + tol, (key, printed, (est, low, high))
        # the interpolated estimate is close to what wrk2 printed from its full histogram
        assert est == pytest.approx(printed, rel=0.04, abs=tol), key
    assert merged.clients == [report.percentiles_ms, report.percentiles_ms]


def test_self_merge_equals_single_report():
    report = load(SWEEP / "rate-25000.txt", "wrk2")
    one, three = merge_reports([report]), merge_reports([report, report, report])
    assert three.total_count == 3 * one.total_count
    for key in MERGE_KEYS:
        # bounds equal; the estimate up to a step or two of the spread (each row's requests sit
        # on 32 values, split in whole requests, and HdrHistogram rounds its target count)
        est1, low1, high1 = one.percentiles[key]
        est3, low3, high3 = three.percentiles[key]
        assert (low3, high3) == (low1, high1), key
        assert est3 == pytest.approx(est1, abs=(high1 - low1) / 16), key


def test_interpolated_p99_is_better_than_the_upper_bound():
    # rate-25000: wrk2 printed p99 = 7.18 ms; its spectrum has rows 6.899 ms and 7.379 ms around it
    merged = merge_reports([load(SWEEP / "rate-25000.txt", "wrk2")])
    est, low, high = merged.percentiles["99"]
    assert (low, high) == (6.899, 7.379)
    assert est == pytest.approx(7.18, abs=0.01)
    assert "at p99:" in merged.exactness and "6.899" in merged.exactness and "7.379" in merged.exactness
    assert "gap between neighboring rows" in merged.exactness


@pytest.mark.parametrize("names", [
    (SWEEP / "rate-25000.txt", SWEEP / "rate-11000.txt"),
    (SWEEP / "rate-2000.txt", SWEEP / "rate-40000.txt"),
    (FIXTURES / "wrk2" / "realistic_60s_U_latency.txt", FIXTURES / "wrk2" / "latency.txt"),
], ids=["25k+11k", "2k+40k", "realistic+latency"])
def test_merged_p99_lies_between_the_clients(names):
    a, b = (load(n, "wrk2") for n in names)
    merged = merge_reports([a, b])
    lo_client = min(a.percentiles_ms["99"], b.percentiles_ms["99"])
    hi_client = max(a.percentiles_ms["99"], b.percentiles_ms["99"])
    tol = print_tolerance(hi_client)
    est, low, high = merged.percentiles["99"]
    assert low <= est <= high
    assert lo_client - tol <= est <= hi_client + tol
    # the bounds are a row gap wide: they may reach past a client's p99, never miss the range
    assert low <= hi_client + tol and high >= lo_client - tol
    # a real merge, not an average: it is weighted by each client's number of requests
    assert merged.total_count == a.histogram.spectrum[-1][2] + b.histogram.spectrum[-1][2]
    assert merged.requests_per_sec == pytest.approx(a.requests_per_sec + b.requests_per_sec)


def test_merge_weights_by_requests_not_by_client():
    # 2k req/s for 20 s has a tenth of 25k's requests: the merged p50 is near the busy client's
    small, big = load(SWEEP / "rate-2000.txt", "wrk2"), load(SWEEP / "rate-25000.txt", "wrk2")
    merged = merge_reports([small, big])
    est = merged.estimate("50")
    assert abs(est - big.percentiles_ms["50"]) < abs(est - small.percentiles_ms["50"])
    assert merged.estimate("99.99") is None  # not a merged key


def test_spectrum_buckets_from_total_counts():
    rows = [(0.5, 0.0, 1), (1.0, 0.5, 50), (1.0, 0.6, 50), (2.0, 0.9, 90), (4.0, 1.0, 100), (4.0, 1.0, 100)]
    assert spectrum_buckets(rows) == [(0.5, 0.5, 1), (0.5, 1.0, 49), (1.0, 2.0, 40), (2.0, 4.0, 10)]


@pytest.mark.parametrize("rows, message", [
    ([(1.0, 0.0, 5), (2.0, 0.5, 3)], "not cumulative"),
    ([(2.0, 0.0, 1), (1.0, 0.5, 3)], "not cumulative"),
    ([(float("nan"), 0.0, 1)], "finite"),
    ([(1.0, 0.0)], "must be"),
])
def test_damaged_spectra_are_refused(rows, message):
    with pytest.raises(TunepathError, match=message):
        spectrum_buckets(rows)


def test_reader_agrees_with_hdrh():
    hist = HdrHistogram(1, 3_600_000_000, 3)
    for value, count in ((27, 1), (950, 400), (7379, 90), (12_345, 9), (1_741_823, 1)):
        hist.record_value(value, count)
    reader = _Reader(hist)
    for pct in (0, 10, 50, 90, 99, 99.9, 100):
        assert reader.value_ms(pct) == hist.get_value_at_percentile(pct) / 1000


def synthetic(rows: list[tuple[float, int]], requests_per_sec: float = 100.0) -> WrkReport:
    """A wrk2-like report whose spectrum has the given (value_ms, total_count) rows."""
    total = rows[-1][1]
    spectrum = [(v, c / total if total else 1.0, c) for v, c in rows]
    r = WrkReport(tool="wrk2", requests=total, requests_per_sec=requests_per_sec)
    r.histogram = Histogram(total_count=total, spectrum=spectrum)
    r.percentiles_ms = {k: None for k in MERGE_KEYS}
    return r


@st.composite
def spectra(draw):
    n = draw(st.integers(1, 25))
    steps = draw(st.lists(st.integers(0, 5000), min_size=n, max_size=n))
    adds = draw(st.lists(st.integers(0, 400), min_size=n, max_size=n))
    value, count, rows = 0, 0, []
    for step, add in zip(steps, adds):
        value, count = value + step, count + add
        rows.append((value / 1000, count))
    if count == 0:
        rows.append(((value + 1) / 1000, 1))
    return synthetic(rows)


@settings(max_examples=60, deadline=None)
@given(st.lists(spectra(), min_size=1, max_size=4))
def test_low_estimate_high_are_ordered(reports):
    merged = merge_reports(reports)
    assert merged.method == "spectrum"
    assert merged.total_count == sum(r.histogram.spectrum[-1][2] for r in reports)
    smallest = min(r.histogram.spectrum[0][0] for r in reports)
    largest = max(r.histogram.spectrum[-1][0] for r in reports)
    for key, (est, low, high) in merged.percentiles.items():
        assert low <= est <= high, key
        # within the recorded range, up to HdrHistogram's three significant digits
        assert smallest * 0.999 - 0.001 <= low and high <= largest * 1.001 + 0.001
    keys = list(merged.percentiles)
    for lower, upper in zip(keys, keys[1:]):
        assert merged.percentiles[lower][0] <= merged.percentiles[upper][0]


def test_empty_spectra_are_refused():
    empty = synthetic([(0.0, 0)])
    with pytest.raises(TunepathError, match="no latency was recorded"):
        merge_reports([empty, copy.deepcopy(empty)])


def test_latency_beyond_an_hour_is_refused():
    with pytest.raises(TunepathError, match="one-hour"):
        merge_reports([synthetic([(1.0, 1), (4_000_000.0, 2)])])


# --- bounds -----------------------------------------------------------------------
def test_wrk_pair_uses_bounds():
    a, b = load(FIXTURES / "wrk" / "latency.txt", "wrk"), load(FIXTURES / "wrk" / "max_load_c50.txt", "wrk")
    merged = merge_reports([a, b])
    assert isinstance(merged, MergedLatency) and merged.method == "bounds"
    assert set(merged.percentiles) == {"50", "75", "90", "99"}  # Debian wrk prints no 99.9 %
    wa, wb = a.requests, b.requests
    for key, (est, low, high) in merged.percentiles.items():
        qa, qb = a.percentiles_ms[key], b.percentiles_ms[key]
        assert (low, high) == (min(qa, qb), max(qa, qb))
        assert est == pytest.approx((wa * qa + wb * qb) / (wa + wb))
    assert merged.total_count == wa + wb
    assert merged.requests_per_sec == pytest.approx(a.requests_per_sec + b.requests_per_sec)
    assert "bound, not a merge" in merged.exactness and "p99" in merged.exactness


def test_one_client_without_spectrum_makes_it_bounds():
    wrk2 = load(SWEEP / "rate-25000.txt", "wrk2")
    wrk = load(FIXTURES / "wrk" / "latency.txt", "wrk")
    merged = merge_reports([wrk2, wrk])
    assert merged.method == "bounds"
    assert set(merged.percentiles) == {"50", "75", "90", "99"}
    assert merged.clients[0]["99.9"] == wrk2.percentiles_ms["99.9"]


def test_bounds_of_a_single_client_are_its_own_percentiles():
    wrk = load(FIXTURES / "wrk" / "max_load_c50.txt", "wrk")
    merged = merge_reports([wrk])
    assert merged.percentiles["99"] == (55.08, 55.08, 55.08)


def test_clients_without_any_response_are_left_out_of_bounds():
    wrk = load(FIXTURES / "wrk" / "latency.txt", "wrk")
    silent = WrkReport(tool="wrk", requests=0, requests_per_sec=0.0,
                       percentiles_ms={"50": None, "75": None, "90": None, "99": None})
    merged = merge_reports([wrk, silent])
    assert merged.percentiles["99"] == (5.31, 5.31, 5.31)


@pytest.mark.parametrize("reports, message", [
    ([], "no reports"),
    (["text"], "parsed"),
])
def test_bad_input_is_refused(reports, message):
    with pytest.raises(TunepathError, match=message):
        merge_reports(reports)


def test_report_without_latency_is_refused():
    plain = load(FIXTURES / "wrk" / "plain.txt", "wrk")  # run without --latency
    with pytest.raises(TunepathError, match="--latency"):
        merge_reports([plain, load(FIXTURES / "wrk" / "latency.txt", "wrk")])
