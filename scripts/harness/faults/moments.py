"""The moments of a run at which a Ctrl-C trial strikes (``scripts/faults --at MOMENTS``).

Without ``--at``, a trial's fault comes while a host change is applied (the first change is its
trigger). With it, each SIGINT trial strikes at one named moment of an applied run of the NIC-queue
step, the moments taking turns: the trigger is the run's start, a line the run prints, or its first
host change, and the fault comes within :attr:`Moment.within_s` seconds of it. The reboot wait
needs a server that reboots: it is the VM target's ``controller`` kind (``scripts/faults --vm``).
"""

from __future__ import annotations

import pwd
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from harness import ROOT
from harness.faults.probe import Controller
from harness.faults.report import AUTO, MODIFIED

__all__ = ["Moment", "MOMENTS", "by_name", "wait_line", "forget_wrk2", "seed_runs", "render_moments", "WRK2_SOURCE"]

WRK2_SOURCE = ROOT / "tests" / "data" / "shared" / "vendor" / "wrk2-44a94c1.tar.gz"
START, CHANGE = "start", "change"      # triggers that are not a line of output


@dataclass(frozen=True)
class Moment:
    """When in a run a Ctrl-C comes: after ``trigger`` (the run's start, its first host change, or
    the first line of its output matching the pattern), within ``within_s`` seconds."""

    name: str
    label: str
    trigger: str                   # START, CHANGE or a regular expression
    within_s: float
    steps: str = "nic-queues"
    build: bool = False            # the run rebuilds a site when it ends (the harness's own site directory)
    fresh_wrk2: bool = False       # the clients' wrk2 is removed first, so the run builds it


MOMENTS = (
    Moment("connecting", "connecting to the hosts", START, 1.0),
    Moment("wrk2-build", "building wrk2 on the clients", r"wrk2: building ", 8.0, fresh_wrk2=True),
    Moment("notebook", "a step notebook starting", r"\] nic-queues: starting", 2.0),
    Moment("warm-up", "a warm-up", r": warm-up \d", 2.0),
    Moment("measurement", "a measurement", r": measuring for ", 3.0),
    Moment("change", "a disruptive change (eth0's queues)", CHANGE, 1.0),
    Moment("final-build", "the final build of the site", r"^runs: \d+ recorded runs", 15.0, build=True),
    Moment("https", "a measurement over HTTPS (the TLS step: its key on the server)", r"tls/[^:]*: measuring for ",
           3.0, steps="tls"),
    Moment("sysctl-server", "a measurement under the server's raised backlogs (the kernel step's sysctls)",
           r"kernel-network/backlogs[^:]*: measuring for ", 3.0, steps="kernel-network"),
    Moment("sysctl-client", "a measurement under the clients' tcp_tw_reuse (the kernel step's sysctls)",
           r"kernel-network/tw-reuse[^:]*: measuring for ", 3.0, steps="kernel-network"),
)


def by_name(names: str) -> tuple[Moment, ...]:
    """``all`` or comma-separated names, in MOMENTS' order; ValueError names the unknown ones."""
    known = {m.name: m for m in MOMENTS}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if wanted == ["all"]:
        return MOMENTS
    unknown = [n for n in wanted if n not in known]
    if unknown or not wanted:
        raise ValueError(f"unknown moment(s) {', '.join(unknown) or '(none)'}: choose among all, "
                         + ", ".join(known))
    return tuple(m for m in MOMENTS if m.name in wanted)


def wait_line(ctl: Controller, pattern: str, limit_s: float) -> float | None:
    """The moment the run first printed a line matching ``pattern``; None if it ended (or
    ``limit_s`` passed) first."""
    rx, seen = re.compile(pattern), 0
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        lines = ctl.lines[seen:]
        seen += len(lines)
        if any(rx.search(line) for line in lines):
            return time.monotonic()
        if not ctl.running():
            return None
        time.sleep(0.05)
    return None


def forget_wrk2(prefix: str) -> None:
    """The installed wrk2 of each client of the lab ``prefix`` removed, so the next run builds it again."""
    from tunepath.lab.state import ROLES
    from tunepath.lab.users import user_name

    for user in (user_name(prefix, r.suffix) for r in ROLES if r.kind == "client"):
        home = Path(pwd.getpwnam(user).pw_dir)
        for name in ("wrk2", "wrk2.source"):
            (home / ".tunepath" / "bin" / name).unlink(missing_ok=True)


def seed_runs(runs_dir: Path) -> None:
    """The project's recorded runs copied into the harness's runs directory (once), so that a run's
    final build has every step's runs, as it has in the project, and builds the whole site."""
    import shutil

    for run in sorted((ROOT / "runs").iterdir()):
        if run.is_dir() and not run.name.startswith(".") and not (runs_dir / run.name).exists():
            shutil.copytree(run, runs_dir / run.name, symlinks=True)


def render_moments(trials: list) -> str:
    """A Markdown table of the SIGINT and SIGTERM trials per moment and kind: how many, their exit statuses,
    how the server ended, and the time from the signal to the run's exit (median and max)."""
    labels = {m.name: m.label for m in MOMENTS}
    rows = ["| moment | fault | trials | exit status | restored automatically | hosts left modified "
            "| signal to exit (median) | signal to exit (max) |", "|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list] = {}
    for t in trials:
        if t.moment and t.kind.startswith(("sigint", "sigterm")):
            groups.setdefault((t.moment, t.kind), []).append(t)
    order = [m.name for m in MOMENTS]
    for (moment, kind), ts in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order
                                                                     else len(order), kv[0][1])):
        exits = [t.to_exit_s for t in ts if t.to_exit_s is not None]
        codes = ", ".join(str(c) for c in sorted({t.exit_status for t in ts}, key=lambda c: (c is None, c)))
        cell = (lambda v: f"{v:.1f} s") if exits else None
        rows.append(f"| {labels.get(moment, moment)} | {kind} | {len(ts)} | {codes} | "
                    f"{sum(t.outcome == AUTO for t in ts)} | "
                    f"{sum(t.outcome == MODIFIED for t in ts)} | "
                    f"{cell(statistics.median(exits)) if exits else '–'} | {cell(max(exits)) if exits else '–'} |")
    return "\n".join(rows)
