"""Noise flags: what may have disturbed a measurement, from what the run recorded.

Each flag names the figure it concerns (``field``: the display field a page shows it
beside), a short ``code`` and a sentence for readers. The checks:

- ``steal``: CPU steal time on a host above ``Thresholds.steal_pct`` (a noisy neighbour
  on a shared or virtual machine took the CPUs);
- ``foreign-load``: busy CPU time on a host that neither Tomcat nor the load generator
  accounts for, above ``Thresholds.foreign_pct`` of all its CPUs (interrupt and softirq time,
  the network stack's work for the benchmark's own traffic, is not counted);
- ``client-saturated``: the load generator used nearly all the CPU its threads can use:
  the client, not the server, may have set the pace;
- ``rate-short``: wrk2 served less than the offered rate (the server is past capacity);
- ``calibration``: wrk2's calibration did not complete (too short a run);
- ``not-steady``: the warm-up's windows never became steady (:mod:`tunepath.analysis.steady`);
- ``duration``: the measured duration is far from the requested one;
- ``socket-errors`` and ``non-2xx``: failed requests;
- ``report-inconsistent``, ``report-derived``, ``report-cut``, ``report-damaged``,
  ``report-absurd``: the report itself cannot be fully trusted (the parser's typed
  ``problems``: Requests/sec disagrees with requests ÷ duration, was recomputed from them,
  a line or section is cut, a line held NUL bytes or invalid UTF-8, a value is impossible).

Two flags concern a configuration's repetitions together rather than one measurement
(:func:`mode_flags`, :func:`shape_flag`, set by :mod:`tunepath.analysis.frames`):

- ``two-modes``: its counted repetitions split into two modes (the gap rule of
  :func:`tunepath.analysis.modes.find_gap`): the interval of its median, and the level stated
  for it, cannot be trusted;
- ``shapes-differ`` (info): a compared pair with a verdict whose CVs differ by a factor of
  ``SHAPE_CV_RATIO`` or more, or one of which has two modes: "significant" then says the two
  distributions differ, not that their medians do.

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

__all__ = ["NoiseFlag", "Thresholds", "THRESHOLDS", "flags_for", "requested_duration", "DROP_CODES", "drop_reasons",
           "cpu_flags", "mode_flags", "shape_flag", "SHAPE_CV_RATIO", "report_flag"]

# a repetition with one of these (warning) flags is left out of its configuration's interval:
# something outside the configuration took CPU time while it was measured
DROP_CODES = ("steal", "foreign-load")
# two samples whose coefficients of variation differ by this factor or more have different shapes
SHAPE_CV_RATIO = 3.0


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
    """The duration a load command asked for, in seconds (wrk/wrk2 ``-d``, ab ``-t``, siege ``-t NS``)."""
    if tool == "ab":
        m = _AB_DURATION.search(command or "")
        return float(m.group(1)) if m else None
    if tool == "jmeter":
        m = re.search(r"-Jduration=(\d+)", command or "")
        return float(m.group(1)) if m else None
    if tool == "siege":   # `-t NS` ends between N - 1 and N seconds: the middle of that second
        m = re.search(r"-t\s*(\d+)S\b", command or "")
        return float(m.group(1)) - 0.5 if m else None
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


@dataclass(frozen=True)
class NoiseFlag:
    """Something that may have disturbed a measurement, beside the figure (``field``) it concerns."""

    code: str                     # steal, foreign-load, client-saturated, rate-short, calibration, …
    field: str                    # the figure it concerns: requests_per_sec, latency_p99, errors, …
    text: str                     # one sentence for the page
    host: str | None = None       # the host it was seen on, where it is one host's
    severity: str = "warning"     # "warning", or "info" for what is expected (a proxy's own CPU)
    repetition: int | None = None # which repetition, where a configuration was repeated

    def to_data(self) -> dict:
        """The flag as recorded beside one repetition (plain JSON)."""
        return {"code": self.code, "field": self.field, "text": self.text, "host": self.host,
                "severity": self.severity}


def drop_reasons(flags) -> list["NoiseFlag"]:
    """The flags that leave a repetition out of its configuration's figures."""
    return [f for f in flags if f.code in DROP_CODES and f.severity == "warning"]


