"""Repetitions, intervals and differences: how sure a benchmark figure is.

The same configuration run again can differ by several per cent on a shared machine. This
module turns repetitions into figures a reader can trust:

- :func:`summarise` — median of the repetitions with a distribution-free interval
  of the median (order statistics), and the confidence that interval really has;
- :func:`compare` — the ratio of two configurations' medians with a distribution-free
  interval (Hodges–Lehmann/Moses, exact under the Mann–Whitney null distribution), the
  test's exact p-value, and whether the change is distinguishable from noise at the level;
- :func:`holm` — Holm's adjustment of a family of p-values (a sweep's reading of its best);
- :class:`StoppingRule` — when to stop repeating.

The achieved level is reported, never rounded up: three values give a 75 % interval of the
median, five 93.75 %, six 96.9 %. A difference can be tested at 95 % when the smallest two-sided
p-value of the exact test, 2 / C(m + n, m), is at most 5 %: 4 + 4 values (2.9 %) or 3 + 5
(3.6 %) can, 3 + 3 (10 %) and 3 + 4 (5.7 %) cannot.

"Significant" means the exact Mann–Whitney test finds that the two distributions differ; it
says the *medians* differ only when they have the same shape. None and NaN are ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tunepath.errors import TunepathError

__all__ = ["MIN_FOR_INTERVAL", "MIN_FOR_VERDICT", "Summary", "Difference", "StoppingRule", "clean",
           "summarise", "compare", "median_interval", "shift_interval", "level_size", "min_p", "testable",
           "holm", "holm_verdicts"]

# Fewer values than this give no interval: order statistics of one or two values only reproduce them.
MIN_FOR_INTERVAL = 3
# With a comparison, the rounds go on to at least this many (4 + 4 is the least equal split testable at 95 %).
MIN_FOR_VERDICT = 4
_EPS = 1e-12


@dataclass(frozen=True)
class Summary:
    """Repetitions of one figure: median, its interval, spread (``level`` None without interval)."""

    n: int
    median: float
    low: float | None
    high: float | None
    level: float | None
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
    """B relative to A: ratio of medians with a distribution-free interval (Hodges–Lehmann).

    ``p`` is the exact two-sided Mann–Whitney p-value; ``level`` the confidence the interval
    reaches; both None without interval (fewer than three values on a side)."""

    ratio: float
    low: float | None
    high: float | None
    change_pct: float
    significant: bool | None
    n_a: int
    n_b: int
    level: float | None = None
    p: float | None = None

    def change_interval_pct(self) -> tuple[float, float] | None:
        """The interval of the change in per cent, or None without interval."""
        return None if self.low is None or self.high is None else ((self.low - 1) * 100, (self.high - 1) * 100)


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


def _check_level(level: float) -> None:
    if isinstance(level, bool) or not (isinstance(level, (int, float)) and 0 < level < 1):
        raise TunepathError(f"the interval level must lie strictly between 0 and 1 (e.g. 0.95), "
                            f"got {level!r}")


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


def level_size(level: float) -> int:
    """The fewest values whose interval of the median reaches ``level`` (6 for 95 %)."""
    _check_level(level)
    return next(n for n in range(1, 64) if 1 - 2 ** (1 - n) >= level - _EPS)


@lru_cache(maxsize=256)
def _u_distribution(m: int, n: int) -> tuple[int, ...]:
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
    return tuple(table[(m, n)])


def min_p(m: int, n: int) -> float:
    """The smallest two-sided p-value the exact Mann–Whitney test can give m and n values."""
    return min(1.0, 2 / math.comb(m + n, m))


def testable(m: int, n: int, alpha: float) -> bool:
    """Whether m and n values can be found different at ``alpha`` (at least three a side)."""
    return min(m, n) >= MIN_FOR_INTERVAL and min_p(m, n) <= alpha + _EPS


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


def _p_value(a: np.ndarray, b: np.ndarray) -> float:
    """Exact two-sided Mann–Whitney p-value, ties counted against rejecting: the interval of
    :func:`shift_interval` excludes zero at level L exactly when this is at most 1 − L."""
    diffs = (b[None, :] - a[:, None]).ravel()
    z = min(int((diffs <= 0).sum()), int((diffs >= 0).sum()))
    counts = _u_distribution(len(a), len(b))
    return min(1.0, 2 * sum(counts[: z + 1]) / math.comb(len(a) + len(b), len(a)))


def summarise(values: Iterable[float | None], level: float = 0.95) -> Summary:
    """Median, distribution-free interval of the median, and spread of ``values``.

    None and NaN are ignored. With fewer than three values there is no interval
    (``low``, ``high`` and ``level`` are None); with fewer than two no coefficient of variation.
    ``Summary.level`` is the confidence the interval really has: the requested ``level`` or
    more when there are enough values (six for 95 %), less with fewer.
    """
    _check_level(level)
    data = clean(values)
    n = len(data)
    if n == 0:
        raise TunepathError("no values to summarise (all were missing or NaN)")
    cv = None
    if n >= 2:
        mean = float(np.mean(data))
        cv = float(np.std(data, ddof=1)) / mean if mean != 0 else None
    low = high = achieved = None
    if n >= MIN_FOR_INTERVAL:
        low, high, achieved = median_interval(np.sort(data), level)
    return Summary(n=n, median=float(np.median(data)), low=low, high=high, level=achieved, cv=cv,
                   min=float(data.min()), max=float(data.max()))


def compare(a_values: Iterable[float | None], b_values: Iterable[float | None],
            level: float = 0.95) -> Difference:
    """How B differs from A: ratio of medians (B / A), with a distribution-free interval.

    The interval is that of the shift between the two samples' logarithms
    (:func:`shift_interval`, exact under the Mann–Whitney null distribution), turned back
    into a ratio. The change is ``significant`` when that interval excludes 1× *and*
    reaches ``level`` (the distributions differ; see the module's note on medians); when
    the sizes cannot reach ``level`` (:func:`testable`: 3 + 3 and 3 + 4 cannot at 95 %) it
    is None and the interval carries the level it reaches. The samples are not paired.
    Both must hold positive values only.
    """
    _check_level(level)
    a, b = clean(a_values), clean(b_values)
    if len(a) == 0 or len(b) == 0:
        which = "A" if len(a) == 0 else "B"
        raise TunepathError(f"sample {which} has no values (all were missing or NaN)")
    if (a <= 0).any() or (b <= 0).any():
        raise TunepathError("both samples must hold positive values only: a ratio to zero or a "
                            "negative figure means nothing")
    ratio = float(np.median(b) / np.median(a))
    low = high = significant = achieved = p = None
    if len(a) >= MIN_FOR_INTERVAL and len(b) >= MIN_FOR_INTERVAL:
        la, lb = np.log(a), np.log(b)
        lo, hi, achieved = shift_interval(la, lb, level)
        low, high, p = math.exp(lo), math.exp(hi), _p_value(la, lb)
        if achieved >= level - _EPS:
            significant = not (low <= 1.0 <= high)
    return Difference(ratio=ratio, low=low, high=high, change_pct=(ratio - 1) * 100,
                      significant=significant, n_a=len(a), n_b=len(b), level=achieved, p=p)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's adjusted p-values of one family of tests (None: a comparison without a test,
    which still counts in the family's size). The family-wise error stays at most alpha
    when each adjusted p-value is compared with alpha."""
    m = len(pvalues)
    order = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out: list[float | None] = [None] * m
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def holm_verdicts(diffs: Sequence[Difference], level: float = 0.95) -> list[bool | None]:
    """Each comparison's verdict within its family, Holm-corrected at ``1 − level``: True
    (significant), False (not), None (its sizes could not reach the first step's alpha / m)."""
    alpha, m = 1 - level, len(diffs)
    adjusted = holm([d.p for d in diffs])
    return [True if adj is not None and adj <= alpha + _EPS
            else (False if testable(d.n_a, d.n_b, alpha / m) else None)
            for d, adj in zip(diffs, adjusted)]


Family = Sequence[tuple[str, str]]       # comparisons judged together (Holm), as (A, B) names


@dataclass
class StoppingRule:
    """When to stop repeating a set of configurations (a round runs each once).

    The data are looked at once, at :meth:`first_stop`: the minimum, but at least the values for
    an interval of the median that misses at most half of ``1 − level`` (:func:`level_size`:
    seven values for 95 %, whose interval reaches 98.4 %) and, where the step compares
    configurations, at least :data:`MIN_FOR_VERDICT` rounds and enough for every comparison to
    reach a verdict (Holm's alpha / m in a family of m). The rounds stop there when every
    interval's relative half-width is at most ``ci_target_pct``; otherwise they go on to
    ``max_repetitions``, or until one more round (``round_s``) would overrun ``time_budget_s``.
    Stopping when an interval happens to look narrow favours intervals that miss; one look, late
    enough, keeps the coverage really reached within a point of the level stated
    (docs/statistics.md, ``scripts/bench --only stats``).
    """

    min_repetitions: int = 3
    max_repetitions: int = 10
    ci_target_pct: float = 5.0
    time_budget_s: float | None = None
    level: float = 0.95
    fixed: bool = False      # the rounds the comparisons need, fixed in advance: the data are never looked at

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
        _check_level(self.level)

    def first_stop(self, families: Sequence[Family] = ()) -> int:
        """The round at which the rule looks at the data (and may stop); with ``fixed`` rounds, the
        round at which it stops: the least that lets every comparison reach a verdict."""
        interval = [] if self.fixed else [level_size(1 - (1 - self.level) / 2)]
        return max([self.min_repetitions, *interval] + [
            next(k for k in range(MIN_FOR_VERDICT, 64) if testable(k, k, (1 - self.level) / len(f))) for f in families if f])

    def widths(self, samples: Mapping[str, Iterable[float | None]]) -> dict[str, float | None]:
        """Each configuration's relative interval half-width in % (None: no interval yet)."""
        return {name: summarise(values, self.level).rel_half_width_pct() if clean(values).size else None
                for name, values in samples.items()}

    def untested(self, samples: Mapping[str, Sequence[float | None]], families: Sequence[Family]) -> list[str]:
        """The comparisons that cannot reach a verdict at ``level`` with the values so far."""
        counts = {name: int(clean(values).size) for name, values in samples.items()}
        out = []
        for family in families:
            alpha = (1 - self.level) / max(1, len(family))
            out += [f"{a} vs {b}" + (f" (Holm over {len(family)})" if len(family) > 1 else "")
                    for a, b in family if not testable(counts.get(a, 0), counts.get(b, 0), alpha)]
        return out

    def _wide(self, samples: Mapping[str, list]) -> list[str]:
        return [f"{name} (no interval yet)" if w is None else f"{name} (±{w:.1f} %)"
                for name, w in self.widths(samples).items() if w is None or w > self.ci_target_pct]

    def decide(self, samples: Mapping[str, list[float]], elapsed_s: float, round_s: float,
               families: Sequence[Family] = ()) -> tuple[bool, str]:
        """(another round needed, the reason in one sentence): ``samples`` are each configuration's
        values so far, ``round_s`` what one more round takes, ``families`` the page's comparisons."""
        if not samples:
            raise TunepathError("no configurations to decide on")
        if elapsed_s < 0 or round_s < 0:
            raise TunepathError("elapsed_s and round_s must not be negative")
        samples = {name: list(clean(values)) for name, values in samples.items()}
        rounds = min(len(values) for values in samples.values())
        first, target, lvl = self.first_stop(families), f"{self.ci_target_pct:g}", f"{self.level * 100:g} %"
        if rounds < first and rounds < self.max_repetitions and not self._over(elapsed_s, round_s):
            return True, f"{rounds} of at least {first} repetitions run so far"
        untested = self.untested(samples, families)
        if self.fixed and rounds >= first and not untested:
            return False, (f"every comparison can be tested at {lvl} with the values counted ({rounds} or more each; "
                           "the number fixed in advance, the data not looked at to stop)")
        # the look: the first `first` values of each configuration, whatever came after them
        at_look = (self._wide({name: values[:first] for name, values in samples.items()})
                   if rounds >= first and not self.fixed else [])
        if rounds >= first and not at_look and not untested:
            tested = " and every comparison can reach a verdict at that level" if families else ""
            return False, (f"every configuration's interval reached {lvl} within ±{target} % of its median after "
                           f"{rounds} repetitions{tested}")
        now = self._wide(samples)
        missing = "; ".join(part for part in (
            f"intervals wider than {target} %: {', '.join(now)}" if now else "",
            f"fewer than the {first} repetitions the look at the data needs" if rounds < first else "",
            f"comparisons too few to test at {lvl}: {', '.join(untested)}" if untested else "") if part)
        if rounds >= self.max_repetitions:
            return False, f"maximum of {self.max_repetitions} repetitions reached" + (f"; {missing}" if missing else "")
        if self._over(elapsed_s, round_s):
            return False, f"time budget of {self.time_budget_s:g} s spent; {missing or 'no more rounds fit'}"
        if at_look:
            return True, (f"after {first} repetitions, intervals were wider than {target} % ({', '.join(at_look)}): "
                          f"going on to the maximum of {self.max_repetitions}")
        return True, f"after {rounds} repetitions, {missing}"

    def _over(self, elapsed_s: float, round_s: float) -> bool:
        return self.time_budget_s is not None and elapsed_s + round_s > self.time_budget_s
