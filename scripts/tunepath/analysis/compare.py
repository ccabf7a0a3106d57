"""Two recorded runs side by side: per step, the ratio of their figures, and which host facts differ.

A ratio across runs compares two different set-ups, usually two different machines: it
says how far apart the results are, never that one change caused the difference. The
facts that differ are listed beside every comparison for that reason.

    doc = compare_document(runs, frame)      # every pair of runs, the default pair first
"""

from __future__ import annotations

import itertools
import json
import math

import pandas as pd

from tunepath.publish import formatting as fmt
from tunepath.analysis import stats
from tunepath.evidence.store import FACT_KEYS, Run

__all__ = ["pair_document", "compare_document", "fact_rows", "default_pair"]

FACT_LABELS = {
    "cpu_model": "CPU", "cpus": "CPUs", "cpus_online": "CPUs online", "numa_nodes": "NUMA nodes",
    "kernel": "kernel", "kernel_cmdline": "kernel command line", "iommu": "IOMMU", "nic": "NIC",
    "os": "OS", "java_version": "Java", "tomcat_version": "Tomcat", "load_generator": "load generator",
    "nofile_limit": "open-file limit",
}
CONTEXT_KEYS = (("load_generator", "load generator binary"), ("threads", "load threads"),
                ("connections", "connections"), ("rate", "offered rate (-R)"), ("open_loop", "open loop (wrk2)"),
                ("duration_s", "measured seconds"), ("warmup_s", "warm-up seconds"))


def _show(value) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_show(v)}" for k, v in value.items() if v is not None) or "not recorded"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "; ".join(_show(v) for v in value) or "not recorded"
    return str(value)


SERVER_ONLY_FACTS = frozenset({"tomcat_version", "java_version", "iommu", "kernel_cmdline"})   # host facts


def fact_rows(a: Run, b: Run) -> list[dict]:
    """Host facts and load settings of both runs; ``differs`` marks the ones to read first."""
    rows = [{"group": "setting", "key": "same_machine", "label": "server and client on one machine",
             "a": _show(a.same_machine), "b": _show(b.same_machine)}]
    for role in ("server", "client"):
        fa, fb = getattr(a, role).facts, getattr(b, role).facts
        for key in FACT_KEYS:
            if role == "client" and key in SERVER_ONLY_FACTS:
                continue
            if role == "server" and key == "load_generator":
                continue
            rows.append({"group": role, "key": f"{role}.{key}", "label": f"{role}: {FACT_LABELS[key]}",
                         "a": _show(fa.get(key)), "b": _show(fb.get(key))})
    ca, cb = a.context.to_dict(), b.context.to_dict()
    for key, label in CONTEXT_KEYS:
        rows.append({"group": "load", "key": f"context.{key}", "label": label,
                     "a": _show(ca.get(key)), "b": _show(cb.get(key))})
    for r in rows:
        r["differs"] = r["a"] != r["b"]
    return rows


def _num(v):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return float(v)


