"""The fault harness: one :class:`Harness`, parametrised by the server it breaks (a :class:`Target`).

Both targets (:mod:`harness.faults.server`, :mod:`harness.faults.vm`) go through the same
course. The harness brings its own lab up (``tunepath lab``; its own prefix and directory),
installs Tomcat on the server once (a run of the setup step), records the server's state, and
lets the target calibrate. Then per trial, the kinds taking turns: it starts an applied
``tunepath run`` as a subprocess (the controller), waits for the target's trigger, waits the
trial's seeded delay, injects the fault, waits for the run to end (killing it after the target's
limit: hung), compares the server with its state before, and if anything differs runs one
``tunepath restore --force`` and compares again. A trial ends restored automatically, restored by
one ``tunepath restore``, left modified, or (the VM) unbootable; the harness then repairs the
server as root so that the next trial starts clean, and a change found only before the next
trial counts against the trial before. After each trial it writes the JSON results
(:func:`harness.faults.report.write_results`). :meth:`Harness.close` ends the run in flight, puts
the server and this machine back and takes the lab down, however the harness ended.
"""

from __future__ import annotations

import shutil
import signal
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import ROOT
from harness.faults.probe import NOTICED, STOPS, Controller, machine_state, put_machine_back, say
from harness.faults.report import Plan, Trial, duration, load_trials, write_results
from harness.faults.target import Target
from tunepath.errors import TunepathError
from tunepath.versions import TOMCAT_VERSION

__all__ = ["Config", "Harness", "TARBALL"]

TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"


@dataclass
class Config:
    """The options every target takes (``python -m harness.faults --help``)."""

    trials: int
    kinds: tuple[str, ...]
    prefix: str
    directory: Path
    out: Path
    seed: int = 11
    keep_lab: bool = False
    keep_runs: bool = False
    only: tuple[tuple[str, int], ...] = ()     # (kind, index) pairs: run just these trials
    merge: Path | None = None                  # earlier results: kept, but trials run again replace theirs
    command: str = "scripts/faults"            # as typed, for the results
    tunepath: Path = ROOT / ".venv" / "bin" / "tunepath"


