"""Two modes: does a configuration's slow mode go with something measurable in the JVM?

Between Tomcat starts, one configuration's server CPU per request can fall into two modes (say
20–28 µs and 50–65 µs). This module finds them and asks whether the JVM's recorded facts
(:mod:`tunepath.analysis.jvmfacts`) differ between them.

**Gap rule** (:func:`find_gap`), on one configuration's counted repetitions (dropped ones left
out: something outside the configuration disturbed them), figure ``server_cpu_us_per_req``, or
``requests_per_sec`` where fewer than four repetitions have a CPU figure. The values (positive
and finite) are sorted, and each gap between neighbours is measured relative to the lower one
(``high / low − 1``). The configuration is *bimodal* when the largest gap that leaves at least
``MIN_SIDE`` (2) values on each side is

- at least ``THRESHOLD_PCT`` (25 %): far beyond the few per cent repetitions of one mode differ by,
  and below the 80 % between the two modes seen so far; and
- at least ``DOMINANCE`` (1.5) times every other gap between neighbours: a widely scattered figure
  (every gap large) is not two modes, nor are three clusters.

Two values a side is the least that makes a mode (one far value is an outlier), so fewer than
four values are not tested. The *slow* side is the one with more CPU per request (fewer req/s).

**Verdict rule** (:func:`compare_fact`). The slow-mode repetitions of every bimodal configuration
of a run are pooled and compared with the fast-mode ones on each fact. The slow mode *goes with*
a fact only when the difference is clear: the exact two-sided Mann–Whitney test rejects "no
shift" at 5 % (the 95 % Hodges–Lehmann interval of the shift, :func:`stats.shift_interval`,
excludes zero and really reaches 95 %; ties, such as runs without GC pauses, only make it more
cautious; this needs e.g. 4 + 4, 3 + 5 or 2 + 8 values), *and* in every bimodal configuration with
the fact on both sides the slow mode's median lies on the same side (pooling configurations that
differ in the fact must not pass for a link). Otherwise the verdict says the fact does not
separate the modes, or that too few repetitions recorded it to test at 95 %. Two groups that do
not overlap are said to, but non-overlap alone is not enough: 2 + 2 values do not overlap by
chance one time in three.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tunepath.analysis import stats
from tunepath.analysis.jvmfacts import JVM_COLUMNS
from tunepath.publish import formatting as fmt

__all__ = ["THRESHOLD_PCT", "MIN_SIDE", "DOMINANCE", "LEVEL", "FACTS", "RULE", "Gap", "ModeSplit",
           "FactComparison", "ModeReport", "find_gap", "mode_split", "compare_fact", "mode_report"]

THRESHOLD_PCT = 25.0
MIN_SIDE = 2
DOMINANCE = 1.5
LEVEL = 0.95
FIGURES = ("server_cpu_us_per_req", "requests_per_sec")
RULE = (f"A configuration has two modes when, its counted repetitions sorted, the largest gap between "
        f"neighbours with at least {MIN_SIDE} values on each side is at least {THRESHOLD_PCT:g} % of the "
        f"lower value and at least {DOMINANCE:g} times every other gap. The slow mode goes with a JVM fact "
        f"only when the exact Mann–Whitney test finds the slow and fast repetitions differ at 5 % and every "
        f"bimodal configuration differs the same way.")


def _count(v) -> str:
    return fmt.NA if v is None else (f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}")


# fact → (what it is, the word for more of it, for less of it, how a value is written)
FACTS = {
    "compiles_during": ("JIT compilations during the load", "more", "fewer", _count),
    "compile_s_during": ("JIT compile time during the load", "more", "less", fmt.seconds),
    "gc_pauses_during": ("GC pauses during the load", "more", "fewer", _count),
    "gc_pause_ms_during": ("GC pause time during the load", "more", "less", fmt.latency),
    "compiles_at_start": ("JIT compilations before the load began", "more", "fewer", _count),
    "steady_after_s": ("warm-up time until steady", "more", "less", fmt.seconds),
    "gc_cpu_pct_during": ("GC threads' share of Tomcat's CPU", "more", "less", fmt.percent),
}
assert list(FACTS) == JVM_COLUMNS


def _finite(value) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


@dataclass(frozen=True)
class Gap:
    """The largest eligible gap of some values: ``low`` and ``high`` its neighbours, ``pct`` its
    size in % of ``low`` (None: too few values), ``bimodal`` whether it splits them in two, ``why``."""

    low: float | None
    high: float | None
    pct: float | None
    bimodal: bool
    why: str


def find_gap(values: Iterable[float], threshold_pct: float = THRESHOLD_PCT, min_side: int = MIN_SIDE,
             dominance: float = DOMINANCE) -> Gap:
    """The gap rule on ``values`` (None, NaN and values ≤ 0 ignored)."""
    xs = sorted(v for v in map(_finite, values) if v is not None and v > 0)
    if len(xs) < 2 * min_side:
        return Gap(None, None, None, False, f"{len(xs)} values: at least {2 * min_side} are needed")
    gaps = [(xs[i] / xs[i - 1] - 1) * 100 for i in range(1, len(xs))]
    best = max(range(min_side, len(xs) - min_side + 1), key=lambda i: gaps[i - 1])
    pct = gaps[best - 1]
    others = [g for i, g in enumerate(gaps, 1) if i != best]
    gap = dict(low=xs[best - 1], high=xs[best], pct=pct)
    if pct < threshold_pct:
        return Gap(**gap, bimodal=False, why=f"the largest gap with {min_side} values on each side, {pct:.0f} %, "
                                            f"is under {threshold_pct:g} %")
    if others and pct < dominance * max(others):
        return Gap(**gap, bimodal=False, why=f"the largest gap, {pct:.0f} %, is not {dominance:g} times "
                                            f"the next one ({max(others):.0f} %): no single split")
    return Gap(**gap, bimodal=True, why=f"a gap of {pct:.0f} % between {xs[best - 1]:.4g} and {xs[best]:.4g}")


@dataclass(frozen=True)
class ModeSplit:
    """One configuration tested for two modes: its figure, the gap rule's answer, and which
    repetitions are fast and slow (both empty unless ``bimodal``)."""

    step: str
    variant: str
    label: str
    figure: str                                 # server_cpu_us_per_req or requests_per_sec
    threshold_pct: float
    gap: Gap
    values: tuple[tuple[int, float], ...]      # (repetition, figure) of the counted repetitions
    fast: tuple[int, ...]
    slow: tuple[int, ...]
    facts: dict                                 # repetition → {fact column: value or None}

    @property
    def bimodal(self) -> bool:
        return self.gap.bimodal

    def median(self, reps: Sequence[int]) -> float | None:
        return _median([v for r, v in self.values if r in reps])

    def shown(self, value) -> str:
        return fmt.micros(value) if self.figure == FIGURES[0] else f"{fmt.rate(value)} req/s"

    @property
    def text(self) -> str:
        what = "server CPU per request" if self.figure == FIGURES[0] else "requests per second"
        if not self.bimodal:
            return f"{self.step} / {self.label}: {what}, one mode ({self.gap.why})."
        reps = lambda rs: ", ".join(str(r) for r in rs)        # noqa: E731
        return (f"{self.step} / {self.label}: {what} {self.shown(self.median(self.fast))} in repetitions "
                f"{reps(self.fast)} (fast) and {self.shown(self.median(self.slow))} in repetitions "
                f"{reps(self.slow)} (slow): a gap of {self.gap.pct:.0f} %.")

    def to_data(self) -> dict:
        fast, slow = self.median(self.fast), self.median(self.slow)
        return {"step": self.step, "variant": self.variant, "label": self.label, "figure": self.figure,
                "threshold_pct": self.threshold_pct, "gap_pct": self.gap.pct, "bimodal": self.bimodal,
                "why": self.gap.why, "values": [{"repetition": r, "value": v} for r, v in self.values],
                "fast": list(self.fast), "slow": list(self.slow), "fast_median": fast, "slow_median": slow,
                "text": self.text,
                "display": {"fast": self.shown(fast) if fast is not None else "",
                            "slow": self.shown(slow) if slow is not None else "",
                            "gap": "" if self.gap.pct is None else f"{self.gap.pct:.0f} %"}}


def _figure(reps: list[dict], min_values: int) -> tuple[str, tuple[tuple[int, float], ...]]:
    values = ()
    for figure in FIGURES:
        values = tuple((int(r["repetition"]), v) for r in reps
                       if (v := _finite(r.get(figure))) is not None and v > 0)
        if len(values) >= min_values:
            break
    return figure, values


def mode_split(row: dict, threshold_pct: float = THRESHOLD_PCT) -> ModeSplit | None:
    """The gap rule on one configuration (``row``: a variant row of the frames, with its
    ``repetitions``); None when it has too few counted repetitions to be tested."""
    reps = [r for r in row.get("repetitions") or [] if not r.get("dropped")]
    figure, values = _figure(reps, 2 * MIN_SIDE)
    if len(values) < 2 * MIN_SIDE:
        return None
    gap = find_gap([v for _, v in values], threshold_pct)
    fast = slow = ()
    if gap.bimodal:
        low = tuple(r for r, v in values if v <= gap.low)
        high = tuple(r for r, v in values if v >= gap.high)
        fast, slow = (low, high) if figure == FIGURES[0] else (high, low)
    facts = {int(r["repetition"]): {c: _finite(r.get(c)) for c in JVM_COLUMNS} for r in reps}
    return ModeSplit(row["step"], row["variant"], row.get("label") or row["variant"], figure, threshold_pct,
                     gap, values, tuple(sorted(fast)), tuple(sorted(slow)), facts)


@dataclass(frozen=True)
class FactComparison:
    """One JVM fact in the slow-mode repetitions against the fast-mode ones, and the verdict."""

    fact: str
    label: str
    fast: tuple[float, ...]
    slow: tuple[float, ...]
    overlap: bool | None            # do the two groups' ranges meet (None: a group is empty)
    significant: bool | None        # exact Mann–Whitney at 5 % (None: too few values to test)
    consistent: bool | None         # same direction in every bimodal configuration (None: untested)
    goes_with: bool
    verdict: str

    @property
    def short(self) -> str:
        """The verdict in a few words (a table cell)."""
        if self.goes_with:
            _, more, less, _ = FACTS[self.fact]
            return f"goes with {more if _median(self.slow) > _median(self.fast) else less}"
        if not self.fast and not self.slow:
            return "not recorded"
        if self.significant is None:
            return "too few to test"
        return "no clear difference" if not self.significant else "no clear link"

    def to_data(self) -> dict:
        shown = FACTS[self.fact][3]
        fast, slow = _median(self.fast), _median(self.slow)
        return {"fact": self.fact, "label": self.label, "fast_median": fast, "slow_median": slow,
                "n_fast": len(self.fast), "n_slow": len(self.slow), "overlap": self.overlap,
                "significant": self.significant, "consistent": self.consistent, "goes_with": self.goes_with,
                "short": self.short, "verdict": self.verdict,
                "display": {"fast": shown(fast) if fast is not None else fmt.NA,
                            "slow": shown(slow) if slow is not None else fmt.NA}}


def _sides(splits: Sequence[ModeSplit], fact: str) -> list[tuple[list[float], list[float]]]:
    """Per bimodal configuration: the fact's values in its fast and its slow repetitions."""
    out = []
    for s in splits:
        pick = lambda reps: [v for r in reps if (v := s.facts.get(r, {}).get(fact)) is not None]  # noqa: E731
        out.append((pick(s.fast), pick(s.slow)))
    return out


