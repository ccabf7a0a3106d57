"""What can be wrong with a load-generator report, as typed records, and the checks that find it.

A report that parses is not yet a report to trust. Its ``Requests/sec`` line may be cut
(a file truncated at ``Requests/sec: 24`` while it says 14,680,146 requests in one minute),
a byte may be damaged (NUL, invalid UTF-8), a section may end early, or a value may be
impossible (a duration of 0, percentiles that decrease). Each finding becomes a
:class:`Problem` on the report: ``field`` names the :class:`~tunepath.parse.wrk.WrkReport`
field it makes untrustworthy, so the analysis can flag that figure on the pages
(:mod:`tunepath.analysis.noise`), and ``text`` is the warning a person reads.

The rate check derives its tolerance from what was printed: wrk prints the duration with
two decimals in its unit (``1.00m`` is 59.7 s to 60.3 s) and ``Requests/sec`` with two
decimals, ab prints seconds with three. A printed rate outside requests ÷ (duration ±
half its last digit) cannot be the tool's own arithmetic. Every parser shares these checks:
:func:`judge_rate` for the rate, :func:`check_derived` (the same interval test, :func:`agrees`)
for any other figure a tool computes from figures it prints (ab's transfer rate and time per
request, siege's throughput and availability), and :func:`absurd_values` for values no tool
prints (not finite, negative, percentiles out of order, more lines or errors than possible).

This module imports only :mod:`~tunepath.parse.units`; the parsers import it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from tunepath.errors import TunepathError
from tunepath.parse.units import UnitError, decimals, half_digit, parse_number

if TYPE_CHECKING:
    from tunepath.parse.record import WrkReport

__all__ = ["ParseError", "Problem", "CODES", "damaged", "shown", "agrees", "check_rate", "check_derived", "judge_rate",
           "absurd_values", "unread_problems", "decreasing"]

# Problem codes: the rate disagrees with requests ÷ duration (printed figure kept); the rate was
# replaced by requests ÷ duration (printed one missing, cut or impossible); a line or section is
# cut short; a line holds NUL bytes or invalid UTF-8 and was not read; a value is impossible.
CODES = ("inconsistent", "derived", "cut", "damaged", "absurd")


class ParseError(TunepathError, ValueError):
    """The text is not a report of the tool (or is too damaged to read)."""


@dataclass(frozen=True)
class Problem:
    """One reason not to trust one figure of a report (the typed twin of a warning)."""

    code: str                 # one of CODES
    field: str                # the WrkReport field concerned: requests_per_sec, percentiles_ms, …
    text: str                 # the warning, one line
    line: int | None = None   # 1-based line of the report, where there is one

    def to_data(self) -> dict:
        return asdict(self)


def damaged(line: str) -> bool:
    """True when the line holds a NUL byte or a byte that was not UTF-8 (decoded as U+FFFD)."""
    return "\x00" in line or "\ufffd" in line


def shown(line: str, width: int = 60) -> str:
    """A line quoted for a one-line message: control characters escaped, long lines shortened."""
    text = line if len(line) <= width else line[:width] + "…"
    return repr(text)


def _interval(value: float, half: float) -> tuple[float, float]:
    return value - half, value + half


def agrees(printed: tuple[float, float], low: float, high: float) -> bool:
    """Whether a printed figure ``(value, half its last printed digit)`` can be the rounding of a true value
    in ``[low, high]`` (what the figures it is computed from allow, given their own rounding)."""
    finite = [abs(v) for v in (low, high, printed[0]) if math.isfinite(v)]
    slack = 1e-9 * max([1.0, *finite])
    low_p, high_p = _interval(*printed)
    return high_p >= low - slack and low_p <= high + slack


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def check_derived(field: str, said: str, printed: tuple[float, float], bounds: tuple[float, float], how: str,
                  line: int | None = None) -> Problem | None:
    """The rate's check for another figure the tool computes from figures it prints: ``said`` quotes it,
    ``printed`` is ``(value, half its last digit)``, ``bounds`` what ``how`` (the computation, in words)
    gives within the rounding of its inputs. An ``inconsistent`` problem when the two cannot agree."""
    low, high = bounds
    if not (math.isfinite(printed[0]) and math.isfinite(low)) or agrees(printed, low, high):
        return None
    between = (_figure(low) if high - low <= 1e-9 * max(1.0, abs(low)) else
               f"at least {_figure(low)}" if math.isinf(high) else f"{_figure(low)} to {_figure(high)}")
    return Problem("inconsistent", field, f"{said} disagrees with {how} = {between}: the tool computes it from "
                                          "those figures, so one of them was damaged or edited", line)


def check_rate(requests: int | None, duration: tuple[float, float] | None,
               printed: tuple[float, float] | None, *, cut: bool) -> tuple[str, float] | None:
    """Judge a printed rate against requests ÷ duration.

    ``duration`` and ``printed`` are ``(value, half of the last printed digit)``; ``cut``
    says the printed token lacks the tool's fixed decimals (a fragment). Returns None when
    the figures agree or cannot be compared, else ``(code, rate to keep)``: ``"derived"``
    with requests ÷ duration when the printed figure is missing, a fragment that disagrees,
    negative or not finite; ``"inconsistent"`` with requests ÷ duration too when the printed
    figure is well formed but disagrees (the tool computes its rate from those two figures, so a
    disagreement means the rate line was damaged or edited); ``"cut"`` with the
    printed figure when a fragment still agrees to its printed digits."""
    if requests is None or duration is None or not (math.isfinite(duration[0]) and duration[0] > 0):
        return None
    derived = requests / duration[0]
    low_d, high_d = _interval(*duration)
    lowest = requests / high_d
    highest = requests / low_d if low_d > 0 else math.inf
    if printed is None or not math.isfinite(printed[0]) or printed[0] < 0:
        return "derived", derived
    if agrees(printed, lowest, highest):
        return ("cut", printed[0]) if cut else None
    return ("derived", derived) if cut else ("inconsistent", derived)


def judge_rate(requests: int | None, duration: tuple[float, float] | None, printed: tuple[str, int] | None,
               places: int, *, unreadable: int | None = None,
               label: str = "Requests/sec") -> tuple[float | None, Problem | None]:
    """The requests per second to keep, and the problem with it, if any.

    ``duration`` is ``(seconds, half its last printed digit)``; ``printed`` the ``Requests/sec``
    token and its line; ``places`` the decimals the tool always prints (a token with others is a
    fragment); ``unreadable``: the line that was there but could not be read; ``label``: how the
    tool names the figure. Raises :class:`ParseError` when nothing trustworthy is left (a fragment,
    an impossible or unreadable figure, and no usable requests and duration to recompute it from)."""
    value, cut = None, printed is not None           # a token that is no number counts as cut
    if printed is not None:
        try:
            value = (parse_number(printed[0]), half_digit(printed[0], parse_number))
            cut = decimals(printed[0]) != places
        except UnitError:
            pass
    verdict = check_rate(requests, duration, value, cut=cut)
    said = f"'{label}: {printed[0]}' (line {printed[1]})" if printed else None
    flaw = ("is not a number" if value is None else
            "is impossible" if not (math.isfinite(value[0]) and value[0] >= 0) else
            f"is cut (the tool prints {places} decimals)")
    if verdict is None:
        if value is not None and not cut and math.isfinite(value[0]) and value[0] >= 0:
            return value[0], None
        what = f"{said} {flaw}" if said else "the requests-per-second line could not be read"
        raise ParseError(f"nothing trustworthy is left: {what}, and no usable 'N requests in T' line is "
                         "left to recompute it from")
    code, rate = verdict
    given = f"{requests:,} requests in {duration[0]:g} s"
    spread = f"±{duration[1] / duration[0] * 100:.2g} %, the rounding of the printed duration"
    if code == "cut":
        text = f"{said} {flaw}; it agrees with {given}"
    elif code == "inconsistent":
        text = (f"{said} disagrees with {given} = {rate:,.2f} req/s ({spread}); the tool computes its rate "
                "from those two figures, so requests ÷ duration is kept")
    else:
        why = (f"{said} {flaw}" if said else
               f"the requests-per-second line (line {unreadable}) could not be read" if unreadable else
               "the report is truncated: no requests-per-second line")
        text = f"{why}: requests per second is derived from {given} = {rate:,.2f} ({spread})"
    return rate, Problem(code, "requests_per_sec", text, printed[1] if printed else unreadable)


def _what_may_miss(name: str) -> str:
    if name == "report":
        return "the report may be incomplete"
    return f"the {_LABELS.get(name, name.replace('_', ' '))} may be missing or incomplete"


def unread_problems(unread: dict[str, list[tuple[int, str]]]) -> list[Problem]:
    """One problem per field whose lines could not be read (``unread``: field → [(line, text)])."""
    out = []
    for name, found in unread.items():
        numbers = [n for n, _ in found]
        listed = ", ".join(str(n) for n in numbers[:5]) + (f" and {len(numbers) - 5} more" if len(numbers) > 5 else "")
        what = ("NUL bytes or invalid UTF-8" if any(damaged(text) for _, text in found) else
                "text that is not what the tool prints")
        many = len(numbers) > 1
        out.append(Problem("damaged", name, f"line{'s' if many else ''} {listed} ({shown(found[0][1])}) "
                                            f"hold{'' if many else 's'} {what} and could not be read: "
                                            f"{_what_may_miss(name)}", numbers[0]))
    return out


_LABELS = {"percentiles_ms": "latency percentiles", "uncorrected_percentiles_ms": "uncorrected latency percentiles",
           "histogram": "latency histogram", "uncorrected_histogram": "uncorrected latency histogram",
           "requests_per_sec": "requests per second", "requests": "request count and duration",
           "transfer_per_sec_bytes": "transfer rate", "socket_errors": "socket error counts",
           "non_2xx_3xx": "count of error responses", "latency_ms": "latency statistics",
           "req_per_sec_per_thread": "per-thread rate", "calibration": "calibration lines",
           "warmup_s": "warm-up line"}


def decreasing(values: list[float]) -> bool:
    """Whether a series that can only grow (percentiles, a cumulative spectrum) decreases somewhere."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return any(b < a - 1e-9 * max(1.0, abs(a)) for a, b in zip(finite, finite[1:]))


