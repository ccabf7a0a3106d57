"""Parse Apache JMeter's non-GUI summary (the ``summary = …`` line of its summariser).

    summary =  99979 in  71.0s = 1408.8/s Avg:    38 Min:     0 Max: 25445 Err:     0 (0.00%)

JMeter reports times in milliseconds. It gives no percentiles here: those stay None.
"""

from __future__ import annotations

import math
import re

from tunepath.parse.wrk import PERCENTILE_KEYS, ParseError, Stats, WrkReport

__all__ = ["parse_jmeter", "JMETER_ERROR", "JMETER_SUMMARY"]

JMETER_SUMMARY = "summary ="   # what tells a JMeter report from the others

_SUMMARY = re.compile(r"^summary\s*=\s*(\d+)\s+in\s+([\d.:]+)s?\s*=\s*([\d.]+)/s\s+Avg:\s*(\d+)\s+Min:\s*(\d+)"
                      r"\s+Max:\s*(\d+)\s+Err:\s*(\d+)", re.M)
JMETER_ERROR = re.compile(r"^(Error in NonGUIDriver.*|.*Exception.*)$", re.M)


def _seconds(text: str) -> float:
    if ":" in text:                      # newer JMeter prints 00:01:11
        h, m, s = (float(x) for x in text.split(":"))
        return h * 3600 + m * 60 + s
    return float(text)


def parse_jmeter(text: str) -> WrkReport:
    found = _SUMMARY.findall(text or "")
    if not found:
        err = JMETER_ERROR.search(text or "")
        raise ParseError("no JMeter summary line" + (f": JMeter said {err.group(1).strip()!r}" if err else
                                                     " (is the summariser enabled in jmeter.properties?)"))
    count, secs, rate, avg, mn, mx, errors = found[-1]        # the last "summary =" is the whole run
    r = WrkReport(tool="jmeter", threads=None, requests=int(count), duration_s=_seconds(secs),
                  requests_per_sec=float(rate))
    r.latency_ms = Stats(float(avg), math.nan, float(mx), math.nan)
    r.percentiles_ms = {k: None for k in PERCENTILE_KEYS}
    r.percentiles_ms["100"] = float(mx)
    r.socket_errors = {"connect": 0, "read": int(errors), "write": 0, "timeout": 0}
    if int(errors):
        r.warnings.append(f"{errors} samples failed (JMeter counts errors and non-2xx/3xx together)")
    return r
