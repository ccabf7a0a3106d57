"""The fault harness's hands on the lab's VM guest (``scripts/faults --vm``): SSH into the guest
(its state, a watcher of the GRUB change), QEMU's power (SIGKILL, power on again with the same
disk), its serial console, and a new disk from the cached image for repairs.

The guest is reached like the run reaches it: the lab's key, its known_hosts and the forward on
127.0.0.1. The watcher is one SSH session running a loop in the guest that prints a line each
time the drop-in file appears or goes, or ``update-grub``/``grub-mkconfig`` starts or ends; its end
(EOF) is the guest going down. Powering on is ``Lab.up(vm=True)``: it restarts a dead QEMU on the
lab's own overlay (the cached base image is never written) and waits for the guest's sshd.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from harness.faults.state import GuestState, parse_state
from tunepath.live.hoststate import GRUB_DROP_IN

__all__ = ["Guest", "Watcher", "Power", "STATE_SCRIPT"]

STATE_SCRIPT = "; ".join([
    "echo cmdline=$(cat /proc/cmdline)",
    f"if test -e {GRUB_DROP_IN}; then echo dropin=$(sha256sum < {GRUB_DROP_IN} | cut -c1-12); "
    "else echo dropin=absent; fi",
    "g=/boot/grub/grub.cfg; if ! sudo test -e $g; then echo grub_cfg=missing; elif ! sudo test -s $g; then "
    "echo grub_cfg=empty; elif ! sudo grep -q '^menuentry' $g; then echo 'grub_cfg=no menuentry'; "
    "else echo grub_cfg=ok; fi",
    "echo grub_iommu=$(sudo grep -c 'iommu\\.' $g 2>/dev/null)",
    "echo cpus=$(cat /sys/devices/system/cpu/online)",
    "echo queues=$(sudo /usr/sbin/ethtool -l eth0 | awk '/Current hardware/{c=1} c && /^Combined/{print $2; exit}')",
    "test -e ~/.tunepath/lock && echo lock=yes || echo lock=no",
    "test -e ~/.tunepath/original-state.json && echo saved_state=yes || echo saved_state=no",
    "echo tomcat=$(pgrep -u $(id -u) -f '[o]rg.apache.catalina.startup.Bootstrap' | tr '\\n' ' ')",
])
# prints "<drop-in present><update-grub running>" (e.g. "10") whenever it changes. The drop-in and
# grub-mkconfig's grub.cfg.new are tested every 0.05 s (shell builtins), pgrep only every 8th round
# (slow under TCG); [x] keeps pgrep from matching this loop's own command line
WATCH_SCRIPT = (f"p=; i=0; g=0; while :; do d=0; test -e {GRUB_DROP_IN} && d=1; "
                "if test -e /boot/grub/grub.cfg.new; then g=1; elif [ $((i % 8)) = 0 ]; then g=0; "
                "pgrep -f '[u]pdate-grub|[g]rub-mkconfig' >/dev/null && g=1; fi; i=$((i + 1)); "
                "if [ \"$d$g\" != \"$p\" ]; then echo \"$d$g\"; p=$d$g; fi; sleep 0.05; done")


class Guest:
    """SSH to the VM's user ``tunepath`` with the lab's key and known_hosts."""

    def __init__(self, directory: Path, port: int):
        self.directory, self.port = directory, port

    def argv(self, command: str, timeout: int = 10) -> list[str]:
        return ["ssh", "-i", str(self.directory / "id_ed25519"), "-o", f"UserKnownHostsFile={self.directory}/known_hosts",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={timeout}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2", "-p", str(self.port),
                "tunepath@127.0.0.1", command]

    def run(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.argv(command), capture_output=True, text=True, timeout=timeout,
                                  errors="replace")
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(command, 255, "", f"(no answer within {timeout:g} s)")

    def answers(self) -> bool:
        return self.run("true", timeout=20).returncode == 0

    def wait_answer(self, limit: float) -> float | None:
        """Seconds until a command runs in the guest; None if not within ``limit``."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            if self.answers():
                return time.monotonic() - t0
            time.sleep(3)
        return None

    def state(self, tries: int = 4) -> GuestState:
        """The guest's state (tried again when SSH or the guest stalls: TCG under load)."""
        for attempt in range(tries):
            done = self.run(STATE_SCRIPT, timeout=90)
            if done.returncode == 0:
                try:
                    return parse_state(done.stdout)
                except ValueError:
                    pass
            if attempt + 1 < tries:
                time.sleep(10)
        raise OSError(f"reading the guest's state failed ({done.returncode}): {done.stderr.strip()[-300:]}")

    def update_grub_seconds(self) -> float:
        """How long ``update-grub`` takes undisturbed (it rewrites the same grub.cfg)."""
        t0 = time.monotonic()
        done = self.run("sudo update-grub", timeout=600)
        if done.returncode != 0:
            raise OSError(f"update-grub failed in the guest: {done.stderr.strip()[-300:]}")
        return time.monotonic() - t0


