"""Which two recorded runs the comparison opens on, and what "the same host kind" means.

**Host kind.** Two runs are of the same host kind when their *servers* recorded the same CPU
model (the ``cpu_model`` fact, compared without regard to case or spacing) and the same number
of CPUs (the ``cpus`` fact), and both servers are real or both emulated. A server that did not
record both facts has no host kind and matches nothing. The client, the kernel, Java and the
load settings are not part of it: they are what a comparison of one host kind shows.

**The default pair** is chosen among pairs that measured at least one configuration in common
(a pair with nothing in common has no ratio to show) and never includes a run on an emulated
server (its figures test commands, not performance). It is the newest pair of runs of the same
host kind: set side by side, two different machines show the machines, not the effect of a change
(the NUMA step's page says not to compare its two reference servers), so such a pair is listed
but never opened first.

"Newest" compares the later run of each pair first (its recorded date, then its run id), then
the earlier one. With no pair of one host kind that has anything in common there is no default
pair.

    pick = choose_default(runs, frame)       # Pick(a, b, rule) or None
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from tunepath.evidence.store import Run

__all__ = ["HostKind", "Pick", "host_kind", "same_kind", "common_ground", "choose_default", "age", "page_order"]

RULES = {
    "host-kind": "the newest two runs of the same host kind ({kind})",
}


@dataclass(frozen=True)
class HostKind:
    """A server's CPU model (as recorded, and folded for comparison), CPU count, and emulation."""

    cpu_model: str
    cpus: int
    emulated: bool

    @property
    def key(self) -> tuple[str, int, bool]:
        return " ".join(self.cpu_model.split()).casefold(), self.cpus, self.emulated

    def __str__(self) -> str:
        return f"{' '.join(self.cpu_model.split())}, {self.cpus} CPUs" + (", emulated" if self.emulated else "")


@dataclass(frozen=True)
class Pick:
    """The default pair and the rule that chose it (a sentence for the page)."""

    a: "Run"
    b: "Run"
    rule: str


def host_kind(run: "Run") -> HostKind | None:
    """The host kind of ``run``'s server, or None where it did not record its CPU model and count."""
    model, cpus = run.server.facts.get("cpu_model"), run.server.cpus
    if not isinstance(model, str) or not model.strip() or not cpus:
        return None
    return HostKind(model, cpus, run.emulated)


def page_order(runs: list["Run"]) -> list["Run"]:
    """The order of the runs on the comparison page: reference runs first, then by date and run
    id; in a pair, A is the earlier of the two."""
    return sorted(runs, key=lambda r: (r.kind != "reference", *_when(r)))


def same_kind(a: "Run", b: "Run") -> bool:
    """Both servers recorded their host kind, and it is the same."""
    ka, kb = host_kind(a), host_kind(b)
    return ka is not None and kb is not None and ka.key == kb.key


def _when(run: "Run") -> tuple[str, str]:
    return run.info.date or "", run.run_id


def age(a: "Run", b: "Run") -> tuple:
    """A sort key, larger for newer pairs: the later run's date and id, then the earlier run's."""
    return tuple(sorted((_when(a), _when(b)), reverse=True))


def _measured(frame: "pd.DataFrame | None", run: "Run") -> set[tuple[str, str]] | None:
    if frame is None:
        return None
    rows = frame[frame.run_id == run.run_id]
    return set(zip(rows.step, rows.variant))


def common_ground(a: "Run", b: "Run", frame: "pd.DataFrame | None") -> int | None:
    """How many configurations (step and variant) both runs measured; None without a frame."""
    ma, mb = _measured(frame, a), _measured(frame, b)
    return None if ma is None or mb is None else len(ma & mb)


def choose_default(runs: list["Run"], frame: "pd.DataFrame | None" = None) -> Pick | None:
    """The pair the comparison opens on, by the rules of this module's docstring. Without a
    ``frame`` the pairs' common ground is not known and is not required."""
    real = [r for r in page_order(runs) if not r.emulated]
    pairs = [(a, b) for i, a in enumerate(real) for b in real[i + 1:]]
    common = {(a.run_id, b.run_id): common_ground(a, b, frame) for a, b in pairs}
    pairs = [p for p in pairs if common[p[0].run_id, p[1].run_id] != 0]
    if not pairs:
        return None
    pairs.sort(key=lambda p: age(*p), reverse=True)           # newest first
    same = [(a, b) for a, b in pairs if same_kind(a, b)]
    if same:
        return Pick(*same[0], RULES["host-kind"].format(kind=host_kind(same[0][0])))
    return None