def _flag(code: str, field: str, text: str, host: str | None = None, severity: str = "warning") -> NoiseFlag:
    return NoiseFlag(code, field, text, host, severity)


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _steal_flag(host: str, steal, t: Thresholds) -> list[NoiseFlag]:
    """CPU steal on one host above the threshold."""
    if not (_finite(steal) and steal > t.steal_pct):
        return []
    return [_flag("steal", "requests_per_sec",
                  f"CPU steal {steal:.1f} % on the {host} during the measurement (threshold "
                  f"{t.steal_pct:g} %): a neighbor on the same physical machine took CPU time", host)]


def _own_cpu_s(host: str, entry: dict, same_machine: bool) -> float | None:
    """CPU seconds on ``host`` that Tomcat and the load generator account for; None: no estimate
    (the server without Tomcat's CPU time: nothing to subtract)."""
    tomcat_s, client_s = entry.get("tomcat_cpu_s"), entry.get("client_cpu_s")
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
        return None
    controller = entry.get("controller_cpu_s")      # recorded only where the controller shares this kernel
    if host == "server" and _finite(controller):
        own += controller
    return own


def _foreign_load_flag(host: str, u: dict, entry: dict, window, cpus, *, same_machine: bool,
                       proxied: bool, t: Thresholds) -> list[NoiseFlag]:
    """Busy CPU time on one host that neither Tomcat nor the load generator accounts for."""
    busy, steal = u.get("busy"), u.get("steal")
    if _finite(busy) and _finite(steal):
        busy = busy - steal           # stolen time is flagged as steal, not as other load
    # interrupt work (irq, softirq: the NIC's and the network stack's, mostly for the benchmark's own
    # traffic) belongs to no process; it is not counted as competing load
    for mode in ("irq", "softirq"):
        if _finite(busy) and _finite(u.get(mode)):
            busy = busy - u[mode]
    if not (_finite(busy) and _finite(window) and window > 0 and cpus):
        return []
    own = _own_cpu_s(host, entry, same_machine)
    if own is None:
        return []
    foreign = max(0.0, busy / 100.0 * cpus * window - own) / (cpus * window) * 100.0
    if not foreign > t.foreign_pct:
        return []
    proxy_here = proxied and host == "server"
    why = ("httpd, the proxy under test, is counted here: its CPU time is not separated" if proxy_here else
           "other processes competed (interrupt and softirq time, the network's own work, is not counted)")
    return [_flag("foreign-load", "requests_per_sec",
                  f"{foreign:.0f} % of {_host_words(host)} CPU time was busy outside the Tomcat and "
                  f"load-generator processes (threshold {t.foreign_pct:g} %): {why}", host,
                  severity="info" if proxy_here else "warning")]


def _host_words(host: str) -> str:
    """Whose CPU time, in words: "server" → "the server's", "client-1" → "client 1's"."""
    return "the server's" if host == "server" else f"{host.replace('-', ' ')}'s"


def _host_cpu_flags(entry: dict, window, server_cpus: int | None, client_cpus: int | None, *,
                    same_machine: bool, proxied: bool, t: Thresholds) -> list[NoiseFlag]:
    """Steal and foreign load, host by host, from the CPU utilisation sampled on every host."""
    out: list[NoiseFlag] = []
    for host, u in (entry.get("cpu_utilisation") or {}).items():
        if not isinstance(u, dict):
            continue
        out += _steal_flag(host, u.get("steal"), t)
        cpus = server_cpus if host == "server" else client_cpus
        out += _foreign_load_flag(host, u, entry, window, cpus, same_machine=same_machine, proxied=proxied, t=t)
    return out


def cpu_flags(entry: dict, server_cpus: int | None, client_cpus: int | None, *, same_machine: bool,
              proxied: bool = False, thresholds: Thresholds = THRESHOLDS) -> list[NoiseFlag]:
    """Steal and foreign load of one recorded measurement (``entry``), from its CPU samples alone:
    what the live flow checks right after measuring, to repeat a disturbed repetition."""
    same_machine = same_machine or bool((entry.get("placement") or {}).get("shared_kernel"))
    return _host_cpu_flags(entry, entry.get("window_s"), _count_cpus(entry.get("cpus_online"), server_cpus),
                           client_cpus, same_machine=same_machine, proxied=proxied, t=thresholds)