def _test(fast: list[float], slow: list[float]) -> bool | None:
    if min(len(fast), len(slow)) < 2:
        return None
    low, high, achieved = stats.shift_interval(np.asarray(fast), np.asarray(slow), LEVEL)
    if achieved < LEVEL - 1e-12:
        return None
    return not (low <= 0 <= high)


def compare_fact(splits: Sequence[ModeSplit], fact: str) -> FactComparison:
    """The verdict rule on one fact over the bimodal configurations ``splits``."""
    label, more, less, shown = FACTS[fact]
    sides = _sides(splits, fact)
    fast = tuple(v for f, _ in sides for v in f)
    slow = tuple(v for _, s in sides for v in s)
    base = dict(fact=fact, label=label, fast=fast, slow=slow)
    if not fast and not slow:
        return FactComparison(**base, overlap=None, significant=None, consistent=None, goes_with=False,
                              verdict=f"No repetition of a bimodal configuration recorded {label}.")
    overlap = (max(fast) >= min(slow) and max(slow) >= min(fast)) if fast and slow else None
    significant = _test(list(fast), list(slow))
    mf, ms = _median(fast), _median(slow)
    medians = f"median {shown(ms)} in the slow mode, {shown(mf)} in the fast"
    if significant is None:
        return FactComparison(**base, overlap=overlap, significant=None, consistent=None, goes_with=False,
                              verdict=f"Too few repetitions recorded {label} ({len(slow)} slow, {len(fast)} fast) "
                                      f"to test at 5 %: it does not clearly separate the modes.")
    if not significant:
        return FactComparison(**base, overlap=overlap, significant=False, consistent=None, goes_with=False,
                              verdict=f"No clear difference in {label} between the modes: {medians} "
                                      f"(exact Mann–Whitney test, not significant at 5 %).")
    sign = 1 if ms > mf else -1
    within = [(_median(s) - _median(f)) * sign > 0 for f, s in sides if f and s]
    consistent = all(within)
    if not consistent:
        return FactComparison(**base, overlap=overlap, significant=True, consistent=False, goes_with=False,
                              verdict=f"{label[0].upper()}{label[1:]}: a difference overall ({medians}), but not "
                                      f"the same way in every bimodal configuration, so no clear link.")
    apart = "the two groups do not overlap" if overlap is False else "the groups overlap"
    return FactComparison(**base, overlap=overlap, significant=True, consistent=True, goes_with=True,
                          verdict=f"The slow mode goes with {more if sign > 0 else less} {label}: {medians} "
                                  f"({len(slow)} and {len(fast)} repetitions; {apart}; exact Mann–Whitney "
                                  f"test significant at 5 %).")


