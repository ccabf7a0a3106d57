"""A step's parsed runs: what a step's notebook works with between loading and publishing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tunepath.errors import TunepathError
from tunepath.evidence.store import Run

__all__ = ["StepResult"]


@dataclass
class StepResult:
    """The runs of one step, their parsed measurements, and the step that reads them.

    ``frame`` holds the rows of the step's table (``definition.select``), ``all_rows``
    every configuration the runs measured (one row each, medians over repetitions).
    """

    step: str                   # the step's name
    definition: object          # the step object (tunepath.steps.base.Step)
    registry: object            # the step registry the frames were ordered by
    runs: list[Run]
    frame: pd.DataFrame
    all_rows: pd.DataFrame = field(repr=False, default=None)
    options: dict = field(default_factory=lambda: {"slo_ms": 10.0, "slo_percentile": "99"})
    recorded: Path | None = None     # the run a notebook in live mode recorded by itself (finished)
    chart_dir: Path | None = None    # where pipeline.draw_charts wrote the charts (their static/)
    findings: object = field(repr=False, default=None)   # an analysis step's own findings, found once
                                                         # (its charts and its document both read them)

    def commands(self, run_id: str | None = None) -> list:
        """The step's command blocks for a run's hosts (the first run by default)."""
        return self.definition.plan(self.run(run_id).context)

    @property
    def charted_runs(self) -> list[Run]:
        """The runs whose figures measure performance, and so may be charted, ranked or given a
        best: never an emulated server's, whose figures check that the commands work."""
        return [run for run in self.runs if not run.emulated]

    def run(self, run_id: str | None = None) -> Run:
        for run in self.runs:
            if run_id is None or run.run_id == run_id:
                return run
        raise TunepathError(f"step {self.step!r} has no run {run_id!r}")
