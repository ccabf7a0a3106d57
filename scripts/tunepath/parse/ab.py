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
text) raises :class:`~tunepath.parse.wrk.ParseError` with one sentence a person can act on.
Like wrk's, a report that parses is checked (:mod:`~tunepath.parse.problems`): ``Requests per
second`` against ``Complete requests`` ÷ ``Time taken`` within the rounding of both prints, lines
holding NUL bytes or invalid UTF-8, a report cut before its last table, impossible values.

To parse a report of any tool (ab, wrk, wrk2, JMeter), use
:func:`tunepath.parse.reports.parse_report`: it recognises ab by :data:`AB_BANNER`.
"""

from __future__ import annotations

import math
import re

from tunepath.parse.wrk import PERCENTILE_KEYS, ParseError, Stats, WrkReport
from tunepath.parse.problems import Problem, absurd_values, damaged, judge_rate, unread_problems
from tunepath.parse.source import read_report_file
from tunepath.parse.units import UnitError, half_digit, parse_number

__all__ = ["parse_ab", "parse_ab_file", "AB_BANNER"]

AB_BANNER = "This is ApacheBench"

# ab's percentile rows that have a wrk counterpart (66, 80, 95 and 98 % are dropped)
_PCT_MAP = {"50": "50", "75": "75", "90": "90", "99": "99", "100": "100"}
_FAILURE_KINDS = ("Connect", "Receive", "Length", "Exceptions")
# labels one report prints once: a second one means two reports in one text
_ONCE = ("Concurrency Level", "Time taken for tests", "Complete requests", "Requests per second")

_A = re.ASCII
RE_KV = re.compile(r"^([A-Za-z][A-Za-z0-9 /\-]*?):\s*(.*?)\s*$", _A)
RE_BANNER = re.compile(r"^(This is ApacheBench, Version|Copyright \d+ Adam Twiss|"
                       r"Licensed to The Apache Software Foundation)", _A)
RE_BENCHMARKING = re.compile(r"^Benchmarking\s+\S+\s+\(be patient\)\.*(done)?\s*$", _A)
RE_PROGRESS = re.compile(r"^(Completed|Finished)\s+\d+\s+requests\s*$", _A)
RE_FAIL_BREAKDOWN = re.compile(
    r"^\(Connect:\s*(\d+),\s*Receive:\s*(\d+),\s*Length:\s*(\d+),\s*Exceptions:\s*(\d+)\)\s*$", _A)
RE_CONN_HEAD = re.compile(r"^Connection Times \(ms\)\s*$", _A)
RE_CONN_COLS5 = re.compile(r"^min\s+mean\[\+/-sd\]\s+median\s+max\s*$", _A)
RE_CONN_COLS3 = re.compile(r"^min\s+avg\s+max\s*$", _A)
RE_CONN_ROW = re.compile(r"^(Connect|Processing|Waiting|Total):\s+(.*?)\s*$", _A)
RE_PCT_HEAD = re.compile(r"^Percentage of the requests served within a certain time \(ms\)\s*$", _A)
RE_PCT_ROW = re.compile(r"^(\d+)%\s+(\S+)(\s+\(longest request\))?\s*$", _A)
RE_RATE_EXTRA = re.compile(r"^\S+\s+kb/s\s+(sent|total)\s*$", _A)
# ab's notes under Connection Times, each two lines long:
#   WARNING: The median and mean for the initial connection time are not within a normal deviation
#           These results are probably not that reliable.
#   ERROR: The median and mean for the waiting time are more than twice the standard
#          deviation apart. These results are NOT reliable.
RE_AB_WARNING = re.compile(r"^(WARNING|ERROR):\s*(The median and mean .*?)\s*$", _A)
RE_AB_WARNING_CONT = re.compile(r"^(These results are probably not that reliable\.|"
                                r"deviation apart\. These results are NOT reliable\.)\s*$", _A)
RE_USAGE = re.compile(r"^Usage:\s+ab\b", _A)
RE_APR_ERROR = re.compile(r"\b(apr_\w+(?:\(\))?):\s*(.*?\(\d+\))\s*$", _A)
RE_AB_ERROR = re.compile(r"^(ab:\s+.*|Test aborted after .*|socket: .*|Invalid .*|SSL .*)$", _A)
RE_COUNT = re.compile(r"[0-9]+", _A)


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
    try:
        return _AbParser(lines).run()
    except (UnitError, ValueError, IndexError, OverflowError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"damaged ab report: {exc}") from None


def _count(value: str, label: str) -> int:
    token = value.split()[0] if value.split() else ""
    if not RE_COUNT.fullmatch(token):
        raise ParseError(f"damaged ab report: {label!r} is not a count: {value!r}")
    return int(token)


def _number(value: str, label: str, unit: str | None = None) -> float:
    """The first token of ``value`` as a number; ``unit`` (if given) must follow it."""
    tokens = value.split()
    if not tokens:
        raise ParseError(f"damaged ab report: {label!r} has no value")
    if unit is not None and (len(tokens) < 2 or tokens[1] != unit):
        raise ParseError(f"damaged ab report: {label!r} should be a number of {unit}: {value!r}")
    try:
        return parse_number(tokens[0])
    except UnitError:
        raise ParseError(f"damaged ab report: {label!r} is not a number: {value!r}") from None


class _AbParser:
    def __init__(self, lines: list[str]):
        self.lines = lines
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
        self.unread: dict[str, list[tuple[int, str]]] = {}   # lines with NUL bytes or invalid UTF-8
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
            elif m := RE_APR_ERROR.search(line):
                self.error_line = f"{m.group(1)}: {m.group(2)}"
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
                key = _PCT_MAP.get(m.group(1))
                value = _number(m.group(2), f"{m.group(1)}%")
                if key is not None and self.percentiles is not None:
                    self.percentiles[key] = value
                self.longest = self.longest or bool(m.group(3))
            elif m := RE_FAIL_BREAKDOWN.match(line):
                self.failures = dict(zip(_FAILURE_KINDS, (int(g) for g in m.groups())))
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
        r = self.r
        if label in _ONCE:
            if label in self.once:
                raise ParseError(f"more than one report: line {self.number} ({label}) repeats line "
                                 f"{self.once[label]}; split the file and parse each report")
            self.once[label] = self.number
        if label in ("Server Software", "Server Hostname", "Server Port", "Document Path",
                     "Document Length", "SSL/TLS Protocol", "Server Temp Key", "TLS Server Name",
                     "HTML transferred", "Total body sent", "Keep-Alive requests"):
            self.kv[label] = value
        elif label == "Concurrency Level":
            r.connections = _count(value, label)
        elif label == "Time taken for tests":
            r.duration_s = _number(value, label, "seconds")
            self.duration_step = half_digit(value.split()[0], parse_number)
        elif label == "Complete requests":
            r.requests = _count(value, label)
        elif label == "Failed requests":
            self.failed = _count(value, label)
        elif label == "Write errors":
            r.socket_errors["write"] = _count(value, label)
        elif label == "Non-2xx responses":
            r.non_2xx_3xx = _count(value, label)
        elif label == "Total transferred":
            r.bytes_read = _number(value, label, "bytes")
        elif label == "Requests per second":
            r.requests_per_sec = _number(value, label)
            self.rps_line = (value.split()[0], self.number)
        elif label == "Time per request":
            if "across all concurrent requests" not in value and self.time_per_request is None:
                self.time_per_request = _number(value, label, "[ms]")
        elif label == "Transfer rate":
            r.transfer_per_sec_bytes = _tidy(_number(value, label, "[Kbytes/sec]") * 1024)
        else:
            return False
        return True

    def _conn_row(self, name: str, rest: str) -> None:
        tokens = rest.split()
        if self.columns and len(tokens) != self.columns:     # a row cut short: not read, flagged
            self.r.add_problem(Problem("cut", "latency_ms", f"line {self.number}: the Connection Times row "
                                                            f"{name!r} has {len(tokens)} of its {self.columns} "
                                                            "values: it was not read", self.number))
            return
        if len(tokens) not in (3, 5):
            raise ParseError(f"damaged ab report: the Connection Times row {name!r} has "
                             f"{len(tokens)} values instead of 5 (or 3 with ab -S)")
        values = [_number(t, f"{name} row") for t in tokens]
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
        for problem in unread_problems(self.unread) + absurd_values(r, zero_duration=True):
            r.add_problem(problem)
        return r

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
        if self.duration_step is None:
            return
        duration = (r.duration_s, self.duration_step)
        r.requests_per_sec, problem = judge_rate(r.requests, duration, self.rps_line, 2,
                                                 unreadable=self.unread["report"][0][0] if self.unread else None,
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


def _tidy(value: float) -> float:
    return float(f"{value:.12g}") if math.isfinite(value) else value
