"""The lines of a wrk/wrk2 report, as regular expressions (read by :mod:`~tunepath.parse.wrk`).

Also which lines a report prints only once (:data:`REPORT_LINES`: seeing one again means a
second report in the same text) and which field a line that could not be read would have
filled (:func:`field_of`).

Every pattern is anchored at both ends of one stripped line, reads tokens (runs of non-space) separated by
whitespace and counts of at most 18 digits, and has no nested or adjacent unbounded quantifiers: a
line of any length is read in time proportional to its length (issue 30, finding 9).
:data:`RE_KNOWN` is the first word of every line the parser reads, so that a line of anything else
(a Lua script's output, junk) costs one match, not one per pattern (finding 10).
"""

from __future__ import annotations

import re

_TOK = r"(\S+)"
RE_RUNNING = re.compile(r"^Running\s+(\S+)\s+test\s+@\s+(\S+)\s*$")
RE_THREADS = re.compile(r"^(\d{1,18})\s+threads?\s+and\s+(\d{1,18})\s+connections?\s*$")
# the project's wrk2 with -W (its patch, fix 6): what follows counts only the window after the warm-up
RE_WARMUP = re.compile(r"^Warm-up:\s+(\S+)\s+at the offered rate, not counted\s*$")
RE_CALIBRATION = re.compile(
    r"^Thread calibration:\s+mean lat\.:\s*(\S+),\s*rate sampling interval:\s*(\S+)\s*$")
RE_STATS_HEADER = re.compile(r"^Thread Stats\s+Avg\s+Stdev\s+Max\s+\+/-\s+Stdev\s*$")
RE_STATS_ROW = re.compile(rf"^(Latency|Req/Sec)\s+{_TOK}\s+{_TOK}\s+{_TOK}\s+{_TOK}\s*$")
RE_DIST_WRK2 = re.compile(r"^Latency Distribution \(HdrHistogram - (.*)\)\s*$")
RE_DIST_WRK = re.compile(r"^Latency Distribution\s*$")
RE_PCT_ROW = re.compile(r"^(\d{1,3}(?:\.\d{1,6})?)%\s+(\S+)\s*$")
RE_SPECTRUM_HEAD = re.compile(r"^Detailed Percentile spectrum:\s*$")
RE_SPECTRUM_COLS = re.compile(r"^Value\s+Percentile\s+TotalCount\s+1/\(1-Percentile\)\s*$")
RE_SPECTRUM_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d{1,18})\s+(\S+)\s*$")
RE_FOOT_MEAN = re.compile(r"^#\[Mean\s*=\s*(\S+),\s*StdDeviation\s*=\s*(\S+)\]\s*$")
RE_FOOT_MAX = re.compile(r"^#\[Max\s*=\s*(\S+),\s*Total count\s*=\s*(\S+)\]\s*$")
RE_FOOT_BUCKETS = re.compile(r"^#\[Buckets\s*=\s*(\S+),\s*SubBuckets\s*=\s*(\S+)\]\s*$")
RE_RULE = re.compile(r"^-{10,}\s*$")
RE_SUMMARY = re.compile(r"^(\d{1,18})\s+requests in\s+(\S+),\s+(\S+)\s+read\s*$")
RE_SOCKET = re.compile(
    r"^Socket errors:\s+connect\s+(\d{1,18}),\s+read\s+(\d{1,18}),\s+write\s+(\d{1,18}),\s+timeout\s+(\d{1,18})\s*$")
RE_NON2XX = re.compile(r"^Non-2xx or 3xx responses:\s+(\d{1,18})\s*$")
RE_RPS = re.compile(r"^Requests/sec:\s+(\S+)\s*$")
RE_TPS = re.compile(r"^Transfer/sec:\s+(\S+)\s*$")
RE_USAGE = re.compile(r"^Usage:\s+wrk\b")
# how every line the parser reads begins (a digit: threads, a percentile row, the request count)
RE_KNOWN = re.compile(r"(?:Running\s|Warm-up:|Thread\s|Latency|Req/Sec\s|Socket errors:|Non-2xx|Requests/sec:|"
                      r"Transfer/sec:|This is ApacheBench|summary|[0-9])")

# another tool's report (ab's banner, JMeter's summary line)
RE_OTHER_TOOL = re.compile(r"^(This is ApacheBench|summary\s*=)")

# lines a report prints once: seeing one again (or another tool's report) means a second report
REPORT_LINES = (RE_RUNNING, RE_THREADS, RE_WARMUP, RE_STATS_HEADER, RE_STATS_ROW, RE_DIST_WRK2, RE_DIST_WRK,
                RE_SUMMARY, RE_SOCKET, RE_NON2XX, RE_RPS, RE_TPS, RE_OTHER_TOOL)
# which field a line that could not be read would have filled (first match wins)
_FIELD_HINTS = (("Warm-up", "warmup_s"), ("Requests/sec", "requests_per_sec"), ("requests in", "requests"),
                ("Transfer/sec", "transfer_per_sec_bytes"), ("Socket errors", "socket_errors"),
                ("Non-2xx", "non_2xx_3xx"), ("Uncorrected", "uncorrected_percentiles_ms"),
                ("Distribution", "percentiles_ms"), ("Req/Sec", "req_per_sec_per_thread"),
                ("Latency", "latency_ms"), ("calibration", "calibration"), ("%", "percentiles_ms"))


def field_of(line: str) -> str:
    """The WrkReport field a line would have filled; "report" when it names none."""
    return next((name for key, name in _FIELD_HINTS if key in line), "report")
