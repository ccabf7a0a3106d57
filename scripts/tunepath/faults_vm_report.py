"""The VM fault harness's records (``scripts/faults --vm``): the guest's state, one trial, the
seeded schedule, the outcome of a trial and the results table.

:class:`GuestState` is what the harness compares with the VM's original state after each fault
(the kernel command line, the GRUB drop-in, the IOMMU parameters in ``grub.cfg`` and whether it is
a usable file, online CPUs, eth0's combined queues, the run's lock and saved state, Tomcat);
:class:`VmTrial` is one fault and what came of it; :func:`schedule` draws every trial's delays
from one seed; :func:`render` makes the Markdown table. Pure: no VM, no SSH (``tests/test_faults_vm.py``).
"""

from __future__ import annotations

import random
import statistics
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from tunepath.faults_report import load_records, save_results

__all__ = ["KINDS", "KIND_LABELS", "OUTCOMES", "AUTO", "RESTORE", "MODIFIED", "UNBOOTABLE", "GuestState",
           "parse_state", "VmTrial", "Plan", "schedule", "summary_rows", "render", "write_results", "load_trials"]

KINDS = ("grub", "dropin", "rebootwait", "controller")
KIND_LABELS = {"grub": "QEMU killed during `update-grub`",
               "dropin": "QEMU killed right after the drop-in is written",
               "rebootwait": "QEMU killed during the reboot wait",
               "controller": "controller killed (SIGKILL/SIGINT) during the reboot wait"}
AUTO, RESTORE = "restored automatically", "restored by one tunepath restore"
MODIFIED, UNBOOTABLE = "left modified", "unbootable"
OUTCOMES = (AUTO, RESTORE, MODIFIED, UNBOOTABLE)
REBOOT_WINDOW_S = 60.0      # the reboot faults come within this many seconds of the guest going down
DROPIN_WINDOW_S = 0.3       # the drop-in fault: within this many seconds of the file showing


@dataclass(frozen=True)
class GuestState:
    """What the IOMMU step changes on the VM and a run (or a restore) must put back."""

    cmdline: str                   # /proc/cmdline
    dropin: str                    # sha256 (12 hex) of /etc/default/grub.d/99-tunepath-iommu.cfg, or "absent"
    grub_cfg: str                  # "ok", "missing", "empty" or "no menuentry" (/boot/grub/grub.cfg)
    grub_iommu: int                # lines of grub.cfg holding "iommu."
    cpus_online: str               # /sys/devices/system/cpu/online
    queues: str                    # eth0's current combined channels (ethtool -l)
    lock: bool = False             # ~/.tunepath/lock
    saved_state: bool = False      # ~/.tunepath/original-state.json (a run's or restore's leftover)
    tomcat: bool = False           # a Tomcat JVM of the user runs

    def differences(self, before: "GuestState") -> list[str]:
        """One line per field that differs from ``before``: "queues: 4 → 1"."""
        out = []
        for f in fields(self):
            was, now = getattr(before, f.name), getattr(self, f.name)
            if was != now:
                out.append(f"{f.name}: {was} → {now}")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def parse_state(text: str) -> GuestState:
    """The guest's ``key=value`` lines (faults_vm_probe.STATE_SCRIPT) as a GuestState."""
    kv = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            kv[key.strip()] = value.strip()
    missing = [k for k in ("cmdline", "dropin", "grub_cfg", "grub_iommu", "cpus", "queues") if k not in kv]
    if missing:
        raise ValueError(f"the guest's state lacks {', '.join(missing)}: {text[-300:]!r}")
    yes = lambda key: kv.get(key, "no") == "yes"    # noqa: E731
    return GuestState(cmdline=kv["cmdline"], dropin=kv["dropin"], grub_cfg=kv["grub_cfg"],
                      grub_iommu=int(kv["grub_iommu"] or 0), cpus_online=kv["cpus"], queues=kv["queues"],
                      lock=yes("lock"), saved_state=yes("saved_state"), tomcat=bool(kv.get("tomcat", "").strip()))


@dataclass(frozen=True)
class Plan:
    """One trial as drawn before it runs."""

    kind: str
    index: int                     # 1… within its kind
    seed: int
    delay_s: float                 # after the trigger (drop-in shown, update-grub started, guest gone down)
    signal: str = ""               # controller: SIGKILL or SIGINT
    off_s: float = 0.0             # QEMU kinds: how long the VM stays off before it is powered on


