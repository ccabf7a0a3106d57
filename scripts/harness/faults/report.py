"""The fault harness's records and its results: one trial, the summary rows, the table, the file.

:class:`Trial` is one fault injected into one applied run and what came of it, for either target
(the namespace server or the VM guest: a field one target has no use for keeps its default).
:func:`summary_rows` counts the outcomes per fault kind; :func:`render` makes the Markdown table
``scripts/faults`` prints, with the columns of the target's :class:`Layout`; :func:`write_results`
writes the JSON results with the trial and summary fields that layout names, and
:func:`load_trials` reads them back (``--table FILE``). Pure: no lab, no SSH.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

__all__ = ["AUTO", "RESTORE", "MODIFIED", "UNBOOTABLE", "OUTCOMES", "Plan", "Trial", "Summary", "Column", "Layout",
           "summary_rows", "render", "write_results", "load_trials", "duration"]

AUTO, RESTORE = "restored automatically", "restored by one tunepath restore"
MODIFIED, UNBOOTABLE = "left modified", "unbootable"
OUTCOMES = (AUTO, RESTORE, MODIFIED, UNBOOTABLE)


@dataclass(frozen=True)
class Plan:
    """One trial as drawn before it runs (from the harness's seed, the kind and the index)."""

    kind: str
    index: int                     # 1… within its kind
    seed: int                      # the trial's own seed
    delay_s: float                 # after the trigger, how long the harness waits to inject the fault
    steps: str = ""                # the run's --steps
    signal: str = ""               # VM controller trials: SIGKILL or SIGINT
    off_s: float = 0.0             # VM power cuts: how long the VM stays off
    outage_s: float = 0.0          # server sshd/link trials: how long it stays down
    moment: str = ""               # server SIGINT trials with --at: the moment of the run (harness.faults.moments)


@dataclass
class Trial:
    """One fault injected into one applied run, and what came of it."""

    kind: str                      # server: sigint, sigint-pgrp, sigint-runner, sigterm-runner, sigkill, sshd, link; VM: grub,
                                   # dropin, rebootwait, controller
    index: int                     # 1… within its kind
    seed: int                      # the trial's own seed (derived from the harness's)
    delay_s: float                 # after the trigger, how long the harness waited
    steps: str = ""                # the run's --steps
    signal: str = ""               # VM controller trials: SIGKILL or SIGINT
    moment: str = ""               # with --at: the moment of the run the fault came at
    outage_s: float | None = None  # sshd down / link down for this long (server: sshd, link)
    noticed_s: float | None = None         # server lost (sshd, link, a power cut): from the fault until the run gave it up
    injected: bool = False         # the trigger came and the fault was injected
    fault_at_s: float | None = None        # since the run started
    to_exit_s: float | None = None         # a SIGINT's trial: from the signal until the run had exited
    phase: str = ""                # VM: what the guest was doing (its last console line)
    changed_at_fault: list[str] = field(default_factory=list)   # server: what differed from "before" then
    last_line: str = ""            # what the run had printed last when the fault came
    final_line: str = ""           # what it printed last
    exit_status: int | None = None
    hung: bool = False             # the run outlived the limit and was killed
    kernels_left: int = 0          # step kernels still running once the run had ended
    boot_s: float | None = None    # VM: from power-on (or the controller's fault) until sshd answered
    booted: bool = True            # VM: the guest answered after the fault
    cmdline_after_fault: str = ""  # VM: what the guest booted after the fault
    differences: list[str] = field(default_factory=list)       # once the run ended
    restore_output: list[str] = field(default_factory=list)    # the one `tunepath restore --force`
    restore_s: float | None = None
    left: list[str] = field(default_factory=list)              # after it
    late: list[str] = field(default_factory=list)              # found before the next trial
    repaired: str = ""             # VM: how the harness repaired it (the server's repairs go to the note)
    console_tail: list[str] = field(default_factory=list)      # VM: the console when the guest did not boot
    outcome: str = ""
    duration_s: float = 0.0
    note: str = ""

    @classmethod
    def planned(cls, plan: Plan) -> "Trial":
        return cls(plan.kind, plan.index, plan.seed, plan.delay_s, steps=plan.steps, signal=plan.signal,
                   moment=plan.moment)

    @property
    def landed(self) -> bool:
        """The fault came while a host change was applied (server)."""
        return bool(self.changed_at_fault)

    def add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text

    def classify(self) -> str:
        if not self.booted:
            self.outcome = UNBOOTABLE
        elif self.left or self.late:
            self.outcome = MODIFIED
        elif self.differences:
            self.outcome = RESTORE
        else:
            self.outcome = AUTO
        return self.outcome

    def to_dict(self, names: tuple[str, ...]) -> dict:
        """The fields ``names`` (``landed`` included, if named), in that order."""
        data = {**asdict(self), "landed": self.landed}
        return {name: data[name] for name in names}


@dataclass(frozen=True)
class Summary:
    """One row of the results table: the trials of one fault kind, or of all."""

    kind: str
    trials: int
    landed: int
    injected: int
    auto: int
    by_restore: int
    modified: int
    unbootable: int
    boot_median_s: float | None
    median_s: float
    hung: int
    exit_median_s: float | None = None     # SIGINT trials: signal to exit, median …
    exit_max_s: float | None = None        # … and the longest


@dataclass(frozen=True)
class Column:
    """One column of the table: a :class:`Summary` field under a header."""

    header: str
    field: str
    unit: str = ""                 # "": as it is; "s": whole seconds; "s.1": seconds, one decimal; "min": minutes

    def cell(self, row: Summary) -> str:
        value = getattr(row, self.field)
        if value is None:
            return "–"
        if self.unit == "s":
            return f"{value:.0f} s"
        if self.unit == "s.1":
            return f"{value:.1f} s"
        return f"{value / 60:.1f} min" if self.unit == "min" else str(value)


@dataclass(frozen=True)
class Layout:
    """How one target's results are shown and written: its fault kinds and their row labels (in the
    order they run), the table's columns, and the trial and summary fields its JSON results hold."""

    labels: dict[str, str]
    columns: tuple[Column, ...]
    trial_fields: tuple[str, ...]
    summary_fields: tuple[str, ...]
    retired: tuple[str, ...] = ()  # kinds that no longer run, labelled in older results files

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in self.labels if k not in self.retired)


