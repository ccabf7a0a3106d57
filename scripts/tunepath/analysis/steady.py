"""Steady state: when a warming JVM's throughput has stopped climbing.

A measurement taken while the JIT still compiles (or the heap still grows) measures the
warm-up, not the configuration. Instead of a fixed warm-up, the live flow loads Tomcat in
short consecutive windows and measures once the last ``k`` windows served within ``±pct`` %
of their median (the idea of JMH's warm-up iterations, with a stopping test instead of a fixed
count), or once a cap is spent. :class:`WarmUp` is what a measurement records of it.

Steady throughput alone is not enough on a server whose JIT shares its CPUs with the workers:
the compiler threads get a small share of a saturated CPU, the throughput can sit on a plateau
for three windows while the queue of compilations is still long, and the compilations then
run in the counted window (on the lab of 2026-12-02, half of the measurements compiled for 30 %
or more of their counted window). With ``jit_pct`` the last window must also have compiled for
at most that share of its time (HotSpot's own counter of compilation time, read from the
JVM's hsperfdata file after each window): :func:`quiet`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = ["WarmUp", "steady_at", "spread_pct", "quiet", "compile_pct"]


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


def compile_pct(before, after) -> float | None:
    """The share of the time between two readings of a JVM's counters (:class:`~tunepath.parse.hsperf.JvmCounters`)
    that its JIT spent compiling, in % (summed over compiler threads: two busy threads make 200 %);
    None where either reading or its clock is missing."""
    if before is None or after is None:
        return None
    if None in (before.compile_s, after.compile_s, before.uptime_s, after.uptime_s):
        return None
    elapsed = after.uptime_s - before.uptime_s
    if elapsed <= 0:
        return None
    return max(0.0, after.compile_s - before.compile_s) / elapsed * 100


def quiet(rates: list[float | None], compiling: list[float | None], windows: int, pct: float,
          jit_pct: float | None) -> bool:
    """Steady now: the last ``windows`` windows served within ``±pct`` % of their median and, with
    ``jit_pct``, the last window compiled for at most ``jit_pct`` % of its time (a window whose
    compilation time could not be read is not quiet)."""
    if len(rates) < windows or steady_at(rates[-windows:], windows, pct) is None:
        return False
    if not jit_pct:
        return True
    last = compiling[-1] if compiling else None
    return last is not None and last <= jit_pct


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
    compile_pct: tuple[float | None, ...] = ()   # the JIT's compilation time in each window, % of it
    jit_pct: float | None = None             # … and the rule: the last at most this (None: not tested)

    @property
    def steady(self) -> bool:
        return self.steady_after_s is not None

    def to_dict(self) -> dict:
        return {"window_s": self.window_s, "windows_rps": [None if r is None else round(r, 1) for r in self.rates],
                "seconds": round(self.seconds, 2),
                "steady_after_s": None if self.steady_after_s is None else round(self.steady_after_s, 2),
                "steady": self.steady, "rule": {"windows": self.windows, "pct": self.pct,
                                                **({"jit_pct": self.jit_pct} if self.jit_pct else {})},
                "tool": self.tool,
                **({"windows_compile_pct": [None if c is None else round(c, 1) for c in self.compile_pct]}
                   if self.jit_pct else {})}

    @classmethod
    def from_dict(cls, data: dict) -> "WarmUp":
        rule = data.get("rule") or {}
        return cls(int(data.get("window_s") or 0), tuple(data.get("windows_rps") or ()), float(data.get("seconds") or 0),
                   data.get("steady_after_s"), int(rule.get("windows", 3)), float(rule.get("pct", 5.0)),
                   data.get("tool") or "", tuple(data.get("windows_compile_pct") or ()), rule.get("jit_pct"))
