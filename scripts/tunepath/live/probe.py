"""The capacity probe: how a live run chooses wrk2's offered rate.

An open-loop measurement offers a constant rate, so the rate must be one the server can
serve: offered above its capacity, requests queue without bound and the corrected
latency measures the queue, not the server. Before the run's first measurement (not the
smoke test), with Tomcat started in that measurement's configuration, a short closed-loop
run measures the most the server serves at the run's connections: Debian's ``wrk``, each
connection sending as soon as its previous answer arrived (the context's ``probe_with``).
Every later measurement of the run offers :data:`FRACTION` of it (split between the clients
that drive the load), so the steps compare latency at one offered load; the rate sweep
climbs from the same kind of probe. The run records the probe's report, the rate and why
(its notes and context: ``rate``, ``rate_probed``).

Only a client without a closed-loop wrk probes with wrk2 itself at an unreachable rate
(:data:`PROBE_RATE` per client). That reads low where the client shares CPUs with the server:
wrk2 behind its schedule sends in a tight loop and takes CPU from Tomcat. On the lab (one
2-CPU machine) such a probe reported 8,127 req/s, and the same JVM then served 17,000 req/s
with p99 ≤ 10 ms in both repetitions.
"""

from __future__ import annotations

from dataclasses import replace

from tunepath.analysis.climb import nice_rate
from tunepath.errors import TunepathError
from tunepath.model.context import HostContext
from tunepath.model.load import PROBE, load_spec
from tunepath.model.plan import Block
from tunepath.model.shell import number, quote
from tunepath.parse.reports import parse_report

__all__ = ["PROBE_RATE", "FRACTION", "probe_block", "probe_capacity", "set_rate", "choose_rate", "probe_seconds"]

PROBE_RATE = 1_000_000       # req/s per client: more than one JVM serves
FRACTION = 0.7               # the offered rate: this fraction of the probe's capacity


def probe_seconds(ctx: HostContext) -> int:
    """The probe's length: 10 s (wrk2 reports its rate over the whole run; no calibration needed),
    or the run's duration when shorter (the smoke profile)."""
    return min(10, ctx.duration_s)


def probe_block(ctx: HostContext, url: str | None = None) -> Block:
    """The probe, from the path's load (:func:`~tunepath.model.load.load_spec`): its connections and
    threads, closed loop (or wrk2 at an unreachable rate), for :func:`probe_seconds`, against ``url``
    (the step's load's: :meth:`Step.load`) where given."""
    spec = load_spec(ctx, duration_s=probe_seconds(ctx), warmup_s=0)
    if url:
        spec = spec.with_(url=url)
    t, c, d = (number(v, k) for k, v in (("threads", spec.threads), ("connections", spec.connections),
                                           ("duration", spec.duration_s)))
    url = quote(spec.url, "URL")
    if ctx.probe_with:
        return Block(PROBE, "client",
                     f"Capacity probe: {d} s closed loop (each connection sends when its answer arrived); the "
                     f"offered rate is {FRACTION * 100:.0f} % of what the server served",
                     f"{spec.nofile}\n{spec.pin}{quote(ctx.probe_with, 'probe tool')} -t{t} -c{c} -d{d} {url}")
    return Block(PROBE, "client",
                 f"Capacity probe: offer far more than the server can serve for {d} s; the offered rate is "
                 f"{FRACTION * 100:.0f} % of what it achieved",
                 f"{spec.nofile}\n{spec.pin}{quote(ctx.wrk2, 'wrk2')} -t{t} -c{c} -d{d} -R{PROBE_RATE} {url}")


def probe_capacity(session, step, variant: str, clients: list, drive, warm_first: bool = False) -> float:
    """Run the probe from ``clients`` against the running Tomcat and record its report; returns the
    requests per second all clients achieved together. ``warm_first``: Tomcat has just started and
    no warm-up ran (the measurement's own wrk2 warms up), so the probe runs once uncounted first."""
    from tunepath.live.session import progress

    ctx = session.ctx
    url = step.load(ctx).url
    block, seconds = probe_block(ctx, url), probe_seconds(ctx)
    if warm_first:
        progress(f"{step.name}/{variant}: warming the JVM up with the probe's load for {seconds} s (not counted)")
        drive(session, block.text, seconds, clients)
    progress(f"{step.name}/{variant}: capacity probe, {seconds} s "
             + (f"closed loop ({ctx.probe_with})" if ctx.probe_with else f"at an offered {PROBE_RATE:,} req/s per client"))
    results = drive(session, block.text, seconds, clients)
    session.recorder.verification(step.name, PROBE, "client", block.text,
                                  results[0].stdout + results[0].stderr)
    try:
        achieved = sum(parse_report(r.stdout, "wrk" if ctx.probe_with else "wrk2").requests_per_sec or 0
                       for r in results)
    except TunepathError as exc:
        raise TunepathError(f"on {clients[0].name}: the capacity probe's report is unreadable ({exc}); its "
                            f"output is recorded in the run. Check that Tomcat answers at {url} and run "
                            "again") from None
    if achieved <= 0:
        raise TunepathError(f"on {clients[0].name}: the capacity probe served nothing (`{block.text}`): check "
                            f"that Tomcat answers at {url}")
    progress(f"{step.name}/{variant}: capacity {achieved:,.0f} req/s")
    return achieved


def set_rate(session, step, variant: str, achieved: float, clients: int) -> None:
    """The run's offered rate from now on: :data:`FRACTION` of ``achieved``, split between the
    ``clients``; recorded in the context (run.json and the side file) and the run's notes."""
    from tunepath.live.session import progress, save_context

    rec, ctx = session.recorder, session.ctx
    rate = nice_rate(FRACTION * achieved / clients)
    session.ctx = replace(ctx, rate=rate, rate_probed=round(achieved))
    save_context(rec.runs_dir, session.run_id, session.ctx, rec)
    per = f" from each of {clients} clients" if clients > 1 else ""
    rec.record["notes"].append({"text": rec.mask(
        f"Offered rate {rate:,} req/s{per}: {FRACTION * 100:.0f} % of the {achieved:,.0f} req/s that {step.name} "
        f"({variant}) served in a {probe_seconds(ctx)} s capacity probe ("
        + (f"closed loop, {ctx.probe_with}" if ctx.probe_with else f"wrk2 offering {PROBE_RATE:,} req/s per client")
        + "). Every later measurement of this run offers it, so the steps compare latency at one offered load.")})
    rec.save()
    progress(f"offering {rate:,} req/s{per} from now on")


def choose_rate(session, step, variant: str, clients: list, drive, warm_first: bool = False) -> bool:
    """Probe once per run (the first measurement with wrk2) and set the offered rate; True when it
    probed. ``drive(session, text, seconds, clients)`` runs the load (:func:`tunepath.live.measure.drive`)."""
    if session.ctx.rate_probed or not session.tool.open_loop:
        return False
    set_rate(session, step, variant, probe_capacity(session, step, variant, clients, drive, warm_first), len(clients))
    return True
