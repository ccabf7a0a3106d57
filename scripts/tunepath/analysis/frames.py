"""Parsed frames: recorded runs → pandas rows.

:func:`repetitions_frame` has one row per recorded measurement (a configuration may be
measured several times, interleaved with the others), each with its noise flags
(:mod:`tunepath.analysis.noise`). :func:`measurements_frame` has one row per configuration: the
median of its repetitions, a confidence interval and coefficient of variation
(:mod:`tunepath.analysis.stats`), and derived figures with their intervals.

Derived figures are computed within one run only (one server host, one client):
the speed-up over that run's own stock baseline (none for an emulated server: its figures are
function checks, never compared), the change against the previous
measurement of that run's tuning sequence, and, for steps that compare variants, the
ratio to the step's first variant. Runs from different hosts are never combined.

Each derived figure (:mod:`tunepath.analysis.derive`) is read on the figure that can differ
(:func:`~tunepath.analysis.derive.rate_is_offered`): where the
load offered a fixed rate and Tomcat served it, requests/s is that rate for every configuration,
so the requests/s comparisons (``speedup_vs_stock``, ``change_vs_previous_pct``, ``vs_step_first``
and their intervals) are None and the same comparisons are made on server CPU per request
(``cpu_vs_stock``, ``cpu_change_vs_previous_pct`` with ``cpu_change_low`` … and ``cpu_vs_first``).
Closed-loop runs, and open-loop runs that could not serve their rate (the original's references
at -R500000), keep requests/s.

Latency percentiles come twice where wrk2 ran with ``-U``: ``p50_ms`` … ``p99.9_ms`` corrected for
coordinated omission (wrk2's "Recorded Latency"), ``p50_uncorrected_ms`` … ``p99.9_uncorrected_ms``
as measured from when each request was actually sent. Every other report leaves the uncorrected
ones None (NaN in a variant row).

A configuration whose counted repetitions split into two modes gets a ``two-modes`` flag beside the
figure (its interval's level cannot be trusted), and a compared pair with a verdict and different
shapes (CVs far apart, or two modes) a ``shapes-differ`` flag beside the comparison: there "significant" says the
distributions differ, not that the medians do (:mod:`tunepath.analysis.noise`). These per-comparison
verdicts are each a test of its own at 95 %; a step that picks the best of many variants corrects its
own reading for multiple comparisons (the thread sweep: Holm).

Each row says whether its requests/s can be trusted (``requests_per_sec_trusted``: no problem of
the parser concerns it, in any client's report, and in a variant row in none of its counted
repetitions) and lists the parser's ``problems`` (each a :class:`~tunepath.parse.problems.Problem`'s
data; a client's named by ``client`` and its text, a variant row's by ``repetition`` where there
are several): pages and ``tunepath compare`` put a ⚑ beside a figure that cannot be trusted.

Each repetition also carries its JVM facts (:data:`JVM_COLUMNS`, from the record's ``jvm`` and
``warmup``: :mod:`tunepath.analysis.jvmfacts`) and the ``collector`` its counters name, None where
not recorded; a variant row holds their
medians over the counted repetitions, and its ``repetitions`` entries each repetition's own.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import replace

import pandas as pd

from tunepath.analysis import stats
from tunepath.errors import TunepathError
from tunepath.analysis.jvmfacts import JVM_COLUMNS, collector, fact_value, jvm_facts
from tunepath.analysis.derive import derive, rate_is_offered, finite_values as _finite_values
from tunepath.analysis.noise import THRESHOLDS, NoiseFlag, Thresholds, drop_reasons, flags_for, mode_flags
from tunepath.parse.reports import parse_report_file
from tunepath.evidence.store import Run

__all__ = ["measurements_frame", "repetitions_frame", "variant_frame", "offered_rate", "rate_is_offered", "COLUMNS",
           "PERCENTILE_COLUMNS", "JVM_COLUMNS"]

REPETITION_COLUMNS = [
    "run_id", "server", "client", "kind", "same_machine", "step", "variant", "label", "order",
    "repetition", "tool", "command", "offered_rate", "cpus_online", "requests", "duration_s", "bytes_read",
    "requests_per_sec", "transfer_per_sec_bytes", "latency_avg_ms", "latency_stdev_ms", "latency_max_ms",
    "p50_ms", "p90_ms", "p99_ms", "p99.9_ms",
    "p50_uncorrected_ms", "p90_uncorrected_ms", "p99_uncorrected_ms", "p99.9_uncorrected_ms",
    "socket_errors_total", "non_2xx_3xx", "errors", "jvm_warnings", "client_cpu_us_per_req",
    "server_cpu_us_per_req", *JVM_COLUMNS, "collector", "warnings", "flags", "clients", "latency_merge", "raw",
    "requests_per_sec_trusted", "problems",
]
# figures taken as the median of a configuration's repetitions
MEDIAN_COLUMNS = ["requests", "duration_s", "bytes_read", "requests_per_sec", "transfer_per_sec_bytes",
                  "latency_avg_ms", "latency_stdev_ms", "latency_max_ms", "p50_ms", "p90_ms", "p99_ms",
                  "p99.9_ms", "p50_uncorrected_ms", "p90_uncorrected_ms", "p99_uncorrected_ms",
                  "p99.9_uncorrected_ms", "socket_errors_total", "non_2xx_3xx", "errors",
                  "client_cpu_us_per_req", "server_cpu_us_per_req", *JVM_COLUMNS]
# the latency percentiles of a row: corrected (every tool that prints them), uncorrected (wrk2 -U)
PERCENTILES = ("50", "90", "99", "99.9")
PERCENTILE_COLUMNS = [f"p{k}_ms" for k in PERCENTILES] + [f"p{k}_uncorrected_ms" for k in PERCENTILES]
COLUMNS = REPETITION_COLUMNS + [
    "n", "dropped", "dropped_why", "repetitions", "rps_low", "rps_high", "rps_cv", "cpu_low", "cpu_high", "cpu_cv", "interval_level",
    "cpu_level", "change_level", "vs_first_level", "cpu_vs_first_level",
    "speedup_vs_stock", "change_vs_previous_pct", "change_low", "change_high", "change_significant",
    "previous_variant", "previous_label", "previous_requests_per_sec",
    "vs_step_first", "vs_first_low", "vs_first_high", "vs_first_significant", "step_first_label",
    "cpu_vs_first", "cpu_vs_first_low", "cpu_vs_first_high", "cpu_vs_first_significant",
    "cpu_vs_stock", "cpu_change_vs_previous_pct", "cpu_change_low", "cpu_change_high", "cpu_change_significant",
    "cpu_change_level",
]

_RATE = re.compile(r"(?:^|\s)(?:-R\s*|--rate[= ])(\d+(?:\.\d+)?)([kKmMgG]?)\b")


def offered_rate(command: str) -> float | None:
    """The constant rate a wrk2 command asks for (``-R500000``, ``-R 50k``), or None."""
    m = _RATE.search(command or "")
    if not m:
        return None
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    return float(m.group(1)) * scale


def _combined(m, parts_entries: list[dict]) -> tuple[dict, object, list[dict], dict | None]:
    """Several clients at once: their reports parsed, throughput summed, latency merged."""
    reports = [parse_report_file(path, m.tool) for _, path in m.parts]
    rows = [r.to_row() for r in reports]
    total = lambda key: sum(r[key] for r in rows if r[key] is not None) if any(  # noqa: E731
        r[key] is not None for r in rows) else None
    requests = total("requests")
    flat = dict(rows[0])
    flat.update(requests=requests, requests_per_sec=total("requests_per_sec"), bytes_read=total("bytes_read"),
                transfer_per_sec_bytes=total("transfer_per_sec_bytes"),
                socket_errors_total=total("socket_errors_total"), non_2xx_3xx=total("non_2xx_3xx"),
                duration_s=max((r["duration_s"] for r in rows if r["duration_s"] is not None), default=None))
    weights = [(r["latency_avg_ms"], r["requests"]) for r in rows
               if r["latency_avg_ms"] is not None and r["requests"]]
    flat["latency_avg_ms"] = (sum(a * n for a, n in weights) / sum(n for _, n in weights)) if weights else None
    flat["latency_max_ms"] = max((r["latency_max_ms"] for r in rows if r["latency_max_ms"] is not None),
                                 default=None)
    flat["latency_stdev_ms"] = None
    merged, merge_error, uncorrected = _merged(reports)
    for key in PERCENTILES:
        flat[f"p{key}_ms"] = merged.estimate(key) if merged else None
        flat[f"p{key}_uncorrected_ms"] = uncorrected.estimate(key) if uncorrected else None
    clients = []
    for (name, path), r, part in zip(m.parts, rows, parts_entries):
        clients.append({"client": name, "requests_per_sec": r["requests_per_sec"], "requests": r["requests"],
                        "latency_avg_ms": r["latency_avg_ms"], "p99_ms": r["p99_ms"],
                        "client_cpu_s": part.get("client_cpu_s"), "exit_status": part.get("exit_status"),
                        "raw": str(path.relative_to(m.stdout.parents[2]))})
    merge_info = ({"method": merged.method, "exactness": merged.exactness,
                   "p99": list(merged.percentiles.get("99") or ())} if merged else
                  {"method": "none", "exactness": f"the clients' latencies could not be merged: {merge_error}",
                   "p99": []})
    merge_info["uncorrected_method"] = uncorrected.method if uncorrected else None
    return flat, reports, clients, merge_info


def _merged(reports):
    """The clients' corrected latency merged (or None and why not), and their uncorrected latency
    (wrk2 -U) merged by the same method: None unless every client printed it and it merges."""
    from tunepath.parse.merge import merge_reports, merge_uncorrected

    try:
        merged, error = merge_reports(reports), ""
    except TunepathError as exc:         # e.g. a client printed no percentiles: say so, keep the rest
        merged, error = None, str(exc)
    try:
        uncorrected = merge_uncorrected(reports)
    except TunepathError:
        uncorrected = None
    return merged, error, uncorrected


def _client_flags(reports, names, extra, *, tool, command, rate, flat, thresholds) -> list[NoiseFlag]:
    """Several clients: each client's own report checked (errors, calibration, duration), and the
    summed rate against the summed offered rate."""
    out = []
    for name, report in zip(names, reports):
        for f in flags_for(report, {}, tool=tool, command=command, offered_rate=None, server_cpus=None,
                           client_cpus=None, same_machine=False, thresholds=thresholds):
            out.append(replace(f, text=f"client {name}: {f.text}", host=name))
    offered = rate * len(reports) if rate else None
    achieved = flat["requests_per_sec"]
    if offered and achieved is not None and achieved < offered * (1 - thresholds.rate_shortfall_pct / 100):
        out.append(NoiseFlag("rate-short", "requests_per_sec",
                             f"the {len(reports)} clients achieved {achieved:,.0f} req/s of {offered:,.0f} offered "
                             f"({achieved / offered * 100:.0f} %): past the server's capacity"))
    return out


def repetitions_frame(runs: list[Run], path, thresholds: Thresholds = THRESHOLDS) -> pd.DataFrame:
    """Every recorded measurement of ``runs``, parsed, one row each, with its noise flags
    (``path``: the step registry, which labels and orders the measurements)."""
    rows = []
    for run in runs:
        client_cpus, server_cpus = run.client.facts.get("cpus"), run.server.facts.get("cpus")
        for m in run.measurements:
            extra = m.live.to_data()
            clients, merge_info, reports = [], None, None
            if len(m.parts) > 1:
                flat, reports, clients, merge_info = _combined(m, extra.get("parts", []))
                report = reports[0]
                client_cpu = sum(p.get("client_cpu_s") or 0 for p in extra.get("parts", [])) or None
            else:
                report = parse_report_file(m.stdout, m.tool)
                flat = report.to_row()
                client_cpu = extra.get("client_cpu_s")
            tool = m.tool or report.tool
            rate = offered_rate(m.command)
            flags = flags_for(report, extra, tool=tool, command=m.command, offered_rate=rate,
                              server_cpus=server_cpus, client_cpus=client_cpus, same_machine=run.same_machine,
                              proxied=path.get(m.step).shares_server(m.variant), thresholds=thresholds)
            if reports is not None:
                # CPU checks stay (they use every host's figures); the report checks run per client
                flags = [f for f in flags if f.code in ("steal", "foreign-load", "client-saturated")]
                flags += _client_flags(reports, [n for n, _ in m.parts], extra, tool=tool, command=m.command,
                                       rate=rate, flat=flat, thresholds=thresholds)
                if merge_info["method"] == "none":
                    flags.append(NoiseFlag("latency-merge", "latency_p99", merge_info["exactness"]))
                rate = rate * len(reports) if rate else None      # what all clients together offered
            rows.append({
                "run_id": run.run_id, "server": m.host, "client": m.client, "kind": run.kind,
                "same_machine": run.same_machine, "step": m.step, "variant": m.variant,
                "label": path.get(m.step).label(m.variant, run.context), "order": path.order(m.step, m.variant),
                "repetition": m.repetition,
                "tool": tool, "command": m.command, "offered_rate": rate,
                "cpus_online": m.cpus_online,
                "requests": flat["requests"], "duration_s": flat["duration_s"],
                "bytes_read": flat["bytes_read"], "requests_per_sec": flat["requests_per_sec"],
                "transfer_per_sec_bytes": flat["transfer_per_sec_bytes"],
                "latency_avg_ms": flat["latency_avg_ms"], "latency_stdev_ms": flat["latency_stdev_ms"],
                "latency_max_ms": flat["latency_max_ms"],
                **{col: flat[col] for col in PERCENTILE_COLUMNS},
                "socket_errors_total": flat["socket_errors_total"], "non_2xx_3xx": flat["non_2xx_3xx"],
                "errors": flat["socket_errors_total"],
                "warnings": list(report.warnings),
                "jvm_warnings": list(extra.get("jvm_warnings", [])),
                "client_cpu_us_per_req": _per_request(client_cpu, flat["requests"]),
                "server_cpu_us_per_req": _per_request(extra.get("tomcat_cpu_s"), flat["requests"]),
                **jvm_facts(extra), "collector": _collector(extra),
                "flags": flags, "clients": clients, "latency_merge": merge_info,
                "raw": str(m.stdout.relative_to(run.path.parent)),
                **_rate_trust([report] if reports is None else reports, [n for n, _ in m.parts]),
            })
    return pd.DataFrame(rows, columns=REPETITION_COLUMNS)


def _collector(live: dict) -> str | None:
    """The collector the measurement's JVM named in its counters (None without them)."""
    jvm = live.get("jvm") if isinstance(live.get("jvm"), dict) else {}
    return collector(jvm.get("during"))


