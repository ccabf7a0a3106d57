"""One entry point for every load generator's report: wrk2, wrk, ab, siege, JMeter.

This is the only module that knows every parser: it imports :mod:`~tunepath.parse.wrk`,
:mod:`~tunepath.parse.ab`, :mod:`~tunepath.parse.siege` and :mod:`~tunepath.parse.jmeter`, and
none of them imports it. The tool is the one given, else recognised from the text: ab's banner,
JMeter's ``summary =`` line, siege's summary (or its ``-j`` JSON), wrk/wrk2 otherwise. Files are read by :mod:`~tunepath.parse.source`
(size limit, regular files only), and every :class:`ParseError` of a file names the file.
"""

from __future__ import annotations

import re

from tunepath.parse.ab import AB_BANNER, parse_ab
from tunepath.parse.jmeter import JMETER_SUMMARY, parse_jmeter
from tunepath.parse.siege import looks_like_siege, parse_siege
from tunepath.parse.source import (
    MAX_REPORT_BYTES,
    ReportReadError,
    display_name,
    read_report_file,
    read_report_stream,
)
from tunepath.parse.wrk import ParseError, WrkReport, parse

__all__ = ["parse_report", "parse_report_file", "parse_report_stream", "recognise_tool", "ParseError",
           "ReportReadError", "WrkReport", "MAX_REPORT_BYTES"]

# a line only a wrk/wrk2 report prints: a report of another tool must not hold one
_WRK_LINE = re.compile(r"^[ \t]*(?:Requests/sec:.*|\d+ requests in \S+, \S+ read)[ \t]*$", re.M)


def recognise_tool(text: str) -> str | None:
    """``"ab"``, ``"jmeter"`` or ``"siege"`` when the text says so; None for wrk/wrk2 (told apart by the
    parser)."""
    if not isinstance(text, str):
        return None   # the parser then says it expected text
    if AB_BANNER in text:
        return "ab"
    if JMETER_SUMMARY in text:
        return "jmeter"
    if looks_like_siege(text):
        return "siege"
    return None


def parse_report(text: str, tool: str | None = None) -> WrkReport:
    """Parse ``text`` as the report of ``tool`` (recognised from the text when not given)."""
    tool = tool.lower() if tool else recognise_tool(text)
    if tool in ("ab", "jmeter", "siege") and isinstance(text, str) and (m := _WRK_LINE.search(text)):
        raise ParseError(f"more than one report: a {tool} report and a wrk report ({m.group(0).strip()!r}) "
                         "in one text; split the file and parse each report")
    if tool == "ab":
        return parse_ab(text)
    if tool == "jmeter":
        return parse_jmeter(text)
    if tool == "siege":
        return parse_siege(text)
    report = parse(text)
    if tool in ("wrk", "wrk2") and report.tool is None:
        report.tool = tool
    elif tool in ("wrk", "wrk2") and report.tool != tool:
        report.warnings.append(f"the report has the shape only {report.tool}'s reports have, "
                               f"although it was recorded as {tool}'s")
    return report


def parse_report_file(path, tool: str | None = None) -> WrkReport:
    """Parse a file of any tool's report; bytes that are not UTF-8 are named in a warning, not fatal.
    Every :class:`ParseError` names the file (a :class:`ReportReadError` when it could not be read)."""
    text = read_report_file(path)
    try:
        return parse_report(text, tool)
    except ParseError as exc:
        raise ParseError(f"{display_name(path)}: {exc}") from None


def parse_report_stream(stream, tool: str | None = None, name: str = "stdin") -> WrkReport:
    """Parse a report read from a binary stream (at most the size limit plus one byte is read)."""
    text = read_report_stream(stream, name)
    try:
        return parse_report(text, tool)
    except ParseError as exc:
        raise ParseError(f"{name}: {exc}") from None
