"""The lines of an ApacheBench report, as regular expressions, and its figures as ab prints them
(read by :mod:`~tunepath.parse.ab`).

Every pattern reads one stripped line, anchored, with bounded labels and no unbounded quantifier
next to another that can match the same characters: a line of any length is read in time
proportional to its length (issue 30, finding 9: a 200,000-character ``Server Software:`` value
and a 280 KB line of ``apr_a: `` once made the parser backtrack for minutes). ab's error lines
(``apr_socket_recv: Connection reset by peer (104)``) are found by :func:`apr_error` without a
search that restarts at every ``apr_`` of the line.

ab prints each figure in one C format (ab.c, ``output_results``): counts with ``%d``, the duration
with ``%.3f``, rates and times with ``%.2f``/``%.3f``, the tables in whole milliseconds (``%5.1f``
for the deviation). :func:`figure` and :func:`count` accept those shapes and nothing else (``inf``,
``1e400``, ``1.2.3``, ``.``, 5,000 digits), with a one-line :class:`ParseError` naming the line.
"""

from __future__ import annotations

import re

from tunepath.parse.problems import ParseError, shown
from tunepath.parse.units import UnitError, parse_fixed, parse_int, quoted

__all__ = ["AB_BANNER", "PCT_MAP", "FAILURE_KINDS", "ONCE", "COUNTS", "apr_error", "count", "figure"]

AB_BANNER = "This is ApacheBench"

# ab's percentile rows that have a wrk counterpart (66, 80, 95 and 98 % are read, checked and dropped)
PCT_MAP = {"50": "50", "75": "75", "90": "90", "99": "99", "100": "100"}
FAILURE_KINDS = ("Connect", "Receive", "Length", "Exceptions")
# labels one report prints once: a second one means two reports in one text
ONCE = ("Concurrency Level", "Time taken for tests", "Complete requests", "Requests per second")
# the counts ab prints with %d, and the report field each one feeds (a cut one concerns that field)
COUNTS = {"Concurrency Level": "connections", "Complete requests": "requests", "Failed requests": "socket_errors",
          "Write errors": "socket_errors", "Non-2xx responses": "non_2xx_3xx"}

_A = re.ASCII
RE_KV = re.compile(r"^([A-Za-z][A-Za-z0-9 /\-]{0,40}?):\s*(.*)$", _A)
RE_BANNER = re.compile(r"^(This is ApacheBench, Version|Copyright \d+ Adam Twiss|"
                       r"Licensed to The Apache Software Foundation)", _A)
RE_BENCHMARKING = re.compile(r"^Benchmarking\s+\S+\s+\(be patient\)\.*(done)?$", _A)
RE_PROGRESS = re.compile(r"^(Completed|Finished)\s+\d{1,18}\s+requests$", _A)
RE_FAIL_BREAKDOWN = re.compile(
    r"^\(Connect:\s*(\d{1,18}),\s*Receive:\s*(\d{1,18}),\s*Length:\s*(\d{1,18}),\s*Exceptions:\s*(\d{1,18})\)$", _A)
RE_CONN_HEAD = re.compile(r"^Connection Times \(ms\)$", _A)
RE_CONN_COLS5 = re.compile(r"^min\s+mean\[\+/-sd\]\s+median\s+max$", _A)
RE_CONN_COLS3 = re.compile(r"^min\s+avg\s+max$", _A)
RE_CONN_ROW = re.compile(r"^(Connect|Processing|Waiting|Total):\s+(.*)$", _A)
RE_PCT_HEAD = re.compile(r"^Percentage of the requests served within a certain time \(ms\)$", _A)
RE_PCT_ROW = re.compile(r"^(\d{1,3})%\s+(\S+)(\s+\(longest request\))?$", _A)
RE_RATE_EXTRA = re.compile(r"^\S+\s+kb/s\s+(sent|total)$", _A)
# ab's notes under Connection Times, each two lines long:
#   WARNING: The median and mean for the initial connection time are not within a normal deviation
#           These results are probably not that reliable.
#   ERROR: The median and mean for the waiting time are more than twice the standard
#          deviation apart. These results are NOT reliable.
RE_AB_WARNING = re.compile(r"^(WARNING|ERROR):\s*(The median and mean .*)$", _A)
RE_AB_WARNING_CONT = re.compile(r"^(These results are probably not that reliable\.|"
                                r"deviation apart\. These results are NOT reliable\.)$", _A)
RE_USAGE = re.compile(r"^Usage:\s+ab\b", _A)
RE_APR_START = re.compile(r"\b(apr_\w{1,60}(?:\(\))?):\s*", _A)
RE_AB_ERROR = re.compile(r"^(ab:\s+.*|Test aborted after .*|socket: .*|Invalid .*|SSL .*)$", _A)
RE_COUNT = re.compile(r"[0-9]{1,18}", _A)


def apr_error(line: str) -> str | None:
    """``apr_socket_recv: Connection reset by peer (104)`` from a line that ends with an APR error and its
    code, wherever the error starts (ab prints it after its progress dots); None for any other line."""
    if not line.endswith(")"):
        return None
    head, _, code = line[:-1].rpartition("(")
    if not (code and RE_COUNT.fullmatch(code)):
        return None
    m = RE_APR_START.search(line)       # the first apr_…: of the line, found in one pass
    if m is None or m.end() > len(head):
        return None
    return f"{m.group(1)}: {line[m.end():]}"


def count(value: str, label: str, number: int) -> int:
    """The count ab prints after ``label`` (``%d``)."""
    token = value.split(maxsplit=1)[0] if value.strip() else ""
    try:
        return parse_int(token)
    except UnitError:
        raise ParseError(f"damaged ab report: line {number}: {label!r} is not a count: {shown(value)}") from None


def figure(value: str, label: str, number: int, unit: str | None = None, places: int | None = None) -> float:
    """The first token of ``value`` as ab prints it (``places`` decimals; None: a plain number with at
    most 3), followed by ``unit`` when one is given."""
    tokens = value.split(maxsplit=2)
    if not tokens:
        raise ParseError(f"damaged ab report: line {number}: {label!r} has no value")
    if unit is not None and (len(tokens) < 2 or tokens[1] != unit):
        raise ParseError(f"damaged ab report: line {number}: {label!r} should be a number of {unit}: {shown(value)}")
    try:
        return parse_fixed(tokens[0], places)
    except UnitError:
        how = "a plain number" if places is None else f"{places} decimals" if places else "a whole number"
        raise ParseError(f"damaged ab report: line {number}: {label!r} is {quoted(tokens[0])}, not a figure ab "
                         f"prints ({how}): the report was damaged or edited") from None
