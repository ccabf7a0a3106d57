"""A run's function checks: what became of each command block of a step, with a pass mark.

A run on an emulated server (the lab's QEMU VM) checks that a step's commands work; its figures
time the emulator, so its pages show these checks instead of a results table. Each block the run
recorded for the step (``blocks`` in its ``run.json``; a block run once per variant or repetition
counts each time) gets one :class:`Check`:

- ``pass``: every time it ran, it exited 0 (a block that records no exit status, such as a
  reboot, passed when it ran; a reboot records what it read back, ``/proc/cmdline``);
- ``fail``: it exited non-zero at least once (``exits`` lists the statuses);
- ``skipped``: the run did not run it, and says why;
- ``dry-run``: printed only.

What the step's checks printed (``sudo dmesg | grep iommu``, ``lscpu`` …), and what became of a
check the run could not make (its ``verify-…`` blocks), stay in the run's ``verification`` entries (:mod:`tunepath.publish.verification`), which the page shows under the
marks. Shapes: ``docs/data-schema.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunepath.evidence.store import Run
from tunepath.model.load import PROBE

__all__ = ["Check", "function_checks", "tally", "LOAD_REPORTS"]

LOAD_REPORTS = frozenset({PROBE})   # verifications that are load reports: on an emulated server they time the emulator

_MARKS = ("pass", "fail", "skipped", "dry-run")
_VERIFY = "verify-"      # a check's own block: the verification entries say what became of it


@dataclass(frozen=True)
class Check:
    """One command block of a step in one run, with its pass mark."""

    block: str
    title: str
    host: str
    mark: str                        # pass | fail | skipped | dry-run
    times: int                       # how often the run recorded it
    exits: tuple[int, ...] = ()      # the distinct non-zero exit statuses (``fail``)
    seconds: float | None = None     # the time it took, summed over its runs
    reason: str = ""                 # why it was skipped or only printed
    read_back: str = ""              # what it read back (the kernel command line after a reboot)

    def to_data(self) -> dict:
        out = {"block": self.block, "title": self.title, "host": self.host, "mark": self.mark,
               "times": self.times}
        if self.exits:
            out["exits"] = list(self.exits)
        if self.seconds is not None:
            out["seconds"] = round(self.seconds, 1)
        if self.reason:
            out["reason"] = self.reason
        if self.read_back:
            out["read_back"] = self.read_back
        return out


def _mark(records: list[dict]) -> tuple[str, tuple[int, ...]]:
    outcomes = {r.get("outcome") for r in records}
    exits = tuple(sorted({r["exit_status"] for r in records
                          if isinstance(r.get("exit_status"), int) and r["exit_status"] != 0}))
    if exits:
        return "fail", exits
    if "ran" in outcomes:
        return "pass", ()
    return ("dry-run" if "dry-run" in outcomes else "skipped"), ()


def function_checks(run: Run, definition) -> list[Check]:
    """The pass marks of ``definition``'s command blocks in ``run``, in the order the run first
    recorded each (``definition``: the step, whose plan gives a block's title for a reader)."""
    step = definition.name
    titles = {b.id: b.title for b in definition.plan(run.context)}
    records: dict[str, list[dict]] = {}
    for r in run.record.get("blocks", []):
        if r.get("step") == step and isinstance(r.get("block"), str) and not r["block"].startswith(_VERIFY):
            records.setdefault(r["block"], []).append(r)
    checks = []
    for block, recs in records.items():
        mark, exits = _mark(recs)
        durations = [r["duration_s"] for r in recs if isinstance(r.get("duration_s"), (int, float))]
        reasons = [r["reason"] for r in recs if r.get("reason")]
        read_back = next((r["kernel_cmdline"] for r in reversed(recs) if r.get("kernel_cmdline")), "")
        checks.append(Check(block=block, title=titles.get(block, block.replace("-", " ")),
                            host=recs[0].get("host", "server"), mark=mark, times=len(recs), exits=exits,
                            seconds=sum(durations) if durations else None,
                            reason=reasons[-1] if mark in ("skipped", "dry-run") and reasons else "",
                            read_back=read_back))
    return checks


def tally(checks: list[Check]) -> dict[str, int]:
    """How many blocks got each mark (marks no block got are left out)."""
    counts = {m: sum(c.mark == m for c in checks) for m in _MARKS}
    return {m: n for m, n in counts.items() if n}