@dataclass(frozen=True)
class ModeReport:
    """Every tested configuration of one run, and, over the bimodal ones, each JVM fact compared."""

    run_id: str
    splits: tuple[ModeSplit, ...]
    facts: tuple[FactComparison, ...]     # empty without a bimodal configuration

    @property
    def bimodal(self) -> tuple[ModeSplit, ...]:
        return tuple(s for s in self.splits if s.bimodal)

    @property
    def recorded(self) -> bool:
        """Whether any repetition of a bimodal configuration recorded a JVM fact."""
        return any(f.fast or f.slow for f in self.facts)

    @property
    def goes_with(self) -> tuple[FactComparison, ...]:
        return tuple(f for f in self.facts if f.goes_with)

    @property
    def text(self) -> str:
        if not self.splits:
            return (f"No configuration of this run has {2 * MIN_SIDE} counted repetitions, so none could be "
                    "tested for two modes.")
        if not self.bimodal:
            n = len(self.splits)
            return (f"None of the {n} configuration{'s' if n > 1 else ''} tested had two modes "
                    f"(no gap of {THRESHOLD_PCT:g} % or more between its repetitions).")
        k = len(self.bimodal)
        had = f"{k} configuration{'s' if k > 1 else ''} had two modes"
        if not self.recorded:
            return f"{had}, but {'their' if k > 1 else 'its'} measurements recorded no JVM facts."
        if not self.goes_with:
            return f"{had}; no measurable JVM fact separates the slow mode from the fast one."
        words = [f"{FACTS[f.fact][1] if _median(f.slow) > _median(f.fast) else FACTS[f.fact][2]} {f.label}"
                 for f in self.goes_with]
        listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
        return f"{had}; the slow mode goes with {listed}."

    def to_data(self) -> dict:
        return {"rule": RULE, "threshold_pct": THRESHOLD_PCT, "min_side": MIN_SIDE, "dominance": DOMINANCE,
                "tested": len(self.splits), "bimodal": [s.to_data() for s in self.bimodal],
                "unimodal": [s.to_data() for s in self.splits if not s.bimodal],
                "recorded": self.recorded, "facts": [f.to_data() for f in self.facts],
                "goes_with": [f.fact for f in self.goes_with], "text": self.text}


def mode_report(run_id: str, rows: Iterable[dict], threshold_pct: float = THRESHOLD_PCT) -> ModeReport:
    """The run-level report (``rows``: the run's variant rows of the frames, every step)."""
    splits = tuple(s for row in rows if (s := mode_split(row, threshold_pct)) is not None)
    bimodal = [s for s in splits if s.bimodal]
    facts = tuple(compare_fact(bimodal, fact) for fact in FACTS) if bimodal else ()
    return ModeReport(run_id, splits, facts)
