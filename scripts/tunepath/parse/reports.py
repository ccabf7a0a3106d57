"""One entry point for every load generator's report: wrk2, wrk, ab, JMeter.

This is the only module that knows every parser: it imports :mod:`~tunepath.parse.wrk`,
:mod:`~tunepath.parse.ab` and :mod:`~tunepath.parse.jmeter`, and none of them imports it.
The tool is the one given, else recognised from the text: ab's banner, JMeter's
``summary =`` line, wrk/wrk2 otherwise.
"""

from __future__ import annotations

from pathlib import Path

from tunepath.parse.ab import AB_BANNER, parse_ab
from tunepath.parse.jmeter import JMETER_SUMMARY, parse_jmeter
from tunepath.parse.wrk import ParseError, WrkReport, parse

__all__ = ["parse_report", "parse_report_file", "recognise_tool", "ParseError", "WrkReport"]


def recognise_tool(text: str) -> str | None:
    """``"ab"`` or ``"jmeter"`` when the text says so; None for wrk/wrk2 (told apart by the parser)."""
    if not isinstance(text, str):
        return None   # the parser then says it expected text
    if AB_BANNER in text:
        return "ab"
    if JMETER_SUMMARY in text:
        return "jmeter"
    return None


def parse_report(text: str, tool: str | None = None) -> WrkReport:
    """Parse ``text`` as the report of ``tool`` (recognised from the text when not given)."""
    tool = tool.lower() if tool else recognise_tool(text)
    if tool == "ab":
        return parse_ab(text)
    if tool == "jmeter":
        return parse_jmeter(text)
    report = parse(text)
    if tool in ("wrk", "wrk2") and report.tool is None:
        report.tool = tool
    return report


def parse_report_file(path, tool: str | None = None) -> WrkReport:
    """Parse a file of any tool's report; bytes that are not UTF-8 are replaced, not fatal."""
    return parse_report(Path(path).read_bytes().decode("utf-8", errors="replace"), tool)
