"""What a parsed wrk/wrk2 report says about itself: warnings on its figures, and whether it is cut.

Read by :mod:`~tunepath.parse.wrk` after the last line. :func:`figure_warnings` words what the figures
themselves show (no responses, socket errors, a histogram that counts fewer requests, a duration far
from the requested one). :func:`cut_problems`: a report ends with ``Requests/sec`` and ``Transfer/sec``;
one without them is cut, and the socket errors and non-2xx/3xx responses wrk prints just before them
are then unknown, not 0 (issue 30, item 6). Its rate is derived and flagged by the rate check.
:func:`mean_problems`: a mean latency above the maximum of the same latencies (``Thread Stats``, or a
HdrHistogram's footer) cannot be what the tool computed.
"""

from __future__ import annotations

import math

from tunepath.parse.problems import Problem
from tunepath.parse.record import WrkReport

__all__ = ["DURATION_TOLERANCE", "MEAN_SLACK", "figure_warnings", "cut_problems", "mean_problems"]

# A run whose measured duration differs from the header's by more than this
# fraction gets a warning (the header is rounded: "1m" for 60 s).
DURATION_TOLERANCE = 0.10
# wrk prints a latency with two decimals in a unit that keeps it at 1.00 or more (us, ms, s): each
# printed figure is within 0.5 % of the true one, so a mean 1 % above the maximum is not rounding
MEAN_SLACK = 1.01


def figure_warnings(r: WrkReport) -> list[str]:
    """The warnings a person reads about the report's own figures."""
    w: list[str] = []
    if r.requests == 0:
        w.append("no responses at all: every latency figure is undefined")
    if r.req_per_sec_per_thread is not None and math.isnan(r.req_per_sec_per_thread.avg) and r.requests:
        w.append("Req/Sec is NaN: wrk2 reports no per-thread rate for a run shorter than its "
                 "calibration (about 10 s)")
    if r.histogram and r.histogram.total_count is not None and r.requests:
        if r.histogram.total_count < r.requests and r.warmup_s is None:
            w.append(f"the latency histogram counts {r.histogram.total_count} of {r.requests} "
                     "requests (wrk2 resets its histograms after calibration)")
        elif r.histogram.total_count < r.requests:
            w.append(f"the latency histogram holds {r.histogram.total_count} latencies for the {r.requests} "
                     "requests counted after the warm-up; both cover that window, so only wrk2's -B (one "
                     "latency per batch of pipelined requests) records fewer")
    if r.header_duration_s and r.duration_s is not None:
        if abs(r.duration_s - r.header_duration_s) > DURATION_TOLERANCE * r.header_duration_s:
            w.append(f"measured duration {r.duration_s:g} s is far from the requested "
                     f"{r.header_duration_s:g} s")
    errors = sum(r.socket_errors.values())
    if errors:
        w.append(f"{errors} socket errors (connect {r.socket_errors['connect']}, read "
                 f"{r.socket_errors['read']}, write {r.socket_errors['write']}, timeout "
                 f"{r.socket_errors['timeout']})")
    if r.non_2xx_3xx:
        w.append(f"{r.non_2xx_3xx} responses with status 400 or above")
    return w


def cut_problems(seen: dict[str, int], unread: dict[str, list[tuple[int, str]]], *,
                 rate_flagged: bool) -> list[Problem]:
    """``seen``: the parts of the report read, each to its line (``totals``, ``socket``, ``non-2xx``, ``rps``,
    ``tps``); ``unread``: the fields whose lines were there but could not be read (those say so themselves);
    ``rate_flagged``: the rate check found the Requests/sec line cut or wrong (that problem says it)."""
    if "rps" in seen and "tps" not in seen:
        if rate_flagged or "transfer_per_sec_bytes" in unread:
            return []
        return [Problem("cut", "transfer_per_sec_bytes", f"the report is cut after its 'Requests/sec' line "
                                                         f"(line {seen['rps']}): 'Transfer/sec' is missing")]
    if "totals" not in seen or "rps" in seen or "requests_per_sec" in unread:
        return []
    unknown = [name for key, name in (("socket", "socket_errors"), ("non-2xx", "non_2xx_3xx"))
               if key not in seen and name not in unread]
    if not unknown:
        return []
    what = "socket errors and non-2xx or 3xx responses" if len(unknown) == 2 else "non-2xx or 3xx responses"
    return [Problem("cut", unknown[0], f"the report is cut before its closing 'Requests/sec' and 'Transfer/sec' "
                                       f"lines: the {what} wrk prints just before them may be missing, so their "
                                       "0 is not known")]


def mean_problems(r: WrkReport, stats_line: int | None) -> list[Problem]:
    """A mean above the maximum of the same latencies: in ``Thread Stats`` (printed two decimals in its
    unit, :data:`MEAN_SLACK`), or in a HdrHistogram's footer (in ms, three decimals). ``stats_line``: the
    ``Latency`` row's line."""
    out = []
    s = r.latency_ms
    if s is not None and math.isfinite(s.avg) and math.isfinite(s.max) and s.avg > s.max * MEAN_SLACK:
        where = f"line {stats_line}: " if stats_line else ""
        out.append(Problem("absurd", "latency_ms", f"{where}the mean latency ({s.avg:g} ms) is above the maximum "
                                                   f"({s.max:g} ms) of the same latencies", stats_line))
    for name, hist in (("histogram", r.histogram), ("uncorrected_histogram", r.uncorrected_histogram)):
        mean, top = (hist.mean_ms, hist.max_ms) if hist is not None else (None, None)
        if mean is not None and top is not None and math.isfinite(mean) and math.isfinite(top) and mean > top + 0.001:
            label = name.replace("_", " ").replace("histogram", "latency histogram")
            out.append(Problem("absurd", name, f"the footer of the {label} gives a mean ({mean:g} ms) above its "
                                               f"maximum ({top:g} ms)"))
    return out
