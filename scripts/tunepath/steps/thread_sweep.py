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
           "from it after Holm's correction for multiple comparisons.")
    notebook_cells = (
        ("markdown", "## The best thread count per run\n\nThe highest median throughput, and the thread counts "
                     "the exact Mann–Whitney test cannot tell apart from it, Holm-corrected over every pair of "
                     "counts (the best is picked from the same data) at a family-wise 5 %."),
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
        return blocks + [restart(ctx), *load_blocks(ctx, self.load(ctx))]

    def measure(self, session, variants: list[str]) -> None:
        """Interleaved rounds until every comparison with the best can reach a verdict (Holm over
        every pair of counts), the intervals are narrow, or the budget is spent."""
        from tunepath.live.repeat import repeat

        repeat(session, self, variants, against_best=True)

    # --- analysis and charts ------------------------------------------------------------
    def best(self, result, run) -> dict | None:
        """The thread count with the highest median throughput, and each other count's verdict
        against it: the exact Mann–Whitney test on every pair of counts, Holm-corrected over all
        of them (the best is chosen from the same data, so the family is every pair)."""
        rows = [r for r in result.frame[result.frame.run_id == run.run_id].to_dict("records")
                if r["requests_per_sec"] and r["requests_per_sec"] > 0]
        if not rows:
            return None
        best = max(rows, key=lambda r: r["requests_per_sec"])
        values = [[v for v in r["rps_values"] if v is not None and v == v and v > 0] for r in rows]
        pairs = [(i, j) for i in range(len(rows)) for j in range(i + 1, len(rows)) if values[i] and values[j]]
        verdicts = dict(zip(pairs, stats.holm_verdicts([stats.compare(values[i], values[j]) for i, j in pairs])))
        b = rows.index(best)
        verdict = {i: verdicts.get((min(i, b), max(i, b))) for i in range(len(rows)) if i != b}
        pick = lambda want: [rows[i]["label"] for i, v in verdict.items() if v is want]  # noqa: E731
        return {"variant": best["variant"], "label": best["label"], "ties": pick(False), "below": pick(True),
                "untested": pick(None), "comparisons": len(pairs),
                "min_repetitions": min(int(r["n"] or 1) for r in rows)}

    def analysis(self, result, run) -> dict | None:
        best = self.best(result, run)
        if not best:
            return None
        return {"best_variant": best["variant"], "best_label": best["label"], "ties": best["ties"],
                "below": best["below"], "untested": best["untested"], "comparisons": best["comparisons"],
                "correction": "Holm", "min_repetitions": best["min_repetitions"]}

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
