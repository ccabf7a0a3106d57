"""The live rate sweep's plan: which rates to offer, when to stop, which points to repeat.

A live sweep starts from the capacity probe (the requests per second a short wrk2 run at
an unreachable rate achieved) and climbs in equal steps: by default from 50 % of that
capacity, 10 % of it at a time. It stops after the latency objective was missed at two
rates in a row, or as soon as the server served less than 95 % of the offered rate (it is
past its capacity: higher rates only queue), or after ``max_points`` rates. The capacity is
then read as for a recorded sweep (:func:`tunepath.analysis.sweep.capacity`).

With time left, points are measured again, those nearest the boundary first (the last rate
that met the objective and the first that missed it, then outwards), because a single
noisy run there moves the reading. A point is flagged noisy when its repetitions disagree
on the objective or their throughputs differ by more than ``noise_pct``.

Pure functions on :class:`~tunepath.analysis.sweep.SweepPoint` records: the live step
measures, this module decides.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tunepath.analysis.sweep import SweepPoint, meets
from tunepath.errors import TunepathError

__all__ = ["Climb", "nice_rate"]


def nice_rate(value: float) -> int:
    """``value`` rounded to two significant figures (1,234 → 1,200; 56,789 → 57,000), at least 1."""
    if value < 1:
        return 1
    step = 10 ** max(0, int(math.floor(math.log10(value))) - 1)
    return max(1, int(math.floor(value / step + 0.5)) * step)


@dataclass(frozen=True)
class Climb:
    capacity: float                 # the probe's achieved req/s (from the sweep's one client)
    slo_ms: float = 10.0
    percentile: str = "99"
    start_fraction: float = 0.5     # the first rate: this fraction of the probe's capacity
    step_fraction: float = 0.1      # … then up by this fraction of it at a time
    max_points: int = 16
    floor: float = 0.95             # served below this fraction of the offered rate: stop
    misses: int = 2                 # stop after this many misses in a row
    noise_pct: float = 10.0         # repetitions whose throughputs differ by more: noisy

    def __post_init__(self) -> None:
        if not (isinstance(self.capacity, (int, float)) and math.isfinite(self.capacity) and self.capacity > 0):
            raise TunepathError(f"a rate sweep climbs from a measured capacity in req/s, got {self.capacity!r}: "
                                "the capacity probe served nothing")
        if not 0 < self.step_fraction <= 1 or not 0 < self.start_fraction:
            raise TunepathError("the sweep's start and step are fractions of the capacity above 0")

    def rate(self, index: int) -> int:
        """The ``index``-th rate of the climb (0: the first)."""
        return nice_rate(self.capacity * (self.start_fraction + index * self.step_fraction))

    def rates(self) -> list[int]:
        """Every rate the climb may offer, rising and distinct (at most ``max_points``)."""
        out: list[int] = []
        for i in range(self.max_points * 2):
            r = self.rate(i)
            if not out or r > out[-1]:
                out.append(r)
            if len(out) == self.max_points:
                break
        return out

    def met(self, point: SweepPoint) -> bool:
        return meets(point, self.percentile, self.slo_ms, self.floor)

    def stop_reason(self, points: list[SweepPoint]) -> str | None:
        """Why the climb ends after ``points`` (in the order measured), or None to go on."""
        if not points:
            return None
        last = points[-1]
        if last.achieved_rate is not None and last.achieved_rate < self.floor * last.offered_rate:
            return (f"the server served {last.achieved_rate:,.0f} req/s of the {last.offered_rate:,.0f} offered "
                    f"(below {self.floor:.0%}): past its capacity")
        tail = points[-self.misses:]
        if len(tail) == self.misses and not any(self.met(p) for p in tail):
            rates = [f"{p.offered_rate:,.0f}" for p in tail]
            return (f"p{self.percentile} ≤ {self.slo_ms:g} ms was missed at {self.misses} rates in a row when first "
                    f"measured ({', '.join(rates[:-1])} and {rates[-1]} req/s; repetitions may differ)")
        if len(points) >= self.max_points:
            return f"the sweep reached its {self.max_points} rates"
        return None

    def repeat_order(self, points: list[SweepPoint]) -> list[float]:
        """The offered rates to measure again, nearest the objective's boundary first."""
        ordered = sorted(points, key=lambda p: p.offered_rate)
        if not ordered:
            return []
        flags = [self.met(p) for p in ordered]
        boundary = next((i for i, ok in enumerate(flags) if not ok), len(ordered))
        # the first miss and the last meet, then outwards in both directions
        order = sorted(range(len(ordered)), key=lambda i: (min(abs(i - boundary), abs(i - (boundary - 1))), -i))
        return [ordered[i].offered_rate for i in order]

    def noisy(self, repetitions: list[SweepPoint]) -> str | None:
        """Why the repetitions of one rate disagree (None: they agree, or there is one)."""
        if len(repetitions) < 2:
            return None
        verdicts = {self.met(p) for p in repetitions}
        if len(verdicts) > 1:
            return f"its repetitions disagree on p{self.percentile} ≤ {self.slo_ms:g} ms"
        rates = [p.achieved_rate for p in repetitions if p.achieved_rate]
        if len(rates) >= 2:
            spread = (max(rates) - min(rates)) / statistics.median(rates) * 100
            if spread > self.noise_pct:
                return f"its repetitions' throughputs differ by {spread:.0f} % (more than {self.noise_pct:g} %)"
        return None
