"""Parse the text report of wrk2 and of Debian's wrk.

One function, :func:`parse`, turns stdout of either tool into a :class:`WrkReport`.
It understands every section the tools print: the ``Running …`` header, the
``Warm-up`` line of the project's wrk2 run with ``-W`` (its patch, fix 6: everything
after it counts only the window after the warm-up), wrk2's ``Thread calibration``
lines, ``Thread Stats``, wrk2's HdrHistogram blocks (``Recorded`` and ``-U``
``Uncorrected``, each with its detailed spectrum and footer), wrk's four-line
``Latency Distribution``, the request/byte/duration summary, socket errors,
non-2xx/3xx responses, ``Requests/sec`` and ``Transfer/sec``. Summary-only excerpts
(as the original learning path published them), CRLF line ends and trailing output
of a Lua script are accepted.

A report that parses is then checked (:mod:`~tunepath.parse.problems`): ``Requests/sec``
against requests ÷ duration within the rounding of both prints, lines holding NUL bytes or
invalid UTF-8 (never read, always named), sections that end early, a report cut before its
closing ``Requests/sec``/``Transfer/sec`` lines (its error counts are then unknown, not 0),
impossible values. Each finding is a typed ``Problem`` on the report and a warning.

The work is linear in the text and bounded per line: a line that begins like no line of a report
costs one match (:data:`~tunepath.parse.wrklines.RE_KNOWN`), and only the first calibration lines
(one per thread) are converted and kept; the others are counted (issue 30, finding 10).

Anything that is no wrk/wrk2 report, holds two reports, or leaves no trustworthy figure
raises :class:`ParseError` with a sentence a person can act on.
"""

from __future__ import annotations

import math
import re

from tunepath.parse.problems import ParseError, Problem, absurd_values, damaged, judge_rate, shown, unread_problems
from tunepath.parse.record import PERCENTILE_KEYS, Histogram, Stats, WrkReport
from tunepath.parse.source import MAX_REPORT_BYTES, read_report_file
from tunepath.parse.units import (UnitError, decimals, half_digit, parse_bytes, parse_count, parse_int, parse_number,
                                  parse_percent, parse_time_ms, parse_time_s)
from tunepath.parse.wrkchecks import cut_problems, figure_warnings, mean_problems
from tunepath.parse.wrklines import (
    RE_CALIBRATION, RE_DIST_WRK, RE_DIST_WRK2, RE_FOOT_BUCKETS, RE_FOOT_MAX, RE_FOOT_MEAN, RE_KNOWN, RE_NON2XX, RE_PCT_ROW,
    RE_RPS, RE_RULE, RE_RUNNING, RE_SOCKET, RE_SPECTRUM_COLS, RE_SPECTRUM_HEAD, RE_SPECTRUM_ROW, RE_STATS_HEADER,
    RE_STATS_ROW, RE_SUMMARY, RE_THREADS, RE_TPS, RE_USAGE, RE_WARMUP, REPORT_LINES, field_of,
)

__all__ = ["ParseError", "Problem", "Stats", "Histogram", "WrkReport", "parse", "parse_file", "PERCENTILE_KEYS"]

# wrk and wrk2 print Requests/sec, and every size and time, with exactly this many decimals
PRINTED_DECIMALS = 2
# wrk2 prints one calibration line per thread: at most this many are kept (the others are counted)
MAX_CALIBRATION = 1024


def _pct_key(text: str) -> str:
    value = float(text)
    key = f"{value:.3f}".rstrip("0").rstrip(".")
    return key


def parse_file(path) -> WrkReport:
    """Parse a file (size-limited, regular files only); bytes that are not UTF-8 are named, not fatal."""
    return parse(read_report_file(path))


def parse(text: str) -> WrkReport:
    """Parse one wrk/wrk2 report. Raises :class:`ParseError` for anything else."""
    if not isinstance(text, str):
        raise ParseError("expected the report as text")
    if len(text) > MAX_REPORT_BYTES:
        raise ParseError(f"{len(text):,} characters, more than a report can be "
                         f"({MAX_REPORT_BYTES // (1024 * 1024)} MiB): is this the right output?")
    lines = [ln.strip() for ln in text.splitlines()]
    content = [ln for ln in lines if ln]
    if not content:
        raise ParseError("empty output: the load generator printed nothing "
                         "(an unreachable server makes wrk print only one line on stderr)")
    if any(RE_USAGE.match(ln) for ln in content[:3]):
        raise ParseError("this is wrk's usage text, not a report: the command's arguments were "
                         "rejected (wrk2 also needs -R/--rate); see the command's stderr")
    open_end = bool(lines[-1]) and not text.endswith(("\n", "\r"))
    try:
        return _Parser(lines, open_end).run()
    except (UnitError, ValueError, IndexError, OverflowError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"damaged wrk report: {exc}") from None


