"""Fault injection on the lab's server VM: power cuts and a killed controller around the IOMMU
step's GRUB change and reboot, and checks that the VM boots and is put back.

``scripts/faults --vm [--trials N] [--kinds grub,dropin,rebootwait,controller] [--seed S]
[--prefix P] [--dir D] [--out FILE] [--keep-lab]`` brings up a lab with the VM (``tunepath lab up
--vm``; its own prefix and directory), installs Tomcat on it once (a run of the setup step), records
the guest's original state (:class:`tunepath.faults_vm_report.GuestState`) and times one
undisturbed ``update-grub``. Then, per trial, it starts an
applied run of the IOMMU step (``--apply --allow-reboot --steps iommu``) with a watcher in the guest
(:class:`tunepath.faults_vm_probe.Watcher`) and injects one fault:

- ``grub``: QEMU SIGKILLed (a power cut) while ``update-grub`` runs, within 90 % of its undisturbed time;
- ``dropin``: QEMU SIGKILLed within 0.3 s of the drop-in file showing in the guest;
- ``rebootwait``: QEMU SIGKILLed within 60 s of the guest going down for the step's reboot;
- ``controller``: the controller's process group SIGKILLed (odd trials) or SIGINTed (even) within
  60 s of the guest going down.

After a power cut the VM is powered on again 2-5 s later (same disk). The harness waits for the
run to end, for the guest's sshd (a VM that does not answer within 10 minutes is *unbootable*: the
serial console says why), compares the guest with its original state, runs one ``tunepath restore
--allow-reboot --force`` if they differ, and compares again. A VM left modified or unbootable is
repaired before the next trial: a new overlay on the cached image, Tomcat installed again. A
benchmark script, not CI: see docs/faults.md, "VM faults".
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.faults_probe import Controller, say
from tunepath.faults_vm_probe import Guest, Power, Watcher
from tunepath.faults_vm_report import KINDS, Plan, VmTrial, load_trials, render, schedule, write_results
from tunepath.project import project_dir
from tunepath.versions import TOMCAT_VERSION

__all__ = ["Config", "VmHarness", "main"]

ROOT = project_dir(required=False) or Path.cwd()
TRIGGER_WAIT_S = 420      # from the run's start until the trigger (drop-in, update-grub, the guest going down)
RUN_LIMIT_S = 1200        # after the fault, how long the run may take to end before it counts as hung
BOOT_LIMIT_S = 600        # after power-on / after the run, how long the guest may take to answer (3 VMs share 2 CPUs here)
RESTORE_LIMIT_S = 900


@dataclass
class Config:
    trials: int = 2
    kinds: tuple[str, ...] = KINDS
    prefix: str = "tpvmf"
    directory: Path = ROOT / "build" / "vmfaults-lab"
    seed: int = 11
    out: Path = ROOT / "build" / "faults-vm.json"
    keep_lab: bool = False
    only: tuple[tuple[str, int], ...] = ()     # (kind, index) pairs: run just these trials
    merge: Path | None = None                  # earlier results: kept, but trials run again replace theirs
    tunepath: Path = ROOT / ".venv" / "bin" / "tunepath"


class VmHarness:
    """The lab with its VM, the guest's original state, the trials."""

    def __init__(self, config: Config):
        from tunepath.lab import Lab

        self.config = config
        self.lab = Lab(config.directory, config.prefix)
        self.records = Path(tempfile.mkdtemp(prefix="tunepath-faults-vm-"))
        self.power = Power(self.lab, self.records)
        self.guest: Guest | None = None
        self.before = None
        self.grub_s = 0.0
        self.trials: list[VmTrial] = []
        self.started = time.monotonic()
        self.controller: Controller | None = None

    def elapsed(self) -> str:
        return f"{(time.monotonic() - self.started) / 60:.1f} min"

    def command(self, steps: str, *extra: str) -> list[str]:
        return [str(self.config.tunepath), "run", "--hosts", str(self.lab.hosts_file), "--profile", "smoke",
                "--steps", steps, "--runs-dir", str(self.records / "runs"), "--no-build", "--repetitions", "1",
                "--max-repetitions", "1", *extra]

    def restore(self) -> tuple[list[str], float]:
        """One ``tunepath restore --allow-reboot --force``: its output and exit status, its seconds. Through
        ``restore_host`` in a subprocess, as the CLI calls it but with ``apply``: the CLI refuses
        ``--allow-reboot`` (its option check wants ``--apply``, which ``restore`` does not take)."""
        t0 = time.monotonic()
        code = ("import sys; from tunepath.live.putback import restore_host; from tunepath.live.session import "
                "LiveOptions; from tunepath.settings import resolve_paths; o = LiveOptions(**resolve_paths("
                "{'hosts_file': sys.argv[1], 'apply': True, 'allow_reboot': True})); "
                "print('\\n'.join(restore_host(o, force=True, reboot=True)) or 'nothing to restore')")
        try:
            r = subprocess.run([sys.executable, "-c", code, str(self.lab.hosts_file)], capture_output=True, text=True,
                               timeout=RESTORE_LIMIT_S, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")})
            out = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()] + [f"(exit status {r.returncode})"]
        except subprocess.TimeoutExpired:
            out = [f"(tunepath restore did not end within {RESTORE_LIMIT_S} s)"]
        return out, time.monotonic() - t0

    # -- before the trials -------------------------------------------------------------------
    def prepare(self) -> None:
        tarball = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"
        if not tarball.is_file():
            raise TunepathError(f"{tarball} is missing: run scripts/bootstrap --live first (it fetches Tomcat)")
        say(f"lab {self.config.prefix} in {self.config.directory}: up, with the VM (a boot takes ~30 s)")
        state = self.lab.up(say=lambda line: None, vm=True)
        self.guest = Guest(self.lab.directory, state.vm.port)
        self.setup(tarball)
        self.before = self.guest.state()
        if self.before.dropin != "absent" or self.before.grub_iommu or self.before.lock:
            raise TunepathError(f"the VM is not in its original state before the trials: {self.before}")
        say(f"the VM before: `{self.before.cmdline}`; CPUs {self.before.cpus_online}; eth0 combined "
            f"{self.before.queues}; grub.cfg {self.before.grub_cfg}")
        self.grub_s = self.guest.update_grub_seconds()
        say(f"update-grub alone takes {self.grub_s:.1f} s in the VM")

    def setup(self, tarball: Path | None = None) -> None:
        """Tomcat in the VM (a run of the setup step), unless it is there."""
        tarball = tarball or ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"
        if self.guest.run(f"test -x ~/apache-tomcat-{TOMCAT_VERSION}/bin/startup.sh").returncode == 0:
            return
        say("setup: installing Tomcat in the VM (one run of the setup step)")
        ctl = Controller(self.command("setup", "--apply", "--tomcat-tarball", str(tarball)), ROOT)
        if ctl.wait(900) != 0:
            raise TunepathError(f"the setup run failed (exit status {ctl.proc.returncode}): {ctl.last_line()}")

    def repair(self) -> str:
        """A new disk from the cached image, Tomcat installed again."""
        done = self.power.repair()
        self.setup()
        return done

    # -- one trial -------------------------------------------------------------------------
    def trial(self, plan: Plan, number: int, total: int) -> VmTrial:
        t = VmTrial(plan.kind, plan.index, plan.seed, plan.delay_s, plan.signal)
        t0 = time.monotonic()
        phase = lambda what: say(f"trial {number}/{total} {plan.kind} {plan.index}: {what} "   # noqa: E731
                                 f"(trial {time.monotonic() - t0:.0f} s, elapsed {self.elapsed()})")
        watcher = Watcher(self.guest)
        time.sleep(1)
        self.controller = ctl = Controller(self.command("iommu", "--apply", "--allow-reboot"), ROOT)
        phase("run started; waiting for the trigger")
        trigger = self.wait_trigger(plan.kind, watcher, ctl)
        if trigger is None:
            watcher.stop()
            t.note = f"no trigger before the run ended or within {TRIGGER_WAIT_S} s: no fault injected"
            phase(t.note)
        else:
            time.sleep(max(0.0, trigger + plan.delay_s - time.monotonic()))
            watcher.stop()
            self.inject(plan, t, ctl, t0, phase)
        code, hung = ctl.finish(RUN_LIMIT_S)
        t.exit_status, t.hung, t.final_line = code, hung, ctl.last_line()
        phase(f"the run ended (exit {code}{', hung: killed' if hung else ''}): {t.final_line[:160]}")
        self.check(t, phase)
        t.duration_s = round(time.monotonic() - t0, 1)
        phase(f"outcome: {t.classify()}")
        return t

    def wait_trigger(self, kind: str, watcher: Watcher, ctl: Controller) -> float | None:
        """The moment the fault's delay counts from, per kind; None if the run ended first."""
        deadline = time.monotonic() + TRIGGER_WAIT_S
        while time.monotonic() < deadline and ctl.running():
            if kind == "dropin":
                moment = watcher.first(lambda c: c[0] == "1")
            elif kind == "grub":
                moment = watcher.first(lambda c: c[1] == "1")
            else:                                     # the guest went down after update-grub
                moment = watcher.ended if watcher.grub_ended() else None
            if moment is not None:
                return moment
            if watcher.ended is not None and kind in ("dropin", "grub"):
                return None
            time.sleep(0.02)
        return None

    def inject(self, plan: Plan, t: VmTrial, ctl: Controller, t0: float, phase) -> None:
        t.injected, t.fault_at_s, t.last_line = True, round(time.monotonic() - t0, 2), ctl.last_line()
        if plan.kind == "controller":
            ctl.signal(signal.SIGKILL if plan.signal == "SIGKILL" else signal.SIGINT)
            t.phase = (self.power.console_lines() or [""])[-1][:200]
            phase(f"{plan.signal} to the controller {plan.delay_s:.1f} s after the guest went down "
                  f"(console: {t.phase[:100]})")
            waited = self.guest.wait_answer(BOOT_LIMIT_S)
            t.boot_s = None if waited is None else round(waited, 1)
            phase(f"the VM answers {waited:.0f} s after the signal" if waited is not None else "the VM does not answer")
            return
        pid = self.power.kill()
        t.phase = (self.power.console_lines() or [""])[-1][:200]
        self.power.keep_console(f"console-{plan.kind}-{plan.index}-killed.log")
        phase(f"QEMU (pid {pid}) SIGKILLed {plan.delay_s:.2f} s after the trigger; console: {t.phase[:100]}")
        time.sleep(plan.off_s)
        phase(f"powering the VM on again after {plan.off_s:.1f} s off")
        seconds, error = self.power.power_on()
        t.boot_s = None if seconds is None else round(seconds, 1)
        if seconds is None:
            t.note = f"power-on: {error}"
        phase(f"the VM {'answers after %.0f s' % seconds if seconds is not None else 'did not answer: ' + error[:200]}")

    def check(self, t: VmTrial, phase) -> None:
        """The guest booted?  As before?  Else one restore, and compare again."""
        waited = self.guest.wait_answer(BOOT_LIMIT_S)
        if waited is None:
            t.booted, t.console_tail = False, self.power.console_lines()[-8:]
            self.power.keep_console(f"console-{t.kind}-{t.index}-unbootable.log")
            phase(f"UNBOOTABLE: no sshd within {BOOT_LIMIT_S} s; console: {' / '.join(t.console_tail[-3:])}")
            t.repaired = self.repair()
            return
        now = self.guest.state()
        t.cmdline_after_fault = now.cmdline
        t.differences = now.differences(self.before)
        if not t.differences:
            return
        phase(f"differs: {'; '.join(t.differences)}; one tunepath restore --allow-reboot --force")
        t.restore_output, seconds = self.restore()
        t.restore_s = round(seconds, 1)
        if self.guest.wait_answer(BOOT_LIMIT_S) is None:
            t.booted, t.console_tail = False, self.power.console_lines()[-8:]
            t.repaired = self.repair()
            return
        t.left = self.guest.state().differences(self.before)
        phase(f"after the restore ({seconds:.0f} s): " + ("as before" if not t.left else "LEFT: " + "; ".join(t.left)))
        if t.left:
            t.repaired = self.repair()

    def before_next(self) -> None:
        """A change that landed after the previous trial's check counts against it."""
        if not self.trials or not self.guest.wait_answer(BOOT_LIMIT_S):
            return
        late = self.guest.state().differences(self.before)
        if late:
            prev = self.trials[-1]
            prev.late = late
            prev.repaired = prev.repaired or self.repair()
            prev.classify()
            say(f"before the next trial: {prev.kind} {prev.index} left {'; '.join(late)}; repaired")

    # -- the whole run ---------------------------------------------------------------------------
    def run(self) -> list[VmTrial]:
        self.prepare()
        plans = schedule(self.config.kinds, self.config.trials, self.config.seed, self.grub_s)
        if self.config.only:
            plans = [p for p in plans if (p.kind, p.index) in self.config.only]
        for number, plan in enumerate(plans, 1):
            self.before_next()
            self.trials.append(self.trial(plan, number, len(plans)))
            self.save()
        self.before_next()
        self.save()
        return self.trials

    def save(self) -> None:
        earlier = load_trials(self.config.merge) if self.config.merge and self.config.merge.is_file() else []
        again = {(t.kind, t.index) for t in self.trials}
        kept = [t for t in earlier if (t.kind, t.index) not in again]
        write_results(self.config.out, self.header(), kept + self.trials)

    def header(self) -> dict:
        return {"date": dt.date.today().isoformat(), "command": "scripts/faults --vm " + " ".join(sys.argv[1:]),
                "seed": self.config.seed, "trials_per_kind": self.config.trials, "kinds": list(self.config.kinds),
                "update_grub_s": round(self.grub_s, 1), "minutes": round((time.monotonic() - self.started) / 60, 1),
                "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.release()}",
                "vm": "Debian 12 under QEMU TCG, 2 vCPUs on 2 NUMA nodes, Intel IOMMU, virtio-net 4 queues",
                "before": self.before.to_dict() if self.before else None}

    def close(self) -> None:
        if self.controller is not None and self.controller.running():
            self.controller.finish(0, signal.SIGINT)
        if not self.config.keep_lab:
            say(f"lab {self.config.prefix}: down")
            self.lab.down(say=lambda line: None)
        shutil.rmtree(self.records, ignore_errors=True)


