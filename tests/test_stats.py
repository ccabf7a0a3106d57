"""Repetitions, distribution-free intervals, differences, Holm and the stopping rule (tunepath.analysis.stats)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tunepath.errors import TunepathError
from tunepath.analysis.stats import (Difference, StoppingRule, Summary, compare, holm, holm_verdicts, level_size,
                                     min_p, summarise)
from tunepath.analysis.stats import testable as can_test

pytestmark = pytest.mark.fast

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
    assert summarise(data) == summarise(data)


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
    assert (one.n, one.median, one.low, one.high, one.cv, one.level) == (1, 4.0, None, None, None, None)
    assert one.rel_half_width_pct() is None
    two = summarise([4.0, 6.0, None])
    assert two.low is None and two.high is None and two.level is None, "no interval: no level either"
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


@pytest.mark.parametrize("kwargs", [{"level": 1.0}, {"level": 0}, {"level": 95}, {"level": True}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(TunepathError):
        summarise([1.0, 2.0, 3.0], **kwargs)


@settings(max_examples=60, deadline=None)
@given(values_st)
def test_interval_brackets_median_within_range(values):
    s = summarise(values)
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
    assert (d.low, d.high, d.significant, d.level, d.p) == (None, None, None, None, None)
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
    d = compare(a, b)
    assert 0 < d.low <= d.high
    if d.level >= 0.95:
        assert d.significant == (not d.low <= 1.0 <= d.high)
        assert d.significant == (d.p <= 0.05 + 1e-12), "the p-value and the interval agree"
    else:                                   # too few runs to test at 95 %: no verdict
        assert d.significant is None and not can_test(d.n_a, d.n_b, 0.05)
    assert d.change_pct == pytest.approx((d.ratio - 1) * 100)


@settings(max_examples=30, deadline=None)
@given(values_st)
def test_sample_against_itself_is_not_significant(values):
    d = compare(values, list(values))
    assert d.ratio == 1.0 and d.significant is not True and d.low <= 1.0 <= d.high


# --- what the sizes allow, p-values and Holm --------------------------------------
def test_three_against_five_can_be_tested_at_95_percent():
    """The least two-sided p-value is 2 / C(m + n, m): 4 + 4 and 3 + 5 reach 5 %, 3 + 3 and 3 + 4 do not."""
    assert min_p(4, 4) == pytest.approx(2 / 70) and min_p(3, 5) == pytest.approx(2 / 56)
    assert can_test(4, 4, 0.05) and can_test(3, 5, 0.05) and can_test(5, 3, 0.05)
    assert not can_test(3, 3, 0.05) and not can_test(3, 4, 0.05) and not can_test(2, 8, 0.05)
    d = compare([100, 101, 102], [110, 111, 112, 113, 114])
    assert d.significant is True and d.level == pytest.approx(1 - 2 / 56) and d.p == pytest.approx(2 / 56)
    assert compare([100, 101, 102], [110, 111, 112]).significant is None


def test_p_value_is_exact():
    # complete separation: the least p; one pair out of order among 4 + 4: U = 1, p = 2 × 2 / 70
    assert compare([1, 2, 3, 4], [5, 6, 7, 8]).p == pytest.approx(2 / 70)
    assert compare([1, 2, 3, 6], [5, 7, 8, 9]).p == pytest.approx(4 / 70)
    assert compare([1, 2, 3], [1, 2, 3]).p == 1.0


def test_holm_adjusts_step_down():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.01, None, 0.02]) == [pytest.approx(0.03), None, pytest.approx(0.04)]
    assert holm([]) == []
    assert holm([0.5, 0.9]) == [1.0, 1.0]


def test_holm_verdicts_need_sizes_that_can_pass_the_first_step():
    clear = compare([1, 2, 3, 4, 5, 6], [11, 12, 13, 14, 15, 16])       # p = 2 / 924
    same = compare([1, 2, 3, 4, 5, 6], [1.5, 2.5, 3.5, 4.5, 5.5, 6.5])
    assert holm_verdicts([clear, same]) == [True, False]
    four = compare([1, 2, 3, 4], [5, 6, 7, 8])                         # p = 2.9 %: no verdict among 7
    assert holm_verdicts([four] * 7) == [None] * 7
    assert holm_verdicts([four]) == [True]


def test_level_size():
    assert [level_size(x) for x in (0.5, 0.75, 0.9, 0.95, 0.99)] == [2, 3, 5, 6, 8]


# --- stopping rule ----------------------------------------------------------------
TIGHT = [1000.0, 1001.0, 999.0, 1000.5, 1000.2, 999.8, 1000.1]
WIDE = [600.0, 1400.0, 900.0, 1300.0, 700.0, 1200.0, 1000.0]
PAIR = [(("stock", "tuned"),)]


def test_keep_going_until_the_look():
    rule = StoppingRule()
    assert rule.first_stop() == 7 and rule.first_stop(PAIR) == 7, "an interval missing at most 2.5 %: 7 values"
    go, why = rule.decide({"stock": TIGHT[:3], "tuned": TIGHT[:3]}, elapsed_s=40, round_s=20)
    assert go is True and "3 of at least 7" in why, "three tight values no longer end the rounds"


def test_a_comparison_needs_four_rounds_and_a_family_more():
    assert StoppingRule(min_repetitions=1, level=0.8).first_stop() == 5          # 90 %: 5 values
    assert StoppingRule(min_repetitions=1, level=0.5).first_stop() == 3          # 75 %: 3 values
    assert StoppingRule(min_repetitions=1, level=0.5).first_stop(PAIR) == 4      # but four rounds to compare
    assert StoppingRule(min_repetitions=1, level=0.9).first_stop([tuple(("a", b) for b in "bcdefgh")]) == 6
    assert StoppingRule().first_stop([tuple((a, b) for a in "abcdefgh" for b in "abcdefgh" if a < b)]) == 7
    assert StoppingRule().first_stop([(("a", "b"),) * 300]) == 8                # 2 / C(16, 8) ≤ 5 % / 300


def test_stop_when_every_interval_is_tight_at_the_look():
    go, why = StoppingRule().decide({"stock": TIGHT, "tuned": [2000.0, 2002.0, 1999.0, 2001.0, 2000.5, 1999.5, 2000.0]},
                                    elapsed_s=100, round_s=20, families=PAIR)
    assert go is False
    assert "reached 95 % within ±5 %" in why and "7 repetitions" in why and "verdict" in why


def test_a_wide_look_goes_on_to_the_maximum_even_if_later_values_are_tight():
    rule = StoppingRule(max_repetitions=12)
    go, why = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=100, round_s=20)
    assert go is True and "tuned" in why and "stock" not in why and "maximum of 12" in why
    later = [600.0, 1000.0, 1001.0, 999.0, 1000.0, 1400.0, 1000.0] + [1000.0] * 3   # narrow now, not at the look
    assert rule.widths({"tuned": later})["tuned"] <= 5
    go, why = rule.decide({"stock": TIGHT + [1000.0] * 3, "tuned": later}, elapsed_s=100, round_s=20)
    assert go is True and "after 7 repetitions, intervals were wider" in why


def test_stop_at_the_maximum():
    rule = StoppingRule(max_repetitions=7)
    go, why = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=100, round_s=20)
    assert go is False and "maximum of 7 repetitions" in why and "tuned" in why


def test_a_maximum_below_the_look_runs_to_it():
    rule = StoppingRule(max_repetitions=5)
    go, why = rule.decide({"stock": TIGHT[:4], "tuned": TIGHT[:4]}, 0, 1, PAIR)
    assert go is True
    go, why = rule.decide({"stock": TIGHT[:5], "tuned": TIGHT[:5]}, 0, 1, PAIR)
    assert go is False and "maximum of 5" in why and "fewer than the 7 repetitions the look" in why


def test_stop_when_the_budget_is_spent():
    rule = StoppingRule(time_budget_s=60)
    go, why = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=45, round_s=20)
    assert go is False
    assert why.startswith("time budget of 60 s spent; intervals wider than 5 %: tuned")
    go, _ = rule.decide({"stock": TIGHT, "tuned": WIDE}, elapsed_s=40, round_s=20)
    assert go is True, "exactly on budget is still allowed"
    go, why = rule.decide({"stock": TIGHT[:2], "tuned": TIGHT[:2]}, elapsed_s=45, round_s=20)
    assert go is False and "fewer than the 7" in why


def test_target_is_configurable():
    samples = {"a": [100.0, 104.0, 97.0, 102.0, 99.0, 101.0, 100.5]}
    width = summarise(samples["a"]).rel_half_width_pct()
    assert StoppingRule(ci_target_pct=width + 0.01).decide(samples, 0, 1)[0] is False
    assert StoppingRule(ci_target_pct=width - 0.01).decide(samples, 0, 1)[0] is True


def test_failed_runs_do_not_count():
    # seven rounds ran, but one produced no figure: six values, so the look has not come yet
    go, why = StoppingRule().decide({"a": [10.0, math.nan, 10.1, 10.0, 10.1, 10.0, 10.0]}, elapsed_s=0, round_s=1)
    assert go is True and "6 of at least 7" in why


def test_untested_comparisons_are_named():
    rule = StoppingRule(max_repetitions=7)
    family = [tuple((a, b) for a in "abc" for b in "abc" if a < b) * 100]     # 300 comparisons: 7 + 7 cannot
    samples = {v: TIGHT for v in "abc"}
    assert rule.untested(samples, family)[0] == "a vs b (Holm over 300)"
    assert rule.untested(samples, PAIR) == ["stock vs tuned"]


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