class Harness:
    """One harness run on one target: the lab, the server's state before, the trials."""

    def __init__(self, config: Config, target: Target):
        from tunepath.lab import Lab

        self.config, self.target = config, target
        self.lab = Lab(config.directory, config.prefix)
        self.records = Path(tempfile.mkdtemp(prefix=target.records_prefix))
        self.trials: list[Trial] = []
        self.started = time.monotonic()
        self.machine = machine_state()
        self.before = None
        self.controller: Controller | None = None
        self.current = ""                          # the trial in flight, for the progress lines
        self.trial_t0 = 0.0

    def elapsed(self) -> str:
        return duration(time.monotonic() - self.started)

    def phase(self, what: str) -> None:
        """A progress line of the trial in flight."""
        say(f"{self.current}: {what} (trial {time.monotonic() - self.trial_t0:.0f} s, elapsed {self.elapsed()})")

    # -- the controller ------------------------------------------------------------------
    def command(self, steps: str, *extra: str) -> list[str]:
        build = () if "--site-dir" in extra else ("--no-build",)
        return [str(self.config.tunepath), "run", "--hosts", str(self.lab.hosts_file), "--profile", "smoke",
                "--steps", steps, "--runs-dir", str(self.records / "runs"), *build,
                *self.target.run_options, *extra]

    def restore(self) -> tuple[list[str], float]:
        """One ``tunepath restore --force`` (the target's): its output and exit status, its seconds."""
        t0, limit = time.monotonic(), self.target.restore_limit_s
        try:
            r = subprocess.run(self.target.restore_argv(self), capture_output=True, text=True,
                               timeout=limit, cwd=ROOT, env=_with_scripts_path())
            out = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()] + [f"(exit status {r.returncode})"]
        except subprocess.TimeoutExpired:
            out = [f"(tunepath restore did not end within {limit:.0f} s)"]
        return out, time.monotonic() - t0

    # -- before the trials -------------------------------------------------------------------
    def prepare(self) -> None:
        if not TARBALL.is_file():
            raise TunepathError(f"{TARBALL} is missing: run scripts/bootstrap --live first (it fetches Tomcat)")
        say(f"lab {self.config.prefix} in {self.config.directory}: up")
        self.target.up(self)
        self.setup()
        self.before = self.target.state()
        say(self.target.record_before(self.before))
        self.target.calibrate(self)

    def setup(self) -> None:
        """Tomcat on the server (a run of the setup step), unless it is there."""
        if self.target.tomcat_installed():
            return
        say("setup: installing Tomcat on the lab's server (one run of the setup step)")
        ctl = Controller(self.command("setup", *self.target.setup_options, "--tomcat-tarball", str(TARBALL)), ROOT)
        if ctl.wait(self.target.setup_limit_s) != 0:
            raise TunepathError(f"the setup run failed (exit status {ctl.proc.returncode}): {ctl.last_line()}")

    # -- one trial -------------------------------------------------------------------------
    def trial(self, plan: Plan, number: int, total: int) -> Trial:
        t = Trial.planned(plan)
        self.current, self.trial_t0 = f"trial {number}/{total} {plan.kind} {plan.index}", time.monotonic()
        self.target.start_watch()
        extra = self.target.before_run(self, plan)
        self.controller = ctl = Controller(self.command(plan.steps, *self.target.trial_options, *extra), ROOT)
        self.phase("run started; waiting for the trigger")
        trigger = self.target.wait_trigger(self, plan, ctl)
        if trigger is None:
            self.target.stop_watch()
            t.note = self.target.no_trigger
            self.phase(t.note)
        else:
            time.sleep(max(0.0, trigger + plan.delay_s - time.monotonic()))
            self.target.stop_watch()
            t.fault_at_s, t.last_line = round(time.monotonic() - self.trial_t0, 2), ctl.last_line()
            fault = time.monotonic()
            self.target.inject(self, plan, t, ctl)
        t.exit_status, t.hung = ctl.finish(self.target.run_limit_s)
        if trigger is not None and t.injected and (plan.kind in STOPS or plan.signal == "SIGINT"):
            t.to_exit_s = round(time.monotonic() - fault, 2)
        elif trigger is not None and t.injected and not plan.signal:   # a server lost: when the run gave it up
            t.noticed_s = ctl.first_after(fault, NOTICED)
        t.kernels_left = ctl.end_kernels()
        t.final_line = ctl.last_line()
        self.controller = None
        self.phase(f"the run ended (exit {t.exit_status}{', hung: killed' if t.hung else ''}): {t.final_line[:160]}")
        self.check(t)
        t.duration_s = round(time.monotonic() - self.trial_t0, 1)
        t.classify()
        return t

    def check(self, t: Trial) -> None:
        """Compare with ``before``; one ``tunepath restore --force`` if anything differs; repair as
        root what that left, so the next trial starts clean."""
        now = self.target.settle(self, t, first=True)
        if now is None:
            return
        t.differences = now.differences(self.before)
        if not t.differences:
            return
        self.phase(f"differs: {'; '.join(t.differences)}; one tunepath restore --force")
        t.restore_output, seconds = self.restore()
        t.restore_s = round(seconds, 1)
        after = self.target.settle(self, t, first=False)
        if after is None:
            return
        t.left = after.differences(self.before)
        self.phase(f"after the restore ({seconds:.0f} s): " + ("as before" if not t.left else "LEFT: " + "; ".join(t.left)))
        if t.left:
            self.target.record_repair(t, self.target.repair(self))

    def check_late(self) -> None:
        """Before the next trial (and after the last): the lab whole, the server still as before
        (else the previous trial left something that landed late: it counts against that trial)."""
        if not self.target.reachable(self.lab):
            return
        late = self.target.state().differences(self.before)
        if not late:
            return
        done = self.target.repair(self)
        if self.trials:
            previous = self.trials[-1]
            previous.late = late
            self.target.record_repair(previous, done)
            previous.classify()
            say(f"before the next trial: {previous.kind} {previous.index} left {'; '.join(late)}; repaired: {done}")

    # -- all trials -------------------------------------------------------------------------
    def plans(self) -> list[Plan]:
        plans = self.target.plans(self.config)
        return [p for p in plans if (p.kind, p.index) in self.config.only] if self.config.only else plans

    def run(self) -> list[Trial]:
        self.prepare()
        plans = self.plans()
        first = time.monotonic()
        for number, plan in enumerate(plans, 1):
            self.check_late()
            t = self.trial(plan, number, len(plans))
            self.trials.append(t)
            self.save()
            spent = time.monotonic() - first
            say(f"{t.kind} {t.index}/{self.config.trials}{f' ({t.steps})' if t.steps else ''}: {t.outcome}"
                f"{' (' + t.note + ')' if t.note else ''}; trial {t.duration_s:.0f} s, exit {t.exit_status}; "
                f"elapsed {self.elapsed()}, about {duration(spent / number * (len(plans) - number))} left")
        if self.trials:
            self.check_late()
            self.save()
        return self.trials

    def save(self) -> None:
        """The results so far; with ``--merge``, the earlier file's trials that did not run again too."""
        merge = self.config.merge
        earlier = load_trials(merge) if merge and merge.is_file() else []
        again = {(t.kind, t.index) for t in self.trials}
        kept = [t for t in earlier if (t.kind, t.index) not in again]
        write_results(self.config.out, self.target.header(self), kept + self.trials, self.target.layout)

    # -- always -----------------------------------------------------------------------------
    def close(self) -> list[str]:
        """End the run in flight, put the server and this machine back, take the lab down."""
        done = []
        if self.controller is not None:          # a run already cleaning up is not interrupted twice
            busy = any(w in "\n".join(self.controller.lines[-3:]) for w in ("cleaning up", "interrupt:"))
            self.controller.finish(120 if busy else 0, None if busy else signal.SIGINT)
            self.controller.end_kernels()
        done += self.target.put_back(self)
        if not self.config.keep_lab:
            done += self.lab.down(say=lambda line: None) or []
        done += put_machine_back(self.machine)
        if not self.config.keep_runs:
            shutil.rmtree(self.records, ignore_errors=True)
        return done


def _with_scripts_path() -> dict:
    """This environment with ``scripts/`` on PYTHONPATH (a restore run through ``python -c``)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT / "scripts") + (os.pathsep + path if path else "")}