def _rate_trust(reports, names: list[str]) -> dict:
    """Whether one measurement's requests/s can be trusted (every client's report's can) and the
    parser's problems of its reports; with several clients, each problem names its client."""
    problems = []
    for name, report in zip(names if len(reports) > 1 else [None] * len(reports), reports):
        for p in report.problems:
            problems.append(p.to_data() if name is None else dict(p.to_data(), client=name,
                                                                   text=f"client {name}: {p.text}"))
    return {"requests_per_sec_trusted": all(r.requests_per_sec_trusted for r in reports), "problems": problems}


_EMPTY = stats.Summary(n=0, median=math.nan, low=None, high=None, level=None, cv=None, min=math.nan, max=math.nan)


def _summarise(values) -> "stats.Summary":
    values = _finite_values(values)
    return stats.summarise(values) if values else _EMPTY


def _median(values):
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else None


def variant_frame(reps: pd.DataFrame, runs: list[Run], path) -> pd.DataFrame:
    """One row per configuration: medians of its repetitions, intervals, flags, derived figures."""
    by_run = {r.run_id: r for r in runs}
    rows = []
    for run_id in dict.fromkeys(reps.run_id):
        run_rows = []
        mine = reps[reps.run_id == run_id]
        for (step, variant), group in mine.groupby(["step", "variant"], sort=False):
            every = sorted(group.to_dict("records"), key=lambda r: r["repetition"])
            # repetitions disturbed from outside are left out (unless every one was: then all count)
            recs = [r for r in every if not drop_reasons(r["flags"])] or every
            out = [r for r in every if r not in recs]
            row = dict(recs[0])
            for col in MEDIAN_COLUMNS:
                row[col] = _median([r[col] for r in recs])
            for col in JVM_COLUMNS:
                row[col] = fact_value(col, row[col])
            n = len(recs)
            row["dropped"] = len(out)
            row["dropped_why"] = [f"repetition {r['repetition']}: " + "; ".join(f.text for f in drop_reasons(r["flags"]))
                                  for r in out]
            rps = _summarise([r["requests_per_sec"] for r in recs])
            cpu = _summarise([r["server_cpu_us_per_req"] for r in recs])
            row.update(n=n, rps_low=rps.low, rps_high=rps.high, rps_cv=rps.cv, cpu_low=cpu.low, cpu_high=cpu.high,
                       cpu_cv=cpu.cv, interval_level=rps.level, cpu_level=cpu.level)
            row["rps_values"] = [r["requests_per_sec"] for r in recs]
            row["cpu_values"] = [r["server_cpu_us_per_req"] for r in recs]
            row["flags"] = [replace(f, repetition=r["repetition"] if len(every) > 1 else None)
                            for r in every for f in r["flags"]] + mode_flags(
                {"requests_per_sec": row["rps_values"], "server_cpu_per_req": row["cpu_values"]})
            row["warnings"] = list(dict.fromkeys(w for r in recs for w in r["warnings"]))
            row["requests_per_sec_trusted"] = all(r["requests_per_sec_trusted"] for r in recs)
            row["problems"] = [dict(p, repetition=r["repetition"]) if len(every) > 1 else p
                               for r in recs for p in r["problems"]]
            row["jvm_warnings"] = list(dict.fromkeys(w for r in recs for w in r["jvm_warnings"]))
            row["clients"] = [dict(c, repetition=r["repetition"]) for r in recs for c in (r["clients"] or [])]
            row["repetitions"] = [{"repetition": r["repetition"], "requests_per_sec": r["requests_per_sec"],
                                   "server_cpu_us_per_req": r["server_cpu_us_per_req"], "p99_ms": r["p99_ms"],
                                   "raw": r["raw"], "flags": [f.to_data() for f in r["flags"]],
                                   **{col: fact_value(col, r[col]) for col in JVM_COLUMNS},
                                   "dropped": r in out} for r in every]
            row["sort"] = (path.sort_key(step, variant, by_run[run_id].context) if run_id in by_run
                          else (99, 1, 0, variant))
            run_rows.append(row)
        run_rows.sort(key=lambda r: r["sort"])
        derive(run_rows, path, emulated=run_id in by_run and by_run[run_id].emulated)
        rows.extend(run_rows)
    frame = pd.DataFrame(rows, columns=COLUMNS + ["rps_values", "cpu_values"])
    return frame


def measurements_frame(runs: list[Run], path, thresholds: Thresholds = THRESHOLDS) -> pd.DataFrame:
    """Every configuration measured in ``runs``: one row each (medians over repetitions);
    ``path`` is the step registry."""
    return variant_frame(repetitions_frame(runs, path, thresholds), runs, path)


def _per_request(cpu_s, requests) -> float | None:
    """CPU seconds spent over requests served, in microseconds per request."""
    if cpu_s is None or not requests:
        return None
    return cpu_s / requests * 1e6

