"""Fault injection: interrupt applied live runs on the lab and check the server is put back.

``scripts/faults [--trials N] [--kinds sigint,sigkill,sshd,link] [--prefix P] [--dir D] [--seed S]
[--out FILE] [--keep-lab]`` brings a lab up (``tunepath lab``; its own prefix and directory),
installs Tomcat on its server once (a run of the setup step), records the server's state (eth0's
queue counts, online CPUs, huge pages, the bytes of ``server.xml``, ``setenv.sh`` and the examples'
``context.xml``, Tomcat, httpd and load generators stopped, no lock), and times one applied run of
each step set without a fault (the calibration). Then, per trial, it starts ``tunepath run --apply``
as a subprocess, waits until the server shows a host change (a CPU offline, other queue counts, huge
pages reserved), waits a random time within 80 % of the span the calibration run stayed changed
(seeded per trial), and injects one fault (the kinds take turns: trial 1 of each, then trial 2 …;
the step sets too, see ``STEP_SETS``):

- ``sigint``: SIGINT to the controller's process group (a Ctrl-C in its terminal);
- ``sigkill``: SIGKILL to it;
- ``sshd``: the server's sshd killed, listener and sessions, then started again a few seconds later
  (an operator bringing it back);
- ``link``: the server's eth0 set down, then up again a few seconds later.

It waits for the controller to end (killing it after a generous limit, counted as hung), compares
the server with its state before, and if anything differs runs one ``tunepath restore --force`` and
compares again. A trial ends restored automatically, restored by one ``tunepath restore``, or left
modified (the differences are recorded, and the harness repairs the server as root before the next
trial; a change found only before the next trial counts as left modified too). The results are a
JSON file (default ``build/faults.json``) and a Markdown table printed at the end.

Everything machine-wide (CPU hotplug, huge pages) happens under ``flock /tmp/tunepath-apply.lock``,
held for the whole harness. However it ends, even on Ctrl-C, the lab goes down (unless
``--keep-lab``), and this machine's CPUs and huge pages are as the harness found them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.faults_probe import Controller, Probe, inject, machine_state, put_machine_back, say
from tunepath.faults_report import Trial, duration, load_trials, render, write_results
from tunepath.project import project_dir
from tunepath.versions import TOMCAT_VERSION

__all__ = ["Config", "Harness", "main", "KINDS", "STEP_SETS"]

ROOT = project_dir(required=False) or Path.cwd()
APPLY_LOCK = Path("/tmp/tunepath-apply.lock")
KINDS = ("sigint", "sigkill", "sshd", "link")
# the trials of each kind take these in turn: CPU 1 offline (the baseline, baseline_cpus "0") with eth0's
# queues after it (75 s a run here); the JVM step's huge pages (90 s); eth0's queues alone (25 s), twice,
# which keeps 20 trials of each kind within an hour
STEP_SETS = ("baseline,nic-queues", "jvm", "nic-queues", "nic-queues")
DELAY_SHARE = 0.8          # the fault comes within this share of the span the calibration run stayed changed
RUN_LIMIT_S = 300          # after the fault, how long a run may take to end before it counts as hung
CHANGE_WAIT_S = 240        # how long a run may take to make its first host change
OUTAGE_S = (2.0, 8.0)      # sshd down / link down for this long (uniform, seeded)


@dataclass
class Config:
    trials: int = 20
    kinds: tuple[str, ...] = KINDS
    prefix: str = "tpflt"
    directory: Path = ROOT / "build" / "faults-lab"
    seed: int = 11
    out: Path = ROOT / "build" / "faults.json"
    keep_lab: bool = False
    keep_runs: bool = False
    step_sets: tuple[str, ...] = STEP_SETS
    delay_max: float | None = None        # seconds; default: from the calibration
    tunepath: Path = ROOT / ".venv" / "bin" / "tunepath"


@dataclass
class Calibration:
    steps: str
    change_s: float                       # from the start to the first host change
    window_s: float                       # from the first change to the run's end
    total_s: float
    differences: list[str] = field(default_factory=list)    # after the run: should be none


class Harness:
    """One harness run: the lab, the baseline state, the calibration, the trials."""

    def __init__(self, config: Config):
        from tunepath.lab import Lab

        self.config = config
        self.lab = Lab(config.directory, config.prefix)
        self.runs = Path(tempfile.mkdtemp(prefix="tunepath-faults-runs-"))
        self.trials: list[Trial] = []
        self.calibrations: dict[str, Calibration] = {}
        self.started = time.monotonic()
        self.machine = machine_state()
        self.probe: Probe | None = None
        self.before = None
        self.controller: Controller | None = None

    # -- the controller ------------------------------------------------------------------
    def command(self, steps: str, *extra: str) -> list[str]:
        return [str(self.config.tunepath), "run", "--hosts", str(self.lab.hosts_file), "--profile", "smoke",
                "--steps", steps, "--runs-dir", str(self.runs), "--no-build", "--no-pin", *extra]

    def restore(self) -> list[str]:
        """One ``tunepath restore --force``: its output, and its exit status."""
        try:
            r = subprocess.run([str(self.config.tunepath), "restore", "--force", "--hosts",
                                str(self.lab.hosts_file)], capture_output=True, text=True, timeout=240, cwd=ROOT)
        except subprocess.TimeoutExpired:
            return ["(tunepath restore did not end within 240 s)"]
        return [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()] + [f"(exit status {r.returncode})"]

    # -- before the trials -------------------------------------------------------------------
    def prepare(self) -> None:
        tarball = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"
        if not tarball.is_file():
            raise TunepathError(f"{tarball} is missing: run scripts/bootstrap --live first (it fetches Tomcat)")
        say(f"lab {self.config.prefix} in {self.config.directory}: up")
        self.lab.up(say=lambda line: None)
        self.probe = Probe(self.lab)
        self.probe.forget_saved_state()
        say("setup: installing Tomcat on the lab's server (one run of the setup step)")
        ctl = Controller(self.command("setup", "--tomcat-tarball", str(tarball)), ROOT)
        if ctl.wait(600) != 0:
            raise TunepathError(f"the setup run failed (exit status {ctl.proc.returncode}): {ctl.last_line()}")
        self.before = self.probe.state()
        say(f"the server before: {self.before.queues}; CPUs {self.before.cpus_online}; "
            f"{self.before.hugepages} huge pages; Tomcat {'running' if self.before.tomcat else 'stopped'}")
        if self.config.delay_max is None:            # given: the trials need no calibration
            for steps in dict.fromkeys(self.config.step_sets):
                self.calibrate(steps)

    def calibrate(self, steps: str) -> None:
        """One applied run of ``steps`` without a fault: when the first change comes, how long the
        host stays changed, and that the run leaves the server as it found it."""
        say(f"calibration: an applied run of {steps}, no fault")
        t0 = time.monotonic()
        ctl = Controller(self.command(steps, "--apply"), ROOT)
        change = self.wait_for_change(ctl)
        if change is None:
            raise TunepathError(f"the applied run of {steps} changed nothing on the server (exit status "
                                f"{ctl.proc.returncode}): {ctl.last_line()}; see {self.runs}")
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

    def wait_for_change(self, ctl: Controller) -> float | None:
        """The moment the server first differs from ``before`` in a host change; None if the run
        ended (or took too long) first."""
        deadline = time.monotonic() + CHANGE_WAIT_S
        while time.monotonic() < deadline and ctl.running():
            if self.probe.changed(self.before):
                return time.monotonic()
            time.sleep(0.1)
        return None

    # -- one trial -------------------------------------------------------------------------
    def trial(self, kind: str, index: int, steps: str) -> Trial:
        rng = random.Random(f"{self.config.seed}-{kind}-{index}")
        limit = self.config.delay_max if self.config.delay_max is not None else \
            DELAY_SHARE * self.calibrations[steps].window_s
        t = Trial(kind, index, steps, rng.randrange(1 << 30), round(rng.uniform(0, limit), 2))
        outage = rng.uniform(*OUTAGE_S)
        t0 = time.monotonic()
        self.controller = ctl = Controller(self.command(steps, "--apply"), ROOT)
        change = self.wait_for_change(ctl)
        if change is None:
            t.note = "the run made no host change before it ended: no fault injected"
        else:
            time.sleep(max(0.0, change + t.delay_s - time.monotonic()))
            t.fault_at_s = round(time.monotonic() - t0, 2)
            t.changed_at_fault = self.probe.state().differences(self.before)
            t.last_line = ctl.last_line()
            if ctl.running():
                t.outage_s = inject(kind, self.lab, ctl, outage)
            else:
                t.note = "the run ended before the fault"
                t.changed_at_fault = []
        t.exit_status, t.hung = ctl.finish(RUN_LIMIT_S)
        t.kernels_left = ctl.end_kernels()
        t.final_line = ctl.last_line()
        self.controller = None
        self.check(t)
        t.duration_s = round(time.monotonic() - t0, 1)
        return t

    def check(self, t: Trial) -> None:
        """Compare with ``before``; one ``tunepath restore --force`` if anything differs; repair as
        root what that left, so the next trial starts clean."""
        time.sleep(2)                      # a command the run left behind gets the chance to land
        t.differences = self.probe.state().differences(self.before)
        if t.differences:
            t.restore_output = self.restore()
            time.sleep(1)
            t.left = self.probe.state().differences(self.before)
            if t.left:
                t.note = (t.note + "; " if t.note else "") + "repaired as root: " + "; ".join(
                    self.probe.repair(self.before))
        t.classify()

    def check_late(self, previous: Trial | None) -> None:
        """Before the next trial: the lab whole, the server still as before (else the previous trial
        left something that landed late)."""
        if any(not part.ok for part in self.lab.status()):
            self.lab.up(say=lambda line: None)
        late = self.probe.state().differences(self.before)
        if late and previous is not None:
            previous.late = late
            previous.note = (previous.note + "; " if previous.note else "") + "repaired as root: " + "; ".join(
                self.probe.repair(self.before))
            previous.classify()
        elif late:
            self.probe.repair(self.before)

    # -- all trials -------------------------------------------------------------------------
    def run(self) -> list[Trial]:
        self.prepare()
        plan = [(kind, i) for i in range(1, self.config.trials + 1) for kind in self.config.kinds]
        first = time.monotonic()
        for n, (kind, i) in enumerate(plan, 1):
            self.check_late(self.trials[-1] if self.trials else None)
            steps = self.config.step_sets[(i - 1) % len(self.config.step_sets)]
            t = self.trial(kind, i, steps)
            self.trials.append(t)
            self.save()
            spent = time.monotonic() - first
            say(f"{kind} {i}/{self.config.trials} ({steps}): {t.outcome}"
                f"{' (' + t.note + ')' if t.note else ''}; trial {t.duration_s:.0f} s, exit {t.exit_status}; "
                f"elapsed {duration(time.monotonic() - self.started)}, about "
                f"{duration(spent / n * (len(plan) - n))} left")
        if self.trials:
            self.check_late(self.trials[-1])
            self.save()
        return self.trials

    def save(self) -> None:
        header = {"date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                  "machine": f"{platform.node()}: {os.cpu_count()} CPUs, {platform.machine()}, "
                             f"kernel {platform.release()}",
                  "seed": self.config.seed, "trials_per_kind": self.config.trials, "kinds": list(self.config.kinds),
                  "step_sets": list(self.config.step_sets), "profile": "smoke",
                  "elapsed_s": round(time.monotonic() - self.started, 1),
                  "before": self.before.to_dict() if self.before else None,
                  "calibration": [vars(c) for c in self.calibrations.values()]}
        write_results(self.config.out, header, self.trials)

    # -- always -----------------------------------------------------------------------------
    def close(self) -> list[str]:
        """End the run in flight, put the server and this machine back, take the lab down."""
        done = []
        if self.controller is not None:          # a run already cleaning up is not interrupted twice
            busy = any(w in "\n".join(self.controller.lines[-3:]) for w in ("cleaning up", "interrupt:"))
            self.controller.finish(120 if busy else 0, None if busy else signal.SIGINT)
            self.controller.end_kernels()
        try:
            self.lab.set_link("server", True)
        except TunepathError:
            pass
        if self.probe is not None and self.before is not None:
            done += self.probe.repair(self.before)
        if self.config.keep_lab:
            self.lab.up(say=done.append)               # an sshd a fault killed comes back
        else:
            done += self.lab.down(say=lambda line: None)
        done += put_machine_back(self.machine)
        if not self.config.keep_runs:
            shutil.rmtree(self.runs, ignore_errors=True)
        return done


def apply_lock():
    """Hold ``flock /tmp/tunepath-apply.lock`` (machine-wide changes are serialised through it)."""
    fd = os.open(APPLY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f"waiting for {APPLY_LOCK} (another user of CPU hotplug or huge pages holds it)")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def parse_args(argv: list[str] | None) -> Config:
    p = argparse.ArgumentParser(prog="scripts/faults", description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=20, help="trials per fault kind (default 20)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    p.add_argument("--prefix", default="tpflt", help="the lab's name prefix (default tpflt)")
    p.add_argument("--dir", default=str(ROOT / "build" / "faults-lab"), help="the lab's directory")
    p.add_argument("--seed", type=int, default=11, help="seed of the delays and outages (default 11)")
    p.add_argument("--out", default=str(ROOT / "build" / "faults.json"), help="the JSON results")
    p.add_argument("--steps", default=";".join(STEP_SETS),
                   help="step sets, ';'-separated, used in turn by the trials (default: %(default)s)")
    p.add_argument("--delay-max", type=float, default=None,
                   help="the longest wait after the first host change (default: 80 %% of how long the calibration "
                        "run kept the host changed; given, there is no calibration run)")
    p.add_argument("--keep-lab", action="store_true", help="leave the lab up at the end")
    p.add_argument("--keep-runs", action="store_true", help="keep the recorded runs (their directory is printed)")
    p.add_argument("--table", default=None, metavar="FILE", help="only print the table of a results file")
    a = p.parse_args(argv)
    kinds = tuple(k.strip() for k in a.kinds.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        p.error(f"--kinds {a.kinds}: choose among {', '.join(KINDS)}")
    if a.trials < 1:
        p.error("--trials must be 1 or more")
    sets = tuple(s.strip() for s in a.steps.split(";") if s.strip())
    if not sets:
        p.error("--steps is empty")
    return Config(a.trials, kinds, a.prefix, Path(a.dir).absolute(), a.seed, Path(a.out).absolute(), a.keep_lab,
                  a.keep_runs, sets, a.delay_max)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--table" in argv:
        print(render(load_trials(Path(argv[argv.index("--table") + 1]))))
        return 0
    config = parse_args(argv)
    if os.geteuid() != 0:
        print("scripts/faults: needs root (the lab's namespaces, CPU hotplug, huge pages)", file=sys.stderr)
        return 2
    lock = apply_lock()
    harness = None
    try:
        harness = Harness(config)
        trials = harness.run()
    except (KeyboardInterrupt, TunepathError) as exc:
        say("interrupted" if isinstance(exc, KeyboardInterrupt) else f"stopped: {exc}")
        trials = None
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)          # the clean-up runs to its end
        if harness is not None:
            say("cleaning up: the run in flight, the server, the lab, CPUs and huge pages")
            for line in harness.close():
                say(f"  {line}")
            if config.keep_runs:
                say(f"the runs are kept in {harness.runs}")
        os.close(lock)
    if trials is None:
        if harness is not None and harness.trials:
            harness.save()
            print(render(harness.trials))
        return 130 if harness is None or not harness.trials else 1
    harness.save()
    mean = sum(t.duration_s for t in trials) / len(trials)
    print(f"\n{len(trials)} trials in {duration(time.monotonic() - harness.started)} (a trial took {mean:.0f} s on "
          f"average, setup and calibration included in the total); results in {config.out}\n")
    print(render(trials))
    return 0 if all(t.outcome != "left modified" for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
