"""Step: the rate sweep — wrk2 at rising offered rates, capacity read at a latency objective."""

from __future__ import annotations

from tunepath.analysis.sweep import SweepPoint, capacity as read_capacity
from tunepath.live.probe import probe_block
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.model.shell import number, quote
from tunepath.publish import formatting as fmt
from tunepath.steps.base import SweepStep
from tunepath.model.load import load_spec
from tunepath.steps.commands import restart, warm_up

__all__ = ["STEP", "sweep_command"]


def sweep_command(spec) -> str:
    """The sweep's wrk2 line (its own order of options, as the recorded sweeps ran it): no
    open-file line, the rate after the duration, ``-W`` after the rate."""
    t, c, d = (number(v, k) for k, v in (("threads", spec.threads), ("connections", spec.connections),
                                           ("duration", spec.duration_s)))
    warm = f" -W{number(spec.warmup_s, 'warm-up')}" if spec.warmup_s else ""
    extra = " -U --latency" if spec.latency else ""
    return (f"{spec.pin}{quote(spec.tool, 'load generator')} -t{t} -c{c} -d{d} -R{number(spec.rate, 'rate')}{warm}"
            f"{extra} {quote(spec.url, 'URL')}")


class RateSweep(SweepStep):
    name = "rate-sweep"
    title = "Rate sweep: capacity at a latency objective"
    prefix = "rate"
    why = ("wrk2 offers a constant rate (open loop) and corrects its latencies for coordinated omission. Driving "
           "one JVM at rising rates shows where queueing starts: the latency percentiles stay flat while the "
           "server keeps up and climb steeply past capacity. The capacity worth quoting is the highest offered "
           "rate that still meets a latency objective (default p99 ≤ 10 ms, the parameters `slo_ms` and "
           "`slo_percentile`), beside the maximum throughput. Misses below that rate are flagged as suspected "
           "noise, to be repeated.\n\nA live sweep needs wrk2. It starts Tomcat once, probes its capacity "
           "(a short closed-loop run with Debian's wrk), then climbs from half that capacity in steps of a tenth "
           "of it, until the objective is missed at two rates in a row or the server serves less than 95 % of "
           "the offered rate; with time left it measures the points nearest the boundary again and flags those "
           "whose repetitions disagree. With Debian's wrk (closed loop) the step is recorded as skipped.")
    change = "Find the server's capacity: sweep wrk2's offered rate, and read the highest rate whose p99 latency stays within your objective."
    avoid = 'Do not read figures at a rate the server could not keep up with: wrk2 then measures its own backlog, in seconds.'
    notebook_parameters = (("slo_ms", "10.0", "the rate sweep's latency objective, in ms"),
                           ("slo_percentile", '"99"', "… at this percentile"))
    notebook_cells = (
        ("markdown", "## Capacity at the objective"),
        ("code", "pipeline.analysis(result)"),
    )

    def point_label(self, value: int) -> str:
        return f"{value:,} req/s offered"

    def variants_for(self, ctx: HostContext) -> tuple[Variant, ...]:
        return tuple(Variant(f"rate-{r}", self.point_label(r), f"wrk2 at a constant {r:,} req/s")
                     for r in ctx.rates)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if self.value(variant):
            return TomcatConfig()       # stock Tomcat, as in the recorded reference sweep
        return super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [restart(ctx)]
        if ctx.open_loop and ctx.rate_probed:       # a live sweep: it climbs from its own capacity probe
            blocks += [*(warm_up(ctx) if ctx.steady_state else ()), probe_block(ctx)]   # probed warm
        elif ctx.warmup_s:
            blocks.append(Block("warm-up", "client", f"Warm up the JIT for {ctx.warmup_s} s at "
                                f"{ctx.warmup_rate:,} req/s (not measured)",
                                sweep_command(load_spec(ctx, duration_s=ctx.warmup_s, warmup_s=0)
                                              .with_(rate=ctx.warmup_rate, latency=False, uncorrected=False))))
        settle = f", after {ctx.load_warmup_s} s at that rate (-W, not counted)" if ctx.settles else ""
        for v in self.variants_for(ctx):
            rate = self.value(v.name)
            blocks.append(Block(f"load-{v.name}", "client", f"Offer {rate:,} req/s (the same JVM, rates in rising "
                                f"order{settle})", sweep_command(self.load_at(ctx, rate)), variant=v.name))
        return blocks

    def load_at(self, ctx: HostContext, rate: int):
        """The sweep's load at one offered rate: both latency spectra; where wrk2 takes -W it
        calibrates at the new rate before it counts."""
        return load_spec(ctx).with_(
            rate=rate, latency=True, uncorrected=True)

    # --- live: one JVM through the whole sweep, from one client ------------------------------
    def skip_reasons(self, session, variant: Variant) -> list[str]:
        if session.tool.open_loop:
            return []
        return [f"a rate sweep needs wrk2 (open loop, a constant offered rate); the client has "
                f"{session.tool.name}, which is closed loop ({session.tool.why})"]

    def multi_client(self, variant: str) -> bool:
        return False        # the offered rate is the one on its command line

    def measure(self, session, variants: list[str]) -> None:
        """One JVM: a capacity probe, then rising rates until the objective is missed twice in a
        row or the server falls behind the offered rate; repeated where the time budget allows."""
        from tunepath.live.ratesweep import sweep

        warm = warm_up(session.ctx) if session.ctx.steady_state else []
        sweep(session, self, variants[0], warmup=warm[0] if warm else None)

    # --- analysis and charts ------------------------------------------------------------
    def capacity(self, result, run):
        """The sweep of ``run`` read at the result's latency objective (a ``sweep.Capacity``)."""
        rows = result.frame[result.frame.run_id == run.run_id].sort_values("offered_rate")
        points = [SweepPoint(r["offered_rate"], r["requests_per_sec"],
                             {"50": r["p50_ms"], "90": r["p90_ms"], "99": r["p99_ms"], "99.9": r["p99.9_ms"]},
                             r["label"]) for r in rows.to_dict("records") if r["offered_rate"]]
        if not points:
            return None
        return read_capacity(points, slo_ms=result.options["slo_ms"], percentile=result.options["slo_percentile"])

    def analysis(self, result, run) -> dict | None:
        cap = self.capacity(result, run)
        if cap is None:
            return None
        rate = fmt.offered
        rows = sorted(result.frame[result.frame.run_id == run.run_id].to_dict("records"),
                      key=lambda r: r["offered_rate"] or 0)
        return {
            "slo_ms": cap.slo_ms, "percentile": cap.percentile,
            "capacity_rate": cap.capacity_rate, "max_throughput": cap.max_throughput,
            "sentence": cap.sentence(),
            "display": {"objective": f"p{cap.percentile} ≤ {cap.slo_ms:g} ms",
                        "capacity_rate": rate(cap.capacity_rate),
                        "capacity_achieved": fmt.rate(cap.capacity_achieved),
                        "capacity_latency": fmt.latency(cap.capacity_latency_ms),
                        "max_throughput": fmt.rate(cap.max_throughput),
                        "max_throughput_offered": rate(cap.max_throughput_offered),
                        "first_violation": rate(cap.first_violation),
                        "sustained_rate": rate(cap.sustained_rate),
                        "suspect": ", ".join(rate(v) for v in cap.suspect)},
            "meets": {r["variant"]: ok for r, ok in zip(rows, cap.meets)},
        }

    def charts(self, result, static) -> list:
        from tunepath.publish.charts import rate_sweep_chart

        out = []
        for run in result.charted_runs:
            rows = result.frame[result.frame.run_id == run.run_id].to_dict("records")
            cap = self.capacity(result, run) if rows else None
            if cap is not None:
                out.append(rate_sweep_chart(rows, cap, static, f"rate-sweep-{run.run_id}", run.run_id))
        return out


STEP = RateSweep()