def _infinite(*values) -> bool:
    return any(isinstance(v, float) and math.isinf(v) for v in values)


def _negative(*values) -> bool:
    return any(isinstance(v, (int, float)) and v < 0 for v in values)


def _spectrum_problems(hist, name: str) -> list[Problem]:
    rows = hist.spectrum if hist is not None else []
    out = []
    if rows and (decreasing([r[0] for r in rows]) or decreasing([r[1] for r in rows])
                 or decreasing([float(r[2]) for r in rows]) or _negative(*(v for r in rows for v in r[:2]))):
        out.append(Problem("absurd", name, f"the spectrum of the {_LABELS[name]} is not cumulative "
                                           "(a value, percentile or count decreases)"))
    return out


def _connection_problems(r: WrkReport) -> list[Problem]:
    """No connection for the requests answered, or fewer connections than threads (wrk and wrk2 refuse
    both: each thread needs a connection of its own)."""
    c, t = r.connections, r.threads
    if not isinstance(c, int):
        return []
    if c < 1 and r.requests:
        return [Problem("absurd", "connections", f"{c:,} connections, yet {r.requests:,} requests were answered: "
                                                 "no request is sent without a connection")]
    if isinstance(t, int) and t > 1 and c < t:
        return [Problem("absurd", "connections", f"{c:,} connection{'' if c == 1 else 's'} for {t:,} threads: wrk "
                                                 "and wrk2 refuse to run with fewer connections than threads")]
    return []


