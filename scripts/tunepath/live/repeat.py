"""Interleaved repetitions: A B C, A B C … until the intervals are narrow enough.

Variants are measured in rounds, so that drift over time (a neighbour's load, the JIT, the
page cache) falls on every configuration alike. The :class:`~tunepath.analysis.stats.StoppingRule`
ends the rounds when every configuration's interval is within the target, at the maximum
number of repetitions, or when the step's time budget is spent.
"""

from __future__ import annotations

import time

from tunepath.analysis.stats import StoppingRule
from tunepath.live.loadgen import get_profile
from tunepath.live.measure import measure
from tunepath.live.session import Session, progress

__all__ = ["repeat", "stopping_rule"]


def stopping_rule(session: Session) -> StoppingRule:
    """The profile's rule, with what the run's options override (0 is refused by the CLI)."""
    profile, opts = get_profile(session.options.profile), session.options

    def given(value, default):
        return default if value is None else value

    minimum = given(opts.repetitions, profile.repetitions)
    return StoppingRule(min_repetitions=minimum,
                        max_repetitions=max(given(opts.max_repetitions, profile.max_repetitions), minimum),
                        ci_target_pct=given(opts.ci_target_pct, profile.ci_target_pct),
                        time_budget_s=given(opts.step_budget_s, profile.step_budget_s))


def repeat(session: Session, step, variants: list[str]) -> None:
    """Measure ``variants`` of ``step`` in interleaved rounds and record why the rounds stopped."""
    rule = stopping_rule(session)
    session.repeating = rule.max_repetitions > 1
    samples: dict[str, list[float]] = {v: [] for v in variants}
    started, rounds, reason = time.monotonic(), 0, ""
    while True:
        rounds += 1
        t0 = time.monotonic()
        for i, variant in enumerate(variants):
            if session.repeating:
                progress(f"{step.name}: round {rounds} of at most {rule.max_repetitions}, variant {i + 1}/"
                         f"{len(variants)} ({variant}); {time.monotonic() - started:.0f} s spent"
                         + (f" of a {rule.time_budget_s:.0f} s budget" if rule.time_budget_s else ""))
            recorded, rps = measure(session, step, variant, repetition=rounds)
            if not recorded:
                samples.pop(variant, None)      # e.g. JMeter measured nothing: skipped, not repeated
            elif rps is not None:
                samples[variant].append(rps)
        variants = [v for v in variants if v in samples]
        if not variants:
            break
        more, reason = rule.decide(samples, time.monotonic() - started, time.monotonic() - t0)
        if not more:
            break
        progress(f"{step.name}: another round: {reason}")
    if rounds > 1 or rule.max_repetitions > 1:
        session.recorder.repetitions(step.name, rounds=rounds, reason=reason, rule={
            "min_repetitions": rule.min_repetitions, "max_repetitions": rule.max_repetitions,
            "ci_target_pct": rule.ci_target_pct, "time_budget_s": rule.time_budget_s},
            order=variants)
        progress(f"{step.name}: {rounds} round(s): {reason}")
