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

The dashboard's figures are checked against each other and against the summariser's: its
``sampleCount`` and ``errorCount`` must be the summariser's count and ``Err``, ``errorCount`` no more
than ``sampleCount``, ``errorPct`` (a percentage) ``errorCount`` ÷ ``sampleCount``, and
``meanResTime`` between ``minResTime`` and ``maxResTime``. A dashboard that fails one is set aside
with a problem (its statistics are not this run's, or were damaged), and the summariser's figures
are kept. So is a summariser line whose ``Avg`` is not between its ``Min`` and ``Max``.

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
    count, secs, rate, avg, mn, mx, errors = last.groups()
    line = text.count("\n", 0, last.start()) + 1
    r = WrkReport(tool="jmeter", threads=None, requests=int(count))
    r.duration_s, half = _seconds(secs)
    token = rate.replace(",", ".")
    r.requests_per_sec, problem = judge_rate(r.requests, (r.duration_s, half), (token, line), 1,
                                             label="summary = … /s")
    if problem is not None:
        r.add_problem(problem)
    r.latency_ms = Stats(float(avg), math.nan, float(mx), math.nan)
    if not int(mn) <= int(avg) <= int(mx) and r.requests:
        r.add_problem(Problem("absurd", "latency_ms", f"line {line}: the summary's Min, Avg and Max ({int(mn)}, "
                                                      f"{int(avg)} and {int(mx)} ms) are out of order", line))
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
    found = _error_problems(total, r.requests, r.socket_errors["read"]) + _mean_problems(total, values)
    if found:
        for problem in found:
            r.add_problem(problem)
        return
    r.latency_ms = Stats(values["meanResTime"], math.nan, values["maxResTime"], math.nan)
    for key, pct in _DASHBOARD.items():
        r.percentiles_ms[pct] = values[key]


_SET_ASIDE = "the dashboard's statistics are not used"


def _error_problems(total: dict, samples: int, summary_errors: int) -> list[Problem]:
    """The dashboard's ``errorCount`` and ``errorPct`` against its sample count and the summariser's ``Err``
    (either may be absent from an older dashboard: then it is not checked)."""
    count, pct = total.get("errorCount"), total.get("errorPct")
    if (count is not None and type(count) is not int) or (pct is not None and type(pct) not in (int, float)):
        return [Problem("damaged", "socket_errors", f"the dashboard's errorCount ({count!r}) or errorPct ({pct!r}) "
                                                    f"is not a number: {_SET_ASIDE}")]
    out = []
    if count is not None and not 0 <= count <= samples:
        out.append(Problem("absurd", "socket_errors", f"the dashboard counts {count:,} errors of {samples:,} samples: "
                                                      f"{_SET_ASIDE}"))
        count = None                        # nothing to compare its percentage with
    elif count is not None and count != summary_errors:
        out.append(Problem("inconsistent", "socket_errors", f"the dashboard counts {count:,} errors, the summary "
                                                            f"{summary_errors:,}: {_SET_ASIDE}"))
    if pct is not None and not 0 <= pct <= 100:
        out.append(Problem("absurd", "socket_errors", f"the dashboard's errorPct is {pct:g} %, outside 0 to 100 %: "
                                                      f"{_SET_ASIDE}"))
    elif pct is not None and count is not None and samples and abs(pct - 100 * count / samples) > 0.01:
        out.append(Problem("inconsistent", "socket_errors", f"the dashboard's errorPct ({pct:g} %) is not its "
                                                            f"errorCount ÷ sampleCount ({count:,} ÷ {samples:,}): "
                                                            f"{_SET_ASIDE}"))
    return out


def _mean_problems(total: dict, values: dict) -> list[Problem]:
    """``meanResTime`` between ``minResTime`` (when there) and ``maxResTime``: JMeter computes all three over
    the same samples."""
    low = total.get("minResTime")
    low = float(low) if type(low) in (int, float) and math.isfinite(low) else -math.inf
    mean, high = values["meanResTime"], values["maxResTime"]
    if low - 1e-9 <= mean <= high + 1e-9:
        return []
    what = f"above its maxResTime ({high:g} ms)" if mean > high else f"below its minResTime ({low:g} ms)"
    return [Problem("absurd", "latency_ms", f"the dashboard's meanResTime ({mean:g} ms) is {what}: {_SET_ASIDE}")]


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