def parse(argv: list[str]) -> Config:
    p = argparse.ArgumentParser(prog="scripts/faults --vm", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=2, help="trials per fault kind (default 2; ~5 min each)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {','.join(KINDS)}")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--prefix", default="tpvmf")
    p.add_argument("--dir", type=Path, default=ROOT / "build" / "vmfaults-lab")
    p.add_argument("--out", type=Path, default=ROOT / "build" / "faults-vm.json")
    p.add_argument("--keep-lab", action="store_true", help="leave the lab (and its VM) up afterwards")
    p.add_argument("--only", default="", help="just these trials, e.g. controller:1,dropin:2")
    p.add_argument("--merge", type=Path, help="earlier results to keep in --out (trials run again replace theirs)")
    p.add_argument("--table", type=Path, help="only print the table of a results file")
    a = p.parse_args(argv)
    if a.table:
        print(render(load_trials(a.table)))
        raise SystemExit(0)
    kinds = tuple(k for k in a.kinds.split(",") if k)
    if not kinds or any(k not in KINDS for k in kinds) or a.trials < 1:
        p.error(f"--kinds takes {','.join(KINDS)}; --trials at least 1")
    try:
        only = tuple((k, int(i)) for k, _, i in (x.partition(":") for x in a.only.split(",") if x))
    except ValueError:
        p.error("--only takes kind:index pairs, e.g. controller:1,dropin:2")
    return Config(a.trials, kinds, a.prefix, a.dir.absolute(), a.seed, a.out.absolute(), a.keep_lab, only,
                  a.merge.absolute() if a.merge else None)


def main(argv: list[str] | None = None) -> int:
    config = parse(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        print("scripts/faults --vm: needs root (the lab's namespaces and QEMU)", file=sys.stderr)
        return 2
    harness = VmHarness(config)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        harness.run()
    except KeyboardInterrupt:
        say("interrupted: cleaning up")
    except (TunepathError, OSError, subprocess.SubprocessError) as exc:
        say(f"stopped: {exc}")
    finally:
        harness.save()
        harness.close()
    print(render(harness.trials))
    print(f"\nresults: {config.out}")
    return 0 if harness.trials and all(t.outcome in ("restored automatically", "restored by one tunepath restore")
                                       for t in harness.trials) else 1


if __name__ == "__main__":
    raise SystemExit(main())
