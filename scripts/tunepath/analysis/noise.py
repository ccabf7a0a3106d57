"""Noise flags: what may have disturbed a measurement, from what the run recorded.

Each flag names the figure it concerns (``field``: the display field a page shows it
beside), a short ``code`` and a sentence for readers. The checks:

- ``steal``: CPU steal time on a host above ``Thresholds.steal_pct`` (a noisy neighbour
  on a shared or virtual machine took the CPUs);
- ``foreign-load``: busy CPU time on a host that neither Tomcat nor the load generator
  accounts for, above ``Thresholds.foreign_pct`` of all its CPUs;
- ``client-saturated``: the load generator used nearly all the CPU its threads can use:
  the client, not the server, may have set the pace;
- ``rate-short``: wrk2 served less than the offered rate (the server is past capacity);
- ``calibration``: wrk2's calibration did not complete (too short a run);
- ``duration``: the measured duration is far from the requested one;
- ``socket-errors`` and ``non-2xx``: failed requests.

CPU figures come from ``/proc/stat`` sampled before and after the measurement on every
host (``cpu_utilisation`` in the run record), the Tomcat process's own CPU time and the
load generator's child CPU time.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from tunepath.errors import TunepathError
from tunepath.model.context import parse_cpu_list

__all__ = ["Thresholds", "THRESHOLDS", "flags_for", "requested_duration"]


@dataclass(frozen=True)
class Thresholds:
    steal_pct: float = 5.0             # % of all CPUs' time
    foreign_pct: float = 10.0          # % of all CPUs' time used by neither Tomcat nor the client
    client_saturation_pct: float = 90.0   # % of the CPU the load generator's threads can use
    rate_shortfall_pct: float = 5.0    # achieved below (100 − this) % of the offered rate
    duration_tolerance_pct: float = 10.0

    def to_dict(self) -> dict:
        return asdict(self)


THRESHOLDS = Thresholds()
_DURATION = re.compile(r"(?:^|\s)-d\s*(\d+(?:\.\d+)?)(s|m|h)?\b")
_AB_DURATION = re.compile(r"(?:^|\s)-t\s+(\d+)\b")


def requested_duration(command: str, tool: str | None) -> float | None:
    """The duration a load command asked for, in seconds (wrk/wrk2 ``-d``, ab ``-t``)."""
    if tool == "ab":
        m = _AB_DURATION.search(command or "")
        return float(m.group(1)) if m else None
    if tool == "jmeter":
        m = re.search(r"-Jduration=(\d+)", command or "")
        return float(m.group(1)) if m else None
    m = _DURATION.search(command or "")
    if not m:
        return None
    return float(m.group(1)) * {None: 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _count_cpus(cpus_online: str | None, fallback) -> int | None:
    """How many CPUs were online (``"0-1"`` → 2), else ``fallback``."""
    try:
        n = len(parse_cpu_list(cpus_online)) if cpus_online else 0
    except TunepathError:
        n = 0
    return n or (fallback if isinstance(fallback, int) and fallback > 0 else None)


def _flag(code: str, field: str, text: str, host: str | None = None, severity: str = "warning") -> dict:
    return {"code": code, "field": field, "text": text, "host": host, "severity": severity}


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def flags_for(report, entry: dict, *, tool: str | None, command: str, offered_rate: float | None,
              server_cpus: int | None, client_cpus: int | None, same_machine: bool,
              proxied: bool = False, thresholds: Thresholds = THRESHOLDS) -> list[dict]:
    """The noise flags of one measurement.

    ``report`` is the parsed load-generator report (``WrkReport``), ``entry`` the
    measurement's run-record entry (CPU utilisation, Tomcat and client CPU seconds).
    ``proxied``: a proxy on the server took part (its CPU time is not separated)."""
    t = thresholds
    out: list[dict] = []
    util = entry.get("cpu_utilisation") or {}
    window = entry.get("window_s") or report.duration_s
    tomcat_s, client_s = entry.get("tomcat_cpu_s"), entry.get("client_cpu_s")
    server_cpus = _count_cpus(entry.get("cpus_online"), server_cpus)

    for host, u in util.items():
        if not isinstance(u, dict):
            continue
        steal = u.get("steal")
        if _finite(steal) and steal > t.steal_pct:
            out.append(_flag("steal", "requests_per_sec",
                             f"CPU steal {steal:.1f} % on the {host} during the measurement (threshold "
                             f"{t.steal_pct:g} %): a neighbour on the same physical machine took CPU time",
                             host))
        # busy CPU time on this host that neither Tomcat nor the load generator accounts for
        cpus = server_cpus if host == "server" else client_cpus
        busy = u.get("busy")
        if _finite(busy) and _finite(steal):
            busy = busy - steal           # stolen time is flagged above, not as other load
        if _finite(busy) and _finite(window) and window > 0 and cpus:
            own = 0.0
            if host == "server" and _finite(tomcat_s):
                own += tomcat_s
            parts = entry.get("parts") or []
            if host.startswith("client-") and parts:      # several clients: this host's own share
                index = int(host.split("-")[1]) - 1
                share = parts[index].get("client_cpu_s") if index < len(parts) else None
                own += share if _finite(share) else 0.0
            elif (host in ("client", "client-1") or (host == "server" and same_machine)) and _finite(client_s):
                own += client_s             # only the hosts that drove the load ran the load generator
            if host == "server" and not _finite(tomcat_s):
                continue                     # nothing to subtract: no estimate
            foreign = max(0.0, busy / 100.0 * cpus * window - own) / (cpus * window) * 100.0
            if foreign > t.foreign_pct:
                why = ("httpd, the proxy under test, is counted here: its CPU time is not separated"
                       if proxied and host == "server" else
                       "other processes, or kernel threads such as ksoftirqd doing network work, competed")
                out.append(_flag("foreign-load", "requests_per_sec",
                                 f"{foreign:.0f} % of the {host}'s CPU time was busy outside the Tomcat and "
                                 f"load-generator processes (threshold {t.foreign_pct:g} %): {why}", host,
                                 severity="info" if proxied and host == "server" else "warning"))

    threads = 1 if tool == "ab" else report.threads
    parts = entry.get("parts") or []
    if len(parts) > 1:          # several clients: judge the busiest one, not their sum
        shares = [p.get("client_cpu_s") for p in parts if _finite(p.get("client_cpu_s"))]
        client_s = max(shares) if shares else None
    if _finite(client_s) and _finite(window) and window > 0:
        usable = min(x for x in (threads, client_cpus) if isinstance(x, int) and x > 0) \
            if any(isinstance(x, int) and x > 0 for x in (threads, client_cpus)) else None
        if usable:
            used = client_s / (window * usable) * 100.0
            if used >= t.client_saturation_pct:
                out.append(_flag("client-saturated", "requests_per_sec",
                                 f"the load generator used {used:.0f} % of the {usable} CPU(s) its threads can "
                                 f"use (threshold {t.client_saturation_pct:g} %): the client may have set the "
                                 "pace, not the server", "client"))

    rps = report.requests_per_sec
    if offered_rate and _finite(rps) and rps < offered_rate * (1 - t.rate_shortfall_pct / 100.0):
        out.append(_flag("rate-short", "requests_per_sec",
                         f"achieved {rps:,.0f} req/s of {offered_rate:,.0f} offered "
                         f"({rps / offered_rate * 100:.0f} %): past the server's capacity, latencies are "
                         "queueing time"))

    if (report.tool == "wrk2" or tool == "wrk2") and report.requests:
        per_thread = report.req_per_sec_per_thread
        short = (isinstance(report.threads, int) and len(report.calibration) < report.threads)
        if short or (per_thread is not None and not _finite(per_thread.avg)):
            out.append(_flag("calibration", "latency_p99",
                             "wrk2's calibration did not complete (it needs about 10 s): its latency "
                             "histogram covers only part of the run"))

    wanted = requested_duration(command, tool)
    got = report.duration_s
    if wanted and _finite(got) and abs(got - wanted) > t.duration_tolerance_pct / 100.0 * wanted:
        out.append(_flag("duration", "requests_per_sec",
                         f"measured for {got:g} s of the {wanted:g} s requested"))

    errors = sum((report.socket_errors or {}).values())
    if errors:
        out.append(_flag("socket-errors", "errors",
                         f"{errors:,} socket errors (connect {report.socket_errors['connect']}, read "
                         f"{report.socket_errors['read']}, write {report.socket_errors['write']}, timeout "
                         f"{report.socket_errors['timeout']})"))
    if report.non_2xx_3xx:
        out.append(_flag("non-2xx", "non_2xx_3xx",
                         f"{report.non_2xx_3xx:,} responses with an error status: they are counted in "
                         "Requests/s"))
    return out
