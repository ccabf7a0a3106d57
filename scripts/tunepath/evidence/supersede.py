"""Marking a recorded run as superseded by a newer one.

A run recorded with methods the project has since replaced (a fixed warm-up, unpinned
processes, a closed-loop client) stays in ``runs/`` as evidence, but the pages should show
the run that replaced it. ``tunepath supersede OLD --by NEW --why TEXT`` writes
``"superseded_by": {"run": NEW, "why": TEXT}`` into OLD's ``run.json`` (atomically, nothing
else in the record changes); a replay that selects no runs by name then leaves OLD out, as it
leaves out failed runs. A replay that names OLD (a notebook's ``run_ids`` parameter) still shows it.
"""

from __future__ import annotations

from pathlib import Path

from tunepath.evidence.amend import amend
from tunepath.evidence.store import RunError, RunStore

__all__ = ["supersede", "check_superseding"]


def supersede(store: RunStore, old: str, by: str, why: str) -> Path:
    """Mark run ``old`` as superseded by run ``by`` (both must be recorded and valid); returns
    the rewritten run.json."""
    if old == by:
        raise RunError(f"run {old!r} cannot supersede itself: name the newer run with --by")
    if not why.strip():
        raise RunError("say why the run is superseded (--why): readers of runs/ see it")
    newer = store.load(by)
    if newer.info.status == "failed":
        raise RunError(f"run {by!r} failed: a failed run cannot replace {old!r} on the pages")
    store.load(old)                                  # valid before anything is decided
    chain, at = [by], newer
    while at.info.superseded_by:                     # the newer run's own successors: never back to OLD
        nxt = at.info.superseded_by
        if nxt == old or nxt in chain:
            raise RunError(f"run {by!r} is itself superseded, through {' → '.join(chain + [nxt])}: marking {old!r} "
                           f"as superseded by it would make a cycle, and neither would be shown. Name the newest "
                           f"run of that chain with --by, or remove \"superseded_by\" from runs/{by}/run.json first")
        chain.append(nxt)
        try:
            at = store.load(nxt)
        except RunError:
            break                                    # a successor not recorded: check_superseding says so
    return amend(store, old, "superseded_by", {"run": by, "why": why.strip()})


def check_superseding(runs, known: set[str]) -> None:
    """Every run that says it is superseded names a run that is recorded, and no chain of them
    comes back to where it started (a cycle would hide every run in it)."""
    by_id = {run.run_id: run.info.superseded_by for run in runs}
    for run in runs:
        seen, at = [run.run_id], by_id.get(run.run_id)
        while at and at in by_id:
            if at in seen:
                raise RunError(f"runs {' → '.join(seen + [at])} supersede each other in a cycle, so none of "
                               f"them would be shown: remove \"superseded_by\" from runs/{run.run_id}/run.json "
                               "or from another run of the cycle")
            seen.append(at)
            at = by_id.get(at)
    for run in runs:
        by = run.info.superseded_by
        if by and by not in known:
            raise RunError(f"run {run.run_id!r} says it is superseded by {by!r}, which is not recorded "
                           f"(recorded: {', '.join(sorted(known))}): record that run, or remove "
                           f"\"superseded_by\" from runs/{run.run_id}/run.json")
