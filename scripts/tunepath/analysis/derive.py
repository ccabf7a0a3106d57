"""Derived figures of one run's configurations: each against stock, the previous one, the step's first.

Computed within one run only (one server host, one client), from the variant rows of
:func:`tunepath.analysis.frames.variant_frame`. Each is read on the figure that can differ
(:func:`rate_is_offered`): where the load offered a fixed rate and Tomcat served it, requests/s is
that rate for every configuration, so the comparisons are on server CPU per request; closed-loop
runs, and open-loop runs that could not serve their rate (the original's references at
-R500000), keep requests/s. Only configurations measured in the same interleaved rounds (one
step) get an interval: across steps, drift over time would pass for an effect. An emulated
server's rows get none: its figures check that the commands work.
"""

from __future__ import annotations

import math

from tunepath.analysis import stats
from tunepath.analysis.noise import THRESHOLDS, NoiseFlag, shape_flag

__all__ = ["derive", "rate_is_offered", "finite_values"]


def finite_values(values) -> list[float]:
    """The finite numbers among ``values`` (a configuration's repetitions), as floats."""
    return [float(v) for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v)]


def _ok(value) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _difference(rows_a: dict, rows_b: dict, prefix: str, column: str = "rps_values") -> dict:
    """B against A with its interval (None when either has fewer than 3 usable repetitions).
    A repetition that served nothing (0 req/s) or used no CPU has no ratio: it is left out."""
    a = [v for v in finite_values(rows_a[column]) if v > 0]
    b = [v for v in finite_values(rows_b[column]) if v > 0]
    if not a or not b:
        return {f"{prefix}_low": None, f"{prefix}_high": None, f"{prefix}_significant": None,
                f"{prefix}_level": None}
    d = stats.compare(a, b)
    return {f"{prefix}_low": d.low, f"{prefix}_high": d.high, f"{prefix}_significant": d.significant,
            f"{prefix}_level": d.level if d.low is not None else None}


def rate_is_offered(row: dict) -> bool:
    """The load offered a fixed rate and Tomcat served it (within the noise flags' shortfall): its
    requests/s is the offered rate, the same for every configuration, and compares nothing."""
    offered, rps = row.get("offered_rate"), row.get("requests_per_sec")
    return _ok(offered) and _ok(rps) and rps >= offered * (1 - THRESHOLDS.rate_shortfall_pct / 100.0)


def on_rps(a: dict | None, b: dict) -> bool:
    """A pair is compared on requests/s unless either side's requests/s is just its offered rate."""
    return not rate_is_offered(b) and (a is None or not rate_is_offered(a))


def derive(rows: list[dict], path, emulated: bool = False) -> None:
    """The derived figures of one run's rows; none for an emulated server, whose figures check that
    the commands work and are never compared (they stay None, so no ratio can be shown)."""
    _derive_comparisons(rows, path, emulated)
    seq = sorted((r for r in rows if r["order"] >= 0), key=lambda r: r["order"])
    stock = next((r for r in seq if r["order"] == 0), None)     # the sequence starts at stock Tomcat
    for r in rows:
        r.update(speedup_vs_stock=None, change_vs_previous_pct=None, previous_variant=None,
                 previous_label=None, previous_requests_per_sec=None, change_low=None, change_high=None,
                 change_significant=None, change_level=None, cpu_vs_stock=None, cpu_change_vs_previous_pct=None,
                 cpu_change_low=None, cpu_change_high=None, cpu_change_significant=None, cpu_change_level=None)
    for i, r in enumerate([] if emulated else seq):
        rps, cpu = r["requests_per_sec"], r["server_cpu_us_per_req"]
        if stock and not on_rps(stock, r):
            if _ok(stock["server_cpu_us_per_req"]) and _ok(cpu):
                r["cpu_vs_stock"] = cpu / stock["server_cpu_us_per_req"]
        elif stock and _ok(stock["requests_per_sec"]) and _ok(rps):
            r["speedup_vs_stock"] = rps / stock["requests_per_sec"]
        if i > 0:
            prev = seq[i - 1]
            r["previous_variant"] = f"{prev['step']}/{prev['variant']}"
            r["previous_label"] = prev["label"]
            r["previous_requests_per_sec"] = prev["requests_per_sec"]
            if not on_rps(prev, r):
                _cpu_change(prev, r)
            elif _ok(prev["requests_per_sec"]) and _ok(rps):
                r["change_vs_previous_pct"] = (rps / prev["requests_per_sec"] - 1.0) * 100.0
                if prev["step"] == r["step"]:
                    # only configurations measured in the same interleaved rounds get an interval:
                    # across steps, drift over time would pass for an effect
                    d = _difference(prev, r, "change")
                    r.update(change_low=None if d["change_low"] is None else (d["change_low"] - 1) * 100,
                             change_high=None if d["change_high"] is None else (d["change_high"] - 1) * 100,
                             change_significant=d["change_significant"], change_level=d["change_level"])
                    if d["change_significant"] is not None:
                        r["flags"] = r["flags"] + _shapes(prev, r, "change_vs_previous_pct", "requests_per_sec")


