"""One entry point for every load generator's report: wrk2, wrk, ab, siege, JMeter.

This is the only module that knows every parser: it imports :mod:`~tunepath.parse.wrk`,
:mod:`~tunepath.parse.ab`, :mod:`~tunepath.parse.siege` and :mod:`~tunepath.parse.jmeter`, and
none of them imports it. The tool is the one given, else recognised from the text: ab's banner,
JMeter's ``summary =`` line, siege's summary (or its ``-j`` JSON), wrk/wrk2 otherwise. Files are read by :mod:`~tunepath.parse.source`
(size limit, regular files only), and every :class:`ParseError` of a file names the file.

A text that holds the reports of two different tools is refused before any parser reads it: each
tool's report is recognised by the lines only it prints (:data:`REPORT_STARTS`), wherever they are,
so neither report is read alone. Two reports of one tool are refused by that tool's parser (a line
a report prints once, printed twice).
"""

from __future__ import annotations

import re

from tunepath.parse.ab import AB_BANNER, parse_ab
from tunepath.parse.jmeter import JMETER_SUMMARY, parse_jmeter
from tunepath.parse.problems import shown
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
           "ReportReadError", "WrkReport", "MAX_REPORT_BYTES", "REPORT_STARTS"]

# the lines only one tool's report prints (its banner, or a summary line no other tool prints), by tool;
# each pattern is a literal or anchored at a line start, with bounded runs and no two runs of blanks side by
# side: a search costs time in proportion to the text. ab's banner is found anywhere, as recognise_tool does.
_LEAD = r"^[ \t]{0,64}"
REPORT_STARTS = {
    "ab": re.compile(rf"This is ApacheBench|{_LEAD}Complete requests:", re.M),
    "jmeter": re.compile(rf"{_LEAD}summary[ \t]*=[ \t]*\d", re.M),
    "siege": re.compile(rf"{_LEAD}(?:\*\* SIEGE |Transaction rate:|(?:\{{[ \t]*)?\"transaction_rate\"[ \t]*:)", re.M),
    "wrk": re.compile(rf"{_LEAD}(?:Running \S{{1,40}} test @|Requests/sec:|\d{{1,18}} requests in \S{{1,40}}, "
                      r"\S{1,40} read)", re.M),
}


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


def _refuse_two_tools(text: str) -> None:
    """Raise :class:`ParseError` when the text holds the reports of two different tools."""
    found = sorted((m.start(), name) for name, pattern in REPORT_STARTS.items() if (m := pattern.search(text)))
    if len(found) < 2:
        return
    first, second = (_where(text, at, name) for at, name in found[:2])
    raise ParseError(f"more than one report: {first} and {second} in one text; split the file and parse each report")


def _where(text: str, at: int, tool: str) -> str:
    """``an ab report (line 1 'This is ApacheBench, …')``: the tool, and the line its report was recognised by."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start:end if end >= 0 else len(text)].strip()
    return f"{'an' if tool == 'ab' else 'a'} {tool} report (line {text.count(chr(10), 0, at) + 1} {shown(line, 40)})"


def parse_report(text: str, tool: str | None = None) -> WrkReport:
    """Parse ``text`` as the report of ``tool`` (recognised from the text when not given)."""
    tool = tool.lower() if tool else recognise_tool(text)
    if isinstance(text, str):
        _refuse_two_tools(text)
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
