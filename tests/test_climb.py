"""The live rate sweep's plan (analysis/climb.py): rates, stopping, repeats, noise."""

from __future__ import annotations

import pytest

from tunepath.analysis.climb import Climb, nice_rate
from tunepath.analysis.sweep import SweepPoint
from tunepath.errors import TunepathError

pytestmark = pytest.mark.fast


def point(offered, achieved=None, p99=1.0):
    return SweepPoint(offered, offered if achieved is None else achieved, {"99": p99})


@pytest.mark.parametrize("value, nice", [(0.3, 1), (7, 7), (1234, 1200), (1250, 1300), (56789, 57000),
                                         (999_999, 1_000_000)])
def test_rates_are_rounded_to_two_significant_figures(value, nice):
    assert nice_rate(value) == nice


def test_the_climb_starts_at_half_the_probe_and_rises_by_a_tenth_of_it():
    climb = Climb(2000)
    assert climb.rates()[:4] == [1000, 1200, 1400, 1600]
    assert len(climb.rates()) == climb.max_points
    assert Climb(15, max_points=30).rates() == sorted(set(Climb(15, max_points=30).rates()))  # rising, distinct


def test_the_climb_goes_on_while_the_objective_holds():
    climb = Climb(2000)
    assert climb.stop_reason([]) is None
    assert climb.stop_reason([point(1000), point(1200, p99=50), point(1400)]) is None   # one miss, then a meet


def test_two_misses_in_a_row_end_the_climb():
    why = Climb(2000).stop_reason([point(1000), point(1200, p99=11), point(1400, p99=12)])
    assert why and "2 rates in a row when first measured (1,200 and 1,400 req/s" in why


def test_serving_below_95_percent_of_the_offered_rate_ends_the_climb_at_once():
    why = Climb(2000).stop_reason([point(1000), point(1200, achieved=1100, p99=2.0)])
    assert why and "past its capacity" in why and "1,100" in why
    assert Climb(2000).stop_reason([point(1000), point(1200, achieved=1150, p99=2.0)]) is None   # 95.8 %


def test_the_climb_ends_at_its_maximum_number_of_rates():
    climb = Climb(2000, max_points=3)
    assert "3 rates" in climb.stop_reason([point(1000), point(1200), point(1400)])


def test_repeats_start_at_the_boundary_and_move_outwards():
    climb = Climb(2000)
    pts = [point(1000), point(1200), point(1400), point(1600, p99=20), point(1800, p99=30)]
    order = climb.repeat_order(pts)
    assert order[:2] == [1600, 1400]           # the first miss and the last meet
    assert set(order[2:4]) == {1200, 1800} and order[-1] == 1000
    assert climb.repeat_order([]) == []


def test_repetitions_that_disagree_are_noisy():
    climb = Climb(2000)
    assert climb.noisy([point(1000)]) is None
    assert climb.noisy([point(1000), point(1000, achieved=990)]) is None
    assert "disagree" in climb.noisy([point(1000), point(1000, p99=40)])
    assert "differ by" in climb.noisy([SweepPoint(1000, 1000, {"99": 1}), SweepPoint(1000, 1300, {"99": 1})])


@pytest.mark.parametrize("capacity", [0, -5, float("nan"), None])
def test_a_probe_that_served_nothing_is_refused_in_words(capacity):
    with pytest.raises(TunepathError, match="capacity probe"):
        Climb(capacity)
