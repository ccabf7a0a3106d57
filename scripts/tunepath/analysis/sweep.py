"""Capacity at a latency objective, from a wrk2 rate sweep.

wrk2 offers a fixed request rate (``-R``) and records latency corrected for
coordinated omission. Running it at increasing rates gives a *sweep*; the
server's capacity at an objective such as "p99 ≤ 10 ms" is the highest offered
rate at which the objective holds and the server actually serves (almost) the
offered rate.

On a noisy machine a single point can miss the objective although higher rates
meet it. :func:`capacity` keeps both readings apart: the **conservative** capacity
(``conservative_rate`` = ``sustained_rate``: the highest rate below every miss, so
every rate up to it met the objective) is the figure to quote; the **optimistic**
one (``optimistic_rate`` = ``capacity_rate``: the highest rate that met it) stands
beside it, with the reason they differ: the rates that missed below it
(``missed_below`` = ``suspect``, worth repeating), and ``first_violation``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tunepath.errors import TunepathError
from tunepath.parse.wrk import WrkReport

__all__ = ["SweepPoint", "Capacity", "normalise_percentile", "points_from_reports", "capacity", "meets"]

_KEY = re.compile(r"^\s*[pP]?\s*(\d+(?:\.\d*)?)\s*%?\s*$")


def normalise_percentile(key: str | float | int) -> str:
    """``"99.000%"``, ``"p99"``, ``99`` or ``"99.0"`` → ``"99"``; ``"99.900"`` → ``"99.9"``."""
    if isinstance(key, bool):
        raise TunepathError(f"not a percentile: {key!r}")
    if isinstance(key, (int, float)):
        value = float(key)
    else:
        m = _KEY.match(str(key))
        if not m:
            raise TunepathError(f"not a percentile: {key!r} (use e.g. \"99\" or \"99.9\")")
        value = float(m.group(1))
    if not 0 <= value <= 100:
        raise TunepathError(f"a percentile lies between 0 and 100, got {key!r}")
    return f"{value:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: offered rate (-R), achieved rate, latency percentiles (ms).

    Percentile keys are normalised on creation (``"99.000%"`` → ``"99"``) and NaN
    latencies become None.
    """

    offered_rate: float
    achieved_rate: float | None
    percentiles_ms: Mapping[str, float | None] = field(default_factory=dict)
    label: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "offered_rate", _rate(self.offered_rate))
        achieved = self.achieved_rate
        if achieved is not None:
            if isinstance(achieved, bool) or not isinstance(achieved, (int, float)):
                raise TunepathError(f"an achieved rate must be a number of requests per second, got {achieved!r}")
            object.__setattr__(self, "achieved_rate", None if math.isnan(achieved) else float(achieved))
        pct: dict[str, float | None] = {}
        for key, value in dict(self.percentiles_ms or {}).items():
            if value is not None and not isinstance(value, (int, float)):
                raise TunepathError(f"percentile {key!r} must be a latency in ms, got {value!r}")
            pct[normalise_percentile(key)] = None if value is None or math.isnan(value) else float(value)
        object.__setattr__(self, "percentiles_ms", pct)

    def latency(self, percentile: str) -> float | None:
        """The latency at ``percentile`` in ms (None when missing or NaN)."""
        value = self.percentiles_ms.get(normalise_percentile(percentile))
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return float(value)


def points_from_reports(pairs: Iterable[tuple[float, WrkReport]],
                        labels: Iterable[str | None] | None = None) -> list[SweepPoint]:
    """Sweep points from ``(offered_rate, report)`` pairs, in the given order.

    The achieved rate is the report's ``Requests/sec``; the percentiles are the
    corrected ("Recorded Latency") ones, keyed ``"50"``, ``"75"``, ``"90"``,
    ``"99"``, ``"99.9"``, ``"99.99"`` … whatever form the keys had.
    """
    pairs = list(pairs)
    label_list = list(labels) if labels is not None else [None] * len(pairs)
    if len(label_list) != len(pairs):
        raise TunepathError(f"{len(label_list)} labels for {len(pairs)} reports")
    points = []
    for (offered, report), label in zip(pairs, label_list):
        if not isinstance(report, WrkReport):
            raise TunepathError(f"expected a parsed wrk2 report for offered rate {offered!r}, "
                                f"got {type(report).__name__}")
        points.append(SweepPoint(offered_rate=_rate(offered), achieved_rate=report.requests_per_sec,
                                 percentiles_ms=dict(report.percentiles_ms or {}), label=label))
    return points


