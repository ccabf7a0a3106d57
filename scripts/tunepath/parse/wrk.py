"""Parse the text report of wrk2 and of Debian's wrk.

One function, :func:`parse`, turns stdout of either tool into a :class:`WrkReport`.
It understands every section the tools print: the ``Running …`` header, wrk2's
``Thread calibration`` lines, ``Thread Stats``, wrk2's HdrHistogram blocks
(``Recorded`` and ``-U`` ``Uncorrected``, each with its detailed spectrum and
footer), wrk's four-line ``Latency Distribution``, the request/byte/duration
summary, socket errors, non-2xx/3xx responses, ``Requests/sec`` and
``Transfer/sec``. Summary-only excerpts (as the original learning path published
them), CRLF line ends and trailing output of a Lua script are accepted.

Anything that is no wrk/wrk2 report raises :class:`ParseError` with a sentence a
person can act on.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from tunepath.errors import TunepathError
from tunepath.parse.units import (
    UnitError,
    parse_bytes,
    parse_count,
    parse_number,
    parse_percent,
    parse_time_ms,
    parse_time_s,
)

__all__ = ["ParseError", "Stats", "Histogram", "WrkReport", "parse", "parse_file", "PERCENTILE_KEYS"]

PERCENTILE_KEYS = ("50", "75", "90", "99", "99.9", "99.99", "99.999", "100")

# A run whose measured duration differs from the header's by more than this
# fraction gets a warning (the header is rounded: "1m" for 60 s).
DURATION_TOLERANCE = 0.10


class ParseError(TunepathError, ValueError):
    """The text is not a wrk or wrk2 report (or is too damaged to read)."""


@dataclass
class Stats:
    """One row of ``Thread Stats``: Avg, Stdev, Max, +/- Stdev (percent)."""

    avg: float
    stdev: float
    max: float
    within_stdev_pct: float


@dataclass
class Histogram:
    """A wrk2 HdrHistogram block: footer figures and the detailed spectrum."""

    mean_ms: float | None = None
    stdev_ms: float | None = None
    max_ms: float | None = None
    total_count: int | None = None
    spectrum: list[tuple[float, float, int]] = field(default_factory=list)


@dataclass
class WrkReport:
    """Everything one wrk/wrk2 report says. Times in ms unless named ``_s``."""

    tool: str | None = None
    url: str | None = None
    threads: int | None = None
    connections: int | None = None
    header_duration_s: float | None = None
    calibration: list[dict[str, float]] = field(default_factory=list)
    latency_ms: Stats | None = None
    req_per_sec_per_thread: Stats | None = None
    percentiles_ms: dict[str, float | None] | None = None
    uncorrected_percentiles_ms: dict[str, float | None] | None = None
    histogram: Histogram | None = None
    uncorrected_histogram: Histogram | None = None
    requests: int | None = None
    duration_s: float | None = None
    bytes_read: float | None = None
    requests_per_sec: float | None = None
    transfer_per_sec_bytes: float | None = None
    socket_errors: dict[str, int] = field(
        default_factory=lambda: {"connect": 0, "read": 0, "write": 0, "timeout": 0})
    non_2xx_3xx: int = 0
    warnings: list[str] = field(default_factory=list)

    # -- views -------------------------------------------------------------
    def to_dict(self) -> dict:
        """The ``tunepath parse`` JSON contract (NaN and inf become None)."""
        hist = None
        if self.histogram is not None:
            hist = {
                "mean_ms": self.histogram.mean_ms,
                "stdev_ms": self.histogram.stdev_ms,
                "max_ms": self.histogram.max_ms,
                "total_count": self.histogram.total_count,
                "spectrum": [list(row) for row in self.histogram.spectrum],
            }
        out = {
            "tool": self.tool,
            "url": self.url,
            "threads": self.threads,
            "connections": self.connections,
            "calibration": [dict(c) for c in self.calibration],
            "latency_ms": asdict(self.latency_ms) if self.latency_ms else None,
            "req_per_sec_per_thread": asdict(self.req_per_sec_per_thread) if self.req_per_sec_per_thread else None,
            "percentiles_ms": dict(self.percentiles_ms) if self.percentiles_ms else None,
            "uncorrected_percentiles_ms": dict(self.uncorrected_percentiles_ms) if self.uncorrected_percentiles_ms else None,
            "histogram": hist,
            "requests": self.requests,
            "duration_s": self.duration_s,
            "bytes_read": self.bytes_read,
            "requests_per_sec": self.requests_per_sec,
            "transfer_per_sec_bytes": self.transfer_per_sec_bytes,
            "socket_errors": dict(self.socket_errors),
            "non_2xx_3xx": self.non_2xx_3xx,
            "warnings": list(self.warnings),
        }
        return _finite(out)

    def to_row(self) -> dict:
        """A flat record for one pandas row (NaN kept as NaN, absent as None)."""
        row = {
            "tool": self.tool, "url": self.url, "threads": self.threads,
            "connections": self.connections, "requests": self.requests,
            "duration_s": self.duration_s, "bytes_read": self.bytes_read,
            "requests_per_sec": self.requests_per_sec,
            "transfer_per_sec_bytes": self.transfer_per_sec_bytes,
            "non_2xx_3xx": self.non_2xx_3xx,
            "calibrated": bool(self.calibration),
        }
        for stat, prefix in ((self.latency_ms, "latency"), (self.req_per_sec_per_thread, "req_per_thread")):
            for name in ("avg", "stdev", "max", "within_stdev_pct"):
                key = f"{prefix}_{name}" + ("_ms" if prefix == "latency" and name != "within_stdev_pct" else "")
                row[key] = getattr(stat, name) if stat else None
        for key in PERCENTILE_KEYS:
            row[f"p{key}_ms"] = (self.percentiles_ms or {}).get(key)
        for name, value in self.socket_errors.items():
            row[f"socket_errors_{name}"] = value
        row["socket_errors_total"] = sum(self.socket_errors.values())
        row["histogram_total_count"] = self.histogram.total_count if self.histogram else None
        row["warnings"] = "; ".join(self.warnings)
        return row


def _finite(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


# --- line patterns ---------------------------------------------------------
_TOK = r"(\S+)"
RE_RUNNING = re.compile(r"^Running\s+(\S+)\s+test\s+@\s+(\S+)\s*$")
RE_THREADS = re.compile(r"^(\d+)\s+threads?\s+and\s+(\d+)\s+connections?\s*$")
RE_CALIBRATION = re.compile(
    r"^Thread calibration:\s+mean lat\.:\s*(\S+),\s*rate sampling interval:\s*(\S+)\s*$")
RE_STATS_HEADER = re.compile(r"^Thread Stats\s+Avg\s+Stdev\s+Max\s+\+/-\s+Stdev\s*$")
RE_STATS_ROW = re.compile(rf"^(Latency|Req/Sec)\s+{_TOK}\s+{_TOK}\s+{_TOK}\s+{_TOK}\s*$")
RE_DIST_WRK2 = re.compile(r"^Latency Distribution \(HdrHistogram - (.*)\)\s*$")
RE_DIST_WRK = re.compile(r"^Latency Distribution\s*$")
RE_PCT_ROW = re.compile(r"^(\d+(?:\.\d+)?)%\s+(\S+)\s*$")
RE_SPECTRUM_HEAD = re.compile(r"^Detailed Percentile spectrum:\s*$")
RE_SPECTRUM_COLS = re.compile(r"^Value\s+Percentile\s+TotalCount\s+1/\(1-Percentile\)\s*$")
RE_SPECTRUM_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s*$")
RE_FOOT_MEAN = re.compile(r"^#\[Mean\s*=\s*(\S+),\s*StdDeviation\s*=\s*(\S+)\]\s*$")
RE_FOOT_MAX = re.compile(r"^#\[Max\s*=\s*(\S+),\s*Total count\s*=\s*(\S+)\]\s*$")
RE_FOOT_BUCKETS = re.compile(r"^#\[Buckets\s*=\s*(\S+),\s*SubBuckets\s*=\s*(\S+)\]\s*$")
RE_RULE = re.compile(r"^-{10,}\s*$")
RE_SUMMARY = re.compile(r"^(\d+)\s+requests in\s+(\S+),\s+(\S+)\s+read\s*$")
RE_SOCKET = re.compile(
    r"^Socket errors:\s+connect\s+(\d+),\s+read\s+(\d+),\s+write\s+(\d+),\s+timeout\s+(\d+)\s*$")
RE_NON2XX = re.compile(r"^Non-2xx or 3xx responses:\s+(\d+)\s*$")
RE_RPS = re.compile(r"^Requests/sec:\s+(\S+)\s*$")
RE_TPS = re.compile(r"^Transfer/sec:\s+(\S+)\s*$")
RE_USAGE = re.compile(r"^Usage:\s+wrk\b")


def _pct_key(text: str) -> str:
    value = float(text)
    key = f"{value:.3f}".rstrip("0").rstrip(".")
    return key


def parse_file(path) -> WrkReport:
    """Parse a file; bytes that are not UTF-8 are replaced, not fatal."""
    with open(path, "rb") as fh:
        data = fh.read()
    return parse(data.decode("utf-8", errors="replace"))


def parse(text: str) -> WrkReport:
    """Parse one wrk/wrk2 report. Raises :class:`ParseError` for anything else."""
    if not isinstance(text, str):
        raise ParseError("expected the report as text")
    lines = [ln.strip() for ln in text.splitlines()]
    content = [ln for ln in lines if ln]
    if not content:
        raise ParseError("empty output: the load generator printed nothing "
                         "(an unreachable server makes wrk print only one line on stderr)")
    if any(RE_USAGE.match(ln) for ln in content[:3]):
        raise ParseError("this is wrk's usage text, not a report: the command's arguments were "
                         "rejected (wrk2 also needs -R/--rate); see the command's stderr")
    try:
        return _Parser(lines).run()
    except (UnitError, ValueError, IndexError, OverflowError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"damaged wrk report: {exc}") from None


class _Parser:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.i = 0
        self.r = WrkReport()
        self.unknown = 0
        self.seen_rps = False
        self.seen_summary = False
        self.tool_hints: set[str] = set()

    # the report body is a sequence of sections; each handler consumes its lines
    def run(self) -> WrkReport:
        r = self.r
        while self.i < len(self.lines):
            line = self.lines[self.i]
            self.i += 1
            if not line:
                continue
            if m := RE_RUNNING.match(line):
                r.header_duration_s = _safe(parse_time_s, m.group(1))
                r.url = m.group(2)
            elif m := RE_THREADS.match(line):
                r.threads, r.connections = int(m.group(1)), int(m.group(2))
            elif m := RE_CALIBRATION.match(line):
                r.calibration.append({"mean_latency_ms": parse_time_ms(m.group(1)),
                                      "sampling_interval_ms": parse_time_ms(m.group(2))})
                self.tool_hints.add("wrk2")
            elif RE_STATS_HEADER.match(line):
                pass
            elif m := RE_STATS_ROW.match(line):
                conv = parse_time_ms if m.group(1) == "Latency" else parse_count
                stats = Stats(conv(m.group(2)), conv(m.group(3)), conv(m.group(4)), parse_percent(m.group(5)))
                if m.group(1) == "Latency":
                    r.latency_ms = stats
                else:
                    r.req_per_sec_per_thread = stats
            elif m := RE_DIST_WRK2.match(line):
                self.tool_hints.add("wrk2")
                self._hdr_block(corrected=not m.group(1).startswith("Uncorrected"))
            elif RE_DIST_WRK.match(line):
                self._wrk_distribution()
            elif m := RE_SUMMARY.match(line):
                r.requests = int(m.group(1))
                r.duration_s = parse_time_s(m.group(2))
                r.bytes_read = parse_bytes(m.group(3))
                self.seen_summary = True
            elif m := RE_SOCKET.match(line):
                r.socket_errors = dict(zip(("connect", "read", "write", "timeout"),
                                           (int(g) for g in m.groups())))
            elif m := RE_NON2XX.match(line):
                r.non_2xx_3xx = int(m.group(1))
            elif m := RE_RPS.match(line):
                r.requests_per_sec = parse_number(m.group(1))
                self.seen_rps = True
            elif m := RE_TPS.match(line):
                r.transfer_per_sec_bytes = parse_bytes(m.group(1))
                if self.seen_rps:
                    break  # the report ends here; anything after is script output
            else:
                self.unknown += 1
        return self._finish()

    def _hdr_block(self, corrected: bool) -> None:
        pct: dict[str, float | None] = {k: None for k in PERCENTILE_KEYS}
        hist = Histogram()
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if not line or RE_SPECTRUM_HEAD.match(line) or RE_SPECTRUM_COLS.match(line):
                self.i += 1
                continue
            if m := RE_PCT_ROW.match(line):
                pct[_pct_key(m.group(1))] = parse_time_ms(m.group(2))
            elif m := RE_FOOT_MEAN.match(line):
                hist.mean_ms, hist.stdev_ms = parse_number(m.group(1)), parse_number(m.group(2))
            elif m := RE_FOOT_MAX.match(line):
                hist.max_ms = parse_number(m.group(1))
                hist.total_count = int(parse_number(m.group(2)))
            elif RE_FOOT_BUCKETS.match(line):
                pass
            elif RE_RULE.match(line):
                self.i += 1
                break
            elif m := RE_SPECTRUM_ROW.match(line):
                hist.spectrum.append((parse_number(m.group(1)), parse_number(m.group(2)), int(m.group(3))))
            else:
                break  # section ended without its rule (truncated output)
            self.i += 1
        if corrected:
            self.r.percentiles_ms, self.r.histogram = pct, hist
        else:
            self.r.uncorrected_percentiles_ms, self.r.uncorrected_histogram = pct, hist

    def _wrk_distribution(self) -> None:
        pct: dict[str, float | None] = {k: None for k in PERCENTILE_KEYS}
        while self.i < len(self.lines) and (m := RE_PCT_ROW.match(self.lines[self.i])):
            pct[_pct_key(m.group(1))] = parse_time_ms(m.group(2))
            if "." not in m.group(1):
                self.tool_hints.add("wrk")
            self.i += 1
        self.r.percentiles_ms = pct

    def _finish(self) -> WrkReport:
        r = self.r
        if not (self.seen_rps or self.seen_summary):
            raise ParseError("no wrk report found: neither an 'N requests in T' line nor "
                             "'Requests/sec:' is present")
        if "wrk2" in self.tool_hints:
            r.tool = "wrk2"
        elif "wrk" in self.tool_hints:
            r.tool = "wrk"
        elif (r.req_per_sec_per_thread is not None and math.isnan(r.req_per_sec_per_thread.avg)
              and (r.requests or 0) > 0):
            # wrk2 prints no per-thread rate before its calibration finished; wrk always does
            r.tool = "wrk2"
        if r.requests == 0:
            # wrk prints zeros for empty statistics: with no response they are undefined
            nan = math.nan
            if r.latency_ms is not None:
                r.latency_ms = Stats(nan, nan, nan, nan)
            for name in ("percentiles_ms", "uncorrected_percentiles_ms"):
                if getattr(r, name) is not None:
                    setattr(r, name, {k: None for k in PERCENTILE_KEYS})
        self._warn()
        return r

    def _warn(self) -> None:
        r, w = self.r, self.r.warnings
        if r.requests == 0:
            w.append("no responses at all: every latency figure is undefined")
        if r.req_per_sec_per_thread is not None and math.isnan(r.req_per_sec_per_thread.avg) and r.requests:
            w.append("Req/Sec is NaN: wrk2 reports no per-thread rate for a run shorter than its "
                     "calibration (about 10 s)")
        if r.latency_ms is not None and math.isnan(r.latency_ms.avg) and r.requests:
            w.append("average latency is NaN although responses were counted")
        if r.histogram and r.histogram.total_count is not None and r.requests:
            if r.histogram.total_count < r.requests:
                w.append(f"the latency histogram counts {r.histogram.total_count} of {r.requests} "
                         "requests (wrk2 resets its histograms after calibration)")
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
        if self.seen_summary and not self.seen_rps:
            w.append("the report is truncated: no 'Requests/sec' line")
        if self.unknown:
            w.append(f"{self.unknown} unrecognised line(s) ignored")


def _safe(fn, token):
    try:
        return fn(token)
    except UnitError:
        return None