class Watcher:
    """The guest's drop-in file and update-grub, as events with their moments (monotonic)."""

    def __init__(self, guest: Guest):
        self.proc = subprocess.Popen(guest.argv(WATCH_SCRIPT), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        self.events: list[tuple[float, str]] = []
        self.ended: float | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.append((time.monotonic(), line.strip()))
        self.ended = time.monotonic()

    def first(self, test) -> float | None:
        """The moment of the first event whose code passes ``test``."""
        return next((t for t, code in list(self.events) if len(code) == 2 and test(code)), None)

    def grub_ended(self) -> float | None:
        started = self.first(lambda c: c[1] == "1")
        return next((t for t, c in list(self.events) if started and t > started and c[1:] == "0"), None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()


class Power:
    """The VM's QEMU: killed like a power cut, powered on again with the same disk; its console.
    The Arm VM's QEMU is the child of its boot supervisor (``tunepath.lab.vmboot``), which ends
    with it (a QEMU that ended without a guest reset) and which power-on starts again."""

    def __init__(self, lab, records: Path, arch: str = "amd64"):
        self.lab, self.records, self.arch = lab, records, arch

    def spec(self):
        from tunepath.lab.vmhost import vm_spec

        return vm_spec(self.lab.prefix, self.lab.paths, self.arch)

    def _vm_pid(self) -> int | None:
        """The lab's process of the VM: QEMU, or the Arm VM's boot supervisor."""
        from tunepath.lab.system import process_matches
        from tunepath.lab.vm import vm_mark

        state = self.lab.state()
        pid = state.vm.pid if state and state.vm else None
        return pid if pid is not None and process_matches(pid, vm_mark(self.spec())) else None

    def qemu_pid(self) -> int | None:
        from tunepath.lab.system import process_matches

        owner, spec = self._vm_pid(), self.spec()
        if owner is None or not spec.host_boots:
            return owner
        text = spec.pidfile.read_text().strip() if spec.pidfile.is_file() else ""
        return int(text) if text.isdigit() and process_matches(int(text), f"-name {spec.name},") else None

    def kill(self) -> int | None:
        """SIGKILL to QEMU: the guest loses power (what it had not written to its disk is lost). Between
        two boots of the Arm VM there is no QEMU: its boot supervisor is killed instead."""
        from tunepath.lab.system import process_alive

        owner, pid = self._vm_pid(), self.qemu_pid()
        target = pid if pid is not None else owner
        if target is not None:
            os.kill(target, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while any(p is not None and process_alive(p) for p in (pid, owner)) and time.monotonic() < deadline:
                time.sleep(0.05)
        return target

    def console_lines(self) -> list[str]:
        try:
            text = self.spec().console.read_bytes().decode("utf-8", "replace")
        except OSError:
            return []
        return [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]

    def keep_console(self, name: str) -> Path:
        """A copy of the console log (QEMU starts a new one at power-on)."""
        target = self.records / name
        try:
            shutil.copyfile(self.spec().console, target)
        except OSError:
            pass
        return target

    def power_on(self) -> tuple[float | None, str]:
        """``lab up --vm``: QEMU again on the same overlay, until sshd answers; (seconds, error)."""
        t0 = time.monotonic()
        try:
            self.lab.up(say=lambda line: None, vm=True, arch=self.arch)
        except Exception as exc:                      # noqa: BLE001 (an unbootable VM is a result)
            return None, str(exc)[-600:]
        return time.monotonic() - t0, ""

    def repair(self) -> str:
        """As root: QEMU killed, a new overlay on the cached image (the image as built, without
        Tomcat: the harness installs it again), powered on."""
        from tunepath.lab.vm import overlay_backing
        from tunepath.lab.vmhost import new_disk

        self.kill()
        spec = self.spec()
        if spec.host_boots:                 # the Arm VM's disk is a copy of the image, not an overlay
            state = self.lab.state()
            base = Path(state.vm.image) if state and state.vm and state.vm.image else None
        else:
            base = overlay_backing(spec.overlay)
        if base is None or not base.is_file():
            return "no image to repair the disk from"
        new_disk(spec, base)
        seconds, error = self.power_on()
        return (f"a new disk from the cached image, booted in {seconds:.0f} s" if seconds is not None
                else f"a new disk from the cached image, but the VM did not boot: {error}")
