"""Which comparisons a step's page makes (the live rule waits until each can reach a verdict),
and the thread sweep's reading of its best, Holm-corrected over every pair of counts."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd

from tunepath.analysis.stats import StoppingRule
from tunepath.live.repeat import families
from tunepath.steps import REGISTRY

import pytest

pytestmark = pytest.mark.fast


def test_each_kind_of_step_names_the_comparisons_its_page_makes():
    baseline, connectors, sweep = REGISTRY.get("baseline"), REGISTRY.get("connectors"), REGISTRY.get("thread-sweep")
    assert families(baseline, ["stock", "a", "b"]) == [(("stock", "a"),), (("a", "b"),)]       # each vs the previous
    assert families(connectors, ["nio", "nio2", "apr"]) == [(("nio", "nio2"),), (("nio", "apr"),)]   # vs the first
    counts = [f"threads-{n}" for n in (1, 2, 4, 8)]
    got = families(sweep, counts, against_best=True)
    assert got[:3] == [((counts[0], c),) for c in counts[1:]]
    assert got[3] == tuple(itertools.combinations(counts, 2))                                 # every pair, one family
    assert families(baseline, ["stock"]) == [] and families(REGISTRY.get("setup"), ["smoke"]) == []


def test_the_rule_waits_for_the_sweeps_family():
    counts = [f"threads-{n}" for n in (1, 2, 4, 8, 16, 32, 64, 200)]
    rule = StoppingRule(max_repetitions=10)
    assert rule.first_stop(families(REGISTRY.get("thread-sweep"), counts, against_best=True)) == 7
    assert rule.first_stop(families(REGISTRY.get("connectors"), ["nio", "nio2"])) == 7


def _result(values: dict[str, list[float]]):
    rows = [{"run_id": "r", "variant": v, "label": v, "requests_per_sec": float(np.median(xs)), "rps_values": xs,
             "n": len(xs)} for v, xs in values.items()]
    run = SimpleNamespace(run_id="r", emulated=False)
    return SimpleNamespace(frame=pd.DataFrame(rows), charted_runs=[run]), run


def test_the_sweep_reads_its_best_with_holm_over_every_pair():
    sweep = REGISTRY.get("thread-sweep")
    rng = np.random.default_rng(5)
    fast = {f"threads-{n}": list(1000 * np.exp(rng.normal(0, 0.01, 7))) for n in (8, 16, 32, 64)}
    slow = {f"threads-{n}": list(900 * np.exp(rng.normal(0, 0.01, 7))) for n in (1, 2, 4, 200)}
    got = sweep.analysis(*_result({**slow, **fast}))
    assert got["correction"] == "Holm" and got["comparisons"] == 28
    assert got["best_variant"] in fast and set(got["below"]) == set(slow)
    assert set(got["ties"]) == set(fast) - {got["best_variant"]} and got["untested"] == []


def test_too_few_repetitions_for_the_correction_are_said_so():
    sweep = REGISTRY.get("thread-sweep")
    values = {f"threads-{n}": [1000.0 + n, 1001.0 + n, 1002.0 + n, 1003.0 + n] for n in (1, 2, 4, 8)}
    got = sweep.analysis(*_result(values))
    assert got["comparisons"] == 6 and got["ties"] == [] and got["below"] == []
    assert len(got["untested"]) == 3, "4 + 4 values cannot reach 5 % / 6"
