"""Figures as a page displays them: every preformatted string of one measurement.

The frames hold numbers; :func:`display` formats them once (:mod:`tunepath.publish.formatting`)
into a :class:`Display`, which the Hugo data carries as ``display`` and the ``value``
shortcode prints by field name. A page's field names are this record's fields.

Each latency percentile comes corrected for coordinated omission (``latency_p99``: what every
load generator that prints percentiles reports; wrk2's "Recorded Latency") and, where wrk2 ran
with ``-U``, uncorrected (``latency_p99_uncorrected``); ``PERCENTILES`` maps them to the frames' columns.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import pandas as pd

from tunepath.analysis.derive import rate_is_offered
from tunepath.publish import formatting as fmt

__all__ = ["Display", "display", "clean", "num", "PERCENTILES", "PrecisionDisplay", "precision_display",
           "placement_text", "warmup_text"]

# display field → frames column stem:
# ``latency_p99`` ← ``p99_ms``, ``latency_p99_uncorrected`` ← ``p99_uncorrected_ms``
PERCENTILES = {"latency_p50": "p50", "latency_p90": "p90", "latency_p99": "p99", "latency_p999": "p99.9"}


@dataclass(frozen=True)
class Display:
    """One measurement's figures, formatted (a dash where there is no figure)."""

    requests_per_sec: str | None
    latency_avg: str | None
    latency_max: str | None
    latency_p99: str | None
    errors: str | None
    non_2xx_3xx: str | None
    requests: str | None
    duration: str | None
    transfer_per_sec: str | None
    speedup_vs_stock: str | None
    change_vs_previous_pct: str | None
    previous_label: str | None
    previous_requests_per_sec: str | None
    cpus_online: str | None
    offered_rate: str | None
    served_of_offered: str | None    # "of 7,200 offered" where the row served a fixed offered rate
    vs_step_first: str | None
    client_cpu_per_req: str | None
    server_cpu_per_req: str | None
    step_first_label: str | None
    repetitions: str | None
    rps_interval: str | None
    rps_cv: str | None
    cpu_interval: str | None
    cpu_cv: str | None
    change_interval: str | None
    change_significance: str | None
    vs_first_interval: str | None
    vs_first_significance: str | None
    cpu_vs_first: str | None
    cpu_vs_first_interval: str | None
    cpu_vs_first_significance: str | None
    cpu_vs_stock: str | None
    cpu_change_vs_previous_pct: str | None
    cpu_change_interval: str | None
    cpu_change_significance: str | None
    latency_p50: str | None
    latency_p90: str | None
    latency_p999: str | None
    latency_p50_uncorrected: str | None
    latency_p90_uncorrected: str | None
    latency_p99_uncorrected: str | None
    latency_p999_uncorrected: str | None

    def to_data(self) -> dict:
        return asdict(self)


