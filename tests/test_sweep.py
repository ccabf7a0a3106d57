"""Capacity at a latency objective from a wrk2 rate sweep (tunepath.analysis.sweep)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, REFERENCE
from tunepath.errors import TunepathError
from tunepath.parse.wrk import WrkReport
from tunepath.parse.reports import parse_report_file
from tunepath.analysis.sweep import Capacity, SweepPoint, capacity, normalise_percentile, points_from_reports

pytestmark = pytest.mark.fast

SWEEP = REFERENCE / "sandbox-wrk2-rate-sweep"


def reference_pairs():
    pairs = []
    for path in SWEEP.glob("rate-*.txt"):
        rate = int(re.fullmatch(r"rate-(\d+)\.txt", path.name).group(1))
        assert f"-R{rate} " in path.with_suffix(".cmd").read_text()  # the name tells the truth
        pairs.append((rate, parse_report_file(path, "wrk2")))
    assert len(pairs) == 10
    return pairs


def pt(offered, achieved, p99, **more):
    pct = {"99": p99, **more}
    return SweepPoint(offered_rate=offered, achieved_rate=achieved, percentiles_ms=pct)


# --- the real sweep -----------------------------------------------------------------
def test_reference_sweep_capacity():
    cap = capacity(points_from_reports(reference_pairs()), slo_ms=10.0, percentile="99")
    assert isinstance(cap, Capacity)
    assert cap.capacity_rate == 25000
    assert cap.capacity_achieved == pytest.approx(24975.29)
    assert cap.capacity_latency_ms == pytest.approx(7.18)
    assert cap.first_violation == 11000
    assert cap.sustained_rate == 8000
    assert cap.suspect == [11000, 17000]
    assert cap.max_throughput == pytest.approx(37057.57)
    assert cap.max_throughput_offered == 40000
    assert [p.offered_rate for p in cap.points] == [2000, 5000, 8000, 11000, 14000, 17000, 20000,
                                                     25000, 30000, 40000]
    assert cap.meets == [True, True, True, False, True, False, True, True, False, False]
    assert (cap.conservative_rate, cap.optimistic_rate, cap.missed_below) == (8000, 25000, [11000, 17000])
    text = cap.sentence()
    for needle in ("p99 ≤ 10 ms", "25,000 req/s", "11,000", "17,000", "repeat", "37,058", "40,000"):
        assert needle in text
    assert text.startswith("At p99 ≤ 10 ms the conservative capacity is 8,000 req/s offered")   # first, not 25,000
    assert "They differ because 11,000 and 17,000 req/s missed the objective although 25,000 req/s met it" in text


def test_reference_sweep_points_have_normalised_keys():
    points = points_from_reports(reference_pairs())
    p = next(p for p in points if p.offered_rate == 40000)
    assert p.achieved_rate == pytest.approx(37057.57)
    assert {"50", "75", "90", "99", "99.9", "99.99"} <= set(p.percentiles_ms)
    assert p.latency("99") == pytest.approx(1500.0)       # wrk2 printed "1.50s"
    assert p.latency("p99.000") == p.latency("99")


def test_reference_sweep_at_other_objectives():
    points = points_from_reports(reference_pairs())
    strict = capacity(points, slo_ms=1.0)
    assert strict.capacity_rate is None and strict.first_violation == 2000 and strict.suspect == []
    assert "No offered rate met p99 ≤ 1 ms" in strict.sentence()
    loose = capacity(points, slo_ms=2000.0)
    # 40,000 offered has p99 1.5 s but serves only ~37,058 req/s: it fails on throughput
    assert loose.capacity_rate == 30000 and loose.first_violation == 40000
    assert "served only 37,058" in loose.sentence()
    assert capacity(points, slo_ms=2000.0, rate_tolerance=0.9).capacity_rate == 40000


def test_fixture_without_latency_gives_a_point_that_never_meets():
    report = parse_report_file(FIXTURES / "wrk2" / "plain.txt", "wrk2")  # no --latency
    (point,) = points_from_reports([(2000, report)])
    assert point.latency("99") is None
    cap = capacity([point], slo_ms=1e6)
    assert cap.capacity_rate is None and cap.meets == [False]


# --- synthetic sweeps -------------------------------------------------------------
def test_unsorted_input_is_sorted_and_monotone_sweep():
    cap = capacity([pt(3000, 2990, 12.0), pt(1000, 1000, 2.0), pt(2000, 1999, 4.0)], slo_ms=5)
    assert [p.offered_rate for p in cap.points] == [1000, 2000, 3000]
    assert (cap.capacity_rate, cap.sustained_rate, cap.first_violation, cap.suspect) == (2000, 2000, 3000, [])
    assert (cap.conservative_rate, cap.optimistic_rate, cap.missed_below) == (2000, 2000, [])
    assert "the next rate tried, 3,000 req/s, missed it (p99 12 ms)" in cap.sentence()
    assert "conservative" not in cap.sentence() and "differ" not in cap.sentence()   # one figure: nothing to set apart


def test_every_point_meets():
    cap = capacity([pt(1000, 1000, 1.0), pt(2000, 2000, 2.0)], slo_ms=5)
    assert cap.capacity_rate == 2000 and cap.first_violation is None and cap.sustained_rate == 2000
    assert "extend the sweep" in cap.sentence()


def test_missed_throughput_fails_even_with_low_latency():
    # open-loop wrk2 that could not send the offered rate is no evidence of capacity
    cap = capacity([pt(1000, 1000, 1.0), pt(2000, 1800, 1.0)], slo_ms=5)
    assert cap.meets == [True, False] and cap.capacity_rate == 1000
    assert capacity([pt(1000, 1000, 1.0), pt(2000, 1900, 1.0)], slo_ms=5).capacity_rate == 2000


def test_missing_achieved_rate_fails():
    cap = capacity([pt(1000, None, 1.0), pt(2000, math.nan, 1.0)], slo_ms=5)
    assert cap.meets == [False, False] and cap.max_throughput is None
    assert "no achieved rate" in capacity([pt(500, 500, 1.0), pt(1000, None, 1.0)], slo_ms=5).sentence()


def test_missing_or_nan_percentile_fails():
    cap = capacity([pt(1000, 1000, None), pt(2000, 2000, math.nan), pt(3000, 3000, 3.0)], slo_ms=5)
    assert cap.meets == [False, False, True]
    assert cap.suspect == [1000, 2000] and cap.sustained_rate is None
    assert "there is no conservative capacity: the lowest rate tried, 1,000 req/s, already missed it" in cap.sentence()


# --- the conservative and the optimistic capacity -------------------------------------------------
@pytest.mark.parametrize("pattern, conservative, optimistic, missed", [
    ("MMMM", 4000, 4000, []),             # M: met; x: p99 missed; s: served less than 95 % (rates 1,000, 2,000, …)
    ("MMxx", 2000, 2000, []),
    ("MxMx", 1000, 3000, [2000]),
    ("MsM", 1000, 3000, [2000]),           # a miss on throughput alone counts as a miss
    ("MMxMxMx", 2000, 6000, [3000, 5000]),  # non-monotone: two misses below the optimistic figure
    ("xMMx", None, 3000, [1000]),          # the lowest rate missed: no conservative figure
    ("xxxx", None, None, []),
])
def test_conservative_and_optimistic_capacity(pattern, conservative, optimistic, missed):
    points = [pt(1000 * (i + 1), 1000 * (i + 1) * (0.9 if c == "s" else 1.0), 20.0 if c == "x" else 2.0)
              for i, c in enumerate(pattern)]
    cap = capacity(points, slo_ms=10)
    assert (cap.conservative_rate, cap.optimistic_rate, cap.missed_below) == (conservative, optimistic, missed)
    text = cap.sentence()
    if missed:                                                    # the reason they differ: which rates missed
        assert f"They differ because {' and '.join(f'{m:,}' for m in missed)} req/s missed the objective" in text
        if conservative:
            assert text.index(f"conservative capacity is {conservative:,} req/s") < text.index(f"{optimistic:,} req/s")
    else:
        assert "differ" not in text


def test_other_percentile_and_key_forms():
    points = [SweepPoint(1000, 1000, {"99.900": 8.0, "99": 2.0}), SweepPoint(2000, 2000, {"99.9%": 12.0})]
    assert points[0].percentiles_ms == {"99.9": 8.0, "99": 2.0}
    assert capacity(points, slo_ms=10, percentile="99.9").capacity_rate == 1000
    report_a, report_b = WrkReport(), WrkReport()
    report_a.requests_per_sec, report_a.percentiles_ms = 1000.0, {"99.900%": 8.0, "99.000": 2.0}
    report_b.requests_per_sec, report_b.percentiles_ms = 2000.0, {"99.9": 12.0}
    pts = points_from_reports([(1000, report_a), (2000, report_b)], labels=["a", "b"])
    assert pts[0].percentiles_ms == {"99.9": 8.0, "99": 2.0} and pts[0].label == "a"
    cap = capacity(pts, slo_ms=10, percentile="p99.9")
    assert cap.percentile == "99.9" and cap.capacity_rate == 1000 and cap.first_violation == 2000


@pytest.mark.parametrize("key, expected", [
    ("99", "99"), ("99.000", "99"), ("99.900%", "99.9"), ("p99.99", "99.99"), (50, "50"), (99.9, "99.9"),
])
def test_normalise_percentile(key, expected):
    assert normalise_percentile(key) == expected


@pytest.mark.parametrize("bad", ["median", "101", -1, True])
def test_bad_percentiles_are_refused(bad):
    with pytest.raises(TunepathError, match="percentile"):
        normalise_percentile(bad)


@pytest.mark.parametrize("call, message", [
    (lambda: capacity([]), "empty sweep"),
    (lambda: capacity([pt(1000, 1000, 1.0), pt(1000, 990, 1.2)]), "more than once"),
    (lambda: capacity([pt(1000, 1000, 1.0)], slo_ms=0), "objective"),
    (lambda: capacity([pt(1000, 1000, 1.0)], rate_tolerance=1.5), "rate_tolerance"),
    (lambda: points_from_reports([(0, WrkReport())]), "positive"),
    (lambda: points_from_reports([("fast", WrkReport())]), "number"),
    (lambda: points_from_reports([(1000, "report text")]), "parsed wrk2 report"),
    (lambda: points_from_reports([(1000, WrkReport())], labels=["a", "b"]), "labels"),
    (lambda: SweepPoint(1000, 1000, {"99": "7ms"}), "latency in ms"),
    (lambda: SweepPoint(-5, 1000, {}), "positive"),
    (lambda: SweepPoint(1000, "1k", {}), "achieved rate"),
])
def test_bad_input_is_refused(call, message):
    with pytest.raises(TunepathError, match=message):
        call()


# --- properties -----------------------------------------------------------------
@st.composite
def sweeps(draw):
    rates = draw(st.lists(st.integers(1, 100) .map(lambda r: r * 500), min_size=1, max_size=12, unique=True))
    points = []
    for rate in rates:
        served = draw(st.floats(0.8, 1.0)) * rate
        p99 = draw(st.one_of(st.none(), st.floats(0.1, 50.0)))
        points.append(pt(rate, served, p99))
    return points


@settings(max_examples=200, deadline=None)
@given(sweeps(), st.floats(1.0, 40.0))
def test_capacity_invariants(points, slo):
    cap = capacity(points, slo_ms=slo)
    by_rate = dict(zip((p.offered_rate for p in cap.points), cap.meets))
    rates = sorted(by_rate)
    if cap.capacity_rate is None:
        assert not any(cap.meets) and cap.sustained_rate is None and cap.suspect == []
    else:
        assert by_rate[cap.capacity_rate] and not any(by_rate[r] for r in rates if r > cap.capacity_rate)
    if cap.first_violation is not None:
        assert not by_rate[cap.first_violation]
        assert all(by_rate[r] for r in rates if r < cap.first_violation)
    assert (cap.conservative_rate, cap.optimistic_rate, cap.missed_below) == \
        (cap.sustained_rate, cap.capacity_rate, cap.suspect)
    if cap.capacity_rate is not None:                             # the two differ exactly where a miss lies below
        assert (cap.conservative_rate == cap.optimistic_rate) is (not cap.suspect)
    if cap.sustained_rate is not None:
        assert cap.sustained_rate <= cap.capacity_rate
        assert all(by_rate[r] for r in rates if r <= cap.sustained_rate)
    assert all(not by_rate[r] and r < cap.capacity_rate for r in cap.suspect)
    assert cap.max_throughput == max(p.achieved_rate for p in points)
    assert isinstance(cap.sentence(), str) and cap.sentence()


# --- the page: the conservative capacity leads, the optimistic one and its reason beside it -------------
@pytest.fixture(scope="module")
def sweep_page(tmp_path_factory):
    from conftest import ROOT
    from hugosite import hugo
    from tunepath import pipeline

    result = pipeline.replay_step("rate-sweep", ROOT / "runs")
    doc = result.definition.document(result, [], {}, None)
    site = tmp_path_factory.mktemp("sweep") / "site"
    code, out = hugo(site, {"sweep": '{{< sweep step="rate-sweep" >}}'}, {"rate-sweep": doc})
    assert code == 0, out
    html = (site / "public" / "sweep" / "index.html").read_text()
    parts = re.split(r'(?=<div class="sweep-reading")', html)[1:]
    return {re.search(r'data-run="([^"]+)"', p).group(1): p for p in parts}, result


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" .", ".").replace(" ,", ",")


def test_the_headline_is_the_conservative_capacity_with_the_optimistic_one_and_why(sweep_page):
    parts, result = sweep_page
    sandbox = parts["sandbox-wrk2-rate-sweep"]
    cap = result.definition.capacity(result, result.run("sandbox-wrk2-rate-sweep"))
    headline = sandbox.split('<div class="sweep-headline">')[1].split("</div>")[0]
    figure = re.search(r'<strong class="sweep-figure"><span class="reading" data-reading="conservative">([^<]+)</span>'
                       r' req/s</strong>', headline)
    assert figure and figure.group(1) == f"{cap.conservative_rate:,.0f}" == "8,000"
    text = _text(headline)
    assert text.index("8,000 req/s") < text.index("Optimistic: 25,000 req/s, the highest rate that met it")
    assert "They differ because 11,000 and 17,000 req/s missed the objective although 25,000 req/s met it" in text
    assert '<strong class="sweep-figure">' not in sandbox.replace(figure.group(0), "")   # one headline figure


def test_every_sweep_figure_has_its_unit_and_nothing_repeats(sweep_page):
    parts, _ = sweep_page
    assert len(parts) >= 2
    for run_id, html in parts.items():
        for cell in re.findall(r'<td class="num">(.*?)</td>', html):
            text = _text(cell)
            assert re.fullmatch(r"(n/a|[\d,.]+ req/s)(, [\d,.]+ (ms|s))?( at [\d,.]+ req/s offered)?", text), \
                (run_id, text)
        text = _text(html)
        assert not re.search(r"\b(\w+) \1\b", text, re.I), (run_id, text)         # no doubled word
        assert "offered offered" not in text and "req/s req/s" not in text
        figures = re.findall(r'data-reading="([^"]+)"', html)
        assert len(figures) == len(set(figures)), (run_id, figures)                  # each reading once
