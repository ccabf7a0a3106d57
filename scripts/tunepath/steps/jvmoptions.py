"""What the steps that only change the JVM's options share (JVM, garbage collector, JIT).

Each variant of such a step is a list of options that ``bin/setenv.sh`` hands to Tomcat's JVM
through ``CATALINA_OPTS``; the rest of Tomcat stays stock, minus the access log. Before it is
measured, a variant's options are given to the server's own ``java``: a JVM that refuses one
(a build without Shenandoah, a flag newer than the JDK) or ignores one records the variant as
skipped with the JVM's own words, instead of measuring a JVM that did not start or ran without it.

:func:`jvm_table` is the per-variant table of what the JVM itself reported while the load ran
(its collector, pauses, compilations …), one row per measured configuration.
"""

from __future__ import annotations

from tunepath.analysis.factstable import Column, FactsRow, FactsTable
from tunepath.analysis.jvmfacts import fact_value
from tunepath.analysis.modes import FACTS
from tunepath.live.tomcatconf import TomcatConfig, setenv_command
from tunepath.model.context import HostContext
from tunepath.model.plan import Block
from tunepath.model.shell import quote
from tunepath.publish import formatting as fmt
from tunepath.steps.base import Step
from tunepath.live.tomcat import java_binary
from tunepath.steps.commands import load_blocks, restart

__all__ = ["JvmOptionsStep", "jvm_table", "refusal"]

# what the JVM says when it starts but ignores an option
IGNORED = "Ignoring option"
# what the JVM says around its reason for not starting: not the reason itself
GENERIC = ("Could not create the Java Virtual Machine", "Error occurred during initialization of VM",
           "A fatal exception has occurred")


class JvmOptionsStep(Step):
    """A step whose variants differ only in the JVM's options (``options``: variant → options)."""

    options: dict[str, tuple[str, ...]] = {}
    facts: tuple[str, ...] = ()          # the JVM facts its table shows, beside the collector

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in self.options:
            return TomcatConfig(access_log=False, jvm_options=self.options[variant])
        return super().config(variant, ctx)

    def setenv_blocks(self, ctx: HostContext) -> list[Block]:
        """One block per variant: its ``bin/setenv.sh``."""
        return [Block(f"setenv-{v.name}", "server", f"{v.label}: JVM options in {ctx.tomcat_home}/bin/setenv.sh",
                      setenv_command(ctx.tomcat_home, self.tomcat_config(v.name, ctx)), variant=v.name)
                for v in self.variants_for(ctx)]

    def plan(self, ctx: HostContext) -> list[Block]:
        """Each variant's ``bin/setenv.sh``, the restart, the warm-up and the load."""
        return [*self.setenv_blocks(ctx), restart(ctx), *load_blocks(ctx, self.load(ctx))]

    def skip_reasons(self, session, variant) -> list[str]:
        options = self.options.get(variant.name, ())
        if not options:
            return []
        jvm = java_binary(self.tomcat_config(variant.name, session.ctx).java_home)
        command = f"{jvm} {' '.join(quote(o, 'JVM option') for o in options)} -version 2>&1"
        result = session.server.run(command, check=False, timeout=60)
        why = refusal(result.ok, result.stdout)
        return [f"the server's JVM does not take {' '.join(options)}: {why}"] if why else []

    def analysis(self, result, run) -> dict | None:
        return jvm_table(result, run, self.facts).analysis()


def refusal(started: bool, output: str) -> str | None:
    """Why a JVM given some options and ``-version`` did not take them (None: it did), in its
    own words: the option it ignored, or the lines that say why it did not start."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    ignored = [line for line in lines if IGNORED in line]
    if started:
        return ignored[0] if ignored else None
    reasons = [line for line in lines if not any(g in line for g in GENERIC) and "version" not in line]
    return "; ".join(reasons[:2]) if reasons else "it did not start (" + (lines[0] if lines else "no output") + ")"


def jvm_table(result, run, facts: tuple[str, ...]) -> FactsTable:
    """The measured configurations of ``run`` in the step's table, each with the collector its JVM
    named and the median of each fact in ``facts`` (analysis.modes.FACTS) over its repetitions."""
    rows = result.frame[result.frame.run_id == run.run_id]
    columns = [Column("collector", "Collector (from the JVM's counters)")]
    columns += [Column(f, FACTS[f][0][:1].upper() + FACTS[f][0][1:], text=False) for f in facts]
    out = []
    for row in rows.to_dict("records"):
        cells = {"collector": row.get("collector") if isinstance(row.get("collector"), str) else fmt.NA}
        for f in facts:
            value = fact_value(f, row.get(f))
            cells[f] = FACTS[f][3](value) if value is not None else fmt.NA
        out.append(FactsRow(row["variant"], row["label"], cells))
    return FactsTable(tuple(columns), tuple(out),
                      "Medians over each configuration's counted repetitions, from the JVM's own counters (its "
                      "hsperfdata file) and its threads' CPU time, read before and after each measured load.")
