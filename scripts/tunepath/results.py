"""Parsed frames: recorded runs → one pandas row per measurement.

Derived figures are computed within one run only (one server host, one client):
the speed-up over that run's own stock baseline and the change against the
previous measurement of that run's tuning sequence. Runs from different hosts
are never combined into one series.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from .reports import parse_report_file
from .runstore import Run
from .steps import MEASURED_SEQUENCE, get_step

__all__ = ["measurements_frame", "offered_rate", "COLUMNS"]

COLUMNS = [
    "run_id", "server", "client", "kind", "same_machine", "step", "variant", "label", "order",
    "tool", "command", "offered_rate", "cpus_online", "requests", "duration_s", "bytes_read",
    "requests_per_sec", "transfer_per_sec_bytes", "latency_avg_ms", "latency_stdev_ms", "latency_max_ms",
    "p50_ms", "p99_ms", "p99.9_ms", "socket_errors_total", "non_2xx_3xx", "errors",
    "speedup_vs_stock", "change_vs_previous_pct", "previous_variant", "previous_label",
    "previous_requests_per_sec", "vs_step_first", "step_first_label", "jvm_warnings",
    "client_cpu_us_per_req", "server_cpu_us_per_req", "warnings", "raw",
]

_RATE = re.compile(r"(?:^|\s)(?:-R\s*|--rate[= ])(\d+(?:\.\d+)?)([kKmMgG]?)\b")


def offered_rate(command: str) -> float | None:
    """The constant rate a wrk2 command asks for (``-R500000``, ``-R 50k``), or None."""
    m = _RATE.search(command or "")
    if not m:
        return None
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    return float(m.group(1)) * scale


def _label(step: str, variant: str) -> str:
    for v in get_step(step).variants:
        if v.name == variant:
            return v.label
    return variant


def _order(step: str, variant: str) -> int:
    try:
        return MEASURED_SEQUENCE.index((step, variant))
    except ValueError:
        return -1


def measurements_frame(runs: list[Run]) -> pd.DataFrame:
    """Every measurement of ``runs``, parsed, with per-run derived figures."""
    rows = []
    for run in runs:
        run_rows = []
        for m in run.measurements:
            report = parse_report_file(m.stdout, m.tool)
            extra = run.record_measurement(m.step, m.variant)
            flat = report.to_row()
            tool = m.tool or report.tool
            run_rows.append({
                "run_id": run.run_id, "server": m.host, "client": m.client, "kind": run.kind,
                "same_machine": run.same_machine, "step": m.step, "variant": m.variant,
                "label": _label(m.step, m.variant), "order": _order(m.step, m.variant),
                "tool": tool, "command": m.command, "offered_rate": offered_rate(m.command),
                "cpus_online": m.cpus_online,
                "requests": flat["requests"], "duration_s": flat["duration_s"],
                "bytes_read": flat["bytes_read"], "requests_per_sec": flat["requests_per_sec"],
                "transfer_per_sec_bytes": flat["transfer_per_sec_bytes"],
                "latency_avg_ms": flat["latency_avg_ms"], "latency_stdev_ms": flat["latency_stdev_ms"],
                "latency_max_ms": flat["latency_max_ms"],
                "p50_ms": flat["p50_ms"], "p99_ms": flat["p99_ms"], "p99.9_ms": flat["p99.9_ms"],
                "socket_errors_total": flat["socket_errors_total"], "non_2xx_3xx": flat["non_2xx_3xx"],
                "errors": flat["socket_errors_total"],
                "warnings": list(report.warnings),
                "jvm_warnings": list(extra.get("jvm_warnings", [])),
                "client_cpu_us_per_req": _per_request(extra.get("client_cpu_s"), flat["requests"]),
                "server_cpu_us_per_req": _per_request(extra.get("tomcat_cpu_s"), flat["requests"]),
                "raw": str(m.stdout.relative_to(run.path.parent)),
            })
        _derive(run_rows)
        rows.extend(run_rows)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    return frame


def _derive(rows: list[dict]) -> None:
    _derive_comparisons(rows)
    seq = sorted((r for r in rows if r["order"] >= 0), key=lambda r: r["order"])
    stock = next((r for r in seq if (r["step"], r["variant"]) == MEASURED_SEQUENCE[0]), None)
    for r in rows:
        r.update(speedup_vs_stock=None, change_vs_previous_pct=None, previous_variant=None,
                 previous_label=None, previous_requests_per_sec=None)
    for i, r in enumerate(seq):
        rps = r["requests_per_sec"]
        if stock and _ok(stock["requests_per_sec"]) and _ok(rps):
            r["speedup_vs_stock"] = rps / stock["requests_per_sec"]
        if i > 0:
            prev = seq[i - 1]
            r["previous_variant"] = f"{prev['step']}/{prev['variant']}"
            r["previous_label"] = prev["label"]
            r["previous_requests_per_sec"] = prev["requests_per_sec"]
            if _ok(prev["requests_per_sec"]) and _ok(rps):
                r["change_vs_previous_pct"] = (rps / prev["requests_per_sec"] - 1.0) * 100.0


def _derive_comparisons(rows: list[dict]) -> None:
    """Steps that compare variants (connectors, JVM): each variant against the step's first one."""
    for r in rows:
        r.update(vs_step_first=None, step_first_label=None)
    for step in {r["step"] for r in rows if r["order"] < 0 and r["step"] != "setup"}:
        order = [v.name for v in get_step(step).variants]
        mine = sorted((r for r in rows if r["step"] == step),
                      key=lambda r: order.index(r["variant"]) if r["variant"] in order else len(order))
        first = mine[0]
        for r in mine:
            r["step_first_label"] = first["label"]
            if _ok(first["requests_per_sec"]) and _ok(r["requests_per_sec"]):
                r["vs_step_first"] = r["requests_per_sec"] / first["requests_per_sec"]


def _per_request(cpu_s, requests) -> float | None:
    """CPU seconds spent over requests served, in microseconds per request."""
    if cpu_s is None or not requests:
        return None
    return cpu_s / requests * 1e6


def _ok(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value) and value > 0
