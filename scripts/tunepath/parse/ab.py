"""Parse the text report of ApacheBench (``ab``) into the same :class:`WrkReport` as wrk.

:func:`parse_ab` reads ab's stdout: the banner, ``Server …``/``Document …`` lines,
the summary (``Concurrency Level`` … ``Transfer rate``), the ``Connection Times (ms)``
table (with or without ab's confidence columns, ``-S``) and the ``Percentage of the
requests served within a certain time (ms)`` table. The figures land in the wrk
fields so the rest of the pipeline treats ab like wrk:

* ``url`` is rebuilt from ``Server Hostname``/``Server Port``/``Document Path``
  (``https`` when ab printed an ``SSL/TLS Protocol`` line); ``threads`` is 1 (ab is
  single-threaded) and ``connections`` is the ``Concurrency Level``;
* ``latency_ms``: the average is the first ``Time per request`` (ab's mean latency, to
  the microsecond), stdev and max come from the ``Total`` row of ``Connection Times``
  (whole milliseconds: a mean of 0 there means "under a millisecond", not zero);
  ``within_stdev_pct`` is NaN (ab has no such figure);
* ``percentiles_ms`` keeps ab's 50/75/90/99/100 % rows; 99.9 % and beyond are None;
* ``Failed requests`` go to ``socket_errors["read"]``, ``Write errors`` to
  ``socket_errors["write"]``, ``Non-2xx responses`` to ``non_2xx_3xx``.

Anything that is no ab report (empty stdout, ab's usage text, a run that stopped
on an error such as ``apr_socket_connect(): Connection refused (111)``, two reports in one
text, a figure ab never prints such as ``inf``, ``1e400`` or 5,000 digits) raises
:class:`~tunepath.parse.wrk.ParseError` with one sentence a person can act on. Like wrk's, a
report that parses is checked with the checks every parser shares (:mod:`~tunepath.parse.problems`):
``Requests per second`` against ``Complete requests`` ÷ ``Time taken`` within the rounding of both
prints, lines holding NUL bytes or invalid UTF-8, a report cut before its last table or on a figure
(the last line without a line end: a count cut there is not trusted, and a cut ``Complete requests``
leaves nothing to trust), percentiles in order, impossible values; and the figures ab derives from
one another (:mod:`~tunepath.parse.abchecks`). The lines and figure formats are in
:mod:`~tunepath.parse.ablines`.

To parse a report of any tool (ab, wrk, wrk2, JMeter), use
:func:`tunepath.parse.reports.parse_report`: it recognises ab by :data:`AB_BANNER`.
"""

from __future__ import annotations

import math

from tunepath.parse.abchecks import AbFigures, Printed, ab_problems
from tunepath.parse.ablines import (
    AB_BANNER, COUNTS, FAILURE_KINDS, ONCE, PCT_MAP, RE_AB_ERROR, RE_AB_WARNING, RE_AB_WARNING_CONT, RE_BANNER,
    RE_BENCHMARKING, RE_CONN_COLS3, RE_CONN_COLS5, RE_CONN_HEAD, RE_CONN_ROW, RE_COUNT, RE_FAIL_BREAKDOWN, RE_KV,
    RE_PCT_HEAD, RE_PCT_ROW, RE_PROGRESS, RE_RATE_EXTRA, RE_USAGE, apr_error, count, figure,
)
from tunepath.parse.problems import Problem, absurd_values, damaged, judge_rate, shown, unread_problems
from tunepath.parse.source import read_report_file
from tunepath.parse.units import UnitError, half_digit, parse_number
from tunepath.parse.wrk import PERCENTILE_KEYS, ParseError, Stats, WrkReport

__all__ = ["parse_ab", "parse_ab_file", "AB_BANNER"]

def parse_ab_file(path) -> WrkReport:
    """Parse a file of ab output (size-limited, regular files only)."""
    return parse_ab(read_report_file(path))


def parse_ab(text: str) -> WrkReport:
    """Parse one ApacheBench report. Raises :class:`ParseError` for anything else."""
    if not isinstance(text, str):
        raise ParseError("expected the report as text")
    lines = [ln.strip() for ln in text.splitlines()]
    content = [ln for ln in lines if ln]
    if not content:
        raise ParseError("empty output: ab printed nothing on stdout "
                         "(it writes its usage text and argument errors to stderr)")
    if any(RE_USAGE.match(ln) for ln in content):
        first = next((ln for ln in content if ln.startswith("ab: ")), None)
        why = f" ({first!r})" if first else ""
        raise ParseError(f"this is ab's usage text, not a report: ab rejected its arguments{why}")
    open_end = bool(lines[-1]) and not text.endswith(("\n", "\r"))   # the last line may be cut
    try:
        return _AbParser(lines, open_end).run()
    except (UnitError, ValueError, IndexError, OverflowError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"damaged ab report: {exc}") from None


