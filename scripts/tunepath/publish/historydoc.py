"""``data/steps/history.json``: the history page's data (:mod:`tunepath.analysis.history`).

Per host kind: its runs (versions, date, offered rate), the change points found (which versions,
which figure, how large, how significant), the chart, and per step a table of every series' points.
Every figure is the median its step's page shows, with the run, step, variant and field that bind it.
"""

from __future__ import annotations

from tunepath.analysis.history import MAX_PVALUE, MIN_RUNS, History, Series
from tunepath.publish import formatting as fmt
from tunepath.publish.historychart import shown

__all__ = ["history_document", "FIELDS", "charted", "matrix_grids"]

FIELDS = {"cpu": "server_cpu_per_req", "p99": "latency_p99", "rps": "requests_per_sec"}   # the pages' field names


def charted(h: History, prefer: tuple[str, str]) -> dict[str, Series]:
    """The one series each host kind's chart draws: ``prefer``'s (step, variant) server CPU per request
    over Tomcat releases (the most runs), else the series with the most runs."""
    out = {}
    for kind in h.kinds:
        mine = [s for s in h.series if s.kind == kind]
        first = [s for s in mine if (s.step, s.variant) == prefer and s.figure.key == "cpu" and s.axis == "tomcat"]
        out[kind] = max(first or mine, key=lambda s: (len(s.points), len(s.changes)))
    return out


def _pvalue(p: float) -> str:
    return "p < 0.0001" if p < 0.0001 else f"p = {p:.2g}"      # 0.00099, never rounded up to the threshold


def _point(s: Series, p) -> dict:
    return {"run_id": p.run_id, "step": s.step, "variant": s.variant, "field": FIELDS[s.figure.key],
            "value": shown(s.figure.key, p.median), "versions": p.label, "offered": fmt.offered(p.offered),
            "interval": _INTERVAL[s.figure.key](p.low, p.high, p.level) if p.low is not None else "",
            "n": len(p.values)}


_INTERVAL = {"cpu": fmt.micros_interval, "p99": fmt.latency_interval, "rps": fmt.rate_interval}


def history_document(h: History, step, registry, runs, charts: dict, notebook: dict,
                     grid: tuple[str, str] | None = None) -> dict:
    """The page's data; ``charts`` maps a host kind to its chart's data; ``grid``: the (step,
    variant) each version matrix's grid shows."""
    steps = {s.name: s for s in registry}
    by_id = {r.run_id: r for r in runs}
    kinds = []
    for kind in h.kinds:
        mine = [s for s in h.series if s.kind == kind]
        run_ids = list(dict.fromkeys(p.run_id for s in mine for p in s.points))
        changes = [{"step": s.step, "page": steps[s.step].page, "step_title": steps[s.step].title,
                    "variant": s.variant, "variant_label": _label(steps[s.step], s.variant, by_id, s.points),
                    "figure": s.figure.label, "fixed": s.fixed, "what": c.what(s.axis),
                    "before": _point(s, c.before), "after": _point(s, c.after),
                    "change": fmt.percent_change(c.change_pct), "pvalue": _pvalue(c.pvalue),
                    "worse": (c.change_pct > 0) == s.figure.lower_is_better}
                   for s in mine for c in s.changes]
        tables = []
        for name in dict.fromkeys(s.step for s in mine):
            rows = [{"variant_label": _label(steps[name], s.variant, by_id, s.points), "figure": s.figure.label,
                     "fixed": s.fixed, "searched": s.searched, "changes": len(s.changes),
                     "points": [_point(s, p) for p in s.points]}
                    for s in mine if s.step == name]
            tables.append({"step": name, "page": steps[name].page, "title": steps[name].title, "rows": rows})
        labels = sorted({by_id[r].info.label.split("; ", 1)[-1] for r in run_ids if r in by_id})
        arm = any(by_id[r].server.arm for r in run_ids if r in by_id)      # emulated servers are not in it
        kinds.append({"kind": kind, "runs": len(run_ids), "labels": labels, "series": len(mine), "arm": arm,
                      "searched": sum(s.searched for s in mine), "changes": changes,
                      "chart": charts.get(kind), "tables": tables,
                      "grids": matrix_grids(mine, by_id, steps, grid) if grid else [],
                      "versions": sorted({p.label.rsplit(" · ", 1)[0] for s in mine for p in s.points})})
    fa = h.false_alarms
    shown_runs = {p.run_id for s in h.series for p in s.points}
    return {
        "step": step.name, "number": step.number, "title": step.title, "page": step.page,
        "runs": [{"run_id": r.run_id, "label": r.info.label, "kind": r.kind, "server": r.server.name,
                  "emulated": r.emulated, "in_history": r.run_id in shown_runs} for r in runs],
        "kinds": kinds,
        "method": {"max_pvalue": f"{MAX_PVALUE:g}", "min_runs": MIN_RUNS, "shuffles": fa.shuffles},
        "false_alarms": {"series": fa.series, "alarms": fa.alarms, "shuffled": fa.series * fa.shuffles,
                         "rate": fmt.percent(fa.rate * 100) if fa.rate is not None else ""},
        "notebook": notebook,
    }


def matrix_grids(mine: list[Series], by_id: dict, steps: dict, grid: tuple[str, str]) -> list[dict]:
    """Each version matrix among one host kind's series, at a glance: ``grid``'s configuration, one
    row per Tomcat release and one column per Java release, each cell its run's median (bound to
    it). Requests/s where the series follows it (a closed-loop load), else server CPU per request."""
    step, variant = grid
    found = {(p.run_id, s.figure.key): (s, p) for s in mine if (s.step, s.variant) == grid for p in s.points}
    matrices: dict[str, list] = {}
    for run_id in dict.fromkeys(r for r, _ in found):
        cell = by_id[run_id].info.matrix if run_id in by_id else None
        if cell is not None:
            matrices.setdefault(cell.matrix, []).append((cell.cell, run_id))
    out = []
    for matrix, cells in sorted(matrices.items()):
        key = "rps" if all((r, "rps") in found for _, r in cells) else "cpu"
        tomcats = list(dict.fromkeys(c.tomcat for c, _ in cells))
        javas = sorted({c.java for c, _ in cells}, key=lambda j: j or 0)
        at = {(c.tomcat, c.java): r for c, r in cells}
        figure = next(s.figure for (r, k), (s, _) in found.items() if k == key)
        out.append({
            "matrix": matrix,
            "caption": f"{steps[step].title.split(':')[0]}, {_label(steps[step], variant, by_id, [found[(cells[-1][1], key)][1]])}: "
                       f"{figure.label} by Tomcat and Java release, the version matrix of "
                       f"{by_id[cells[0][1]].info.date or matrix} ({len(cells)} runs)",
            "columns": [f"Java {j}" if j else "Java" for j in javas],
            "rows": [{"tomcat": t or "not recorded",
                      "cells": [_point(*found[(at[(t, j)], key)]) if (t, j) in at and (at[(t, j)], key) in found
                                else None for j in javas]} for t in tomcats],
        })
    return out


def _label(step, variant: str, by_id: dict, points) -> str:
    """``variant``'s label as the newest of ``points``' runs that knows it gives it: a run's hosts
    decide its variants (Java 17 has no virtual-thread connector, for one)."""
    labels = (step.label(variant, by_id[p.run_id].context) for p in reversed(points) if p.run_id in by_id)
    return next((label for label in labels if label != variant), variant)