def _row(label: str, trials: list[Trial]) -> Summary:
    count = lambda outcome: sum(t.outcome == outcome for t in trials)    # noqa: E731
    boots = [t.boot_s for t in trials if t.boot_s is not None]
    exits = [t.to_exit_s for t in trials if t.to_exit_s is not None]
    return Summary(label, len(trials), sum(t.landed for t in trials), sum(t.injected for t in trials), count(AUTO),
                   count(RESTORE), count(MODIFIED), count(UNBOOTABLE), statistics.median(boots) if boots else None,
                   statistics.median(t.duration_s for t in trials) if trials else 0.0, sum(t.hung for t in trials),
                   round(statistics.median(exits), 1) if exits else None, round(max(exits), 1) if exits else None)


def summary_rows(trials: list[Trial], labels: dict[str, str]) -> list[Summary]:
    """One row per fault kind, in the order they ran, and a total."""
    kinds = list(dict.fromkeys(t.kind for t in trials))
    rows = [_row(labels.get(k, k), [t for t in trials if t.kind == k]) for k in kinds]
    if len(kinds) > 1:
        rows.append(_row("all", trials))
    return rows


def _bad_trial(t: Trial) -> str:
    what = "; ".join(t.left or t.late) or ("no sshd: " + " / ".join(t.console_tail[-2:]) if not t.booted else "hung")
    return (f"\n{t.kind} {t.index}: {t.outcome}{' (the run hung and was killed)' if t.hung else ''}: "
            f"{what}{f' (repaired: {t.repaired})' if t.repaired else ''}")


def render(trials: list[Trial], layout: Layout) -> str:
    """The Markdown table, then one line per trial that left the server modified or unbootable, or hung."""
    header = [c.header for c in layout.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.cell(row) for c in layout.columns) + " |"
              for row in summary_rows(trials, layout.labels)]
    lines += [_bad_trial(t) for t in trials if t.outcome in (MODIFIED, UNBOOTABLE) or t.hung]
    return "\n".join(lines)


def write_results(path: Path, header: dict, trials: list[Trial], layout: Layout) -> None:
    """The JSON results, written whole or not at all: the harness's settings and machine
    (``header``), every trial, the summary rows."""
    rows = [{k: v for k, v in asdict(row).items() if k in layout.summary_fields}
            for row in summary_rows(trials, layout.labels)]
    data = {**header, "trials": [t.to_dict(layout.trial_fields) for t in trials], "summary": rows}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def load_trials(path: Path) -> list[Trial]:
    """The trials of a results file (either target's; keys that are no field are ignored)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    names = {f.name for f in fields(Trial)}
    return [Trial(**{k: v for k, v in t.items() if k in names}) for t in data["trials"]]


def duration(seconds: float) -> str:
    """``75`` → "1 min 15 s"; ``42`` → "42 s"."""
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
