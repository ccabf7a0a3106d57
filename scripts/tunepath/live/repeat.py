"""Interleaved repetitions: A B C, A B C … until the figures are precise enough to compare.

Variants are measured in rounds, so that drift over time (a neighbour's load, the JIT, the
page cache) falls on every configuration alike. The :class:`~tunepath.analysis.stats.StoppingRule`
ends the rounds once every configuration's interval reaches its level and is within the target
and every comparison the step's page makes can reach a verdict (:func:`families`: each variant
against the previous one in a tuning step, against the first in a step that compares variants,
and, in a sweep that names its best, every pair Holm-corrected together), at the maximum number
of repetitions, or when the step's time budget is spent.

A repetition that something outside the configuration disturbed (CPU steal, or foreign load:
:data:`tunepath.analysis.noise.DROP_CODES`) does not count: it stays in the run as evidence,
is left out of the figures, and is measured again at once while the budget allows (at most
:data:`RETRIES` times in a round). What each configuration ended with (values counted, dropped
and why, interval half-width, CV, time to steady state) is recorded as the step's
``repetitions[step]["variants"]``. The figure the rule and the record watch is the throughput,
or, where wrk2 offers a constant rate (so throughput is the rate), Tomcat's CPU per request.
"""

from __future__ import annotations

import statistics
import time

from tunepath.analysis.noise import cpu_flags, drop_reasons
from tunepath.analysis.stats import StoppingRule, summarise
from tunepath.errors import TunepathError
from tunepath.live.loadgen import get_profile
from tunepath.live.measure import measure
from tunepath.live.session import Session, progress
from tunepath.parse.reports import parse_report_file

__all__ = ["repeat", "stopping_rule", "families", "shares_jvm", "RETRIES"]

RETRIES = 2      # a disturbed repetition is measured again at most this many times in one round


def stopping_rule(session: Session) -> StoppingRule:
    """The profile's rule, with what the run's options override (0 is refused by the CLI)."""
    profile, opts = get_profile(session.options.profile), session.options

    def given(value, default):
        return default if value is None else value

    minimum = given(opts.repetitions, profile.repetitions)
    return StoppingRule(min_repetitions=minimum,
                        max_repetitions=max(given(opts.max_repetitions, profile.max_repetitions), minimum),
                        ci_target_pct=given(opts.ci_target_pct, profile.ci_target_pct),
                        time_budget_s=given(opts.step_budget_s, profile.step_budget_s),
                        fixed=profile.fixed_rounds and opts.ci_target_pct is None)


def families(step, variants: list[str], against_best: bool = False) -> list[tuple[tuple[str, str], ...]]:
    """The comparisons the step's page makes among ``variants`` (in the step's order), grouped
    into the families judged together: one comparison each, except a sweep's reading of its best,
    which compares with a best chosen from the same data and so judges every pair at once (Holm)."""
    out: list[tuple[tuple[str, str], ...]] = []
    if step.kind == "tuning":
        out += [((a, b),) for a, b in zip(variants, variants[1:])]
    if step.compares_variants:
        out += [((variants[0], v),) for v in variants[1:]]
    if against_best and len(variants) > 1:
        out.append(tuple((a, b) for i, a in enumerate(variants) for b in variants[i + 1:]))
    return out


class _Tally:
    """Each variant's counted values, dropped repetitions and the next repetition number."""

    def __init__(self, variants: list[str], figure: str):
        self.figure = figure          # what the values are: requests_per_sec or server_cpu_us_per_req
        self.samples: dict[str, list[float]] = {v: [] for v in variants}
        self.dropped: dict[str, list[str]] = {v: [] for v in variants}
        self.steady: dict[str, list[float]] = {v: [] for v in variants}
        self.next: dict[str, int] = {v: 1 for v in variants}

    def summary(self, variant: str) -> dict:
        values = self.samples.get(variant) or []
        s = summarise(values) if values else None
        width = s.rel_half_width_pct() if s else None
        return {"figure": self.figure, "n": len(values), "dropped": len(self.dropped[variant]), "dropped_why": self.dropped[variant],
                "halfwidth_pct": None if width is None else round(width, 2),
                "level": s.level if s and s.low is not None else None,
                "cv_pct": None if not s or s.cv is None else round(s.cv * 100, 2),
                "steady_state_s": round(statistics.median(self.steady[variant]), 1) if self.steady[variant] else None}


def cpu_per_request(session: Session, entry: dict) -> float | None:
    """Tomcat's CPU µs per request of a recorded measurement (every client's requests), or None."""
    cpu = entry.get("tomcat_cpu_s")
    files = [p["stdout"] for p in entry.get("parts") or []] or [entry["stdout"]]
    try:
        requests = sum(parse_report_file(session.recorder.dir / f, entry.get("tool")).requests or 0 for f in files)
    except TunepathError:
        return None
    return cpu / requests * 1e6 if isinstance(cpu, (int, float)) and requests else None


def _disturbed(session: Session, step, variant: str) -> list:
    """The drop flags of the measurement just recorded (steal, foreign load)."""
    entry = session.recorder.record["measurements"][-1]
    return drop_reasons(cpu_flags(entry, session.facts.get("cpus"), session.tool.client_cpus,
                                  same_machine=session.inventory.same_machine, proxied=step.shares_server(variant)))


