"""The stopping rule and the tests, by a small seeded simulation (harness.bench.stats).

``scripts/bench --only stats`` runs the same cases with 10,000 trials each for docs/statistics.md;
here a few hundred trials per case keep the test to seconds, so each target is asserted with an
allowance of three standard errors of that smaller trial count (on top of the target itself).
"""

from __future__ import annotations

import math

import pytest

from harness.bench import stats as sim

pytestmark = pytest.mark.fast

TRIALS = 400


def se(p: float, n: int) -> float:
    return math.sqrt(max(p * (1 - p), 0.01 * 0.99) / n)


@pytest.fixture(scope="module")
def cases():
    return {
        ("quick", 0.01): sim.rule_case("quick", 0.01, TRIALS, 1),
        ("full", 0.01): sim.rule_case("full", 0.01, TRIALS, 2),
        ("full", 0.05): sim.rule_case("full", 0.05, TRIALS, 3),
        ("before", 0.01): sim.rule_case("quick", 0.01, TRIALS, 4, old=True),
    }


def test_a_quiet_host_now_finds_a_real_five_percent_difference(cases):
    for key in (("quick", 0.01), ("full", 0.01)):
        assert cases[key]["detection"] >= 0.95 - 3 * se(0.95, TRIALS), (key, cases[key])
    # the rule before issue 17 stopped after three rounds, where 3 + 3 can never reach 95 %
    assert cases[("before", 0.01)]["detection"] == 0 and cases[("before", 0.01)]["rounds"] == 3


def test_false_significant_stays_at_five_percent(cases):
    for key in (("quick", 0.01), ("full", 0.01), ("full", 0.05)):
        assert cases[key]["false_significant"] <= 0.05 + 3 * se(0.05, TRIALS), (key, cases[key])


def test_coverage_reached_is_within_a_point_of_the_level_stated(cases):
    for key in (("quick", 0.01), ("full", 0.01), ("full", 0.05)):
        r = cases[key]
        intervals = 4 * TRIALS                         # two configurations, with and without a difference
        assert abs(r["coverage"] - r["stated"]) <= 0.01 + 3 * se(r["stated"], intervals), (key, r)
    one = sim.single_case("full", 0.05, 2 * TRIALS, 5)
    assert abs(one["coverage"] - one["stated"]) <= 0.01 + 3 * se(one["stated"], 2 * TRIALS), one
    before = sim.single_case("full", 0.05, 2 * TRIALS, 6, old=True)
    assert before["stated"] - before["coverage"] > 0.02, "the old rule's early stops missed more than stated"


def test_the_thread_sweep_holds_its_family_wise_error():
    r = sim.sweep_case(0.01, 120, 7)
    assert r["rounds"] == 7, "28 comparisons (every pair of 8 counts) need 7 + 7 values to reach 5 % / 28"
    assert r["any_wrong"]["holm_all_pairs"] <= 0.05 + 3 * se(0.05, 120)
    assert r["any_wrong"]["uncorrected"] > 0.15, "uncorrected, some count is called different far too often"


def test_targets_and_table():
    result = {"trials": 3, "seed": 0,
              "rule": [dict(profile="full", sigma=0.01, rule="now", rounds=6.0, detection=0.9, false_significant=0.07,
                            coverage=0.95, stated=0.969)],
              "single": [dict(profile="full", sigma=0.01, rule="now", rounds=6.0, coverage=0.969, stated=0.969)],
              "sweep": [dict(sigma=0.01, slower=0, rounds=7.0, trials=3, found=None,
                             any_wrong={"uncorrected": 0.3, "holm_vs_best": 0.09, "holm_all_pairs": 0.06})],
              "shapes": [dict(n=5, false_significant=0.05, flagged_when_significant=None)],
              "modes": [dict(profile="full", rounds=9.9, flagged=0.95, one_mode_only=0.02, coverage=0.96,
                             stated=0.978, false_flags=0.0)]}
    missed = sim.targets(result)
    assert len(missed) == 4 and "detection 90.0%" in missed[0]
    table = sim.markdown(result)
    assert "| full | 1% | now | 6.00 | 90.0 % | 7.0 % | 95.0 % | 96.9 % | -1.9 |" in table
    assert "missed:" in table