def _client_saturation_flag(report, entry: dict, window, tool: str | None, client_cpus: int | None,
                            t: Thresholds) -> list[NoiseFlag]:
    """The load generator used nearly all the CPU its threads can use."""
    threads = 1 if tool == "ab" else report.threads
    client_s = entry.get("client_cpu_s")
    parts = entry.get("parts") or []
    if len(parts) > 1:          # several clients: judge the busiest one, not their sum
        shares = [p.get("client_cpu_s") for p in parts if _finite(p.get("client_cpu_s"))]
        client_s = max(shares) if shares else None
    if not (_finite(client_s) and _finite(window) and window > 0):
        return []
    limits = [x for x in (threads, client_cpus) if isinstance(x, int) and x > 0]
    usable = min(limits) if limits else None
    if not usable:
        return []
    used = client_s / (window * usable) * 100.0
    if not used >= t.client_saturation_pct:
        return []
    return [_flag("client-saturated", "requests_per_sec",
                  f"the load generator used {used:.0f} % of the {usable} CPU(s) its threads can "
                  f"use (threshold {t.client_saturation_pct:g} %): the client may have set the "
                  "pace, not the server", "client")]


def _rate_flag(report, offered_rate: float | None, t: Thresholds) -> list[NoiseFlag]:
    """wrk2 served less than the offered rate."""
    rps = report.requests_per_sec
    if not (offered_rate and _finite(rps) and rps < offered_rate * (1 - t.rate_shortfall_pct / 100.0)):
        return []
    return [_flag("rate-short", "requests_per_sec",
                  f"achieved {rps:,.0f} req/s of {offered_rate:,.0f} offered "
                  f"({rps / offered_rate * 100:.0f} %): past the server's capacity, latencies are "
                  "queueing time")]


def _calibration_flag(report, tool: str | None) -> list[NoiseFlag]:
    """wrk2's calibration did not complete."""
    if not ((report.tool == "wrk2" or tool == "wrk2") and report.requests):
        return []
    per_thread = report.req_per_sec_per_thread
    short = (isinstance(report.threads, int) and len(report.calibration) < report.threads)
    if not (short or (per_thread is not None and not _finite(per_thread.avg))):
        return []
    return [_flag("calibration", "latency_p99",
                  "wrk2's calibration did not complete (stock wrk2 needs about 10 s; with -W it "
                  "calibrates when the warm-up ends): its latency histogram covers only part of the run")]


def _duration_flag(report, command: str, tool: str | None, t: Thresholds) -> list[NoiseFlag]:
    """The measured duration is far from the requested one."""
    wanted = requested_duration(command, tool)
    got = report.duration_s
    if not (wanted and _finite(got) and abs(got - wanted) > t.duration_tolerance_pct / 100.0 * wanted):
        return []
    return [_flag("duration", "requests_per_sec", f"measured for {got:g} s of the {wanted:g} s requested")]


def _error_flags(report) -> list[NoiseFlag]:
    """Failed requests: socket errors, then responses with an error status."""
    out: list[NoiseFlag] = []
    errors = sum((report.socket_errors or {}).values())
    if errors:
        out.append(_flag("socket-errors", "errors",
                         f"{errors:,} socket errors (connect {report.socket_errors['connect']}, read "
                         f"{report.socket_errors['read']}, write {report.socket_errors['write']}, timeout "
                         f"{report.socket_errors['timeout']})"))
    if report.errors:
        out.append(_flag("non-2xx", "non_2xx_3xx",
                         f"{report.non_2xx_3xx:,} of {report.requests:,} responses had an error status (HTTP 4xx/5xx): "
                         "this measured an error page, not the servlet, and gets no verdict"))
    elif report.non_2xx_3xx:
        out.append(_flag("non-2xx", "non_2xx_3xx",
                         f"{report.non_2xx_3xx:,} responses with an error status: they are counted in "
                         "Requests/s"))
    return out


# the display field beside which a problem with a report field is flagged (default: requests_per_sec)
_PROBLEM_FIELDS = {"percentiles_ms": "latency_p99", "histogram": "latency_p99",
                   "uncorrected_percentiles_ms": "latency_p99", "uncorrected_histogram": "latency_p99",
                   "latency_ms": "latency_avg", "socket_errors": "errors", "non_2xx_3xx": "non_2xx_3xx",
                   "transfer_per_sec_bytes": "transfer_per_sec", "calibration": "latency_p99",
                   "req_per_sec_per_thread": "latency_p99"}