def absurd_values(r: WrkReport, *, zero_duration: bool = False, printed_percentiles: list[float] | None = None,
                  calibration_lines: int | None = None, unknown_mean: bool = False) -> list[Problem]:
    """Values no load generator prints: negative or zero durations, negative sizes and latencies,
    figures that are not finite (``1e400`` reads as infinity), percentiles that decrease, more error
    responses than responses, NaN where responses exist, more calibration lines than threads, no
    connection (or fewer than threads). ``zero_duration``: the tool may print a duration of 0 (ab's
    "0.000 seconds" for a run under half a millisecond; wrk prints at least "1.00us").
    ``printed_percentiles``: every percentile row the tool printed, in order, where the report keeps only
    some (ab's 66 %, 80 %, …); ``calibration_lines``: how many were printed, where the report keeps only
    the first ones; ``unknown_mean``: the parser left the mean latency unknown (NaN) and said why."""
    out: list[Problem] = _connection_problems(r)
    if r.duration_s is not None and not (math.isfinite(r.duration_s) and r.duration_s >= 0
                                         and (r.duration_s > 0 or zero_duration)):
        out.append(Problem("absurd", "requests_per_sec",
                           f"the measured duration is {r.duration_s:g} s"
                           + (f" for {r.requests:,} requests" if r.requests else "")
                           + ": requests per second cannot be checked or derived"))
    if _negative(r.bytes_read, r.transfer_per_sec_bytes) or _infinite(r.bytes_read, r.transfer_per_sec_bytes):
        out.append(Problem("absurd", "transfer_per_sec_bytes", "a byte count or transfer rate that is negative or "
                                                               "not finite"))
    if r.latency_ms is not None and (_negative(r.latency_ms.avg, r.latency_ms.stdev, r.latency_ms.max)
                                     or _infinite(r.latency_ms.avg, r.latency_ms.stdev, r.latency_ms.max)):
        out.append(Problem("absurd", "latency_ms", "a latency statistic that is negative or not finite"))
    if r.latency_ms is not None and r.requests and math.isnan(r.latency_ms.avg) and not unknown_mean:
        out.append(Problem("absurd", "latency_ms", "the average latency is NaN although responses were counted"))
    for name in ("percentiles_ms", "uncorrected_percentiles_ms"):
        values = [v for v in (getattr(r, name) or {}).values() if v is not None]
        if name == "percentiles_ms" and printed_percentiles is not None and r.requests:
            values = [v for v in printed_percentiles if v is not None]
        if decreasing(values) or _negative(*values):
            out.append(Problem("absurd", name, f"the {_LABELS[name]} decrease or are negative: "
                                               f"{', '.join(f'{v:g}' for v in values)} ms"))
        elif _infinite(*values) or (r.requests and any(math.isnan(v) for v in values)):
            out.append(Problem("absurd", name, f"one of the {_LABELS[name]} is not finite (NaN or infinite)"
                                               + (" although responses were counted" if r.requests else "")))
    for name in ("histogram", "uncorrected_histogram"):
        hist = getattr(r, name)
        out += _spectrum_problems(hist, name)
        if hist is not None and _infinite(hist.mean_ms, hist.stdev_ms, hist.max_ms):
            out.append(Problem("absurd", name, f"the footer of the {_LABELS[name]} holds a figure that is not finite"))
        if (hist is not None and hist.total_count is not None and r.requests is not None
                and hist.total_count > r.requests):
            out.append(Problem("absurd", name, f"the {_LABELS[name]} counts {hist.total_count} "
                                               f"responses, more than the {r.requests} requests"))
    lines = max(len(r.calibration), calibration_lines or 0)
    if isinstance(r.threads, int) and lines > r.threads:
        kept = f"; the first {len(r.calibration):,} are kept" if len(r.calibration) < lines else ""
        out.append(Problem("absurd", "calibration", f"{lines:,} calibration lines for {r.threads:,} threads "
                                                    f"(one per thread is printed){kept}"))
    if r.requests is not None and r.non_2xx_3xx > r.requests:
        out.append(Problem("absurd", "non_2xx_3xx", f"{r.non_2xx_3xx} error responses, more than the "
                                                    f"{r.requests} requests"))
    return out
