"""What an ApacheBench report's figures say about each other (issue 30, finding 17).

ab computes most of its figures from a few others (ab.c, ``output_results``), so a figure that
disagrees with them was damaged or edited, exactly as a wrk rate that disagrees with requests ÷
duration. The checks are the ones every parser shares (:func:`~tunepath.parse.problems.check_derived`,
the interval test of the rate check; the rate itself is judged by ``judge_rate``, the order and
finiteness of the percentiles by ``absurd_values``); this module only says what ab derives from what:

* ``Time per request`` (mean) = Concurrency Level × Time taken for tests × 1000 ÷ Complete requests;
* ``Transfer rate`` = Total transferred ÷ 1024 ÷ Time taken for tests (KB/s);
* each ``Connection Times`` row: min ≤ mean ≤ max and min ≤ median ≤ max, a deviation that is not
  negative; no row's max above the Total row's (a request's connect, processing and waiting times
  are parts of its total); with ``-S`` only the Total row is an ordered min, average and max;
* the 100 % row is the Total row's max (both are the longest request, rounded the same way);
* a duration printed as ``0.000`` with a rate: ab prints its rates only for a duration above 0;
* ``Failed requests`` no more than ``Complete requests``, beyond the failures that may complete no
  request: a response of the wrong length (``Length``) is a completed request that failed, while a
  connection that never opened (``Connect``), broke (``Exceptions``) or failed to receive (``Receive``,
  with ``-r``) may have completed none.

The parser fills an :class:`AbFigures` as it reads; :func:`ab_problems` returns the problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tunepath.parse.problems import Problem, check_derived

__all__ = ["Printed", "AbFigures", "ab_problems"]


@dataclass(frozen=True)
class Printed:
    """A figure as printed: its value, half its last printed digit, its line and its text."""

    value: float
    half: float
    line: int
    text: str


@dataclass
class AbFigures:
    """What :func:`ab_problems` compares, as ab printed it."""

    concurrency: int | None = None
    requests: int | None = None
    failed: tuple[int, int] | None = None                         # Failed requests, and its line
    failures: dict[str, int] | None = None                        # the (Connect: …, Exceptions: …) breakdown
    bytes_read: int | None = None
    duration: Printed | None = None
    rate: Printed | None = None
    time_per_request: Printed | None = None
    transfer_rate: Printed | None = None
    columns: int = 0                                              # 5, or 3 with ab -S
    rows: dict[str, tuple[list[float], int]] = field(default_factory=dict)   # Connection Times: values, line
    percentiles: list[tuple[int, float, int]] = field(default_factory=list)  # every row: percent, ms, line


def _bounds(value: float, half: float, scale: float, divisor: float) -> tuple[float, float]:
    """``scale`` × (``value`` ± ``half``) ÷ ``divisor``, lowest first (a printed duration is never below 0)."""
    low, high = scale * max(value - half, 0.0) / divisor, scale * (value + half) / divisor
    return min(low, high), max(low, high)


def _derived(f: AbFigures) -> list[Problem | None]:
    out: list[Problem | None] = []
    d, n = f.duration, f.requests
    if d is None or not n:
        return out
    if f.time_per_request is not None and f.concurrency:
        t = f.time_per_request
        out.append(check_derived("latency_ms", f"'Time per request: {t.text} [ms] (mean)' (line {t.line})",
                                 (t.value, t.half), _bounds(d.value, d.half, f.concurrency * 1000.0, n),
                                 f"Concurrency Level × Time taken for tests ÷ Complete requests "
                                 f"({f.concurrency:,} × {d.text} s ÷ {n:,})", t.line))
    if f.transfer_rate is not None and f.bytes_read is not None and d.value - d.half > 0:
        t = f.transfer_rate
        bounds = (f.bytes_read / 1024 / (d.value + d.half), f.bytes_read / 1024 / (d.value - d.half))
        out.append(check_derived("transfer_per_sec_bytes", f"'Transfer rate: {t.text} [Kbytes/sec]' (line {t.line})",
                                 (t.value, t.half), bounds, f"Total transferred ÷ 1024 ÷ Time taken for tests "
                                 f"({f.bytes_read:,} bytes ÷ 1024 ÷ {d.text} s)", t.line))
    if d.value == 0 and f.rate is not None:
        r = f.rate
        out.append(check_derived("requests_per_sec", f"'Requests per second: {r.text}' (line {r.line})",
                                 (r.value, r.half), (n / d.half, math.inf), f"{n:,} requests in under {d.half:g} s "
                                 "(ab prints 'Time taken for tests: 0.000 seconds')", r.line))
    return out


def _ordered(values: list[float]) -> bool:
    return all(b >= a for a, b in zip(values, values[1:]))


def _tables(f: AbFigures) -> list[Problem | None]:
    out: list[Problem | None] = []
    rows = f.rows if f.columns != 3 else {k: v for k, v in f.rows.items() if k == "Total"}
    for name, (values, line) in rows.items():
        if len(values) == 5:
            low, mean, sd, median, high = values
            bad = not (_ordered([low, mean, high]) and _ordered([low, median, high]) and sd >= 0)
        else:
            bad = not _ordered(values)
        if bad:
            out.append(Problem("absurd", "latency_ms", f"line {line}: the Connection Times row {name!r} is not "
                                                       f"ordered (min, mean, median and max: "
                                                       f"{', '.join(f'{v:g}' for v in values)} ms)", line))
    total = f.rows.get("Total")
    if total is not None and f.columns == 5:
        higher = [name for name, (values, _) in f.rows.items() if len(values) == 5 and values[4] > total[0][4]]
        if higher:
            out.append(Problem("absurd", "latency_ms", f"the Connection Times row(s) {', '.join(higher)} have a max "
                                                       f"above the Total row's {total[0][4]:g} ms, which holds them",
                               total[1]))
    longest = [(ms, line) for percent, ms, line in f.percentiles if percent == 100]
    if total is not None and longest and longest[0][0] != total[0][-1]:
        ms, line = longest[0]
        out.append(Problem("inconsistent", "percentiles_ms", f"line {line}: the 100 % row ({ms:g} ms) is not the "
                                                             f"Total row's max ({total[0][-1]:g} ms): ab prints the "
                                                             "longest request in both", line))
    return out


def _failed(f: AbFigures) -> list[Problem | None]:
    """More failed requests than completed ones, beyond the failures that complete no request."""
    if f.failed is None or f.requests is None:
        return []
    failed, line = f.failed
    kinds = f.failures or {}
    if failed - sum(kinds.get(k, 0) for k in ("Connect", "Receive", "Exceptions")) <= f.requests:
        return []
    how = f" ({kinds['Length']:,} of them Length failures, each a completed request)" if kinds.get("Length") else ""
    return [Problem("absurd", "requests", f"line {line}: {failed:,} failed requests{how}, more than the "
                                          f"{f.requests:,} complete requests: one of the two counts was damaged "
                                          "or edited", line)]


def ab_problems(f: AbFigures) -> list[Problem]:
    """Every disagreement between figures ab derives from one another."""
    return [p for p in _derived(f) + _tables(f) + _failed(f) if p is not None]
