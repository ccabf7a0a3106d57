"""Repetitions, bootstrap intervals, differences and the stopping rule (tunepath.analysis.stats)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunepath.errors import TunepathError
from tunepath.analysis.stats import Difference, StoppingRule, Summary, compare, summarise

FAST = 500  # resamples for property tests: enough for ordering, quick to draw

values_st = st.lists(st.floats(min_value=0.1, max_value=1e6, allow_nan=False), min_size=3, max_size=25)


# --- summarise -------------------------------------------------------------------
def test_summary_of_known_values():
    s = summarise([10.0, 12.0, 11.0, 13.0, 9.0])
    # five values cannot give 95 %: minimum to maximum is the best, a 93.75 % interval
    assert (s.n, s.median, s.min, s.max, s.low, s.high) == (5, 11.0, 9.0, 13.0, 9.0, 13.0)
    assert s.level == pytest.approx(1 - 2 / 32)
    assert s.cv == pytest.approx(np.std([10, 12, 11, 13, 9], ddof=1) / 11.0)
    assert s.rel_half_width_pct() == pytest.approx((s.high - s.low) / 2 / 11.0 * 100)


def test_enough_values_reach_the_level_with_the_narrowest_order_statistics():
    data = [float(v) for v in range(1, 11)]          # ten values: [x(2), x(9)] covers 97.9 %
    s = summarise(data)
    assert (s.low, s.high) == (2.0, 9.0) and s.level == pytest.approx(1 - 2 * 11 / 1024)
    assert summarise(data, level=0.8).level >= 0.8 and summarise(data, level=0.8).low > 2.0


def test_summary_is_exact_and_deterministic():
    data = [101.0, 97.5, 103.2, 99.9, 100.4, 98.1, 102.7, 95.0]
    assert summarise(data) == summarise(data) == summarise(data, seed=7)


def test_median_interval_covers_as_often_as_it_claims():
    """Seeded simulation: the order-statistic interval's coverage matches its stated level."""
    rng = np.random.default_rng(11)
    for n in (3, 5, 8):
        hits, level = 0, None
        for _ in range(3000):
            s = summarise(rng.lognormal(size=n))      # the true median of lognormal(0, 1) is 1
            hits += s.low <= 1.0 <= s.high
            level = s.level
        assert abs(hits / 3000 - level) < 0.03, (n, hits / 3000, level)


def test_two_samples_from_one_distribution_are_rarely_called_different():
    """Seeded simulation: at most about 5 % false "significant" verdicts (exact Mann–Whitney)."""
    rng = np.random.default_rng(12)
    for n in (4, 5, 8):
        wrong = sum(bool(compare(rng.lognormal(size=n), rng.lognormal(size=n)).significant) for _ in range(2000))
        assert wrong / 2000 <= 0.06, (n, wrong / 2000)
    # and a real 50 % gain is found most of the time with eight runs each
    found = sum(bool(compare(rng.lognormal(0, 0.2, 8), 1.5 * rng.lognormal(0, 0.2, 8)).significant)
                for _ in range(500))
    assert found / 500 > 0.9


def test_missing_and_nan_values_are_ignored():
    with_gaps = summarise([5.0, None, 6.0, math.nan, 7.0, None])
    assert with_gaps == summarise([5.0, 6.0, 7.0])
    assert with_gaps.n == 3


def test_fewer_than_three_values_give_no_interval():
    one = summarise([4.0])
    assert (one.n, one.median, one.low, one.high, one.cv) == (1, 4.0, None, None, None)
    assert one.rel_half_width_pct() is None
    two = summarise([4.0, 6.0, None])
    assert two.low is None and two.high is None
    assert two.cv == pytest.approx(np.std([4, 6], ddof=1) / 5)


def test_constant_values_have_zero_width():
    s = summarise([3.0, 3.0, 3.0, 3.0])
    assert (s.low, s.high, s.cv) == (3.0, 3.0, 0.0)
    assert s.rel_half_width_pct() == 0.0
    assert summarise([0.0, 0.0, 0.0]).rel_half_width_pct() == 0.0


def test_more_repetitions_narrow_the_interval():
    rng = np.random.default_rng(42)
    population = rng.normal(1000, 50, size=200)
    few, many = summarise(population[:5]), summarise(population)
    assert many.rel_half_width_pct() < few.rel_half_width_pct() / 2


def test_higher_level_gives_wider_interval():
    data = [9.1, 10.4, 9.8, 11.0, 10.2, 9.5, 10.9, 10.0]
    narrow, wide = summarise(data, level=0.5), summarise(data, level=0.99)
    assert wide.low <= narrow.low and wide.high >= narrow.high
    assert (wide.high - wide.low) > (narrow.high - narrow.low)


@pytest.mark.parametrize("bad, message", [
    ([], "no values"),
    ([None, math.nan], "no values"),
    ([1.0, math.inf, 2.0], "infinite"),
    (["12", 3.0], "expected numbers"),
    ("123", "text"),
])
def test_bad_values_are_refused(bad, message):
    with pytest.raises(TunepathError, match=message):
        summarise(bad)


