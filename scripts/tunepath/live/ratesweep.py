"""The live rate sweep: probe, climb, repeat, all against one JVM.

Tomcat starts once in the sweep's configuration. The capacity probe
(:func:`~tunepath.live.probe.probe_capacity`) measures what it serves; the climb
(:class:`~tunepath.analysis.climb.Climb`) offers rising rates from there, one measurement
each, until it stops (two misses in a row, or the server falls below 95 % of the offered
rate). With the step's time budget not spent, points are measured again, nearest the
objective's boundary first, up to the profile's maximum of repetitions; points whose
repetitions disagree are flagged noisy in the run's warnings. The rates actually offered
become the context's ``sweep_rates``, so the page shows exactly the commands that ran.
"""

from __future__ import annotations

import time
from dataclasses import replace

from tunepath.analysis.climb import Climb
from tunepath.analysis.sweep import SweepPoint
from tunepath.live.loadgen import get_profile
from tunepath.live.measure import drive, last_report, measure, restart_for
from tunepath.live.probe import probe_capacity, set_rate
from tunepath.live.warmup import warm_up
from tunepath.live.repeat import stopping_rule
from tunepath.live.session import Session, progress, save_context

__all__ = ["sweep", "SMOKE_POINTS"]

SMOKE_POINTS = 3        # the smoke profile proves the machinery: three rates at most


def _point(session: Session, step, variant: str, rate: int, repetition: int) -> SweepPoint:
    report = last_report(session, step, variant, repetition)
    return SweepPoint(rate, report.requests_per_sec, dict(report.percentiles_ms or {}), variant)


def _offer(session: Session, step, rate: int, offered: list[int], repetition: int) -> SweepPoint:
    """Measure one rate once (the context's rates include it, so its command is on the page)."""
    if rate not in offered:
        offered.append(rate)
        session.ctx = replace(session.ctx, sweep_rates=tuple(sorted(offered)))
    variant = f"{step.prefix}-{rate}"
    measure(session, step, variant, repetition=repetition, restart=False, keep_running=True)
    return _point(session, step, variant, rate, repetition)


def sweep(session: Session, step, first_variant: str, slo_ms: float = 10.0, percentile: str = "99",
          warmup=None) -> None:
    """Warm up (``warmup``: the steady-state block), probe, climb and repeat; then stop Tomcat and
    record the rates and why the sweep ended."""
    rec, rule = session.recorder, stopping_rule(session)
    own = get_profile(session.options.profile).rate_sweep_budget_s
    if own is not None and session.options.step_budget_s is None:      # the sweep reads no verdict
        rule = replace(rule, time_budget_s=min(rule.time_budget_s or own, own))
    started = time.monotonic()
    restart_for(session, step, first_variant)
    if warmup is not None:              # the probe then measures a warm JVM, not the JIT's warm-up
        warm_up(session, step, warmup, step.name, 1)
    capacity = probe_capacity(session, step, "stock", [session.client], drive, warm_first=warmup is None)
    if not session.ctx.rate_probed:
        set_rate(session, step, "stock", capacity, 1)
    climb = Climb(capacity, slo_ms=slo_ms, percentile=percentile,
                  max_points=SMOKE_POINTS if session.options.profile == "smoke" else Climb.max_points)
    offered: list[int] = []
    points: dict[int, list[SweepPoint]] = {}
    reason = None
    for i, rate in enumerate(climb.rates()):
        progress(f"{step.name}: rate {i + 1} ({rate:,} req/s, {rate / capacity * 100:.0f} % of the probe); "
                 f"{time.monotonic() - started:.0f} s spent")
        points[rate] = [_offer(session, step, rate, offered, 1)]
        reason = climb.stop_reason([p[0] for p in points.values()])
        if reason:
            break
    reason = reason or f"the sweep reached its {len(offered)} rates"
    rounds = _repeat(session, step, climb, points, offered, rule, started)
    session.tomcat.stop()
    save_context(rec.runs_dir, session.run_id, session.ctx, rec)
    rec.record["notes"].append({"text": rec.mask(
        f"The rate sweep climbed from {offered[0]:,} req/s ({climb.start_fraction * 100:.0f} % of the probe's "
        f"{capacity:,.0f} req/s) in steps of {climb.step_fraction * 100:.0f} % of it and stopped: {reason}.")})
    for rate, reps in points.items():
        why = climb.noisy(reps)
        if why:
            rec.warn(f"{step.name}/{step.prefix}-{rate}: noisy: {why}")
    rec.repetitions(step.name, rounds=rounds, reason=reason, order=[f"{step.prefix}-{r}" for r in offered], rule={
        "min_repetitions": 1, "max_repetitions": rule.max_repetitions, "ci_target_pct": rule.ci_target_pct,
        "time_budget_s": rule.time_budget_s})


def _repeat(session: Session, step, climb: Climb, points: dict, offered: list[int], rule, started: float) -> int:
    """Measure points again, nearest the boundary first, while the budget lasts; returns the rounds."""
    budget = rule.time_budget_s
    per_point = (time.monotonic() - started) / max(1, len(offered))
    rounds = 1
    for repetition in range(2, rule.max_repetitions + 1):
        for rate in climb.repeat_order([p[0] for p in points.values()]):
            if budget is not None and time.monotonic() - started + per_point > budget:
                progress(f"{step.name}: the {budget:.0f} s budget is spent; no more repetitions")
                return rounds
            rate = int(rate)
            progress(f"{step.name}: repetition {repetition} of {rate:,} req/s; "
                     f"{time.monotonic() - started:.0f} s of {budget or 0:.0f} s spent")
            points[rate].append(_offer(session, step, rate, offered, repetition))
            rounds = repetition
    return rounds