class _AbParser:
    def __init__(self, lines: list[str], open_end: bool = False):
        self.lines = lines
        self.open_end = open_end                         # no line end after the last line: it may be cut
        self.figures = AbFigures()
        self.open_figure: tuple[int, str] | None = None  # the last count read without a unit after it: line, field
        self.r = WrkReport(tool="ab", threads=1)
        self.kv: dict[str, str] = {}
        self.unknown = 0
        self.failures: dict[str, int] | None = None
        self.failed: int | None = None
        self.time_per_request: float | None = None
        self.total_row: tuple[float, float, float] | None = None  # mean, sd, max
        self.percentiles: dict[str, float | None] | None = None
        self.ab_warnings: list[str] = []
        self.error_line: str | None = None
        self.banner = False
        self.number = 0                                  # the line being read, from 1
        self.once: dict[str, int] = {}                   # labels a report prints once → their line
        self.unread: dict[str, list[tuple[int, str]]] = {}   # field → lines not read (NUL bytes, bad rows)
        self.columns = 0                                 # values per Connection Times row (5, or 3 with -S)
        self.longest = False                             # the percentile table's last row was read
        self.duration_step: float | None = None          # half the last printed digit of the duration
        self.rps_line: tuple[str, int] | None = None     # the Requests per second token and its line

    def run(self) -> WrkReport:
        section = None
        for self.number, line in enumerate(self.lines, 1):
            if not line:
                section = None if section == "pct" else section
                continue
            if damaged(line):              # never read: named in a warning, and flagged
                self.unread.setdefault("report", []).append((self.number, line))
                continue
            if RE_BANNER.match(line):
                self.banner = True
            elif RE_BENCHMARKING.match(line) or RE_PROGRESS.match(line) or RE_RATE_EXTRA.match(line):
                pass
            elif error := apr_error(line):
                self.error_line = error
            elif RE_AB_ERROR.match(line):
                self.error_line = line
            elif RE_CONN_HEAD.match(line):
                section = "conn"
            elif section == "conn" and (RE_CONN_COLS5.match(line) or RE_CONN_COLS3.match(line)):
                self.columns = 5 if RE_CONN_COLS5.match(line) else 3
            elif m := RE_CONN_ROW.match(line):
                self._conn_row(m.group(1), m.group(2))
            elif RE_PCT_HEAD.match(line):
                section = "pct"
                self.percentiles = {k: None for k in PERCENTILE_KEYS}
            elif section == "pct" and (m := RE_PCT_ROW.match(line)):
                self._pct_row(m)
            elif section == "pct" and "%" in line:       # a row of the table that is no row ab prints
                self.unread.setdefault("percentiles_ms", []).append((self.number, line))
            elif m := RE_FAIL_BREAKDOWN.match(line):
                self.failures = self.figures.failures = dict(zip(FAILURE_KINDS, (int(g) for g in m.groups())))
            elif m := RE_AB_WARNING.match(line):
                self.ab_warnings.append(f"{m.group(1)}: {m.group(2)}")
            elif RE_AB_WARNING_CONT.match(line) and self.ab_warnings:
                self.ab_warnings[-1] += " " + line
            elif (m := RE_KV.match(line)) and self._field(m.group(1), m.group(2)):
                pass
            else:
                self.unknown += 1
        return self._finish()

    # -- "Label: value" lines --------------------------------------------------
    def _field(self, label: str, value: str) -> bool:
        r, f, n = self.r, self.figures, self.number
        if label in ONCE:
            if label in self.once:
                raise ParseError(f"more than one report: line {n} ({label}) repeats line "
                                 f"{self.once[label]}; split the file and parse each report")
            self.once[label] = n
        if label in ("Server Software", "Server Hostname", "Server Port", "Document Path",
                     "Document Length", "SSL/TLS Protocol", "Server Temp Key", "TLS Server Name",
                     "HTML transferred", "Total body sent", "Keep-Alive requests"):
            self.kv[label] = value
        elif label == "Time taken for tests":
            r.duration_s = figure(value, label, n, "seconds", 3)
            self.duration_step = half_digit(value.split()[0], parse_number)
            f.duration = Printed(r.duration_s, self.duration_step, n, value.split()[0])
        elif label in COUNTS:
            self._count(label, count(value, label, n))
        elif label == "Total transferred":
            f.bytes_read = int(figure(value, label, n, "bytes", 0))
            r.bytes_read = float(f.bytes_read)
        elif label == "Requests per second":
            token = value.split(maxsplit=1)[0] if value.strip() else ""
            r.requests_per_sec = _lenient(token)
            self.rps_line = (token, n)
            if r.requests_per_sec is not None:
                f.rate = Printed(r.requests_per_sec, half_digit(token, parse_number), n, token)
        elif label == "Time per request":
            if "across all concurrent requests" not in value and self.time_per_request is None:
                self.time_per_request = figure(value, label, n, "[ms]")
                f.time_per_request = self._printed(self.time_per_request, value)
        elif label == "Transfer rate":
            kb = figure(value, label, n, "[Kbytes/sec]")
            r.transfer_per_sec_bytes = _tidy(kb * 1024)
            f.transfer_rate = self._printed(kb, value)
        else:
            return False
        return True

    def _count(self, label: str, value: int) -> None:
        r = self.r
        self.open_figure = (self.number, COUNTS[label])       # nothing after it shows whether it is whole
        if label == "Concurrency Level":
            r.connections = self.figures.concurrency = value
        elif label == "Complete requests":
            r.requests = self.figures.requests = value
        elif label == "Failed requests":
            self.failed, self.figures.failed = value, (value, self.number)
        elif label == "Write errors":
            r.socket_errors["write"] = value
        elif label == "Non-2xx responses":
            r.non_2xx_3xx = value

    def _printed(self, value: float, text: str) -> Printed:
        token = text.split(maxsplit=1)[0]
        return Printed(value, half_digit(token, parse_number), self.number, token)

    def _pct_row(self, m) -> None:
        value = figure(m.group(2), f"{m.group(1)}%", self.number)
        key = PCT_MAP.get(m.group(1))
        if key is not None and self.percentiles is not None:
            self.percentiles[key] = value
        self.figures.percentiles.append((int(m.group(1)), value, self.number))
        self.longest = self.longest or bool(m.group(3))

    def _conn_row(self, name: str, rest: str) -> None:
        tokens = rest.split()
        if self.columns and len(tokens) != self.columns:     # a row cut short: not read, flagged
            self.r.add_problem(Problem("cut", "latency_ms", f"line {self.number}: the Connection Times row "
                                                            f"{name!r} has {len(tokens)} of its {self.columns} "
                                                            "values: it was not read", self.number))
            return
        if len(tokens) not in (3, 5):
            raise ParseError(f"damaged ab report: line {self.number}: the Connection Times row {name!r} has "
                             f"{len(tokens)} values instead of 5 (or 3 with ab -S)")
        values = [figure(t, f"{name} row", self.number) for t in tokens]
        self.figures.rows[name] = (values, self.number)
        self.open_figure = (self.number, "latency_ms")
        self.figures.columns = self.columns or len(tokens)
        if name == "Total":
            if len(values) == 5:   # min mean [+/-sd] median max
                self.total_row = (values[1], values[2], values[4])
            else:                  # min avg max (ab -S)
                self.total_row = (values[1], math.nan, values[2])

    # -- the whole report ------------------------------------------------------
    def _finish(self) -> WrkReport:
        r = self.r
        if r.requests is None:
            if self.error_line:
                raise ParseError(f"no ab report: ab stopped with {self.error_line!r} before "
                                 "printing any results" + _hint(self.error_line))
            if self.banner:
                raise ParseError("no ab report: ab printed its banner but stopped before any results "
                                 "(the reason, such as 'apr_socket_connect(): Connection refused (111)' "
                                 "or a timeout, is on its stderr)")
            raise ParseError("no ab report found: there is no 'Complete requests:' line "
                             "(ab prints its results only when the run finished; see its stderr)")
        self._cut_last()
        r.url = self._url()
        if self.total_row is not None:
            mean, sd, mx = self.total_row
            avg = self.time_per_request if self.time_per_request is not None else mean
            r.latency_ms = Stats(avg, sd, mx, math.nan)
        elif self.time_per_request is not None:
            r.latency_ms = Stats(self.time_per_request, math.nan, math.nan, math.nan)
        r.percentiles_ms = self.percentiles
        if self.failed is not None:
            r.socket_errors["read"] = self.failed
        if r.requests == 0:
            nan = math.nan
            if r.latency_ms is not None:
                r.latency_ms = Stats(nan, nan, nan, nan)
            if r.percentiles_ms is not None:
                r.percentiles_ms = {k: None for k in PERCENTILE_KEYS}
        self._check_rate()
        self._check_complete()
        self._warn()
        printed = [ms for _, ms, _ in self.figures.percentiles] if r.requests else None
        for problem in (ab_problems(self.figures) + unread_problems(self.unread)
                        + absurd_values(r, zero_duration=True, printed_percentiles=printed)):
            r.add_problem(problem)
        return r

    def _cut_last(self) -> None:
        """The last line has no line end, so the report may be cut inside it: a figure read there may be
        short (``Complete requests: 12`` of 1200). A cut request count leaves nothing to trust."""
        last = len(self.lines)
        if not (self.open_end and self.open_figure and self.open_figure[0] == last):
            return
        line, field = self.lines[last - 1], self.open_figure[1]
        if field == "requests":
            raise ParseError(f"the report is cut: its last line {last} {shown(line)} has no line end, so the "
                             "request count may be cut, and no rate is left to trust; use the whole ab output")
        self.r.add_problem(Problem("cut", field, f"line {last} {shown(line)} is the last line and has no line end: "
                                                 "its figure may be cut", last))

    def _check_complete(self) -> None:
        """ab ends its report with the percentile table's "(longest request)" row (or, with -d, with
        the Connection Times table): a report without them was cut."""
        r = self.r
        if self.percentiles is not None and not self.longest:
            r.add_problem(Problem("cut", "percentiles_ms", "the percentile table ends before its 100 % "
                                                           "(longest request) row: the report is cut"))
        elif self.percentiles is None and r.requests and self.total_row is None:
            r.add_problem(Problem("cut", "latency_ms", "the report ends before the Total row of its "
                                                       "Connection Times table: it is cut"))

    def _check_rate(self) -> None:
        """ab prints requests per second with two decimals and the duration with three: a figure
        outside requests ÷ (duration ± half a millisecond) is not ab's own arithmetic."""
        r = self.r
        if self.duration_step is None and self.rps_line is None:
            return
        duration = (r.duration_s, self.duration_step) if self.duration_step is not None else None
        unreadable = self.unread["report"][0][0] if "report" in self.unread else None
        r.requests_per_sec, problem = judge_rate(r.requests, duration, self.rps_line, 2, unreadable=unreadable,
                                                 label="Requests per second")
        if problem is not None:
            r.add_problem(problem)

    def _url(self) -> str | None:
        host = self.kv.get("Server Hostname")
        if not host:
            return None
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        scheme = "https" if "SSL/TLS Protocol" in self.kv else "http"
        port = self.kv.get("Server Port", "")
        port = f":{port}" if RE_COUNT.fullmatch(port) else ""
        path = self.kv.get("Document Path", "")
        if not path.startswith("/"):
            path = "/" + path
        return f"{scheme}://{host}{port}{path}"

    def _warn(self) -> None:
        r, w = self.r, self.r.warnings
        if r.requests == 0:
            w.append("no responses at all: every latency figure is undefined")
        if self.failed:
            if self.failures is not None:
                detail = ", ".join(f"{k}: {v}" for k, v in self.failures.items())
                w.append(f"{self.failed} failed requests ({detail})")
            else:
                w.append(f"{self.failed} failed requests (no Connect/Receive/Length/Exceptions breakdown)")
            if (self.failures is not None and self.failures["Length"] > 0
                    and all(v == 0 for k, v in self.failures.items() if k != "Length")):
                w.append(f"all {self.failures['Length']} failures are 'Length' failures: ab counts "
                         "every response whose body length differs from the first one's as failed, "
                         "a known ab quirk with keep-alive on dynamic pages; the responses may well "
                         "be fine")
        if r.socket_errors["write"]:
            w.append(f"{r.socket_errors['write']} write errors")
        if r.non_2xx_3xx:
            w.append(f"{r.non_2xx_3xx} non-2xx responses (ab counts 3xx redirects here too, "
                     "unlike wrk)")
        if r.requests and r.requests > 1 and self.percentiles is None:
            w.append("no percentile table: the report is truncated or ab ran with -d")
        for text in self.ab_warnings:
            w.append(f"ab: {text}")
        if self.error_line:
            w.append(f"ab reported an error: {self.error_line}")
        if r.requests_per_sec is None:
            w.append("the report is truncated: no 'Requests per second' line")
        if self.unknown:
            w.append(f"{self.unknown} unrecognised line(s) ignored")


def _hint(error: str) -> str:
    low = error.lower()
    if "connection refused" in low:
        return ": nothing accepted connections at that address (is the server running and the port right?)"
    if "timeout" in low or "timed out" in low:
        return ": the server stopped answering (with -k, a server that keeps the connection open " \
               "without a 'Connection: keep-alive' header makes ab wait until its 30 s timeout)"
    return ""


def _lenient(token: str) -> float | None:
    """The printed rate, or None: the rate check (judge_rate) says what is wrong with it."""
    try:
        return parse_number(token)
    except UnitError:
        return None


def _tidy(value: float) -> float:
    return float(f"{value:.12g}") if math.isfinite(value) else value