@pytest.mark.parametrize("kwargs", [{"level": 1.0}, {"level": 0}, {"level": 95}, {"resamples": 10}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(TunepathError):
        summarise([1.0, 2.0, 3.0], **kwargs)


@settings(max_examples=60, deadline=None)
@given(values_st, st.integers(0, 2**32 - 1))
def test_interval_brackets_median_within_range(values, seed):
    s = summarise(values, resamples=FAST, seed=seed)
    assert s.min <= s.low <= s.median <= s.high <= s.max
    assert s.median == pytest.approx(float(np.median(values)))
    assert s.rel_half_width_pct() >= 0


# --- compare ---------------------------------------------------------------------
def test_clear_improvement_is_significant():
    d = compare([1000, 1010, 990, 1005, 995], [1500, 1490, 1510, 1520, 1480])
    assert isinstance(d, Difference)
    assert d.ratio == pytest.approx(1.5)
    assert d.change_pct == pytest.approx(50.0)
    assert d.significant is True
    assert 1.0 < d.low <= d.ratio <= d.high
    lo, hi = d.change_interval_pct()
    assert 0 < lo <= 50 <= hi
    assert (d.n_a, d.n_b) == (5, 5)


def test_noise_is_not_significant():
    d = compare([100, 108, 93, 101, 97, 104], [99, 106, 95, 103, 92, 100])
    assert d.significant is False
    assert d.low < 1.0 < d.high


def test_slowdown_has_negative_change():
    d = compare([10.0, 10.2, 9.9, 10.1], [7.9, 8.0, 8.1, 8.2])
    assert d.change_pct < 0 and d.significant is True and d.high < 1.0


def test_small_samples_have_no_verdict():
    d = compare([10.0, 11.0], [20.0, 21.0, 22.0])
    assert d.ratio == pytest.approx(21.0 / 10.5)
    assert (d.low, d.high, d.significant) == (None, None, None)
    assert d.change_interval_pct() is None
    assert (d.n_a, d.n_b) == (2, 3)


def test_compare_is_deterministic():
    a, b = [5.0, 5.5, 4.8, 5.2], [5.6, 5.9, 5.4, 6.1]
    assert compare(a, b) == compare(a, b)


def test_compare_refuses_a_zero_baseline_and_empty_samples():
    with pytest.raises(TunepathError, match="positive"):
        compare([0.0, 1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(TunepathError, match="sample B"):
        compare([1.0, 2.0, 3.0], [None, math.nan])


@settings(max_examples=40, deadline=None)
@given(values_st, values_st)
def test_ratio_interval_and_verdict_agree(a, b):
    d = compare(a, b, resamples=FAST)
    assert 0 < d.low <= d.high
    if d.level >= 0.95:
        assert d.significant == (not d.low <= 1.0 <= d.high)
    else:                                   # too few runs to test at 95 %: no verdict
        assert d.significant is None
    assert d.change_pct == pytest.approx((d.ratio - 1) * 100)


@settings(max_examples=30, deadline=None)
@given(values_st)
def test_sample_against_itself_is_not_significant(values):
    d = compare(values, list(values), resamples=FAST)
    assert d.ratio == 1.0 and d.significant is not True and d.low <= 1.0 <= d.high


# --- stopping rule ----------------------------------------------------------------
TIGHT = [1000.0, 1001.0, 999.0, 1000.5]
WIDE = [600.0, 1400.0, 900.0, 1300.0]


def test_keep_going_until_the_minimum():
    rule = StoppingRule()
    go, why = rule.decide({"stock": TIGHT[:2], "tuned": TIGHT[:2]}, elapsed_s=40, round_s=20)
    assert go is True and "2 of at least 3" in why


def test_stop_when_every_interval_is_tight():
    go, why = StoppingRule().decide({"stock": TIGHT, "tuned": [2000.0, 2002.0, 1999.0]},
                                    elapsed_s=100, round_s=20)
    assert go is False
    assert "within ±5 %" in why and "3 repetitions" in why


def test_continue_while_an_interval_is_wide_naming_it():
    go, why = StoppingRule().decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=100, round_s=20)
    assert go is True
    assert "tuned" in why and "stock" not in why and "wider than 5 %" in why


def test_stop_at_the_maximum():
    rule = StoppingRule(max_repetitions=4)
    go, why = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=100, round_s=20)
    assert go is False and "maximum of 4 repetitions" in why and "tuned" in why


def test_stop_when_the_budget_is_spent():
    rule = StoppingRule(time_budget_s=60)
    go, why = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=45, round_s=20)
    assert go is False
    assert why.startswith("time budget of 60 s spent; intervals still wider than 5 %: tuned")
    go, _ = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=40, round_s=20)
    assert go is True, "exactly on budget is still allowed"


def test_target_is_configurable():
    samples = {"a": [100.0, 104.0, 97.0, 102.0, 99.0]}
    width = summarise(samples["a"]).rel_half_width_pct()
    assert StoppingRule(ci_target_pct=width + 0.01).decide(samples, 0, 1)[0] is False
    assert StoppingRule(ci_target_pct=width - 0.01).decide(samples, 0, 1)[0] is True


def test_failed_runs_do_not_count_towards_the_interval():
    # three rounds ran, but one produced no figure: only two values, so no interval yet
    go, why = StoppingRule().decide({"a": [10.0, math.nan, 10.1]}, elapsed_s=0, round_s=1)
    assert go is True and "a (no interval yet)" in why


@pytest.mark.parametrize("kwargs", [
    {"min_repetitions": 0}, {"min_repetitions": 5, "max_repetitions": 3},
    {"ci_target_pct": 0}, {"time_budget_s": -1}, {"level": 2},
])
def test_bad_rules_are_refused(kwargs):
    with pytest.raises(TunepathError):
        StoppingRule(**kwargs)


def test_decide_refuses_no_configurations():
    with pytest.raises(TunepathError, match="no configurations"):
        StoppingRule().decide({}, 0, 1)


def test_summary_is_frozen():
    s = summarise([1.0, 2.0, 3.0])
    assert isinstance(s, Summary)
    with pytest.raises(AttributeError):
        s.median = 5.0  # type: ignore[misc]
