"""The namespace lab's server as a fault target (``scripts/faults``): :class:`LabServer`.

``scripts/faults [--trials N] [--kinds sigint-pgrp,sigint-runner,sigterm-runner,sigkill,sshd,link] [--prefix P] [--dir D] [--seed S]
[--out FILE] [--steps SETS] [--delay-max S] [--keep-lab] [--keep-runs]`` brings a lab up (``tunepath
lab``; prefix ``tpflt``, directory ``build/faults-lab``), installs Tomcat on its server once, records
the server's state (:class:`harness.faults.state.ServerState`: eth0's queue counts, online CPUs, huge
pages, the bytes of ``server.xml``, ``setenv.sh`` and the examples' ``context.xml``, Tomcat, httpd
and load generators stopped, no lock), and times one applied run of each step set without a fault
(the calibration). Per trial it starts ``tunepath run --apply``, waits until the server shows a
host change (a CPU offline, other queue counts, huge pages reserved: the trigger), waits a random
time within 80 % of the span the calibration run stayed changed (seeded per trial, or within
``--delay-max`` seconds, which skips the calibration), and injects one fault (the step sets take
turns too, see ``STEP_SETS``):

- ``sigint-pgrp``: SIGINT to the controller's process group (a Ctrl-C in its terminal; older results
  call it ``sigint``);
- ``sigint-runner``: SIGINT to ``tunepath run`` alone (a ``kill -INT`` of its pid);
- ``sigterm-runner``: SIGTERM to ``tunepath run`` alone (a ``kill`` of its pid, a service manager);
- ``sigkill``: SIGKILL to the process group;
- ``sshd``: the server's sshd killed, listener and sessions, then started again a few seconds later
  (an operator bringing it back);
- ``link``: the server's eth0 set down, then up again a few seconds later.

Everything machine-wide (CPU hotplug, huge pages) happens under ``flock /tmp/tunepath-apply.lock``,
held for the whole harness. The results: ``build/faults.json`` by default.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import time
from dataclasses import dataclass, field

from harness import ROOT
from harness.faults.moments import (CHANGE, MOMENTS, START, WRK2_SOURCE, Moment, by_name, forget_wrk2, seed_runs,
                                     wait_line)
from harness.faults.probe import Controller, Probe, inject, say
from harness.faults.report import Column, Layout, Plan, Trial
from harness.faults.state import ServerState
from harness.faults.target import Target
from tunepath.errors import TunepathError

__all__ = ["LabServer", "Calibration", "SERVER_LAYOUT", "STEP_SETS"]

# the trials of each kind take these in turn: CPU 1 offline (the baseline, baseline_cpus "0") with eth0's
# queues after it (75 s a run here); the JVM step's huge pages (90 s); eth0's queues alone (25 s), twice,
# which keeps 20 trials of each kind within an hour
STEP_SETS = ("baseline,nic-queues", "jvm", "nic-queues", "nic-queues")
DELAY_SHARE = 0.8          # the fault comes within this share of the span the calibration run stayed changed
CHANGE_WAIT_S = 240        # how long a run may take to make its first host change
OUTAGE_S = (2.0, 8.0)      # sshd down / link down for this long (uniform, seeded)

SERVER_LAYOUT = Layout(
    labels={"sigint-pgrp": "SIGINT to the controller's process group", "sigint-runner": "SIGINT to `tunepath run` alone",
            "sigterm-runner": "SIGTERM to `tunepath run` alone",
            "sigkill": "SIGKILL to the controller", "sshd": "server's sshd killed, restarted",
            "link": "server's link down, then up", "sigint": "SIGINT to the controller"},
    columns=(Column("fault", "kind"), Column("trials", "trials"), Column("fault during an applied change", "landed"),
             Column("restored automatically", "auto"), Column("restored by one `tunepath restore`", "by_restore"),
             Column("hosts left modified", "modified"), Column("signal to exit (median)", "exit_median_s", "s.1"),
             Column("signal to exit (max)", "exit_max_s", "s.1"), Column("time per trial (median)", "median_s", "s")),
    trial_fields=("kind", "index", "steps", "moment", "seed", "delay_s", "outage_s", "noticed_s", "fault_at_s", "to_exit_s", "changed_at_fault",
                  "last_line", "final_line", "exit_status", "hung", "kernels_left", "differences", "restore_output",
                  "left", "late", "outcome", "duration_s", "note", "landed"),
    summary_fields=("kind", "trials", "landed", "auto", "by_restore", "modified", "median_s", "hung", "exit_median_s",
                    "exit_max_s"),
    retired=("sigint",))


@dataclass
class Calibration:
    """One applied run of a step set without a fault."""

    steps: str
    change_s: float                       # from the start to the first host change
    window_s: float                       # from the first change to the run's end
    total_s: float
    differences: list[str] = field(default_factory=list)    # after the run: should be none


class LabServer(Target):
    """The namespace lab's server: the host changes of the baseline, NIC-queue and JVM steps."""

    root_for = "the lab's namespaces, CPU hotplug, huge pages"
    machine_wide = True
    layout = SERVER_LAYOUT
    trials, prefix, lab_dir, out = 20, "tpflt", "faults-lab", "faults.json"
    records_prefix = "tunepath-faults-runs-"
    run_options = ("--no-pin",)
    no_trigger = "the run made no host change before it ended: no fault injected"

    def __init__(self, step_sets: tuple[str, ...] = STEP_SETS, delay_max: float | None = None,
                 moments: tuple[Moment, ...] = (), outage: tuple[float, float] = OUTAGE_S):
        self.step_sets, self.delay_max, self.moments, self.outage = step_sets, delay_max, moments, outage
        self.calibrations: dict[str, Calibration] = {}
        self.lab = None
        self.probe: Probe | None = None
        self.before: ServerState | None = None

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--steps", default=None,
                            help=f"step sets, ';'-separated, used in turn by the trials (default: {';'.join(STEP_SETS)})")
        parser.add_argument("--delay-max", type=float, default=None,
                            help="the longest wait after the first host change (default: 80 %% of how long the "
                                 "calibration run kept the host changed; given, there is no calibration run)")
        parser.add_argument("--outage", default=None, metavar="LOW,HIGH",
                            help=f"how long an sshd or link fault lasts, in seconds, drawn uniformly (default "
                                 f"{OUTAGE_S[0]:g},{OUTAGE_S[1]:g}; beyond 30 the run gives the server up first)")
        parser.add_argument("--at", default=None, metavar="MOMENTS",
                            help="strike at these moments of a run of the NIC-queue step, in turn: all, or of "
                                 f"{','.join(m.name for m in MOMENTS)} (no calibration run; see docs/faults.md)")

    @classmethod
    def from_options(cls, args: argparse.Namespace, parser: argparse.ArgumentParser) -> "LabServer":
        sets = tuple(s.strip() for s in (args.steps or ";".join(STEP_SETS)).split(";") if s.strip())
        if not sets:
            parser.error("--steps is empty")
        try:
            moments = by_name(args.at) if args.at is not None else ()
        except ValueError as exc:
            parser.error(f"--at: {exc}")
        if moments and (args.steps is not None or args.delay_max is not None):
            parser.error("--at chooses the steps and the delays itself: leave out --steps and --delay-max")
        try:
            low, high = (float(v) for v in (args.outage or f"{OUTAGE_S[0]},{OUTAGE_S[1]}").split(","))
        except ValueError:
            parser.error(f"--outage {args.outage}: give two numbers of seconds, e.g. 40,60")
        if not 0 < low <= high <= 600:
            parser.error(f"--outage {args.outage}: from more than 0 to at most 600 s, the lower first")
        return cls(sets, args.delay_max, moments, (low, high))

    # -- the lab and the server's state ----------------------------------------------------
    def up(self, harness) -> None:
        self.lab = harness.lab
        self.lab.up(say=lambda line: None)
        self.probe = Probe(self.lab)
        self.probe.forget_saved_state()

    def state(self) -> ServerState:
        return self.probe.state()

    def record_before(self, before: ServerState) -> str:
        self.before = before
        return (f"the server before: {before.queues}; CPUs {before.cpus_online}; {before.hugepages} huge pages; "
                f"Tomcat {'running' if before.tomcat else 'stopped'}")

    def calibrate(self, harness) -> None:
        if self.delay_max is None and not self.moments:     # the trials need no calibration
            for steps in dict.fromkeys(self.step_sets):
                self.calibrate_steps(harness, steps)

    def calibrate_steps(self, harness, steps: str) -> None:
        """One applied run of ``steps`` without a fault: when the first change comes, how long the
        host stays changed, and that the run leaves the server as it found it."""
        say(f"calibration: an applied run of {steps}, no fault")
        t0 = time.monotonic()
        ctl = Controller(harness.command(steps, "--apply"), ROOT)
        change = self.wait_for_change(ctl)
        if change is None:
            raise TunepathError(f"the applied run of {steps} changed nothing on the server (exit status "
                                f"{ctl.proc.returncode}): {ctl.last_line()}; see {harness.records}")
        code = ctl.wait(900)
        total = time.monotonic() - t0
        time.sleep(1)
        diff = self.probe.state().differences(self.before)
        cal = Calibration(steps, change - t0, total - (change - t0), total, diff)
        self.calibrations[steps] = cal
        say(f"calibration {steps}: exit {code}; first change after {cal.change_s:.0f} s, changed for "
            f"{cal.window_s:.0f} s, {total:.0f} s in all; "
            + ("the server as before" if not diff else f"LEFT MODIFIED: {'; '.join(diff)}"))
        if diff:
            self.probe.repair(self.before)
        if code != 0:
            raise TunepathError(f"the applied run of {steps} without a fault failed (exit status {code}): "
                                f"{ctl.last_line()}")

    def plans(self, config) -> list[Plan]:
        """Per trial, from its own seed: the trial's seed, the delay (within 80 % of its step set's
        calibrated window, or ``--delay-max``) and the outage of an sshd or link fault."""
        plans = []
        for index in range(1, config.trials + 1):
            moment = self.moments[(index - 1) % len(self.moments)] if self.moments else None
            steps = moment.steps if moment else self.step_sets[(index - 1) % len(self.step_sets)]
            limit = (moment.within_s if moment else self.delay_max if self.delay_max is not None
                     else DELAY_SHARE * self.calibrations[steps].window_s)
            for kind in config.kinds:
                rng = random.Random(f"{config.seed}-{kind}-{index}")
                seed, delay = rng.randrange(1 << 30), round(rng.uniform(0, limit), 2)
                plans.append(Plan(kind, index, seed, delay, steps=steps, outage_s=rng.uniform(*self.outage),
                                  moment=moment.name if moment else ""))
        return plans

    def before_run(self, harness, plan: Plan) -> tuple[str, ...]:
        """With ``--at``: the same wrk2 for every run (built from the vendored source where it is
        missing; removed first for the wrk2-build moment) and, for the final build, a site of the
        harness's own."""
        if not plan.moment:
            return ()
        moment = next(m for m in MOMENTS if m.name == plan.moment)
        if moment.fresh_wrk2:
            forget_wrk2(harness.config.prefix)
        extra = ("--wrk2-source", str(WRK2_SOURCE))
        if moment.build:
            seed_runs(harness.records / "runs")
        return extra + (("--site-dir", str(harness.records / "site")) if moment.build else ())

    # -- one trial -------------------------------------------------------------------------
    def wait_for_change(self, ctl: Controller) -> float | None:
        """The moment the server first differs from ``before`` in a host change; None if the run
        ended (or took too long) first."""
        deadline = time.monotonic() + CHANGE_WAIT_S
        while time.monotonic() < deadline and ctl.running():
            if self.probe.changed(self.before):
                return time.monotonic()
            time.sleep(0.1)
        return None

    def wait_trigger(self, harness, plan: Plan, ctl: Controller) -> float | None:
        moment = next((m for m in MOMENTS if m.name == plan.moment), None)
        if moment is None or moment.trigger == CHANGE:
            return self.wait_for_change(ctl)
        if moment.trigger == START:
            return time.monotonic()
        return wait_line(ctl, moment.trigger, CHANGE_WAIT_S)

    def inject(self, harness, plan: Plan, trial: Trial, ctl: Controller) -> None:
        trial.changed_at_fault = self.probe.state().differences(self.before)
        if not ctl.running():
            trial.note, trial.changed_at_fault = "the run ended before the fault", []
            return
        trial.injected = True
        trial.outage_s = inject(plan.kind, self.lab, ctl, plan.outage_s)

    def settle(self, harness, trial: Trial, first: bool) -> ServerState:
        time.sleep(2 if first else 1)      # a command the run left behind gets the chance to land
        return self.probe.state()

    def restore_argv(self, harness) -> list[str]:
        return [str(harness.config.tunepath), "restore", "--force", "--hosts", str(harness.lab.hosts_file)]

    def repair(self, harness) -> str:
        return "; ".join(self.probe.repair(self.before))

    def record_repair(self, trial: Trial, done: str) -> None:
        trial.add_note(f"repaired as root: {done}")

    def reachable(self, lab) -> bool:
        if any(not part.ok for part in lab.status()):
            lab.up(say=lambda line: None)
        return True

    # -- the results and the end -----------------------------------------------------------
    def header(self, harness) -> dict:
        return {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                "machine": f"{platform.node()}: {os.cpu_count()} CPUs, {platform.machine()}, "
                           f"kernel {platform.release()}",
                "seed": harness.config.seed, "trials_per_kind": harness.config.trials,
                "kinds": list(harness.config.kinds), "step_sets": list(self.step_sets), "profile": "smoke",
                "elapsed_s": round(time.monotonic() - harness.started, 1),
                "before": self.before.to_dict() if self.before else None,
                "calibration": [vars(c) for c in self.calibrations.values()]}

    def put_back(self, harness) -> list[str]:
        """The server's link up, the server repaired as root; with ``--keep-lab`` the lab whole
        again (an sshd a fault killed comes back)."""
        done = []
        try:
            harness.lab.set_link("server", True)
        except TunepathError:
            pass
        if self.probe is not None and self.before is not None:
            done += self.probe.repair(self.before)
        if harness.config.keep_lab:
            harness.lab.up(say=done.append)
        return done
