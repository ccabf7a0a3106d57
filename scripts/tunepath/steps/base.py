"""What every step of the learning path is: :class:`Step`, with its hooks and their defaults.

A step module (``tunepath/steps/<name>.py``) defines one subclass and one instance,
``STEP``. The step says what it changes and why, which variants it measures and with
which Tomcat configuration, its exact commands (:meth:`Step.plan`), which host changes
a variant needs, and how it is run live, analysed, charted and published. Generic code
(the live runner, the frames, the Hugo data, the build) only ever asks the step object;
it never compares step names.

Kinds of step:

``setup``       installs and smoke-tests; outside every comparison.
``tuning``      continues the host's cumulative tuning sequence (baseline … IOMMU): each
                measurement is compared with the previous one and with the stock figure.
``comparison``  compares its variants with its first variant (connectors, JVM …).
``sweep``       measures one parameter over a range (threads, offered rate).
``analysis``    runs nothing: reads recorded runs (comparison of runs, summary).

The hooks, by who calls them (each method below documents its default):

- identity and notebook (``publish.notebooks``, ``publish.hugo_data``, the registry): ``name``,
  ``title``, ``kind``, ``why``, ``number``; ``page``, ``notebook`` (``NN-<name>.ipynb``),
  ``data_file``, ``notebook_cells``, ``notebook_parameters``;
- commands and variants (the live flow, the frames, ``tunepath plan``): ``variants`` and
  ``variants_for``, ``label``, ``sort_key``, ``config`` (→ ``tomcat_config``), ``plan``,
  ``verifications``, ``client_verifications``, ``probes``, ``disruptive_needs``,
  ``optional_blocks``, ``measured_changes``, ``shares_server``;
- live (``live.execute``, ``live.measure``, ``live.repeat``): ``run_live`` (default
  ``standard_flow``), ``prepare_live``, ``skip_reasons``, ``load_tool``, ``multi_client``,
  ``before_start``, ``before_load`` (may return a function that undoes it), ``measure`` (default: interleaved
  rounds until the stopping rule ends them). ``live.measure`` runs the plan's ``restart-tomcat``
  (or ``start-tomcat``), ``warm-up`` if any, then ``load-<variant>`` or ``load``; blocks with a
  ``variant`` are shown on the page and applied through the configuration, not run by the plan;
- replay, charts and publishing (``pipeline``): ``select``, ``history``, ``charts``,
  ``analysis``, ``readings``, ``document``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from tunepath.errors import TunepathError
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.load import LoadSpec, load_spec
from tunepath.model.plan import Block, Variant
from tunepath.steps.commands import verify_command

if TYPE_CHECKING:       # annotations only: these layers call the hooks, not the other way round
    from tunepath.analysis.result import StepResult
    from tunepath.evidence.store import Run
    from tunepath.live.session import Session
    from tunepath.publish.charts import Chart

__all__ = ["Step", "SweepStep", "KINDS"]

KINDS = ("setup", "tuning", "comparison", "sweep", "analysis")


class Step:
    """One step of the learning path. Subclasses set the class attributes and override hooks."""

    name: str = ""
    title: str = ""
    kind: str = "comparison"
    why: str = ""                                 # what it changes and why: the notebook's introduction
    # the answer its page opens with (publish/answer.py): what to change, in one line with its config
    # or command (Markdown), and when not to; the variants whose comparisons answer it (all: ())
    change: str = ""
    avoid: str = ""
    answer_variants: tuple[str, ...] = ()
    variants: tuple[Variant, ...] = ()
    verifications: tuple[str, ...] = ()           # commands whose output the run records (steps.commands)
    client_verifications: frozenset[str] = frozenset()   # … of those, run on the client
    probes: tuple[str, ...] = ()                  # read-only plan blocks recorded as verification output
    disruptive_needs: dict[str, tuple[str, ...]] = {}    # variant → disruptive blocks it needs
    optional_blocks: frozenset[str] = frozenset() # disruptive blocks whose absence still lets it measure
    measured_changes: frozenset[str] = frozenset()   # disruptive blocks it applies itself before each of their
                                                     # variant's measurements (before_start): the plan checks them
    notebook_cells: tuple[tuple[str, str], ...] = ()     # extra ("markdown"|"code", source) cells
    notebook_parameters: tuple[tuple[str, str, str], ...] = ()   # extra (name, default, comment) parameters
    number: int = 0                               # its position in the path (set by the registry)

    def __repr__(self) -> str:
        return f"<step {self.number} {self.name}>"

    # --- identity -------------------------------------------------------------------
    @property
    def page(self) -> str:
        """The content page (``content/…/<page>.md``) and the step's URL segment."""
        return self.name

    @property
    def notebook(self) -> str:
        return f"{self.number:02d}-{self.name}.ipynb"

    @property
    def data_file(self) -> str:
        """The Hugo data file the step publishes, relative to the site directory."""
        return f"data/steps/{self.name}.json"

    @property
    def live(self) -> bool:
        """Whether the step runs anything on the hosts."""
        return self.kind != "analysis"

    @property
    def compares_variants(self) -> bool:
        """Each variant is compared with the step's first (connectors, JVM, thread sweep …)."""
        return self.kind == "comparison"

    @property
    def reads_all_runs(self) -> bool:
        """The step reads every selected run, not only those that recorded it."""
        return self.kind == "analysis"

    # --- variants and commands ---------------------------------------------------------
    def variants_for(self, ctx: HostContext) -> tuple[Variant, ...]:
        """The measured variants on the hosts of ``ctx`` (sweeps derive theirs from it)."""
        return self.variants

    def label(self, variant: str, ctx: HostContext) -> str:
        for v in self.variants_for(ctx):
            if v.name == variant:
                return v.label
        return variant

    def sort_key(self, variant: str, ctx: HostContext) -> tuple:
        """Variants in the step's own order; unknown ones after them, by name."""
        order = [v.name for v in self.variants_for(ctx)]
        return (0, order.index(variant), variant) if variant in order else (1, 0, variant)

    def tomcat_config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        """The Tomcat configuration ``variant`` measures, with the context's JDK."""
        config = self.config(variant, ctx)
        return replace(config, java_home=ctx.java_home) if ctx.java_home else config

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        raise TunepathError(f"step {self.name!r} has no variant {variant!r}")

    def plan(self, ctx: HostContext) -> list[Block]:
        """The command blocks of the step for the hosts of ``ctx``, in order."""
        return []

    def load(self, ctx: HostContext) -> LoadSpec:
        """The load the step's measurements drive (tool, URL, headers, rate, connections, threads,
        duration, warm-up): the path's by default. The warm-up and the measurement render their
        commands from it; a step that changes the load (TLS, compression, HTTP/2) overrides this."""
        return load_spec(ctx)

    def verify_commands(self, ctx: HostContext) -> dict[str, str]:
        return {name: verify_command(name, ctx) for name in self.verifications}

    def shares_server(self, variant: str) -> bool:
        """Another process on the server serves this variant's load too (a proxy): its CPU is
        not Tomcat's, and the noise check says so instead of flagging it."""
        return False

    # --- live hooks (called by tunepath.live.execute) ----------------------------------------
    def run_live(self, session: "Session") -> None:
        """Run the step on the hosts of ``session``, recording into its run."""
        from tunepath.live.execute import standard_flow

        standard_flow(self, session)

    def prepare_live(self, session: "Session") -> None:
        """Before the plan runs (e.g. a per-run secret)."""

    def skip_reasons(self, session: "Session", variant: Variant) -> list[str]:
        """Why ``variant`` cannot be measured on these hosts (beyond Java and host changes)."""
        return []

    def load_tool(self, session: "Session", variant: str) -> str:
        """The load generator that measures ``variant`` (its report's format)."""
        return session.tool.name

    def multi_client(self, variant: str) -> bool:
        """Whether every client of the inventory drives ``variant``'s load at once."""
        return True

    def before_start(self, session: "Session", variant: str, repetition: int) -> None:
        """Before Tomcat starts for ``variant``: the host settings it runs under (kernel settings a
        listening socket reads when it opens); its blocks' checks passed in the plan."""

    def before_load(self, session: "Session", variant: str, blocks: dict[str, Block],
                    repetition: int) -> Callable[[], None] | None:
        """Set up what the load needs once Tomcat runs; returns what undoes it, if anything."""
        return None

    def measure(self, session: "Session", variants: list[str]) -> None:
        """Measure the variants that can run: interleaved rounds until the intervals are narrow."""
        from tunepath.live.repeat import repeat

        repeat(session, self, variants)

    # --- replay hooks (called by tunepath.pipeline) ------------------------------------------
    def select(self, frame):
        """The rows of the step's table: its own measurements, or (a step that reads every run)
        each run's tuning sequence in order."""
        if self.reads_all_runs:
            return frame[frame.order >= 0].sort_values(["run_id", "order"]).reset_index(drop=True)
        return frame[frame.step == self.name].reset_index(drop=True)

    def history(self, result: "StepResult", run: "Run") -> list[dict]:
        """The rows the step's throughput and latency charts show for ``run``: its tuning
        sequence up to this step, or the step's own rows outside the sequence."""
        rows = result.all_rows[result.all_rows.run_id == run.run_id]
        mine = rows[rows.step == self.name]
        if mine.empty:
            return []
        if (mine.order < 0).all():
            return mine.to_dict("records")
        upto = mine.order.max() + 1
        return rows[(rows.order >= 0) & (rows.order < upto)].sort_values("order").to_dict("records")

    def charts(self, result: "StepResult", static) -> list["Chart"]:
        """The headline chart (throughput, or server CPU per request where the load offered a fixed
        rate) and the latency chart, one pair per run (never one series across hosts); none for a
        run on an emulated server."""
        from tunepath.publish import charts as chartlib

        highlight = {f"{r.step}/{r.variant}" for r in result.frame.itertuples()}
        out = []
        for run in result.charted_runs:
            rows = self.history(result, run)
            if rows:
                out.append(chartlib.headline_chart(rows, highlight, static, self.name, run.run_id))
                out.append(chartlib.latency_chart(rows, highlight, static, f"{self.name}-latency-{run.run_id}",
                                                  run.run_id))
        return out

    def analysis(self, result: "StepResult", run: "Run") -> dict | None:
        """What the step reads from one run's measurements beyond the table (sweeps)."""
        return None

    def readings(self, result: "StepResult") -> dict:
        """What the notebook shows beyond the table: :meth:`analysis` of each run that has one."""
        found = {run.run_id: self.analysis(result, run) for run in result.runs}
        return {k: v for k, v in found.items() if v is not None}

    def document(self, result: "StepResult", charts: list[dict], notebook: dict, historical_dir) -> dict:
        """The Hugo data of the step (``data_file``)."""
        from tunepath.publish.hugo_data import historical_for, step_document

        doc = step_document(self, result.runs, result.all_rows, charts, notebook,
                            historical_for(self.name, historical_dir), result.registry)
        for block in doc["runs"]:
            run = result.run(block["run_id"])
            # an emulated server's readings time the emulator: its notebook keeps them, its page does not
            found = None if run.emulated else self.analysis(result, run)
            if found is not None:
                block["analysis"] = found
        return doc


class SweepStep(Step):
    """A step whose variants are the points of one parameter, named ``<prefix>-<value>``
    (``threads-16``, ``rate-5000``): labelled and ordered by their value."""

    kind = "sweep"
    prefix: str = ""

    def value(self, variant: str) -> int | None:
        """The number a variant stands for: ``threads-16`` → 16; None for any other name."""
        head, _, tail = variant.rpartition("-")
        return int(tail) if head == self.prefix and tail.isdigit() else None

    def point_label(self, value: int) -> str:
        raise NotImplementedError

    def label(self, variant: str, ctx: HostContext) -> str:
        value = self.value(variant)        # also a point outside this context's list
        return self.point_label(value) if value is not None else variant

    def sort_key(self, variant: str, ctx: HostContext) -> tuple:
        value = self.value(variant)
        return (0, value, variant) if value is not None else super().sort_key(variant, ctx)

