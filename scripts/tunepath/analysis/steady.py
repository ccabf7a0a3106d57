"""Steady state: when a warming JVM's throughput has stopped climbing.

A measurement taken while the JIT still compiles (or the heap still grows) measures the
warm-up, not the configuration. Instead of a fixed warm-up, the live flow loads Tomcat in
short consecutive windows and measures once the last ``k`` windows served within ``±pct`` %
of their median (the idea of JMH's warm-up iterations, with a stopping test instead of a fixed
count), or once a cap is spent. :class:`WarmUp` is what a measurement records of it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = ["WarmUp", "steady_at", "spread_pct"]


def spread_pct(rates: list[float]) -> float | None:
    """The largest distance of ``rates`` from their median, in % of it (None: no positive median)."""
    if not rates:
        return None
    mid = statistics.median(rates)
    if mid <= 0:
        return None
    return max(abs(r - mid) for r in rates) / mid * 100


def steady_at(rates: list[float | None], windows: int, pct: float) -> int | None:
    """The index of the first window that ends ``windows`` windows in a row within ``±pct`` % of
    their median, or None. A window without a reading (None) breaks the run of windows."""
    if windows < 1:
        raise ValueError("windows must be at least 1")
    for end in range(windows - 1, len(rates)):
        last = rates[end - windows + 1:end + 1]
        if any(r is None for r in last):
            continue
        spread = spread_pct(last)       # type: ignore[arg-type]
        if spread is not None and spread <= pct:
            return end
    return None


@dataclass(frozen=True)
class WarmUp:
    """A measurement's warm-up: each window's req/s, and when (if ever) it was steady."""

    window_s: int                            # each window's length (0: one fixed warm-up run)
    rates: tuple[float | None, ...]          # req/s of each window, in order
    seconds: float                           # wall time of the whole warm-up
    steady_after_s: float | None             # wall time until the window that made it steady; None: never
    windows: int = 3                         # the stability test: this many windows in a row …
    pct: float = 5.0                         # … within ± this % of their median
    tool: str = ""

    @property
    def steady(self) -> bool:
        return self.steady_after_s is not None

    def to_dict(self) -> dict:
        return {"window_s": self.window_s, "windows_rps": [None if r is None else round(r, 1) for r in self.rates],
                "seconds": round(self.seconds, 2),
                "steady_after_s": None if self.steady_after_s is None else round(self.steady_after_s, 2),
                "steady": self.steady, "rule": {"windows": self.windows, "pct": self.pct}, "tool": self.tool}

    @classmethod
    def from_dict(cls, data: dict) -> "WarmUp":
        rule = data.get("rule") or {}
        return cls(int(data.get("window_s") or 0), tuple(data.get("windows_rps") or ()), float(data.get("seconds") or 0),
                   data.get("steady_after_s"), int(rule.get("windows", 3)), float(rule.get("pct", 5.0)),
                   data.get("tool") or "")
