"""The replay build's notebooks: which to execute, executing them side by side, and what they produced.

:func:`replay_all` asks the execution cache (:mod:`tunepath.publish.cache`) which steps'
notebooks must execute, executes those with up to :func:`tunepath.publish.pool.workers`
at once (each in its own kernel), and then records every executed step's manifest. The
progress lines come in the steps' order whatever the order in which notebooks finish, and
a failure is that of the first failing step in that order (:mod:`tunepath.publish.pool`).
Manifests are written only once every notebook succeeded: the build publishes nothing
otherwise (:mod:`tunepath.publish.build`).

The kernels of one build share two things through directories the build names in their
environment: the runs they read and the measurements parsed from them
(:mod:`tunepath.memo`, ``build/replay-memo/`` in the staging directory, never published),
and what each chart was drawn from (:mod:`tunepath.publish.chartmemo`,
``build/cache/charts/``, published with the cache). ``--no-cache`` executes every notebook
but keeps that record: a chart is the same bytes whenever its inputs hash the same, so one
whose inputs did not change is not drawn again even then (delete ``build/cache/charts/`` to
draw every chart).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tunepath import memo
from tunepath.errors import TunepathError
from tunepath.publish import cache, chartmemo, kernels, pool
from tunepath.publish.interrupt import end_running

__all__ = ["Progress", "BuildDirs", "Entry", "plan", "kernel_env", "early_kernels", "replay_all", "MEMO",
           "CHART_MEMO"]

MEMO = "build/replay-memo"          # in the staging directory only
CHART_MEMO = "build/cache/charts"   # published with the cache manifests


def _say(message: str) -> None:
    print(message, flush=True)


@dataclass
class Progress:
    """What the build has done so far (for its progress lines and last-build.json)."""

    names: list[str]
    executed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    run_time: float = 0.0
    workers: int = 1


@dataclass(frozen=True)
class BuildDirs:
    """Where one build reads and writes."""

    site_dir: Path               # published
    stage: Path                  # where the notebooks write
    runs_dir: Path
    notebooks_dir: Path
    run_ids: list[str] | None
    use_cache: bool
    jobs: int | None = None      # notebooks at once (None: pool.workers decides)
    preloaded: object = None     # the kernels' preloading process, if the build started it early


@dataclass
class Entry:
    """One step of the build: its cache key, and why it executes (None: it does not)."""

    number: int
    step: object
    key: cache.StepKey
    parameters: dict
    why: str | None
    took: float = 0.0


def plan(chosen: list, dirs: BuildDirs, inputs: cache.BuildInputs, parameters: dict) -> list[Entry]:
    """Every chosen step with its key, and why it must execute (None where the cache holds it)."""
    entries = []
    for i, step in enumerate(chosen, 1):
        source = dirs.notebooks_dir / step.notebook
        key = cache.StepKey("missing", "", "", "") if not source.is_file() else inputs.key_for(source, parameters)
        if not dirs.use_cache:
            why = "cache off (--no-cache)"
        else:
            verdict = cache.check(dirs.stage, step.name, key)
            why = None if verdict.fresh else verdict.why()
        entries.append(Entry(i, step, key, parameters, why))
    return entries


def kernel_env(stage: Path) -> dict[str, str]:
    """What the build's kernels find in their environment: where they share values."""
    return {memo.ENV: str(stage / MEMO), chartmemo.ENV: str(stage / CHART_MEMO)}


def _kernel_log(site_dir: Path) -> Path:
    return site_dir / "build" / "logs" / "kernel-stderr.log"


def early_kernels(site_dir: Path, stage: Path, notebooks_dir: Path, chosen: list,
                  use_cache: bool) -> kernels.Preloaded | None:
    """The kernels' preloading process, started before the build knows exactly which notebooks
    execute, when it is sure some will: the cache is off, or a chosen step was never executed into
    this site directory. Otherwise None (:func:`replay_all` starts it if it must)."""
    if use_cache and all(cache.manifest_path(site_dir, s.name).is_file() for s in chosen):
        return None
    return kernels.Preloaded.start(kernel_env(stage), _kernel_log(site_dir), notebooks_dir)


