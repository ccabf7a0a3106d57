"""The lab's VM guest as a fault target (``scripts/faults --vm``): :class:`VmGuest`.

Power cuts and a killed controller around the IOMMU step's GRUB change and reboot, and checks that
the VM boots and is put back. ``scripts/faults --vm [--trials N] [--kinds
grub,dropin,rebootwait,controller] [--seed S] [--prefix P] [--dir D] [--out FILE] [--only
kind:index,…] [--merge FILE] [--keep-lab] [--keep-runs]`` brings up a lab with the VM (``tunepath
lab up --vm``; prefix ``tpvmf``, directory ``build/vmfaults-lab``), installs Tomcat in it once,
records the guest's original state (:class:`harness.faults.state.GuestState`) and times one
undisturbed ``update-grub``. Per trial it starts an applied run of the IOMMU step (``--apply
--allow-reboot --steps iommu``) with a watcher in the guest (:class:`harness.faults.guest.Watcher`)
and injects one fault:

- ``grub``: QEMU SIGKILLed (a power cut) while ``update-grub`` runs, within 90 % of its undisturbed time;
- ``dropin``: QEMU SIGKILLed within 0.3 s of the drop-in file showing in the guest;
- ``rebootwait``: QEMU SIGKILLed within 60 s of the guest going down for the step's reboot;
- ``controller``: the controller's process group SIGKILLed (odd trials) or SIGINTed (even) within
  60 s of the guest going down.

After a power cut the VM is powered on again 2-5 s later (same disk). A VM that does not answer
within 10 minutes is *unbootable* (the serial console says why). The restore is ``tunepath restore
--allow-reboot --force``. A VM left modified or unbootable is repaired before the next trial: a new
overlay on the cached image, Tomcat installed again. The results: ``build/faults-vm.json`` by
default. A benchmark script, not CI: see docs/faults.md, "VM faults".
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import random
import signal
import sys
import time

from harness.faults.guest import Guest, Power, Watcher
from harness.faults.probe import Controller, say
from harness.faults.report import Column, Layout, Plan, Trial
from harness.faults.state import GuestState
from harness.faults.target import Target
from tunepath.errors import TunepathError
from tunepath.versions import TOMCAT_VERSION

__all__ = ["VmGuest", "GUEST_LAYOUT", "KINDS", "schedule"]

TRIGGER_WAIT_S = 420      # from the run's start until the trigger (drop-in, update-grub, the guest going down)
BOOT_LIMIT_S = 600        # after power-on / after the run, how long the guest may take to answer (3 VMs share 2 CPUs here)
REBOOT_WINDOW_S = 60.0    # the reboot faults come within this many seconds of the guest going down
DROPIN_WINDOW_S = 0.3     # the drop-in fault: within this many seconds of the file showing
RESTORE_CODE = ("import sys; from tunepath.live.putback import restore_host; from tunepath.live.session import "
                "LiveOptions; from tunepath.settings import resolve_paths; o = LiveOptions(**resolve_paths("
                "{'hosts_file': sys.argv[1], 'apply': True, 'allow_reboot': True})); "
                "print('\\n'.join(restore_host(o, force=True, reboot=True)) or 'nothing to restore')")

GUEST_LAYOUT = Layout(
    labels={"grub": "QEMU killed during `update-grub`",
            "dropin": "QEMU killed right after the drop-in is written",
            "rebootwait": "QEMU killed during the reboot wait",
            "controller": "controller killed (SIGKILL/SIGINT) during the reboot wait"},
    columns=(Column("fault", "kind"), Column("trials", "trials"), Column("fault injected", "injected"),
             Column("restored automatically", "auto"), Column("restored by one `tunepath restore`", "by_restore"),
             Column("left modified", "modified"), Column("unbootable", "unbootable"),
             Column("boot after the fault (median)", "boot_median_s", "s"),
             Column("time per trial (median)", "median_s", "min")),
    trial_fields=("kind", "index", "seed", "delay_s", "signal", "injected", "fault_at_s", "noticed_s", "to_exit_s",
                  "phase", "last_line",
                  "final_line", "exit_status", "hung", "boot_s", "booted", "cmdline_after_fault", "differences",
                  "restore_output", "restore_s", "left", "late", "repaired", "console_tail", "outcome",
                  "duration_s", "note"),
    summary_fields=("kind", "trials", "injected", "auto", "by_restore", "modified", "unbootable", "boot_median_s",
                    "median_s"))
KINDS = GUEST_LAYOUT.kinds


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
            plans.append(Plan(kind, index, rng.randrange(1 << 30), delay, steps="iommu", signal=sig,
                              off_s=0.0 if kind == "controller" else off))
    return plans


class VmGuest(Target):
    """The lab's VM: the IOMMU step's GRUB change and reboot."""

    prog = "scripts/faults --vm"
    root_for = "the lab's namespaces and QEMU"
    layout = GUEST_LAYOUT
    trials, prefix, lab_dir, out = 2, "tpvmf", "vmfaults-lab", "faults-vm.json"
    records_prefix = "tunepath-faults-vm-"
    run_options = ("--repetitions", "1", "--max-repetitions", "1")
    trial_options = ("--apply", "--allow-reboot")
    setup_options = ("--apply",)
    setup_limit_s = 900
    run_limit_s = 1200
    restore_limit_s = 900
    no_trigger = f"no trigger before the run ended or within {TRIGGER_WAIT_S} s: no fault injected"

    def __init__(self, arch: str = "amd64"):
        self.arch = arch                  # amd64, or arm64: the Arm VM, which the host boots from its grub.cfg
        self.guest: Guest | None = None
        self.power: Power | None = None
        self.watcher: Watcher | None = None
        self.before: GuestState | None = None
        self.grub_s = 0.0

    # -- the lab and the guest's state -----------------------------------------------------
    @classmethod
    def from_options(cls, args, parser) -> "VmGuest":
        from tunepath.lab.vmarch import arch

        try:
            return cls(arch(getattr(args, "arch", None) or "amd64").debian)
        except TunepathError as exc:
            parser.error(f"--arch: {exc}")

    def up(self, harness) -> None:
        state = harness.lab.up(say=lambda line: None, vm=True, arch=self.arch)   # a boot takes ~30 s (Arm ~60 s)
        self.guest = Guest(harness.lab.directory, state.vm.port)
        self.power = Power(harness.lab, harness.records, self.arch)

    def tomcat_installed(self) -> bool:
        return self.guest.run(f"test -x ~/apache-tomcat-{TOMCAT_VERSION}/bin/startup.sh").returncode == 0

    def state(self) -> GuestState:
        return self.guest.state()

    def record_before(self, before: GuestState) -> str:
        if before.dropin != "absent" or before.grub_iommu or before.lock:
            raise TunepathError(f"the VM is not in its original state before the trials: {before}")
        self.before = before
        return (f"the VM before: `{before.cmdline}`; CPUs {before.cpus_online}; eth0 combined {before.queues}; "
                f"grub.cfg {before.grub_cfg}")

    def calibrate(self, harness) -> None:
        self.grub_s = self.guest.update_grub_seconds()
        say(f"update-grub alone takes {self.grub_s:.1f} s in the VM")

    def plans(self, config) -> list[Plan]:
        return schedule(config.kinds, config.trials, config.seed, self.grub_s)

    # -- one trial -------------------------------------------------------------------------
    def start_watch(self) -> None:
        self.watcher = Watcher(self.guest)
        time.sleep(1)

    def stop_watch(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()

    def wait_trigger(self, harness, plan: Plan, ctl: Controller) -> float | None:
        """Per kind: the drop-in showing, update-grub starting, or the guest going down after it."""
        watcher = self.watcher
        deadline = time.monotonic() + TRIGGER_WAIT_S
        while time.monotonic() < deadline and ctl.running():
            if plan.kind == "dropin":
                moment = watcher.first(lambda c: c[0] == "1")
            elif plan.kind == "grub":
                moment = watcher.first(lambda c: c[1] == "1")
            else:                                     # the guest went down after update-grub
                moment = watcher.ended if watcher.grub_ended() else None
            if moment is not None:
                return moment
            if watcher.ended is not None and plan.kind in ("dropin", "grub"):
                return None
            time.sleep(0.02)
        return None

    def inject(self, harness, plan: Plan, trial: Trial, ctl: Controller) -> None:
        trial.injected = True
        if plan.kind == "controller":
            ctl.signal(signal.SIGKILL if plan.signal == "SIGKILL" else signal.SIGINT)
            trial.phase = (self.power.console_lines() or [""])[-1][:200]
            harness.phase(f"{plan.signal} to the controller {plan.delay_s:.1f} s after the guest went down "
                          f"(console: {trial.phase[:100]})")
            waited = self.guest.wait_answer(BOOT_LIMIT_S)
            trial.boot_s = None if waited is None else round(waited, 1)
            harness.phase(f"the VM answers {waited:.0f} s after the signal" if waited is not None
                          else "the VM does not answer")
            return
        pid = self.power.kill()
        trial.phase = (self.power.console_lines() or [""])[-1][:200]
        self.power.keep_console(f"console-{plan.kind}-{plan.index}-killed.log")
        harness.phase(f"QEMU (pid {pid}) SIGKILLed {plan.delay_s:.2f} s after the trigger; console: {trial.phase[:100]}")
        time.sleep(plan.off_s)
        harness.phase(f"powering the VM on again after {plan.off_s:.1f} s off")
        seconds, error = self.power.power_on()
        trial.boot_s = None if seconds is None else round(seconds, 1)
        if seconds is None:
            trial.note = f"power-on: {error}"
        harness.phase(f"the VM {'answers after %.0f s' % seconds if seconds is not None else 'did not answer: ' + error[:200]}")

    def settle(self, harness, trial: Trial, first: bool) -> GuestState | None:
        """The guest's state once it answers; unbootable (and repaired) if it does not within 10 minutes."""
        if self.guest.wait_answer(BOOT_LIMIT_S) is None:
            trial.booted, trial.console_tail = False, self.power.console_lines()[-8:]
            if first:
                self.power.keep_console(f"console-{trial.kind}-{trial.index}-unbootable.log")
                harness.phase(f"UNBOOTABLE: no sshd within {BOOT_LIMIT_S} s; console: "
                              f"{' / '.join(trial.console_tail[-3:])}")
            self.record_repair(trial, self.repair(harness))
            return None
        now = self.guest.state()
        if first:
            trial.cmdline_after_fault = now.cmdline
        return now

    def restore_argv(self, harness) -> list[str]:
        """``restore_host`` in a subprocess, as the CLI calls it but with ``apply``: the CLI refuses
        ``--allow-reboot`` (its option check wants ``--apply``, which ``restore`` does not take)."""
        return [sys.executable, "-c", RESTORE_CODE, str(harness.lab.hosts_file)]

    def repair(self, harness) -> str:
        """A new disk from the cached image, Tomcat installed again."""
        done = self.power.repair()
        harness.setup()
        return done

    def record_repair(self, trial: Trial, done: str) -> None:
        trial.repaired = f"{trial.repaired}; {done}" if trial.repaired else done

    def reachable(self, lab) -> bool:
        return self.guest.wait_answer(BOOT_LIMIT_S) is not None

    # -- the results -----------------------------------------------------------------------
    def header(self, harness) -> dict:
        return {"date": dt.date.today().isoformat(), "command": harness.config.command,
                "seed": harness.config.seed, "trials_per_kind": harness.config.trials,
                "kinds": list(harness.config.kinds), "update_grub_s": round(self.grub_s, 1),
                "minutes": round((time.monotonic() - harness.started) / 60, 1),
                "machine": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.release()}",
                "vm": "Debian 12 under QEMU TCG, 2 vCPUs on 2 NUMA nodes, Intel IOMMU, virtio-net 4 queues",
                "before": self.before.to_dict() if self.before else None}