def report_flag(code: str, field: str, text: str) -> NoiseFlag:
    """The flag of one of the parser's typed problems (``code``; ``field``, the report's field it
    concerns), beside the display field a page shows it with."""
    return _flag(f"report-{code}", _PROBLEM_FIELDS.get(field, "requests_per_sec"), text)


def _report_flags(report) -> list[NoiseFlag]:
    """The parser's typed problems: a figure of the report itself is not to be trusted."""
    return [report_flag(p.code, p.field, p.text) for p in getattr(report, "problems", None) or ()]


def flags_for(report, entry: dict, *, tool: str | None, command: str, offered_rate: float | None,
              server_cpus: int | None, client_cpus: int | None, same_machine: bool,
              proxied: bool = False, thresholds: Thresholds = THRESHOLDS) -> list[NoiseFlag]:
    """The noise flags of one measurement.

    ``report`` is the parsed load-generator report (``WrkReport``), ``entry`` the
    measurement's run-record entry (CPU utilisation, Tomcat and client CPU seconds).
    ``proxied``: a proxy on the server took part (its CPU time is not separated)."""
    t = thresholds
    # hosts that share a kernel (one machine, or network namespaces of one) share /proc/stat: the
    # server's sample then covers Tomcat and every client's load generator
    same_machine = same_machine or bool((entry.get("placement") or {}).get("shared_kernel"))
    window = entry.get("window_s") or report.duration_s
    server_cpus = _count_cpus(entry.get("cpus_online"), server_cpus)
    return (_host_cpu_flags(entry, window, server_cpus, client_cpus, same_machine=same_machine,
                            proxied=proxied, t=t)
            + _client_saturation_flag(report, entry, window, tool, client_cpus, t)
            + _rate_flag(report, offered_rate, t)
            + _calibration_flag(report, tool)
            + _duration_flag(report, command, tool, t)
            + _error_flags(report)
            + _report_flags(report)
            + _steady_flag(entry.get("warmup")))


def _steady_flag(warmup) -> list[NoiseFlag]:
    """The warm-up's windows never agreed: the JVM may still have been warming up when measured."""
    if not isinstance(warmup, dict) or warmup.get("steady") is not False:
        return []
    rule = warmup.get("rule") or {}
    rates = [r for r in warmup.get("windows_rps") or [] if _finite(r)]
    last = f"; its last windows served {min(rates[-3:]):,.0f}–{max(rates[-3:]):,.0f} req/s" if rates else ""
    return [_flag("not-steady", "requests_per_sec",
                  f"measured before steady state: no {rule.get('windows', 3)} warm-up windows in a row served "
                  f"within ±{rule.get('pct', 5):g} % of their median in {warmup.get('seconds', 0):.0f} s{last}")]


def mode_flags(values: dict[str, list], shown: dict[str, str] | None = None) -> list[NoiseFlag]:
    """``two-modes`` flags of one configuration: ``values`` maps a display field
    (``requests_per_sec``, ``server_cpu_per_req``) to its counted repetitions' figures."""
    from tunepath.analysis.modes import find_gap

    out = []
    for field, figures in values.items():
        gap = find_gap([v for v in figures if _finite(v)])
        if gap.bimodal:
            out.append(_flag("two-modes", field,
                             f"the repetitions split into two modes ({gap.why}): the interval of the median, and "
                             "the level stated for it, cannot be trusted; a difference with this configuration "
                             "says its distribution differs, not necessarily its median"))
    return out


def shape_flag(field: str, other: str, cv: float | None, cv_other: float | None, modes: bool) -> list[NoiseFlag]:
    """``shapes-differ`` beside a comparison (``field``) of this configuration with ``other``
    (``other``: what the comparison is, for the sentence)."""
    why = None
    if modes:
        why = "one of them has two modes"
    elif _finite(cv) and _finite(cv_other) and min(cv, cv_other) > 0 and \
            max(cv, cv_other) / min(cv, cv_other) >= SHAPE_CV_RATIO:
        why = f"CVs {cv * 100:.2g} % and {cv_other * 100:.2g} %"
    if why is None:
        return []
    return [_flag("shapes-differ", field, f"{other}: the two spread differently ({why}), so “significant” here "
                  "says their distributions differ, not that their medians do", severity="info")]
