"""Repetitions, intervals and differences: how sure a benchmark figure is.

A single run's throughput or p99 says little on a shared machine; the same
configuration run again can differ by several per cent. This module turns
repetitions into figures a reader can trust:

- :func:`summarise` — median of the repetitions with a bootstrap percentile
  interval of the median (seeded, so the same numbers give the same interval);
- :func:`compare` — the ratio of two configurations' medians with a bootstrap
  interval, and whether the change is distinguishable from noise;
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

from .errors import TunepathError

__all__ = [
    "MIN_FOR_INTERVAL",
    "Summary",
    "Difference",
    "StoppingRule",
    "clean",
    "summarise",
    "compare",
]

# Fewer values than this give no interval: a bootstrap of one or two values
# can only reproduce them.
MIN_FOR_INTERVAL = 3

# Bootstrap resamples are drawn in chunks of at most this many numbers.
_CHUNK_ELEMENTS = 2_000_000


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


def _bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` resamples (with replacement) of ``values``."""
    n = len(values)
    rows = max(1, _CHUNK_ELEMENTS // n)
    parts = []
    done = 0
    while done < resamples:
        take = min(rows, resamples - done)
        idx = rng.integers(0, n, size=(take, n))
        parts.append(np.median(values[idx], axis=1))
        done += take
    return np.concatenate(parts)


def _bounds(stats: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1 - level) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)


def summarise(values: Iterable[float | None], level: float = 0.95, resamples: int = 10000,
              seed: int = 0) -> Summary:
    """Median, bootstrap percentile interval of the median, and spread of ``values``.

    None and NaN are ignored. With fewer than three values there is no interval
    (``low``/``high`` are None); with fewer than two no coefficient of variation.
    The same values, level, resamples and seed always give the same result.
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
    if n >= MIN_FOR_INTERVAL:
        rng = np.random.default_rng(seed)
        low, high = _bounds(_bootstrap_medians(data, resamples, rng), level)
        # the percentile interval of a median always brackets it up to float rounding
        low, high = min(low, median), max(high, median)
    return Summary(n=n, median=median, low=low, high=high, level=level, cv=cv,
                   min=float(data.min()), max=float(data.max()))


def compare(a_values: Iterable[float | None], b_values: Iterable[float | None], level: float = 0.95,
            resamples: int = 10000, seed: int = 0) -> Difference:
    """How B differs from A: ratio of medians (B / A) with a bootstrap interval.

    The two samples are resampled independently (the runs are not paired). The
    change is ``significant`` when the interval of the ratio excludes 1.0 (the
    interval of the per-cent change excludes 0); it is None when either sample
    has fewer than three values. A's values must be positive: a ratio to zero is
    undefined.
    """
    _check_level(level, resamples)
    a, b = clean(a_values), clean(b_values)
    if len(a) == 0 or len(b) == 0:
        which = "A" if len(a) == 0 else "B"
        raise TunepathError(f"sample {which} has no values (all were missing or NaN)")
    if (a <= 0).any():
        raise TunepathError("sample A (the baseline) must hold positive values only: "
                            "a ratio to zero or a negative figure means nothing")
    ratio = float(np.median(b) / np.median(a))
    low = high = None
    significant = None
    if len(a) >= MIN_FOR_INTERVAL and len(b) >= MIN_FOR_INTERVAL:
        rng = np.random.default_rng(seed)
        med_a = _bootstrap_medians(a, resamples, rng)
        med_b = _bootstrap_medians(b, resamples, rng)
        low, high = _bounds(med_b / med_a, level)
        low, high = min(low, ratio), max(high, ratio)
        significant = not (low <= 1.0 <= high)
    return Difference(ratio=ratio, low=low, high=high, change_pct=(ratio - 1) * 100,
                      significant=significant, n_a=len(a), n_b=len(b), level=level)


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
