"""One entry point for every load generator's report: wrk2, wrk, ab, JMeter."""

from __future__ import annotations

from pathlib import Path

from tunepath.parse.wrk import WrkReport, parse

__all__ = ["parse_report", "parse_report_file"]


def parse_report(text: str, tool: str | None = None) -> WrkReport:
    """Parse ``text`` as the report of ``tool`` (recognised from the text when not given)."""
    tool = tool.lower() if tool else None
    if tool == "ab" or (tool is None and "This is ApacheBench" in text):
        from tunepath.parse.ab import parse_ab

        return parse_ab(text)
    if tool == "jmeter" or (tool is None and "summary =" in text):
        from tunepath.parse.jmeter import parse_jmeter

        return parse_jmeter(text)
    report = parse(text)
    if tool in ("wrk", "wrk2") and report.tool is None:
        report.tool = tool
    return report


def parse_report_file(path, tool: str | None = None) -> WrkReport:
    return parse_report(Path(path).read_bytes().decode("utf-8", errors="replace"), tool)