def _cpu_change(prev: dict, r: dict) -> None:
    """``r`` against the previous configuration on server CPU per request (the figure where
    requests/s is the offered rate); an interval only within one step's interleaved rounds."""
    cpu = r["server_cpu_us_per_req"]
    if not _ok(cpu) or not _ok(prev["server_cpu_us_per_req"]):
        return
    r["cpu_change_vs_previous_pct"] = (cpu / prev["server_cpu_us_per_req"] - 1.0) * 100.0
    if prev["step"] == r["step"]:
        d = _difference(prev, r, "cpu_change", "cpu_values")
        r.update(cpu_change_low=None if d["cpu_change_low"] is None else (d["cpu_change_low"] - 1) * 100,
                 cpu_change_high=None if d["cpu_change_high"] is None else (d["cpu_change_high"] - 1) * 100,
                 cpu_change_significant=d["cpu_change_significant"], cpu_change_level=d["cpu_change_level"])
        if d["cpu_change_significant"] is not None:
            r["flags"] = r["flags"] + _shapes(prev, r, "cpu_change_vs_previous_pct", "server_cpu_per_req")


def _derive_comparisons(rows: list[dict], path, emulated: bool = False) -> None:
    """Steps that compare variants (connectors, JVM, thread sweep): each variant against the step's first."""
    for r in rows:
        r.update(vs_step_first=None, step_first_label=None, vs_first_low=None, vs_first_high=None,
                 vs_first_significant=None, cpu_vs_first=None, cpu_vs_first_low=None, cpu_vs_first_high=None,
                 cpu_vs_first_significant=None, vs_first_level=None, cpu_vs_first_level=None)
    for step in dict.fromkeys(r["step"] for r in rows if path.get(r["step"]).compares_variants and not emulated):
        mine = [r for r in rows if r["step"] == step]      # already in the step's order
        first = mine[0]
        for r in mine:
            r["step_first_label"] = first["label"]
            if on_rps(first, r) and _ok(first["requests_per_sec"]) and _ok(r["requests_per_sec"]):
                r["vs_step_first"] = r["requests_per_sec"] / first["requests_per_sec"]
                if r is not first:
                    r.update(_difference(first, r, "vs_first"))
                    if r["vs_first_significant"] is not None:
                        r["flags"] = r["flags"] + _shapes(first, r, "vs_step_first", "requests_per_sec")
            if _ok(first["server_cpu_us_per_req"]) and _ok(r["server_cpu_us_per_req"]):
                r["cpu_vs_first"] = r["server_cpu_us_per_req"] / first["server_cpu_us_per_req"]
                if r is not first:
                    r.update(_difference(first, r, "cpu_vs_first", "cpu_values"))
                    if r["cpu_vs_first_significant"] is not None:
                        r["flags"] = r["flags"] + _shapes(first, r, "server_cpu_per_req", "server_cpu_per_req")


def _shapes(a: dict, b: dict, field: str, figure: str) -> list[NoiseFlag]:
    """``shapes-differ`` beside B's ``field`` when A and B, compared on ``figure``, differ in shape."""
    cv = "rps_cv" if figure == "requests_per_sec" else "cpu_cv"
    modes = any(f.code == "two-modes" and f.field == figure for r in (a, b) for f in r["flags"])
    return shape_flag(field, f"{b['label']} against {a['label']}", b[cv], a[cv], modes)


