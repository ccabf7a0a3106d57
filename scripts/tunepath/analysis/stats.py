"""Repetitions, intervals and differences: how sure a benchmark figure is.

A single run's throughput or p99 says little on a shared machine; the same
configuration run again can differ by several per cent. This module turns
repetitions into figures a reader can trust:

- :func:`summarise` — median of the repetitions with a distribution-free interval
  of the median (order statistics), and the confidence that interval really has;
- :func:`compare` — the ratio of two configurations' medians with a distribution-free
  interval (Hodges–Lehmann/Moses, exact under the Mann–Whitney null distribution),
  and whether the change is distinguishable from noise at the requested level;

Few repetitions cannot reach 95 %: three values give a 75 % interval of the median,
five 93.75 %, six 96.9 %; a difference needs at least four values on each side to be
tested at 95 %. The achieved level is reported, never rounded up.
- :class:`StoppingRule` — when to stop repeating: every configuration's
  interval within a target relative half-width (the Phoronix Test Suite's
  "standard deviation target" idea), a maximum number of repetitions, or a
  time budget.

Missing values (``None``) and NaN (a run that produced no figure) are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from tunepath.errors import TunepathError

__all__ = [
    "MIN_FOR_INTERVAL",
    "Summary",
    "Difference",
    "StoppingRule",
    "clean",
    "summarise",
    "compare",
    "median_interval",
    "shift_interval",
]

# Fewer values than this give no interval: a bootstrap of one or two values
# can only reproduce them.
MIN_FOR_INTERVAL = 3



@dataclass(frozen=True)
class Summary:
    """Repetitions of one figure: median, its interval, spread."""

    n: int
    median: float
    low: float | None
    high: float | None
    level: float
    cv: float | None
    min: float
    max: float

    def rel_half_width_pct(self) -> float | None:
        """Half the interval's width as a percentage of the median (None without interval).

        A zero-width interval is 0 % even when the median is 0; any other interval
        around a zero median has no relative width (None).
        """
        if self.low is None or self.high is None:
            return None
        width = self.high - self.low
        if width == 0:
            return 0.0
        if self.median == 0:
            return None
        return width / 2 / abs(self.median) * 100


@dataclass(frozen=True)
class Difference:
    """B relative to A: ratio of medians with a bootstrap interval."""

    ratio: float
    low: float | None
    high: float | None
    change_pct: float
    significant: bool | None
    n_a: int
    n_b: int
    level: float = 0.95

    def change_interval_pct(self) -> tuple[float, float] | None:
        """The interval of the change in per cent, or None without interval."""
        if self.low is None or self.high is None:
            return None
        return ((self.low - 1) * 100, (self.high - 1) * 100)


def clean(values: Iterable[float | None]) -> np.ndarray:
    """The finite numbers of ``values`` as a float array (None and NaN dropped).

    Infinite values and anything that is not a number raise :class:`TunepathError`.
    """
    if isinstance(values, (str, bytes)):
        raise TunepathError("expected a list of numbers, got text")
    out: list[float] = []
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TunepathError(f"expected numbers, got {value!r}")
        number = float(value)
        if math.isnan(number):
            continue
        if math.isinf(number):
            raise TunepathError(f"an infinite value ({number}) cannot be summarised; "
                                "drop the run that produced it")
        out.append(number)
    return np.asarray(out, dtype=float)


def _check_level(level: float, resamples: int) -> None:
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise TunepathError(f"the interval level must lie strictly between 0 and 1 (e.g. 0.95), "
                            f"got {level!r}")
    if not isinstance(resamples, int) or isinstance(resamples, bool) or resamples < 100:
        raise TunepathError(f"use at least 100 bootstrap resamples, got {resamples!r}")


def _binomial_tail(n: int, k: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def median_interval(sorted_values: np.ndarray, level: float) -> tuple[float, float, float]:
    """Distribution-free interval of the median from order statistics: (low, high, achieved level).

    [x_(k), x_(n+1−k)] covers the median with probability 1 − 2·P(Binom(n, ½) ≤ k − 1), whatever
    the distribution. The narrowest such interval reaching ``level`` is returned; with too few
    values to reach it, the widest one (minimum to maximum) with the level it does reach
    (75 % for three values, 87.5 % for four, 93.75 % for five, 96.9 % for six)."""
    n = len(sorted_values)
    k_best, achieved = 1, 1 - 2 * _binomial_tail(n, 0)
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * _binomial_tail(n, k - 1)
        if coverage >= level:
            k_best, achieved = k, coverage
        else:
            break
    return float(sorted_values[k_best - 1]), float(sorted_values[n - k_best]), achieved


def _u_distribution(m: int, n: int) -> list[int]:
    """Counts of the Mann–Whitney U statistic (pairs with an A below a B) over all C(m+n, m)
    orderings of m A-values and n B-values without ties."""
    # the largest value is either an A (adds no pair) or a B (above every one of the i A's)
    table: dict[tuple[int, int], list[int]] = {}
    for i in range(m + 1):
        for j in range(n + 1):
            if i == 0 or j == 0:
                table[(i, j)] = [1]
                continue
            out = [0] * (i * j + 1)
            for u, c in enumerate(table[(i - 1, j)]):
                out[u] += c
            for u, c in enumerate(table[(i, j - 1)]):
                out[u + i] += c
            table[(i, j)] = out
    return table[(m, n)]


def shift_interval(a: np.ndarray, b: np.ndarray, level: float) -> tuple[float, float, float]:
    """Distribution-free interval of the shift from A to B (Hodges–Lehmann/Moses): (low, high, level).

    The pairwise differences b_j − a_i are sorted; [D_(k), D_(mn+1−k)] covers the shift with
    probability 1 − 2·P(U ≤ k − 1) under the exact Mann–Whitney null distribution. It excludes
    zero exactly when the two-sided Mann–Whitney test rejects at that level. With too few
    values to reach ``level``, the widest interval and the level it reaches are returned."""
    m, n = len(a), len(b)
    diffs = np.sort((b[None, :] - a[:, None]).ravel())
    counts = _u_distribution(m, n)
    total = math.comb(m + n, m)
    k_best, achieved, cdf = 1, 1 - 2 * counts[0] / total, 0
    for k in range(1, (m * n) // 2 + 1):
        cdf += counts[k - 1]
        coverage = 1 - 2 * cdf / total
        if coverage >= level:
            k_best, achieved = k, coverage
        else:
            break
    return float(diffs[k_best - 1]), float(diffs[m * n - k_best]), achieved


def summarise(values: Iterable[float | None], level: float = 0.95, resamples: int = 10000,
              seed: int = 0) -> Summary:
    """Median, distribution-free interval of the median, and spread of ``values``.

    None and NaN are ignored. With fewer than three values there is no interval
    (``low``/``high`` are None); with fewer than two no coefficient of variation.
    ``Summary.level`` is the confidence the interval really has: the requested
    ``level`` when there are enough values (six for 95 %), less with fewer.
    ``resamples`` and ``seed`` are accepted for compatibility; the interval is exact.
    """
    _check_level(level, resamples)
    data = clean(values)
    n = len(data)
    if n == 0:
        raise TunepathError("no values to summarise (all were missing or NaN)")
    median = float(np.median(data))
    cv = None
    if n >= 2:
        mean = float(np.mean(data))
        cv = float(np.std(data, ddof=1)) / mean if mean != 0 else None
    low = high = None
    achieved = level
    if n >= MIN_FOR_INTERVAL:
        low, high, achieved = median_interval(np.sort(data), level)
    return Summary(n=n, median=median, low=low, high=high, level=achieved, cv=cv,
                   min=float(data.min()), max=float(data.max()))


def compare(a_values: Iterable[float | None], b_values: Iterable[float | None], level: float = 0.95,
            resamples: int = 10000, seed: int = 0) -> Difference:
    """How B differs from A: ratio of medians (B / A), with a distribution-free interval.

    The interval is that of the shift between the two samples' logarithms
    (:func:`shift_interval`, exact under the Mann–Whitney null distribution), turned back
    into a ratio. The change is ``significant`` when that interval excludes 1.0 *and*
    reaches ``level``; with too few repetitions to test at ``level`` (fewer than four
    in each sample for 95 %) it is None and the interval carries the level it reaches.
    The samples are not paired. Both must hold positive values only.
    """
    _check_level(level, resamples)
    a, b = clean(a_values), clean(b_values)
    if len(a) == 0 or len(b) == 0:
        which = "A" if len(a) == 0 else "B"
        raise TunepathError(f"sample {which} has no values (all were missing or NaN)")
    if (a <= 0).any() or (b <= 0).any():
        raise TunepathError("both samples must hold positive values only: a ratio to zero or a "
                            "negative figure means nothing")
    ratio = float(np.median(b) / np.median(a))
    low = high = None
    significant = None
    achieved = level
    if len(a) >= MIN_FOR_INTERVAL and len(b) >= MIN_FOR_INTERVAL:
        lo, hi, achieved = shift_interval(np.log(a), np.log(b), level)
        low, high = math.exp(lo), math.exp(hi)
        if achieved >= level - 1e-12:
            significant = not (low <= 1.0 <= high)
    return Difference(ratio=ratio, low=low, high=high, change_pct=(ratio - 1) * 100,
                      significant=significant, n_a=len(a), n_b=len(b), level=achieved)


def _fmt(value: float) -> str:
    return f"{value:g}"


@dataclass
class StoppingRule:
    """When to stop repeating a set of configurations.

    Stop when every configuration has at least ``min_repetitions`` values and its
    interval's relative half-width is at most ``ci_target_pct``; or when
    ``max_repetitions`` rounds were run; or when one more round (``round_s``)
    would overrun ``time_budget_s``. A round runs every configuration once.
    """

    min_repetitions: int = 3
    max_repetitions: int = 10
    ci_target_pct: float = 5.0
    time_budget_s: float | None = None
    level: float = 0.95
    resamples: int = 10000
    seed: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.min_repetitions, int) and self.min_repetitions >= 1):
            raise TunepathError(f"min_repetitions must be a positive whole number, got {self.min_repetitions!r}")
        if not (isinstance(self.max_repetitions, int) and self.max_repetitions >= self.min_repetitions):
            raise TunepathError(f"max_repetitions ({self.max_repetitions!r}) must be a whole number "
                                f"no smaller than min_repetitions ({self.min_repetitions})")
        if not (isinstance(self.ci_target_pct, (int, float)) and self.ci_target_pct > 0):
            raise TunepathError(f"ci_target_pct must be a positive percentage, got {self.ci_target_pct!r}")
        if self.time_budget_s is not None and not self.time_budget_s > 0:
            raise TunepathError(f"time_budget_s must be positive (or None), got {self.time_budget_s!r}")
        _check_level(self.level, self.resamples)

    def widths(self, samples: Mapping[str, Iterable[float | None]]) -> dict[str, float | None]:
        """Each configuration's relative interval half-width in % (None: no interval yet)."""
        return {name: self._summary(values).rel_half_width_pct() if clean(values).size else None
                for name, values in samples.items()}

    def _summary(self, values) -> Summary:
        return summarise(values, level=self.level, resamples=self.resamples, seed=self.seed)

    def decide(self, samples: Mapping[str, list[float]], elapsed_s: float,
               round_s: float) -> tuple[bool, str]:
        """(another round needed, the reason in one sentence).

        ``samples`` maps each configuration's name to its values so far,
        ``elapsed_s`` is the time spent, ``round_s`` what one more round takes.
        """
        if not samples:
            raise TunepathError("no configurations to decide on")
        if elapsed_s < 0 or round_s < 0:
            raise TunepathError("elapsed_s and round_s must not be negative")
        samples = {name: list(values) for name, values in samples.items()}
        rounds = min(len(values) for values in samples.values())
        target = _fmt(self.ci_target_pct)
        widths = self.widths(samples)
        wide = [name for name, width in widths.items()
                if width is None or width > self.ci_target_pct]

        def wide_list() -> str:
            parts = []
            for name in wide:
                width = widths[name]
                parts.append(f"{name} (no interval yet)" if width is None else f"{name} (±{width:.1f} %)")
            return ", ".join(parts)

        if rounds >= self.min_repetitions and not wide:
            return False, (f"every configuration's {self.level:.0%} interval is within ±{target} % "
                           f"of its median after {rounds} repetitions")
        if rounds >= self.max_repetitions:
            return False, (f"maximum of {self.max_repetitions} repetitions reached; intervals still "
                           f"wider than {target} %: {wide_list()}")
        if self.time_budget_s is not None and elapsed_s + round_s > self.time_budget_s:
            still = (f"intervals still wider than {target} %: {wide_list()}" if wide
                     else f"only {rounds} of at least {self.min_repetitions} repetitions were run")
            return False, f"time budget of {_fmt(self.time_budget_s)} s spent; {still}"
        if rounds < self.min_repetitions:
            return True, f"{rounds} of at least {self.min_repetitions} repetitions run so far"
        return True, f"after {rounds} repetitions, intervals still wider than {target} %: {wide_list()}"