class _Reporter:
    """The progress lines, in the steps' order: an unchanged step's line comes when every step
    before it has been reported."""

    def __init__(self, entries: list[Entry], done: Progress):
        self.entries, self.done, self.n = entries, done, len(entries)
        self.shown = 0
        self.started = time.monotonic()

    def until(self, number: int) -> None:
        """Report the unchanged steps before step ``number``."""
        while self.shown < self.n and self.entries[self.shown].number < number:
            entry = self.entries[self.shown]
            self.done.reused.append(entry.step.name)
            _say(f"[{entry.number}/{self.n}] {entry.step.name}: {cache.UNCHANGED}")
            self.shown += 1

    def executing(self, entry: Entry) -> None:
        self.until(entry.number)
        self.done.reasons[entry.step.name] = entry.why
        _say(f"[{entry.number}/{self.n}] {entry.step.name}: executing {entry.step.notebook} (replay; {entry.why})")
        self.shown += 1

    def finished(self, entry: Entry, jobs_left: int) -> None:
        self.done.executed.append(entry.step.name)
        self.done.run_time += entry.took
        elapsed = time.monotonic() - self.started
        left = elapsed / len(self.done.executed) * jobs_left
        _say(f"[{entry.number}/{self.n}] {entry.step.name}: done in {entry.took:.1f} s "
             f"(at most about {left:.0f} s left)")


def replay_all(entries: list[Entry], dirs: BuildDirs, done: Progress,
               execute: Callable[[Entry, dict, object], None]) -> None:
    """Execute the entries that must execute (``execute(entry, env, preloaded)``: the notebook
    and its HTML), side by side, their kernels forked from one preloading process
    (:mod:`tunepath.publish.kernels`; ``TUNEPATH_PRELOAD_KERNELS=0`` starts each the ordinary
    way), then record their manifests; report every entry in order."""
    jobs = [e for e in entries if e.why is not None]
    for entry in jobs:
        cache.drop_manifest(dirs.stage, entry.step.name)   # a failure leaves no manifest claiming success
    before = cache.snapshot_outputs(dirs.stage)
    env = kernel_env(dirs.stage)
    report = _Reporter(entries, done)
    done.workers = pool.workers(dirs.jobs, len(jobs))
    preloaded = dirs.preloaded          # started early by the build, or now if it must be
    if preloaded is None and jobs:
        preloaded = kernels.Preloaded.start(env, _kernel_log(dirs.site_dir), dirs.notebooks_dir)

    def job(entry: Entry):
        def run() -> Entry:
            t0 = time.monotonic()
            execute(entry, env, preloaded)
            entry.took = time.monotonic() - t0
            return entry
        return run

    try:
        pool.run_in_order([job(e) for e in jobs], done.workers, before=lambda i: report.executing(jobs[i]),
                          after=lambda i, entry: report.finished(entry, len(jobs) - i - 1),
                          on_interrupt=end_running)
    finally:
        if preloaded is not None:
            preloaded.close()
    report.until(len(entries) + 1)
    read = {e.key.runs for e in jobs if e.key.runs}
    if read and cache.runs_digest(dirs.runs_dir) not in read:
        # what the notebooks read is not what the key says: neither publish it nor cache it
        raise TunepathError(f"the recorded runs in {dirs.runs_dir} changed while the build read them; nothing "
                            "was published or cached: build again once nothing writes there")
    _record(jobs, dirs, before)


def _record(jobs: list[Entry], dirs: BuildDirs, before: dict) -> None:
    """Each executed step's manifest: the outputs named after it (its notebook, HTML, data file and
    the charts that data references), and any other file the executions created or changed, which
    could be any executed step's (so it counts for each)."""
    named = {e.step.name: cache.step_outputs(dirs.stage, e.step.data_file, e.step.notebook) for e in jobs}
    claimed = {rel for outputs in named.values() for rel in outputs}
    stray = sorted(cache.changed_since(dirs.stage, before) - claimed)
    for entry in jobs:
        outputs = sorted(set(named[entry.step.name]) | set(stray))
        cache.record(dirs.stage, entry.step.name, entry.key, outputs, entry.parameters, entry.took)