def _values(row: pd.Series | dict, key: str) -> list:
    v = row.get(key) if isinstance(row, dict) else row[key]
    return ([x for x in v if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
            if isinstance(v, (list, tuple)) else [])


def step_rows(a: Run, b: Run, frame: pd.DataFrame, step: str) -> list[dict]:
    """Measurements both runs made of ``step`` (same variant), B relative to A."""
    fa = frame[(frame.run_id == a.run_id) & (frame.step == step)]
    fb = frame[(frame.run_id == b.run_id) & (frame.step == step)]
    rows = []
    for ra in fa.to_dict("records"):
        match = [rb for rb in fb.to_dict("records") if rb["variant"] == ra["variant"]]
        if not match:
            continue
        rb = match[0]
        ratio = (rb["requests_per_sec"] / ra["requests_per_sec"]
                 if _num(ra["requests_per_sec"]) and _num(rb["requests_per_sec"]) else None)
        va, vb = _values(ra, "rps_values"), _values(rb, "rps_values")
        d = stats.compare(va, vb) if ratio and va and vb else None
        cpu_ratio = (rb["server_cpu_us_per_req"] / ra["server_cpu_us_per_req"]
                     if _num(ra["server_cpu_us_per_req"]) and _num(rb["server_cpu_us_per_req"]) else None)
        entry = {"variant": ra["variant"], "label": ra["label"], "ratio": ratio,
                 "low": d.low if d else None, "high": d.high if d else None,
                 "significant": d.significant if d else None,
                 "a_requests_per_sec": _num(ra["requests_per_sec"]), "b_requests_per_sec": _num(rb["requests_per_sec"]),
                 "a_n": int(ra.get("n") or 1), "b_n": int(rb.get("n") or 1), "cpu_ratio": cpu_ratio,
                 "a_tool": ra["tool"], "b_tool": rb["tool"]}
        entry["display"] = {
            "a_requests_per_sec": fmt.rate(entry["a_requests_per_sec"]),
            "b_requests_per_sec": fmt.rate(entry["b_requests_per_sec"]),
            "a_cpu": fmt.micros(_num(ra["server_cpu_us_per_req"])),
            "b_cpu": fmt.micros(_num(rb["server_cpu_us_per_req"])),
            "ratio": fmt.speedup(ratio) or fmt.NA,
            "interval": fmt.ratio_interval(entry["low"], entry["high"], d.level if d else None),
            "significance": fmt.significance(entry["significant"], entry["low"] is not None),
            "cpu_ratio": fmt.speedup(cpu_ratio) or fmt.NA,
            "repetitions": f"{entry['a_n']} / {entry['b_n']}",
        }
        rows.append(entry)
    return rows


def _run_summary(run: Run) -> dict:
    return {"run_id": run.run_id, "label": run.info.label, "kind": run.kind, "kind_label": run.info.kind_label,
            "server": run.server.name, "same_machine": run.same_machine}


def pair_document(a: Run, b: Run, frame: pd.DataFrame, path) -> dict:
    """Two runs side by side; ``path`` is the step registry (the order of the steps)."""
    steps = []
    for s in path:
        rows = step_rows(a, b, frame, s.name)
        if rows:
            steps.append({"step": s.name, "title": s.title, "page": s.page, "rows": rows})
    facts = fact_rows(a, b)
    return {"id": f"{a.run_id}--{b.run_id}", "a": _run_summary(a), "b": _run_summary(b), "steps": steps,
            "facts": facts, "facts_differ": sum(f["differs"] for f in facts),
            "common": sum(len(s["rows"]) for s in steps)}


def default_pair(runs: list[Run]) -> tuple[Run, Run] | None:
    """The pair a reader most likely wants: the newest live run against the first reference run.
    A run on an emulated server is never picked: its figures test commands, not performance."""
    runs = [r for r in runs if not r.emulated]
    refs = [r for r in runs if r.kind == "reference"]
    lives = sorted((r for r in runs if r.kind == "live"), key=lambda r: r.run_id)
    if refs and lives:
        return refs[0], lives[-1]
    return (runs[0], runs[1]) if len(runs) >= 2 else None


def compare_document(runs: list[Run], frame: pd.DataFrame, path, step, charts: dict[str, dict] | None = None,
                     notebook: dict | None = None) -> dict:
    """Every pair of ``runs`` (A = the earlier in the pages' order), the default pair first;
    ``path`` is the step registry, ``step`` the comparison step publishing it."""
    charts = charts or {}
    runs = sorted(runs, key=lambda r: (r.kind != "reference", r.run_id))   # A: the reference side
    first = default_pair(runs)
    pairs = []
    for a, b in itertools.combinations(runs, 2):
        if a.emulated != b.emulated:        # an emulated server's figures are never set against real hosts'
            continue
        doc = pair_document(a, b, frame, path)
        doc["default"] = bool(first) and (a.run_id, b.run_id) == (first[0].run_id, first[1].run_id)
        doc["chart"] = charts.get(doc["id"])
        pairs.append(doc)
    pairs.sort(key=lambda p: (not p["default"], -p["common"], p["id"]))
    s = step
    return json.loads(json.dumps({"step": s.name, "number": s.number, "title": s.title, "page": s.page,
                                  "notebook": notebook or {}, "runs": [_run_summary(r) for r in runs],
                                  "pairs": pairs}, allow_nan=False, default=str))
