"""The fault-injection harness's records: the server's state, one trial, the results table.

:class:`ServerState` is what the harness compares before and after each fault (queue counts,
online CPUs, huge pages, the bytes of ``server.xml`` and ``setenv.sh``, Tomcat and load
generators stopped, the lock released); :class:`Trial` is one fault and what came of it;
:func:`summary_rows` and :func:`render` make the Markdown table ``scripts/faults`` prints
and the README shows.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

__all__ = ["ServerState", "Trial", "Summary", "OUTCOMES", "summary_rows", "render", "write_results",
           "load_trials", "duration"]

AUTO, RESTORE, MODIFIED = "restored automatically", "restored by one tunepath restore", "left modified"
OUTCOMES = (AUTO, RESTORE, MODIFIED)


@dataclass(frozen=True)
class ServerState:
    """What a run may change on the lab's server and must put back."""

    queues: str                    # eth0's current channels, as `ethtool -l` prints them: "rx 4 tx 4 combined 0"
    cpus_online: str               # /sys/devices/system/cpu/online
    hugepages: int                 # vm.nr_hugepages
    server_xml: str                # sha256 of conf/server.xml, or "absent"
    setenv_sh: str                 # sha256 of bin/setenv.sh, or "absent"
    context_xml: str               # sha256 of the examples webapp's context.xml, or "absent"
    tomcat: tuple[int, ...] = ()   # pids of the server user's Tomcat JVMs
    httpd: tuple[int, ...] = ()    # pids of the server user's Apache httpd
    load: tuple[int, ...] = ()     # pids of load generators of the client users
    lock: bool = False             # ~/.tunepath/lock of the server user exists

    def differences(self, before: "ServerState") -> list[str]:
        """One line per field that differs from ``before``: "queues: rx 4 tx 4 → rx 1 tx 1"."""
        out = []
        for f in fields(self):
            was, now = getattr(before, f.name), getattr(self, f.name)
            if isinstance(was, tuple):          # processes: which ones does not matter, whether any does
                if bool(was) != bool(now):
                    out.append(f"{f.name}: {'running' if now else 'stopped'} (pids {' '.join(map(str, now))})"
                               if now else f"{f.name}: stopped")
            elif was != now:
                short = (lambda v: v[:12] if isinstance(v, str) and len(v) == 64 else v)
                out.append(f"{f.name}: {short(was)} → {short(now)}")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Trial:
    """One fault injected into one applied run, and what came of it."""

    kind: str                      # sigint, sigkill, sshd, link
    index: int                     # 1… within its kind
    steps: str                     # the run's --steps
    seed: int                      # the trial's own seed (derived from the harness's)
    delay_s: float                 # after the first host change, how long the harness waited
    outage_s: float | None = None  # sshd down / link down for this long (sshd, link)
    fault_at_s: float | None = None        # since the run started
    changed_at_fault: list[str] = field(default_factory=list)   # what differed from "before" then
    last_line: str = ""            # what the run had printed last when the fault came
    final_line: str = ""           # what it printed last
    exit_status: int | None = None
    hung: bool = False             # the run outlived the limit and was killed
    kernels_left: int = 0          # step kernels still running once the run had ended
    differences: list[str] = field(default_factory=list)       # once the run ended
    restore_output: list[str] = field(default_factory=list)    # the one `tunepath restore --force`
    left: list[str] = field(default_factory=list)              # after it
    late: list[str] = field(default_factory=list)              # found before the next trial
    outcome: str = ""
    duration_s: float = 0.0
    note: str = ""

    @property
    def landed(self) -> bool:
        """The fault came while a host change was applied."""
        return bool(self.changed_at_fault)

    def classify(self) -> str:
        if self.left or self.late:
            self.outcome = MODIFIED
        elif self.differences:
            self.outcome = RESTORE
        else:
            self.outcome = AUTO
        return self.outcome

    def to_dict(self) -> dict:
        return {**asdict(self), "landed": self.landed}


@dataclass(frozen=True)
class Summary:
    """One row of the results table."""

    kind: str
    trials: int
    landed: int
    auto: int
    by_restore: int
    modified: int
    median_s: float
    hung: int

    def cells(self) -> list[str]:
        return [self.kind, str(self.trials), str(self.landed), str(self.auto), str(self.by_restore),
                str(self.modified), f"{self.median_s:.0f} s"]


KIND_LABELS = {"sigint": "SIGINT to the controller", "sigkill": "SIGKILL to the controller",
               "sshd": "server's sshd killed, restarted", "link": "server's link down, then up"}


def summary_rows(trials: list[Trial]) -> list[Summary]:
    """One row per fault kind, in the order they ran, and a total."""
    kinds = list(dict.fromkeys(t.kind for t in trials))
    rows = [_row(KIND_LABELS.get(k, k), [t for t in trials if t.kind == k]) for k in kinds]
    if len(kinds) > 1:
        rows.append(_row("all", trials))
    return rows


def _row(label: str, trials: list[Trial]) -> Summary:
    count = lambda outcome: sum(t.outcome == outcome for t in trials)    # noqa: E731
    return Summary(label, len(trials), sum(t.landed for t in trials), count(AUTO), count(RESTORE), count(MODIFIED),
                   statistics.median(t.duration_s for t in trials) if trials else 0.0, sum(t.hung for t in trials))


HEADER = ["fault", "trials", "fault during an applied change", "restored automatically",
          "restored by one `tunepath restore`", "hosts left modified", "time per trial (median)"]


def render(trials: list[Trial]) -> str:
    """The Markdown table, then one line per trial that left the host modified or hung."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in summary_rows(trials)]
    for t in trials:
        if t.outcome == MODIFIED or t.hung:
            what = "; ".join(t.left or t.late) or "hung"
            lines.append(f"\n{t.kind} {t.index}: {t.outcome}{' (the run hung and was killed)' if t.hung else ''}: "
                         f"{what}")
    return "\n".join(lines)


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def save_results(path: Path, header: dict, trials: list, rows: list) -> None:
    """A harness's JSON results, written atomically: its settings and machine, every trial (a record
    with ``to_dict``), the summary rows (dataclasses)."""
    data = {**header, "trials": [t.to_dict() for t in trials], "summary": [asdict(row) for row in rows]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def load_records(path: Path, record: type) -> list:
    """The trials of a results file as ``record`` dataclasses (unknown keys ignored)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    names = {f.name for f in fields(record)}
    return [record(**{k: v for k, v in t.items() if k in names}) for t in data["trials"]]


def write_results(path: Path, header: dict, trials: list[Trial]) -> None:
    """The JSON results: the harness's settings and machine, every trial, the summary rows."""
    save_results(path, header, trials, summary_rows(trials))


def load_trials(path: Path) -> list[Trial]:
    """The trials of a results file (to print its table again)."""
    return load_records(path, Trial)
