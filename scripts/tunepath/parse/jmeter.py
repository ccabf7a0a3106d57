"""Parse Apache JMeter's non-GUI output: the summariser's total line, and the dashboard's statistics.

JMeter 5.x prints, on stdout, a ``summary +`` line per interval and ``summary =`` lines with the
running total; the last ``summary =`` is the whole run::

    summary = 104238 in 00:00:10 = 10351.3/s Avg:     0 Min:     0 Max:    35 Err:     0 (0.00%)

The summariser rounds the elapsed time to whole seconds and its mean to whole milliseconds
(JMeter 2.x printed ``71.0s``; both forms are read). Its rate, with one decimal, is computed from
the exact elapsed time, so it is checked against requests ÷ (printed seconds ± 0.5).

The load-generators step also writes a CSV results file (``-l``) and JMeter's dashboard (``-e -o``)
with an unbounded percentile window (``-Jjmeter.reportgenerator.statistic_window=-1``; the default
keeps only the last 20,000 samples) and prints the dashboard's ``statistics.json`` after the
summary. When present, its ``Total`` entry gives the mean to a fraction of a millisecond, the median
and JMeter's 90th and 99th percentiles (``pct1ResTime`` and ``pct3ResTime`` with JMeter's default
``aggregate_rpt_pct1=90`` and ``aggregate_rpt_pct3=99``; the 95th has no place in the report), all
computed over every sample, whose elapsed times JMeter records in whole milliseconds. Without it,
the mean is the summariser's whole-millisecond ``Avg`` and only the 100th percentile (``Max``) is
known.

JMeter counts failed samples and responses with an error status together (``Err``): they go to
``socket_errors["read"]``.

A figure JMeter never prints (a count of more than 18 digits, ``1.2.3`` seconds, dashboard
statistics nested thousands deep or holding ``NaN``) never ends in a traceback: the summary is
refused in one line, the dashboard set aside with a problem.
"""

from __future__ import annotations

import json
import math
import re

from tunepath.parse.problems import ParseError, Problem, absurd_values, damaged, judge_rate, unread_problems
from tunepath.parse.record import PERCENTILE_KEYS, Stats, WrkReport
from tunepath.parse.units import quoted

__all__ = ["parse_jmeter", "JMETER_ERROR", "JMETER_SUMMARY"]

JMETER_SUMMARY = "summary ="   # what tells a JMeter report from the others

_SUMMARY = re.compile(r"^summary[ \t]*=[ \t]*(\d{1,18})[ \t]+in[ \t]+([\d.:]{1,20})s?[ \t]*=[ \t]*([\d.,]{1,30}|\*{1,30})/s"
                      r"[ \t]+Avg:[ \t]*(\d{1,18})[ \t]+Min:[ \t]*(\d{1,18})[ \t]+Max:[ \t]*(\d{1,18})[ \t]+"
                      r"Err:[ \t]*(\d{1,18})(?![\w.])", re.M)
JMETER_ERROR = re.compile(r"^(Error in NonGUIDriver.*|.*Exception.*)$", re.M)
# the dashboard's percentiles: statistics.json key → report percentile (JMeter's defaults)
_DASHBOARD = {"medianResTime": "50", "pct1ResTime": "90", "pct3ResTime": "99", "maxResTime": "100"}


def _seconds(text: str) -> tuple[float, float]:
    """The duration and half its last printed digit: ``00:01:11`` (rounded seconds) or ``71.0``."""
    try:
        if ":" in text:
            h, m, s = (float(x) for x in text.split(":"))
            return h * 3600 + m * 60 + s, 0.5
        places = len(text.split(".")[1]) if "." in text else 0
        return float(text), 0.5 * 10.0 ** -places
    except ValueError:
        raise ParseError(f"damaged JMeter summary: the elapsed time {text!r} is neither hh:mm:ss nor "
                         "seconds") from None


def parse_jmeter(text: str) -> WrkReport:
    """Parse JMeter's output (and the dashboard statistics printed after it, if any)."""
    try:
        return _parse(text or "")
    except (ValueError, OverflowError, IndexError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"damaged JMeter summary: {exc}") from None


def _parse(text: str) -> WrkReport:
    found = list(_SUMMARY.finditer(text))
    if not found:
        err = JMETER_ERROR.search(text)
        raise ParseError("no JMeter summary line" + (f": JMeter said {err.group(1).strip()!r}" if err else
                                                     " (is the summariser enabled in jmeter.properties?)"))
    last = found[-1]                                    # the last "summary =" is the whole run
    count, secs, rate, avg, _, mx, errors = last.groups()
    line = text.count("\n", 0, last.start()) + 1
    r = WrkReport(tool="jmeter", threads=None, requests=int(count))
    r.duration_s, half = _seconds(secs)
    token = rate.replace(",", ".")
    r.requests_per_sec, problem = judge_rate(r.requests, (r.duration_s, half), (token, line), 1,
                                             label="summary = … /s")
    if problem is not None:
        r.add_problem(problem)
    r.latency_ms = Stats(float(avg), math.nan, float(mx), math.nan)
    r.percentiles_ms = {k: None for k in PERCENTILE_KEYS}
    r.percentiles_ms["100"] = float(mx)
    r.socket_errors = {"connect": 0, "read": int(errors), "write": 0, "timeout": 0}
    _dashboard(r, text[last.end():])
    if int(errors):
        r.warnings.append(f"{errors} samples failed (JMeter counts errors and non-2xx/3xx together)")
    unread = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if damaged(ln)]
    for p in unread_problems({"report": unread} if unread else {}) + absurd_values(r):
        r.add_problem(p)
    return r


def _dashboard(r: WrkReport, rest: str) -> None:
    """Mean and percentiles from the dashboard's statistics.json printed after the summary."""
    start = rest.find("{")
    if start < 0:
        r.warnings.append("no dashboard statistics after the summary: the mean is JMeter's whole-millisecond "
                          "Avg and no percentile below the maximum is known")
        return
    try:
        data, _ = json.JSONDecoder(parse_constant=_refuse, parse_float=_float, parse_int=_int).raw_decode(rest[start:])
        total = data["Total"]
        values = {k: float(total[k]) for k in ("sampleCount", "meanResTime", *_DASHBOARD)}
        if not all(math.isfinite(v) for v in values.values()):
            raise ValueError("a statistic is not finite")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        r.add_problem(Problem("cut", "percentiles_ms", f"the dashboard statistics after the summary could not be "
                                                       f"read ({exc}): the summariser's figures are kept"))
        return
    if int(values["sampleCount"]) != r.requests:
        r.add_problem(Problem("inconsistent", "percentiles_ms",
                              f"the dashboard counts {int(values['sampleCount']):,} samples, the summary "
                              f"{r.requests:,}: its statistics are not this run's and are not used"))
        return
    r.latency_ms = Stats(values["meanResTime"], math.nan, values["maxResTime"], math.nan)
    for key, pct in _DASHBOARD.items():
        r.percentiles_ms[pct] = values[key]


def _refuse(token: str):
    raise ValueError(f"{token} is no JSON number")


def _float(token: str) -> float:
    """A JSON number as JMeter's Jackson writes one: finite, and not a non-zero figure too small for a float."""
    value = float(token)
    if not math.isfinite(value) or (value == 0 and re.search(r"[1-9]", re.split(r"[eE]", token)[0])):
        raise ValueError(f"{quoted(token)} is no number JMeter prints")
    return value


def _int(token: str) -> int:
    if len(token.lstrip("-")) > 18:
        raise ValueError(f"{quoted(token)} has more digits than any count")
    return int(token)
