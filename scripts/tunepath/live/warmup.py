"""The warm-up before a measurement: short windows until Tomcat's throughput is steady.

With a steady-state context (``warmup_window_s``), the first client loads Tomcat with the
``warm-up`` block (a window of ``warmup_window_s`` seconds, closed loop where the client has
Debian's wrk) again and again, and measuring starts once ``steady_windows`` windows in a row
served within ``±steady_pct`` % of their median (:func:`tunepath.analysis.steady.steady_at`), or
when one more window would pass the cap (``warmup_s``): that measurement is then flagged as
taken before steady state. With ``jit_quiet_pct``, Tomcat's JIT must also have compiled for at
most that share of the last window (its hsperfdata counters, read on the server after each
window: one more round trip a window; :func:`tunepath.analysis.steady.quiet`); where they cannot
be read at the start (no hsperfdata), the throughput rule alone decides, and the record says
the JIT was not tested. Each window's
req/s (and compilation share) and the time to steady state are recorded with the measurement.
Without ``warmup_window_s`` the block runs once, for ``warmup_s``.
"""

from __future__ import annotations

import time

from tunepath.analysis.steady import WarmUp, compile_pct, quiet
from tunepath.errors import TunepathError
from tunepath.live.actions import run_block
from tunepath.live.hosts import CommandFailed
from tunepath.live.jvmfacts import snapshot
from tunepath.live.session import Session, progress
from tunepath.parse.reports import parse_report

__all__ = ["warm_up"]


def _rate(text: str, tool: str) -> float | None:
    try:
        rate = parse_report(text, tool).requests_per_sec
    except TunepathError:
        return None
    return float(rate) if isinstance(rate, (int, float)) else None


def warm_up(session: Session, step, block, tag: str, repetition: int) -> WarmUp | None:
    """Warm Tomcat up before one measurement; returns what the windows served (None: one fixed run)."""
    ctx = session.ctx
    if not ctx.steady_state:
        progress(f"{tag}: warm-up {ctx.warmup_s} s")
        run_block(session, step.name, block, timeout=ctx.warmup_s + 60, repetition=repetition)
        return None
    host, tool = session.host(block.host), "wrk" if ctx.probe_with else session.tool.name
    rates: list[float | None] = []
    compiling: list[float | None] = []
    jit = ctx.jit_quiet_pct or None
    pid = session.tomcat.pid() if jit else None
    counters = snapshot(session.server, pid) if pid else None
    if jit and counters is None:        # no hsperfdata to read (-XX:-UsePerfData, not HotSpot, denied)
        progress(f"{tag}: the JVM's JIT counters cannot be read: the warm-up tests the throughput only")
        jit = None
    t0, steady_after = time.monotonic(), None
    while True:
        result = host.run(block.text, timeout=ctx.warmup_window_s + 60, check=False, as_written=True)
        if not result.ok:
            session.recorder.block(step.name, block.id, block.host, block.text, "ran", exit_status=result.exited,
                                   duration_s=round(time.monotonic() - t0, 3))
            raise CommandFailed(result, "the warm-up window failed; see the run record for the command")
        rates.append(_rate(result.stdout, tool))
        if jit:
            now = snapshot(session.server, pid) if pid else None
            compiling.append(compile_pct(counters, now))
            counters = now or counters
        elapsed = time.monotonic() - t0
        if quiet(rates, compiling, ctx.steady_windows, ctx.steady_pct, jit):
            steady_after = elapsed
            break
        if elapsed + ctx.warmup_window_s > ctx.warmup_s:
            break
        shown = f"{rates[-1]:,.0f} req/s" if rates[-1] is not None else "no reading"
        if jit:
            shown += f", JIT compiling {compiling[-1]:.0f} % of it" if compiling[-1] is not None else ", JIT not read"
        progress(f"{tag}: warm-up window {len(rates)}: {shown}; {elapsed:.0f} s of at most {ctx.warmup_s} s")
    seconds = time.monotonic() - t0
    session.recorder.block(step.name, block.id, block.host, block.text, "ran", exit_status=0,
                           duration_s=round(seconds, 3), **({"repetition": repetition} if repetition > 1 else {}))
    warm = WarmUp(ctx.warmup_window_s, tuple(rates), seconds, steady_after, ctx.steady_windows, ctx.steady_pct, tool,
                  tuple(compiling), jit)
    progress(f"{tag}: " + (f"steady after {steady_after:.0f} s ({len(rates)} windows)" if warm.steady else
                           f"not steady after {seconds:.0f} s ({len(rates)} windows): measuring anyway, flagged"))
    return warm