def schedule(kinds: tuple[str, ...], trials: int, seed: int, grub_s: float) -> list[Plan]:
    """Every trial, the kinds taking turns (trial 1 of each, then trial 2 …), each drawn from its own
    seed (``seed``, kind, index) so one trial can be repeated. ``grub_s``: how long update-grub ran
    undisturbed; a grub fault comes within 90 % of it."""
    plans = []
    for index in range(1, trials + 1):
        for kind in kinds:
            rng = random.Random(f"{seed}-vm-{kind}-{index}")
            window = {"grub": 0.9 * grub_s, "dropin": DROPIN_WINDOW_S}.get(kind, REBOOT_WINDOW_S)
            delay = round(rng.uniform(0, window), 2)
            off = round(rng.uniform(2.0, 5.0), 1)
            sig = ("SIGKILL" if index % 2 else "SIGINT") if kind == "controller" else ""
            plans.append(Plan(kind, index, rng.randrange(1 << 30), delay, sig, 0.0 if kind == "controller" else off))
    return plans


@dataclass
class VmTrial:
    """One fault injected into one applied run of the IOMMU step, and what came of it."""

    kind: str
    index: int
    seed: int
    delay_s: float
    signal: str = ""
    injected: bool = False          # the trigger came and the fault was injected
    fault_at_s: float | None = None   # since the run started
    phase: str = ""                 # what the guest was doing: its last console line, or the run's last line
    last_line: str = ""             # the run's last line at the fault
    final_line: str = ""
    exit_status: int | None = None
    hung: bool = False
    boot_s: float | None = None     # from power-on (or the controller's fault) until sshd answered
    booted: bool = True
    cmdline_after_fault: str = ""   # what the VM booted after the fault
    differences: list[str] = field(default_factory=list)      # once the run ended
    restore_output: list[str] = field(default_factory=list)
    restore_s: float | None = None
    left: list[str] = field(default_factory=list)              # after the restore
    late: list[str] = field(default_factory=list)              # found before the next trial
    repaired: str = ""              # how the harness repaired the VM, if it had to
    console_tail: list[str] = field(default_factory=list)      # when the VM did not boot
    outcome: str = ""
    duration_s: float = 0.0
    note: str = ""

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

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Summary:
    kind: str
    trials: int
    injected: int
    auto: int
    by_restore: int
    modified: int
    unbootable: int
    boot_median_s: float | None
    median_s: float

    def cells(self) -> list[str]:
        boot = "–" if self.boot_median_s is None else f"{self.boot_median_s:.0f} s"
        return [self.kind, str(self.trials), str(self.injected), str(self.auto), str(self.by_restore),
                str(self.modified), str(self.unbootable), boot, f"{self.median_s / 60:.1f} min"]


def _row(label: str, trials: list[VmTrial]) -> Summary:
    count = lambda outcome: sum(t.outcome == outcome for t in trials)    # noqa: E731
    boots = [t.boot_s for t in trials if t.boot_s is not None]
    return Summary(label, len(trials), sum(t.injected for t in trials), count(AUTO), count(RESTORE),
                   count(MODIFIED), count(UNBOOTABLE), statistics.median(boots) if boots else None,
                   statistics.median(t.duration_s for t in trials) if trials else 0.0)


def summary_rows(trials: list[VmTrial]) -> list[Summary]:
    """One row per kind, in the order they ran, and a total."""
    kinds = list(dict.fromkeys(t.kind for t in trials))
    rows = [_row(KIND_LABELS.get(k, k), [t for t in trials if t.kind == k]) for k in kinds]
    if len(kinds) > 1:
        rows.append(_row("all", trials))
    return rows


HEADER = ["fault", "trials", "fault injected", "restored automatically", "restored by one `tunepath restore`",
          "left modified", "unbootable", "boot after the fault (median)", "time per trial (median)"]


def render(trials: list[VmTrial]) -> str:
    """The Markdown table, then one line per trial that left the VM modified or unbootable."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in summary_rows(trials)]
    for t in trials:
        if t.outcome in (MODIFIED, UNBOOTABLE) or t.hung:
            what = "; ".join(t.left or t.late) or ("no sshd: " + " / ".join(t.console_tail[-2:]) if not t.booted
                                                    else "hung")
            lines.append(f"\n{t.kind} {t.index}: {t.outcome}{' (the run hung and was killed)' if t.hung else ''}: "
                         f"{what}{f' (repaired: {t.repaired})' if t.repaired else ''}")
    return "\n".join(lines)


def write_results(path: Path, header: dict, trials: list[VmTrial]) -> None:
    save_results(path, header, trials, summary_rows(trials))


def load_trials(path: Path) -> list[VmTrial]:
    return load_records(path, VmTrial)
