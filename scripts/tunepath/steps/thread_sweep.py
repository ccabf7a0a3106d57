"""Step: the thread-count sweep — the best maxThreads for this host, measured."""

from __future__ import annotations

from tunepath.analysis import stats
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import SweepStep
from tunepath.steps.commands import connector_xml, load_blocks, restart, sweep_connector

__all__ = ["STEP", "BEST_WORDS"]

# what "best" means, by the figure it is read on (open loop: CPU per request; closed loop: throughput)
BEST_WORDS = {"server_cpu_us_per_req": "Least server CPU per request", "requests_per_sec": "Highest median throughput"}
WORSE_WORDS = {"server_cpu_us_per_req": "with more server CPU per request", "requests_per_sec": "with lower throughput"}


class ThreadSweep(SweepStep):
    name = "thread-sweep"
    title = "Thread-count sweep: the best maxThreads for this host"
    prefix = "threads"
    why = ("The baseline set `maxThreads` to the online CPUs minus one, a rule of thumb. This step measures "
           "instead: the same configuration (access log off, keep-alive and connection limits raised) at "
           "`maxThreads` = 1, 2, 4 … 200 (the host context's `sweep_threads`), each repeated in interleaved "
           "rounds. It charts throughput, server CPU time per request and p99 latency against the thread count "
           "and names the best count (the least server CPU per request where the load offered a fixed rate, "
           "the highest median throughput where it did not), with the counts that cannot be told apart "
           "from it after Holm's correction for multiple comparisons.")
    change = 'Sweep `maxThreads` on your own host and keep the count with the least server CPU per request within your latency objective, not a rule of thumb.'
    avoid = 'Do not carry a count from one host or application to another: requests that block need more threads than cores.'
    notebook_cells = (
        ("markdown", "## The best thread count per run\n\nThe least server CPU per request (open loop; the highest "
                     "median throughput closed loop), and the thread counts "
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
        """The best thread count, and each other count's verdict against it: the exact Mann–Whitney
        test on every pair of counts, Holm-corrected over all of them (the best is chosen from the
        same data, so the family is every pair). Where the load offered a fixed rate (open loop),
        requests/s is that rate for every count: the best is then the least server CPU per request;
        closed loop, the highest median throughput (:func:`tunepath.analysis.verdicts.figure_for`).
        None for an emulated server."""
        from tunepath.analysis.verdicts import CPU, figure_for

        if run not in result.charted_runs:      # an emulated server's figures check commands: never ranked
            return None
        rows = [r for r in result.frame[result.frame.run_id == run.run_id].to_dict("records")
                if r["requests_per_sec"] and r["requests_per_sec"] > 0]
        figure = figure_for(rows[0], rows[-1]) if rows else None
        column = "cpu_values" if figure == CPU else "rps_values"
        rows = [r for r in rows if r[figure] is not None and r[figure] == r[figure] and r[figure] > 0]
        if not rows:
            return None
        best = (min if figure == CPU else max)(rows, key=lambda r: r[figure])
        values = [[v for v in r[column] if v is not None and v == v and v > 0] for r in rows]
        pairs = [(i, j) for i in range(len(rows)) for j in range(i + 1, len(rows)) if values[i] and values[j]]
        verdicts = dict(zip(pairs, stats.holm_verdicts([stats.compare(values[i], values[j]) for i, j in pairs])))
        b = rows.index(best)
        verdict = {i: verdicts.get((min(i, b), max(i, b))) for i in range(len(rows)) if i != b}
        pick = lambda want: [rows[i]["label"] for i, v in verdict.items() if v is want]  # noqa: E731
        return {"variant": best["variant"], "label": best["label"], "ties": pick(False), "below": pick(True),
                "untested": pick(None), "comparisons": len(pairs), "figure": figure,
                "words": BEST_WORDS[figure], "worse": WORSE_WORDS[figure],
                "min_repetitions": min(int(r["n"] or 1) for r in rows)}

    def analysis(self, result, run) -> dict | None:
        best = self.best(result, run)
        if not best:
            return None
        return {"best_variant": best["variant"], "best_label": best["label"], "ties": best["ties"],
                "below": best["below"], "untested": best["untested"], "comparisons": best["comparisons"],
                "figure": best["figure"], "best_words": best["words"], "worse_words": best["worse"],
                "correction": "Holm", "min_repetitions": best["min_repetitions"]}

    def charts(self, result, static) -> list:
        from tunepath.publish.charts import thread_sweep_chart

        out = []
        for run in result.charted_runs:
            rows = result.frame[result.frame.run_id == run.run_id].to_dict("records")
            if rows:
                best = self.best(result, run)
                out.append(thread_sweep_chart(rows, static, f"thread-sweep-{run.run_id}", run.run_id,
                                              best["variant"] if best else None, self.value,
                                              best["words"].lower() if best else ""))
        return out


STEP = ThreadSweep()