class _Parser:
    def __init__(self, lines: list[str], open_end: bool):
        self.lines = lines
        self.open_end = open_end      # no line end after the last line: it may be cut
        self.i = 0
        self.r = WrkReport()
        self.unknown = 0
        self.seen: dict[str, int] = {}            # what a report prints once → its line
        self.tool_hints: set[str] = set()
        self.rps_token: str | None = None
        self.duration_step: float | None = None   # half the last printed digit of the duration, s
        self.unread: dict[str, list[tuple[int, str]]] = {}   # field → damaged lines not read
        self.tail_damage: list[int] = []
        self.current = 0                          # the line being read, from 1 (for messages)
        self.calibration_lines = 0                # printed; only the first ones are kept

    # the report body is a sequence of sections; each handler consumes its lines
    def run(self) -> WrkReport:
        while self.i < len(self.lines):
            line = self.lines[self.i]
            self.i += 1
            if not line:
                continue
            if damaged(line):
                self._unread(self.i, line, field_of(line))
                continue
            self.current = self.i
            try:
                if self._line(line):
                    break
            except UnitError as exc:
                bad = self.lines[self.current - 1]
                raise ParseError(f"damaged wrk report, line {self.current} {shown(bad)}: {exc}") from None
        self._tail()
        return self._finish()

    def _line(self, line: str) -> bool:
        """Read one line; True when the report ends here."""
        r = self.r
        if m := RE_CALIBRATION.match(line):          # first: a report may hold a line per thread
            self.calibration_lines += 1
            if len(r.calibration) < min(r.threads or MAX_CALIBRATION, MAX_CALIBRATION):
                r.calibration.append({"mean_latency_ms": parse_time_ms(m.group(1)),
                                      "sampling_interval_ms": parse_time_ms(m.group(2))})
            self.tool_hints.add("wrk2")
        elif not RE_KNOWN.match(line):
            self._unknown(line)
        elif m := RE_RUNNING.match(line):
            self._once("header", line)
            r.header_duration_s = _safe(parse_time_s, m.group(1))
            r.url = m.group(2)
        elif m := RE_THREADS.match(line):
            self._once("threads", line)
            r.threads, r.connections = parse_int(m.group(1)), parse_int(m.group(2))
        elif m := RE_WARMUP.match(line):
            self._once("warmup", line)
            r.warmup_s = parse_time_s(m.group(1))
            self.tool_hints.add("wrk2")         # only the project's patched wrk2 prints it
        elif RE_STATS_HEADER.match(line):
            self._once("stats", line)
        elif m := RE_STATS_ROW.match(line):
            self._stats_row(m, line)
        elif m := RE_DIST_WRK2.match(line):
            corrected = not m.group(1).startswith("Uncorrected")
            self._once("hdr" if corrected else "hdr-uncorrected", line)
            self.tool_hints.add("wrk2")
            self._hdr_block(corrected)
        elif RE_DIST_WRK.match(line):
            self._once("distribution", line)
            self._wrk_distribution()
        elif m := RE_SUMMARY.match(line):
            self._once("totals", line)
            r.requests = parse_int(m.group(1))
            r.duration_s = parse_time_s(m.group(2))
            self.duration_step = half_digit(m.group(2), parse_time_s)
            r.bytes_read = parse_bytes(m.group(3))
        elif m := RE_SOCKET.match(line):
            self._once("socket", line)
            r.socket_errors = dict(zip(("connect", "read", "write", "timeout"), (parse_int(g) for g in m.groups())))
            self._open_last("socket_errors", line)
        elif m := RE_NON2XX.match(line):
            self._once("non-2xx", line)
            r.non_2xx_3xx = parse_int(m.group(1))
            self._open_last("non_2xx_3xx", line)
        elif m := RE_RPS.match(line):
            self._once("rps", line)
            self.rps_token = m.group(1)
        elif m := RE_TPS.match(line):
            self._once("tps", line)
            self._transfer(m.group(1), line)
            return "rps" in self.seen   # the report ends here; anything after is script output
        else:
            self._unknown(line)
        return False

    def _unknown(self, line: str) -> None:
        self.unknown += 1
        if (name := field_of(line)) not in ("report", "latency_ms", "percentiles_ms"):
            self._unread(self.i, line, name)

    def _once(self, kind: str, line: str) -> None:
        if kind in self.seen:
            raise ParseError(f"more than one report: line {self.i} {shown(line)} repeats what line "
                             f"{self.seen[kind]} already said; split the file and parse each report")
        self.seen[kind] = self.i

    def _unread(self, number: int, line: str, name: str) -> None:
        self.unread.setdefault(name, []).append((number, line))

    def _open_last(self, name: str, line: str) -> None:
        if self.open_end and self.i == len(self.lines):
            self.r.add_problem(Problem("cut", name, f"line {self.i} {shown(line)} is the last line and has no "
                                                    "line end: its figure may be cut", self.i))

    def _stats_row(self, m: re.Match, line: str) -> None:
        latency = m.group(1) == "Latency"
        self._once("stats-latency" if latency else "stats-rate", line)
        conv = parse_time_ms if latency else parse_count
        stats = Stats(conv(m.group(2)), conv(m.group(3)), conv(m.group(4)), parse_percent(m.group(5)))
        if latency:
            self.r.latency_ms = stats
        else:
            self.r.req_per_sec_per_thread = stats

    def _transfer(self, token: str, line: str) -> None:
        try:
            value = parse_bytes(token)
            complete = decimals(token) == PRINTED_DECIMALS
        except UnitError:
            value, complete = None, False
        if complete:
            self.r.transfer_per_sec_bytes = value
        else:
            self.r.add_problem(Problem("cut", "transfer_per_sec_bytes",
                                       f"line {self.i} {shown(line)} is cut or damaged (wrk prints a size with "
                                       "two decimals and a unit): the transfer rate is left out", self.i))

    def _hdr_block(self, corrected: bool) -> None:
        names = (("percentiles_ms", "histogram") if corrected
                 else ("uncorrected_percentiles_ms", "uncorrected_histogram"))
        pct: dict[str, float | None] = {k: None for k in PERCENTILE_KEYS}
        hist = Histogram()
        start, closed = self.i, False
        while self.i < len(self.lines):
            line = self.lines[self.i]
            self.current = self.i + 1
            if damaged(line):
                self._unread(self.i + 1, line, names[0] if "%" in line else names[1])
            elif not line or RE_SPECTRUM_HEAD.match(line) or RE_SPECTRUM_COLS.match(line):
                pass
            elif m := RE_PCT_ROW.match(line):
                _put(pct, m)
            elif m := RE_FOOT_MEAN.match(line):
                hist.mean_ms, hist.stdev_ms = parse_number(m.group(1)), parse_number(m.group(2))
            elif m := RE_FOOT_MAX.match(line):
                hist.max_ms = parse_number(m.group(1))
                hist.total_count = parse_int(m.group(2))
            elif RE_FOOT_BUCKETS.match(line):
                pass
            elif RE_RULE.match(line):
                self.i += 1
                closed = True
                break
            elif m := RE_SPECTRUM_ROW.match(line):
                hist.spectrum.append((parse_number(m.group(1)), parse_number(m.group(2)), int(m.group(3))))
            else:
                break  # section ended without its rule (truncated output)
            self.i += 1
        setattr(self.r, names[0], pct)
        setattr(self.r, names[1], hist)
        self._check_block(names, start, closed, pct, hist)

    def _check_block(self, names: tuple[str, str], start: int, closed: bool, pct: dict, hist: Histogram) -> None:
        where = f"line {self.i + 1}" if self.i < len(self.lines) else "the end of the text"
        label = ("uncorrected " if names[1].startswith("uncorrected") else "") + "latency histogram"
        if not closed or hist.total_count is None:
            self.r.add_problem(Problem("cut", names[1], f"the {label} that starts at line {start} ends at {where} "
                                                        "without its footer and closing rule: its spectrum and "
                                                        "percentiles may be incomplete", start))
        missing = [k for k, v in pct.items() if v is None]
        if missing and names[0] not in self.unread:
            self.r.add_problem(Problem("cut", names[0], f"the {label} that starts at line {start} lacks its "
                                                        f"{', '.join(missing)} % rows", start))

    def _wrk_distribution(self) -> None:
        pct: dict[str, float | None] = {k: None for k in PERCENTILE_KEYS}
        start, rows = self.i, 0
        while self.i < len(self.lines):
            line = self.lines[self.i]
            self.current = self.i + 1
            if damaged(line) and "%" in line:
                self._unread(self.i + 1, line, "percentiles_ms")
            elif m := RE_PCT_ROW.match(line):
                _put(pct, m)
                rows += 1
                if "." not in m.group(1):
                    self.tool_hints.add("wrk")
            else:
                break
            self.i += 1
        self.r.percentiles_ms = pct
        if rows < 4 and "percentiles_ms" not in self.unread:
            self.r.add_problem(Problem("cut", "percentiles_ms", f"the latency distribution that starts at line "
                                                                f"{start} has {rows} of its 4 rows", start))

    def _tail(self) -> None:
        """After the report: script output is fine, a second report is not."""
        for n in range(self.i, len(self.lines)):
            line = self.lines[n]
            if damaged(line):
                self.tail_damage.append(n + 1)
            elif RE_KNOWN.match(line) and any(p.match(line) for p in REPORT_LINES):
                raise ParseError(f"more than one report: line {n + 1} {shown(line)} follows the report that "
                                 f"ended at line {self.i}; split the file and parse each report")

    def _finish(self) -> WrkReport:
        r = self.r
        if not ("rps" in self.seen or "totals" in self.seen):
            raise ParseError("no wrk report found: neither an 'N requests in T' line nor "
                             "'Requests/sec:' is present" + self._unread_hint())
        self._rate()
        r.tool = self._tool()
        if r.requests == 0:
            # wrk prints zeros for empty statistics: with no response they are undefined
            nan = math.nan
            if r.latency_ms is not None:
                r.latency_ms = Stats(nan, nan, nan, nan)
            for name in ("percentiles_ms", "uncorrected_percentiles_ms"):
                if getattr(r, name) is not None:
                    setattr(r, name, {k: None for k in PERCENTILE_KEYS})
            for hist in (r.histogram, r.uncorrected_histogram):
                if hist is not None:
                    hist.max_ms = nan
        self._warn()
        return r

    def _unread_hint(self) -> str:
        lines = sorted(n for found in self.unread.values() for n, _ in found)
        return f" (line {lines[0]} and {len(lines) - 1} more could not be read)" if lines else ""

    def _tool(self) -> str | None:
        r = self.r
        per_thread = r.req_per_sec_per_thread
        if "wrk2" in self.tool_hints:
            return "wrk2"
        if "wrk" in self.tool_hints:
            return "wrk"
        if per_thread is not None and math.isnan(per_thread.avg) and (r.requests or 0) > 0:
            return "wrk2"   # wrk2 prints no per-thread rate before its calibration finished; wrk always does
        if ("header" in self.seen and "threads" in self.seen and not r.calibration and not self.unread
                and per_thread is not None and math.isfinite(per_thread.avg)):
            # a whole report with a per-thread rate and no calibration: wrk2 calibrates before it
            # has a rate (and then prints its calibration lines); only wrk prints this shape
            return "wrk"
        return None

    def _rate(self) -> None:
        """Requests/sec checked against requests ÷ duration (see problems.judge_rate)."""
        r = self.r
        duration = (r.duration_s, self.duration_step) if self.duration_step is not None else None
        printed = (self.rps_token, self.seen["rps"]) if self.rps_token is not None else None
        r.requests_per_sec, problem = judge_rate(r.requests, duration, printed, PRINTED_DECIMALS,
                                                 unreadable=self._first_unread("requests_per_sec"))
        if problem is not None:
            r.add_problem(problem)

    def _first_unread(self, name: str) -> int | None:
        return self.unread[name][0][0] if name in self.unread else None

    def _warn(self) -> None:
        r, w = self.r, self.r.warnings
        w.extend(figure_warnings(r))
        flagged = any(p.field == "requests_per_sec" for p in r.problems)
        for problem in cut_problems(self.seen, self.unread, rate_flagged=flagged):
            r.add_problem(problem)
        if self.unknown:
            w.append(f"{self.unknown} unrecognised line(s) ignored")
        for problem in (unread_problems(self.unread) + absurd_values(r, calibration_lines=self.calibration_lines)
                        + mean_problems(r, self.seen.get("stats-latency"))):
            r.add_problem(problem)
        if self.tail_damage:
            w.append(f"after the report, line {self.tail_damage[0]} (and {len(self.tail_damage) - 1} more) holds "
                     "NUL bytes or invalid UTF-8; it is not part of the report")


def _put(pct: dict[str, float | None], m: re.Match) -> None:
    """A percentile row: only the rows wrk and wrk2 print are kept (a report has no 12 % row)."""
    key = _pct_key(m.group(1))
    if key in pct:
        pct[key] = parse_time_ms(m.group(2))


def _safe(fn, token):
    try:
        return fn(token)
    except UnitError:
        return None
