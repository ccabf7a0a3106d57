"""Execute one step live: the generic flow every step follows, asking the step what is its own.

:func:`run_step` is what a step's notebook reaches in ``mode="live"``
(:func:`tunepath.pipeline.step`). It opens the hosts of the inventory, checks that this run
holds the server's lock, and lets the step run (``Step.run_live``); most steps use
:func:`standard_flow`:

- the step's plan (``Step.plan``) is rendered for the real hosts;
- disruptive blocks run only with ``apply`` and a passing preflight; otherwise they are
  recorded as dry-run or skipped, with the reason, and so is every variant that needs
  them (``Step.disruptive_needs``);
- read-only probes (``Step.probes``) are recorded as verification output; other server
  shell blocks run as written; blocks of a variant run with that variant;
- the variants that can run (Java, host changes, ``Step.skip_reasons``) are measured
  (``Step.measure``: by default interleaved repetitions).

A failure or interrupt inside a step restores what the step changed: CPUs, NIC queues,
server.xml, and Tomcat is stopped.
"""

from __future__ import annotations

import time
from pathlib import Path

from tunepath.live.actions import (cleanup, disruptive, ensure_tomcat, java_major, run_block, step_guard,
                                   verify)
from tunepath.live.hoststate import preflight
from tunepath.live.session import LiveOptions, Session, open_session, progress

__all__ = ["run_step", "standard_flow", "run_plan", "measurable"]


def run_step(step, runs_dir, run_id: str, options: LiveOptions) -> None:
    """Execute ``step`` (a step object) live and record it into the run being recorded."""
    if not step.live:
        return
    session = open_session(run_id, Path(runs_dir), options)
    started = time.time()
    try:
        with step_guard(session, step.name):
            progress(f"{step.name}: on {session.server.name} (client {session.client.name}, {session.tool.name}, "
                     f"profile {options.profile})")
            step.run_live(session)
            session.recorder.step_timing(step.name, started, time.time())
    finally:
        session.close()


def standard_flow(step, session: Session) -> None:
    """Install Tomcat if missing, run the plan's host blocks, verify, measure, clean up."""
    ensure_tomcat(session, step.name)
    step.prepare_live(session)
    blocked = run_plan(step, session)
    verify(session, step)
    variants = measurable(step, session, blocked)
    if variants:
        step.measure(session, variants)
    cleanup(session.server, session.tomcat, session.clients, session.run_id)


def run_plan(step, session: Session) -> dict[str, str]:
    """The plan's host blocks, in order; returns the disruptive blocks that did not run, with why."""
    rec = session.recorder
    blocked: dict[str, str] = {}
    for block in step.plan(session.ctx):
        if block.disruptive:
            changed, reason = disruptive(session, step.name, block, run=block.id not in step.measured_changes)
            if not changed and block.id not in step.optional_blocks:
                blocked[block.id] = reason
        elif block.variant:
            continue            # applied with its variant's configuration
        elif block.id in step.probes:
            check = preflight(session.server, block, session.facts, session.inventory.same_machine)
            if check.ok:
                r = run_block(session, step.name, block, timeout=60)
                rec.verification(step.name, block.id, "server", block.text, r.stdout)
            else:
                rec.block(step.name, block.id, block.host, block.text, "skipped", reason=check.reason)
        elif block.host == "server" and block.lang == "bash" and block.id not in ("restart-tomcat", "start-tomcat"):
            run_block(session, step.name, block)
    return blocked


def measurable(step, session: Session, blocked: dict[str, str]) -> list[str]:
    """The variants these hosts can measure; the others are recorded as skipped, with why."""
    out = []
    java = java_major(session)
    blocks = step.plan(session.ctx)
    for variant in step.variants_for(session.ctx):
        needs = step.disruptive_needs.get(variant.name, ())
        missing = [blocked[b] if b == variant.name else f"{b}: {blocked[b]}" for b in needs if b in blocked]
        missing += step.skip_reasons(session, variant)
        if variant.requires_java > (java or 0):
            missing.append(f"needs Java {variant.requires_java} or later; the server runs Java {java} "
                           "(give a newer JDK with --java-home)")
        if missing:
            session.recorder.skipped(step.name, variant.name, "; ".join(missing),
                                     commands=[b.text for b in blocks if b.id in needs])
            progress(f"{step.name}/{variant.name}: skipped ({'; '.join(missing)})")
            continue
        out.append(variant.name)
    return out
