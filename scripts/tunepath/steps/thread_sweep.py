"""Step: the thread-count sweep — the best maxThreads for this host, measured."""

from __future__ import annotations

from tunepath.analysis import stats
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import SweepStep
from tunepath.steps.commands import connector_xml, load_blocks, restart, sweep_connector

__all__ = ["STEP"]


class ThreadSweep(SweepStep):
    name = "thread-sweep"
    title = "Thread-count sweep: the best maxThreads for this host"
    prefix = "threads"
    why = ("The baseline set `maxThreads` to the online CPUs minus one, a rule of thumb. This step measures "
           "instead: the same configuration (access log off, keep-alive and connection limits raised) at "
           "`maxThreads` = 1, 2, 4 … 200 (the host context's `sweep_threads`), each repeated in interleaved "
           "rounds. It charts throughput, server CPU time per request and p99 latency against the thread count "
           "and names the count with the highest median throughput, with the counts that cannot be told apart "
           "from it.")
    notebook_cells = (
        ("markdown", "## The best thread count per run\n\nThe highest median throughput, and the thread counts "
                     "whose difference from it has a 95 % interval that spans zero (not significant)."),
        ("code", "pipeline.analysis(result)"),
    )

    @property
    def compares_variants(self) -> bool:
        return True

    def point_label(self, value: int) -> str:
        return f"maxThreads {value}"

    def variants_for(self, ctx: HostContext) -> tuple[Variant, ...]:
        return tuple(Variant(f"threads-{n}", self.point_label(n), f"maxThreads = minSpareThreads = {n}")
                     for n in ctx.sweep_threads)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        n = self.value(variant)
        if n:
            return TomcatConfig(access_log=False, connector=sweep_connector(n))
        return super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block(f"connector-{v.name}", "server", f"{v.label}: the HTTP Connector in "
                        f"{ctx.tomcat_home}/conf/server.xml", connector_xml(sweep_connector(self.value(v.name))),
                        lang="xml", variant=v.name)
                  for v in self.variants_for(ctx)]
        return blocks + [restart(ctx), *load_blocks(ctx)]

    # --- analysis and charts ------------------------------------------------------------
    def best(self, result, run) -> dict | None:
        """The thread count with the highest median throughput, and those not distinguishable from it."""
        rows = [r for r in result.frame[result.frame.run_id == run.run_id].to_dict("records")
                if r["requests_per_sec"] and r["requests_per_sec"] > 0]
        if not rows:
            return None
        best = max(rows, key=lambda r: r["requests_per_sec"])
        ties = [r["label"] for r in rows
                if r is not best and stats.compare(best["rps_values"], r["rps_values"]).significant is False]
        return {"variant": best["variant"], "label": best["label"], "ties": ties,
                "min_repetitions": min(int(r["n"] or 1) for r in rows)}

    def analysis(self, result, run) -> dict | None:
        best = self.best(result, run)
        if not best:
            return None
        return {"best_variant": best["variant"], "best_label": best["label"], "ties": best["ties"],
                "min_repetitions": best["min_repetitions"]}

    def charts(self, result, static) -> list:
        from tunepath.publish.charts import thread_sweep_chart

        out = []
        for run in result.runs:
            rows = result.frame[result.frame.run_id == run.run_id].to_dict("records")
            if rows:
                best = self.best(result, run)
                out.append(thread_sweep_chart(rows, static, f"thread-sweep-{run.run_id}", run.run_id,
                                              best["variant"] if best else None, self.value))
        return out


STEP = ThreadSweep()