def clean(value):
    """``value`` as plain JSON: no NaN or infinity (None instead), no numpy scalars, no pandas NA."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):   # numpy scalars
        return clean(value.item())
    if value is pd.NA:
        return None
    return value


def num(value):
    value = clean(value)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def display(row: dict) -> Display:
    """The preformatted strings a page prints for one measurement (``row``: a frames row)."""
    return Display(**{
        "requests_per_sec": fmt.rate(num(row["requests_per_sec"])),
        "latency_avg": fmt.latency(num(row["latency_avg_ms"])),
        "latency_max": fmt.latency(num(row["latency_max_ms"])),
        "latency_p99": fmt.latency(num(row["p99_ms"])),
        "errors": fmt.count(num(row["errors"])),
        "non_2xx_3xx": fmt.count(num(row["non_2xx_3xx"])),
        "requests": fmt.count(num(row["requests"])),
        "duration": fmt.seconds(num(row["duration_s"])),
        "transfer_per_sec": fmt.bytes_per_sec(num(row["transfer_per_sec_bytes"])),
        "speedup_vs_stock": fmt.speedup(num(row["speedup_vs_stock"])),
        "change_vs_previous_pct": fmt.percent_change(num(row["change_vs_previous_pct"])),
        "previous_label": row["previous_label"] or "",
        "previous_requests_per_sec": fmt.rate(num(row["previous_requests_per_sec"]))
        if num(row["previous_requests_per_sec"]) is not None else "",
        "cpus_online": row["cpus_online"] if isinstance(row["cpus_online"], str) and row["cpus_online"]
        else fmt.NA,
        "offered_rate": fmt.offered(num(row["offered_rate"])),
        "served_of_offered": f"of {fmt.offered(num(row['offered_rate']))} offered" if rate_is_offered(row) else "",
        "vs_step_first": fmt.speedup(num(row["vs_step_first"])),
        "client_cpu_per_req": fmt.micros(num(row["client_cpu_us_per_req"])),
        "server_cpu_per_req": fmt.micros(num(row["server_cpu_us_per_req"])),
        "step_first_label": row["step_first_label"] or "",
        "repetitions": fmt.repetitions(num(row.get("n"))),
        "rps_interval": fmt.rate_interval(num(row.get("rps_low")), num(row.get("rps_high")),
                                          num(row.get("interval_level"))),
        "rps_cv": fmt.cv(num(row.get("rps_cv"))),
        "cpu_interval": fmt.micros_interval(num(row.get("cpu_low")), num(row.get("cpu_high")),
                                            num(row.get("cpu_level"))),
        "cpu_cv": fmt.cv(num(row.get("cpu_cv"))),
        "change_interval": fmt.pct_interval(num(row.get("change_low")), num(row.get("change_high")),
                                            num(row.get("change_level"))),
        "change_significance": fmt.significance(clean(row.get("change_significant")),
                                                num(row.get("change_low")) is not None),
        "vs_first_interval": fmt.ratio_interval(num(row.get("vs_first_low")), num(row.get("vs_first_high")),
                                                num(row.get("vs_first_level"))),
        "vs_first_significance": fmt.significance(clean(row.get("vs_first_significant")),
                                                  num(row.get("vs_first_low")) is not None),
        "cpu_vs_first": fmt.speedup(num(row.get("cpu_vs_first"))),
        "cpu_vs_first_interval": fmt.ratio_interval(num(row.get("cpu_vs_first_low")),
                                                    num(row.get("cpu_vs_first_high")),
                                                    num(row.get("cpu_vs_first_level"))),
        "cpu_vs_first_significance": fmt.significance(clean(row.get("cpu_vs_first_significant")),
                                                      num(row.get("cpu_vs_first_low")) is not None),
        "cpu_vs_stock": fmt.speedup(num(row.get("cpu_vs_stock"))),
        "cpu_change_vs_previous_pct": fmt.percent_change(num(row.get("cpu_change_vs_previous_pct"))),
        "cpu_change_interval": fmt.pct_interval(num(row.get("cpu_change_low")), num(row.get("cpu_change_high")),
                                                num(row.get("cpu_change_level"))),
        "cpu_change_significance": fmt.significance(clean(row.get("cpu_change_significant")),
                                                    num(row.get("cpu_change_low")) is not None),
        "latency_p50": fmt.latency(num(row.get("p50_ms"))),
        "latency_p90": fmt.latency(num(row.get("p90_ms"))),
        "latency_p999": fmt.latency(num(row.get("p99.9_ms"))),
        **{f"{field}_uncorrected": fmt.latency(num(row.get(f"{col}_uncorrected_ms")))
           for field, col in PERCENTILES.items()},
    })


@dataclass(frozen=True)
class PrecisionDisplay:
    """How precise one variant's figure is, formatted (what the ``precision`` shortcode prints)."""

    n: str                  # values counted
    dropped: str            # repetitions left out
    halfwidth: str          # the interval's half-width in % of the median: "±2.3 %" ("n/a": no interval)
    level: str              # the level that interval reaches: "93.8 %" ("" without one)
    halfwidth_level: str    # both: "±2.3 % (93.8 %)"
    cv: str                 # coefficient of variation: "1.8 %"
    steady_state: str       # median seconds to steady state: "35.0"; "never"; "n/a" (no steady-state warm-up)
    not_steady: str         # measurements never steady, of those with a steady-state warm-up: "1 of 6"

    def to_data(self) -> dict:
        return asdict(self)


def precision_display(n, dropped, halfwidth_pct, level, cv_pct, steady_state_s, warmups: int,
                      not_steady: int | None) -> PrecisionDisplay:
    """The strings of one variant's ``precision`` entry (``warmups``: its measurements that
    recorded a steady-state warm-up; ``not_steady``: how many of them never became steady)."""
    width, lvl = fmt.plus_minus_pct(halfwidth_pct), fmt.level(level)
    if num(steady_state_s) is not None:
        steady = f"{steady_state_s:,.1f}"
    else:
        steady = "never" if warmups and not_steady else fmt.NA
    return PrecisionDisplay(
        n=fmt.count(n), dropped=fmt.count(dropped), halfwidth=width, level=lvl,
        halfwidth_level=f"{width} ({lvl})" if width != fmt.NA and lvl else width,
        cv=fmt.percent(cv_pct), steady_state=steady, not_steady=fmt.of(not_steady, warmups))


def placement_text(*, recorded: bool, pinned: bool | None, shared_kernel: bool | None, server_cpus: str,
                   client_cpus: str, same_machine: bool) -> str:
    """One sentence: where Tomcat and the load generator ran."""
    if not recorded:
        return "This run recorded no CPU placement" + (" (server and client on one machine)." if same_machine else ".")
    if pinned:
        client = f"on {fmt.cpu_set(client_cpus)}" if client_cpus else "unpinned"
        why = ", as they share one kernel" if shared_kernel else ""
        return f"Tomcat ran on {fmt.cpu_set(server_cpus)} and the load generator {client} (taskset){why}."
    if shared_kernel:
        return "Tomcat and the load generator shared one kernel and ran unpinned, taking turns on the same CPUs."
    return "Tomcat and the load generator ran unpinned on separate hosts, each on its own CPUs."


def warmup_text(*, recorded: bool, steady_state: bool, window_s: int, windows: int, pct, cap_s: int,
                jit_pct: int = 0) -> str:
    """One sentence: what came before each measurement."""
    if not recorded:
        return "The run recorded no warm-up rule."
    if steady_state:
        jit = f", and the JIT compiled for at most {jit_pct} % of the last one" if jit_pct else ""
        return (f"Each measurement started once {windows} warm-up windows of {window_s} s in a row served "
                f"within ±{pct:g} % of their median{jit}, or after at most {cap_s} s of warm-up (then marked not steady).")
    if cap_s:
        return f"Each measurement followed one warm-up run of {cap_s} s (a fixed time, not a test for steady state)."
    return "No warm-up ran before a measurement."