def _measure_counted(session: Session, step, variant: str, tally: _Tally, rule: StoppingRule,
                     started: float, restart: bool = True, keep_running: bool = False) -> bool:
    """Measure ``variant`` once, again (at most RETRIES times) while a repetition was disturbed;
    True when Tomcat is left running (``keep_running``, and nothing stopped it)."""
    retries = 0 if session.options.profile == "smoke" else RETRIES     # a smoke test measures nothing
    for attempt in range(retries + 1):
        repetition = tally.next[variant]
        tally.next[variant] += 1
        recorded, rps = measure(session, step, variant, repetition=repetition,
                                restart=restart or (attempt > 0 and not keep_running), keep_running=keep_running)
        if not recorded:
            tally.samples.pop(variant, None)      # e.g. JMeter measured nothing: skipped, not repeated
            return False                          # … and Tomcat was stopped
        entry = session.recorder.record["measurements"][-1]
        flags = _disturbed(session, step, variant)
        if not flags:
            # the figure the rule watches: throughput, or with a constant offered rate (wrk2, where
            # throughput is the rate) Tomcat's CPU per request
            value = cpu_per_request(session, entry) if session.tool.open_loop else rps
            if value is not None:
                tally.samples[variant].append(value)
            if (entry.get("warmup") or {}).get("steady_after_s") is not None:
                tally.steady[variant].append(entry["warmup"]["steady_after_s"])
            return keep_running
        why = "; ".join(f.text for f in flags)
        tally.dropped[variant].append(f"repetition {repetition}: {why}")
        over = rule.time_budget_s is not None and time.monotonic() - started > rule.time_budget_s
        progress(f"{step.name}/{variant} #{repetition}: left out ({why})"
                 + ("" if attempt == retries or over else "; measuring it again"))
        if over:
            return keep_running
    return keep_running


def shares_jvm(session: Session, step, variants: list[str]) -> bool:
    """The variants differ only on the client side or in front of Tomcat (one Tomcat configuration
    for all): each round then starts one JVM, warms it up once and measures every variant on it.
    Each round still starts a fresh JVM, so rounds stay independent (as JMH's forks are)."""
    if len(variants) < 2:
        return False
    first = step.tomcat_config(variants[0], session.ctx).to_dict()
    return all(step.tomcat_config(v, session.ctx).to_dict() == first for v in variants[1:])


def _round(session: Session, step, variants: list[str], tally: _Tally, rule: StoppingRule, started: float,
           rounds: int, shared: bool) -> None:
    """One round: every variant once. On a shared JVM the order turns by one each round, so that no
    variant is always the first measured after the warm-up."""
    order = variants[(rounds - 1) % len(variants):] + variants[:(rounds - 1) % len(variants)] if shared else variants
    running = False
    for i, variant in enumerate(order):
        if session.repeating:
            progress(f"{step.name}: round {rounds} of at most {rule.max_repetitions}, variant {i + 1}/"
                     f"{len(order)} ({variant}); {time.monotonic() - started:.0f} s spent"
                     + (f" of a {rule.time_budget_s:.0f} s budget" if rule.time_budget_s else ""))
        running = _measure_counted(session, step, variant, tally, rule, started, restart=not running,
                                   keep_running=shared and i < len(order) - 1)


def repeat(session: Session, step, variants: list[str], against_best: bool = False) -> None:
    """Measure ``variants`` of ``step`` in interleaved rounds and record why the rounds stopped
    (``against_best``: the step's page compares every variant with the best one)."""
    rule = stopping_rule(session)
    session.repeating = rule.max_repetitions > 1
    tally = _Tally(variants, "server_cpu_us_per_req" if session.tool.open_loop else "requests_per_sec")
    started, rounds, reason = time.monotonic(), 0, ""
    order = list(variants)
    shared = shares_jvm(session, step, variants)
    if shared:
        progress(f"{step.name}: one Tomcat configuration for every variant: one JVM and one warm-up per round")
    while True:
        rounds += 1
        t0 = time.monotonic()
        _round(session, step, variants, tally, rule, started, rounds, shared)
        variants = [v for v in variants if v in tally.samples]
        if not variants:
            break
        more, reason = rule.decide({v: tally.samples[v] for v in variants}, time.monotonic() - started,
                                   time.monotonic() - t0, families(step, variants, against_best))
        if more and rounds >= rule.max_repetitions:     # the rule counts values; left-out ones count no value
            more, reason = False, (f"maximum of {rule.max_repetitions} rounds reached ({reason}; repetitions "
                                   "left out were measured again within their round)")
        if not more:
            break
        progress(f"{step.name}: another round: {reason}")
    if rounds > 1 or rule.max_repetitions > 1:
        compared = families(step, variants, against_best)
        session.recorder.repetitions(step.name, rounds=rounds, reason=reason, rule={
            "min_repetitions": rule.min_repetitions, "max_repetitions": rule.max_repetitions,
            "ci_target_pct": rule.ci_target_pct, "time_budget_s": rule.time_budget_s, "level": rule.level,
            "first_stop": rule.first_stop(compared), "families": [len(f) for f in compared]},
            order=variants, variants={v: tally.summary(v) for v in order if v in tally.samples})
        progress(f"{step.name}: {rounds} round(s): {reason}")