def _rate(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TunepathError(f"an offered rate must be a number of requests per second, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise TunepathError(f"an offered rate must be positive, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Capacity:
    """What a sweep says about capacity at one latency objective."""

    slo_ms: float
    percentile: str
    rate_tolerance: float
    points: list[SweepPoint]     # sorted by offered rate
    meets: list[bool]            # one per point, same order
    capacity_rate: float | None
    capacity_achieved: float | None
    capacity_latency_ms: float | None
    max_throughput: float | None
    max_throughput_offered: float | None
    first_violation: float | None
    sustained_rate: float | None
    suspect: list[float]

    @property
    def conservative_rate(self) -> float | None:
        """The capacity to quote: the highest offered rate below every miss (every rate up to it
        met the objective); None when the lowest rate tried missed it."""
        return self.sustained_rate

    @property
    def optimistic_rate(self) -> float | None:
        """The highest offered rate that met the objective, whatever missed below it."""
        return self.capacity_rate

    @property
    def missed_below(self) -> list[float]:
        """The rates that missed the objective below the optimistic figure: why the two differ."""
        return self.suspect

    def sentence(self) -> str:
        """A plain-English summary of the sweep, the conservative capacity first."""
        goal = f"p{self.percentile} ≤ {_num(self.slo_ms)} ms"
        if self.capacity_rate is None:
            first = self.points[0]
            parts = [f"No offered rate met {goal}: even the lowest, {_num(first.offered_rate)} req/s, "
                     f"had p{self.percentile} {_ms(first.latency(self.percentile))}" + _served(first) + "."]
        elif self.first_violation is None:
            parts = [f"Every rate tried met {goal}, up to {_num(self.capacity_rate)} req/s offered "
                     f"{self._at_best()}: the capacity is at least that; extend the sweep to higher rates."]
        elif not self.suspect:
            parts = [f"At {goal} the capacity is {_num(self.capacity_rate)} req/s offered {self._at_best()}: every "
                     f"rate up to it met the objective, and the next rate tried, {_num(self.first_violation)} req/s, "
                     f"missed it ({self._why(self.first_violation)})."]
        else:
            parts = [self._conservative(goal), self._reason()]
        if self.max_throughput is not None:
            parts.append(f"The highest throughput was {_num(self.max_throughput)} req/s, "
                         f"at {_num(self.max_throughput_offered)} req/s offered.")
        return " ".join(parts)

    def _at_best(self) -> str:
        return (f"({_num(self.capacity_achieved)} req/s served, p{self.percentile} "
                f"{_ms(self.capacity_latency_ms)})")

    def _conservative(self, goal: str) -> str:
        if self.sustained_rate is None:
            low = (f"there is no conservative capacity: the lowest rate tried, {_num(self.points[0].offered_rate)} "
                   "req/s, already missed it")
        else:
            low = f"the conservative capacity is {_num(self.sustained_rate)} req/s offered, the highest rate below every miss"
        return (f"At {goal} {low}; the optimistic figure is "
                f"{_num(self.capacity_rate)} req/s {self._at_best()}, the highest rate that met it.")

    def _reason(self) -> str:
        many = len(self.suspect) > 1
        return (f"They differ because {_join([_num(r) for r in self.suspect])} req/s missed the objective although "
                f"{_num(self.capacity_rate)} req/s met it: noise suspected, repeat {'them' if many else 'it'}.")

    def _why(self, rate: float) -> str:
        point = next(p for p in self.points if p.offered_rate == rate)
        lat = point.latency(self.percentile)
        reasons = []
        if lat is None:
            reasons.append(f"no p{self.percentile} reported")
        elif lat > self.slo_ms:
            reasons.append(f"p{self.percentile} {_ms(lat)}")
        if point.achieved_rate is None:
            reasons.append("no achieved rate reported")
        elif point.achieved_rate < self.rate_tolerance * point.offered_rate:
            reasons.append(f"served only {_num(point.achieved_rate)} req/s")
        return ", ".join(reasons)


def _num(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def _ms(value: float | None) -> str:
    return "unknown" if value is None else f"{_num(value)} ms"


def _served(point: SweepPoint) -> str:
    return "" if point.achieved_rate is None else f" and served {_num(point.achieved_rate)} req/s"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def meets(point: SweepPoint, percentile: str, slo_ms: float, tolerance: float = 0.95) -> bool:
    """The point's latency at ``percentile`` is at most ``slo_ms`` and it served at least
    ``tolerance`` × its offered rate (a point without either does not meet the objective)."""
    latency = point.latency(percentile)
    if latency is None or point.achieved_rate is None:
        return False
    return latency <= slo_ms and point.achieved_rate >= tolerance * point.offered_rate


def capacity(points: Iterable[SweepPoint], slo_ms: float = 10.0, percentile: str = "99",
             rate_tolerance: float = 0.95) -> Capacity:
    """Capacity of a sweep at "``percentile`` ≤ ``slo_ms``".

    A point meets the objective when its latency at ``percentile`` is at most
    ``slo_ms`` and it served at least ``rate_tolerance`` × the offered rate; a
    point without that percentile or rate does not meet it. Offered rates must be
    distinct: combine repetitions of one rate first (e.g. their median).
    """
    points = sorted(points, key=lambda p: p.offered_rate)
    if not points:
        raise TunepathError("an empty sweep has no capacity: give at least one point")
    for point in points:
        if not isinstance(point, SweepPoint):
            raise TunepathError(f"expected SweepPoint objects, got {type(point).__name__}")
    rates = [p.offered_rate for p in points]
    dupes = sorted({r for r in rates if rates.count(r) > 1})
    if dupes:
        raise TunepathError(f"offered rate(s) {', '.join(_num(r) for r in dupes)} appear more than once; "
                            "combine repetitions of one rate first (e.g. the median of each figure)")
    if not (isinstance(slo_ms, (int, float)) and slo_ms > 0):
        raise TunepathError(f"the latency objective must be a positive number of ms, got {slo_ms!r}")
    if not (isinstance(rate_tolerance, (int, float)) and 0 < rate_tolerance <= 1):
        raise TunepathError(f"rate_tolerance is the fraction of the offered rate that must be served "
                            f"(0 < t ≤ 1), got {rate_tolerance!r}")
    key = normalise_percentile(percentile)

    met = [meets(p, key, slo_ms, rate_tolerance) for p in points]
    meeting = [p for p, ok in zip(points, met) if ok]
    best = meeting[-1] if meeting else None
    failing = [p.offered_rate for p, ok in zip(points, met) if not ok]
    first_violation = failing[0] if failing else None
    below = [p.offered_rate for p in meeting if first_violation is None or p.offered_rate < first_violation]
    sustained = below[-1] if below else None
    suspect = [r for r in failing if best is not None and r < best.offered_rate]
    served = [p for p in points if p.achieved_rate is not None]
    top = max(served, key=lambda p: p.achieved_rate) if served else None
    return Capacity(
        slo_ms=float(slo_ms), percentile=key, rate_tolerance=float(rate_tolerance),
        points=points, meets=met,
        capacity_rate=best.offered_rate if best else None,
        capacity_achieved=best.achieved_rate if best else None,
        capacity_latency_ms=best.latency(key) if best else None,
        max_throughput=top.achieved_rate if top else None,
        max_throughput_offered=top.offered_rate if top else None,
        first_violation=first_violation, sustained_rate=sustained, suspect=suspect,
    )
