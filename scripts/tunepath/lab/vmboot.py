"""The Arm VM's boot, done by the host from the guest's own GRUB configuration.

Firmware that runs GRUB on QEMU's ``virt`` machine loses its two NUMA nodes here (see
:mod:`tunepath.lab.vmarch`), so the host plays GRUB's part. Before each boot,
:func:`read_boot` reads the guest's ``/boot/grub/grub.cfg`` from its disk (a whole-disk ext4 file,
read with ``debugfs`` while QEMU is not running), takes the entry GRUB would boot (the first: the
image sets no other default), copies that entry's kernel and initrd out, and QEMU starts them with
that entry's command line. So the path's own commands decide the boot, as on a real server: a
GRUB drop-in, ``update-grub``, ``reboot``.

:func:`supervise` (``python -m tunepath.lab.vmboot BOOT.json``, started by
:func:`tunepath.lab.vm.start_vm` inside the VM's namespace) is the VM's process for the lab: it
runs QEMU with ``-no-reboot`` and watches a QMP monitor of its own. A guest reset ("guest-reset")
reads ``grub.cfg`` again and boots anew; any other end of QEMU (the power button that ``lab down``
presses through the lab's QMP socket, a halt, a killed QEMU) ends it. SIGTERM ends QEMU (a power
cut: ``lab down`` presses the power button first) and then the supervisor; QEMU dies with it
(``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import json
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["BootEntry", "first_entry", "read_boot", "BootPlan", "supervise", "LOADER_MARK"]

GRUB_CFG = "/boot/grub/grub.cfg"
LOADER_MARK = "tunepath.lab.vmboot"
QMP_CONNECT_S = 60
POWERDOWN_S = 60


@dataclass(frozen=True)
class BootEntry:
    title: str
    kernel: str                   # the path in the guest, as grub.cfg names it
    initrd: str | None
    args: str                     # the kernel's command line


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=False, posix=True)
    except ValueError:
        return line.split()


def first_entry(cfg: str) -> BootEntry:
    """The entry GRUB boots by default: the first top-level ``menuentry`` (``set default`` must be 0)."""
    default = re.search(r'^\s*set default="?([^"\s]*)"?', cfg, re.M)
    if default and default.group(1) not in ("0", "${saved_entry}", "${next_entry}"):
        raise TunepathError(f"lab VM: its grub.cfg boots entry {default.group(1)!r} by default; the host boots only "
                            "the first (GRUB_DEFAULT=0)")
    m = re.search(r"^menuentry\s+'([^']*)'.*?\{(.*?)^\}", cfg, re.M | re.S)
    if not m:
        raise TunepathError(f"lab VM: {GRUB_CFG} has no menuentry: run update-grub in the guest")
    kernel = initrd = None
    args = ""
    for line in m.group(2).splitlines():
        words = _words(line.strip())
        if words[:1] == ["linux"] and len(words) >= 2:
            kernel, args = words[1], " ".join(words[2:])
        elif words[:1] == ["initrd"] and len(words) >= 2:
            initrd = words[1]
    if kernel is None:
        raise TunepathError(f"lab VM: the first entry of {GRUB_CFG} ({m.group(1)!r}) has no linux line")
    return BootEntry(m.group(1), kernel, initrd, args)


def _debugfs(disk: Path, request: str, timeout: float = 60) -> subprocess.CompletedProcess:
    from tunepath.lab.vmimage import need

    # -c: read-only, without the allocation bitmaps, as GRUB reads ext4: a disk that lost power mid-write
    # (its journal not replayed) still boots from what reached the file system
    return subprocess.run([need("debugfs"), "-c", "-R", request, str(disk)], capture_output=True, timeout=timeout)


def read_boot(disk: Path, into: Path) -> tuple[BootEntry, Path, Path | None]:
    """The entry ``disk``'s grub.cfg boots, with its kernel and initrd copied into ``into``."""
    done = _debugfs(disk, f"cat {GRUB_CFG}")
    cfg = done.stdout.decode(errors="replace")
    if done.returncode != 0 or not cfg.strip():
        why = " ".join(done.stderr.decode(errors="replace").split()[-12:])
        raise TunepathError(f"lab VM: cannot read {GRUB_CFG} from {disk} ({why or 'empty'}): the guest needs "
                            "`update-grub`")
    entry = first_entry(cfg)
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for name, path in (("vmlinuz", entry.kernel), ("initrd.img", entry.initrd)):
        if path is None:
            out.append(None)
            continue
        target = into / name
        target.unlink(missing_ok=True)
        _debugfs(disk, f"dump {path} {target}")
        if not target.is_file() or target.stat().st_size == 0:
            raise TunepathError(f"lab VM: {GRUB_CFG} boots {path}, which is not on {disk}")
        out.append(target)
    return entry, out[0], out[1]


@dataclass(frozen=True)
class BootPlan:
    """What :func:`supervise` needs, written as JSON next to the VM's other files."""

    argv: list[str]               # QEMU without its kernel, initrd and command line
    disk: str                     # the whole-disk ext4 image the guest boots from
    boot_dir: str                 # where the kernel and initrd are copied
    monitor: str                  # the supervisor's own QMP socket (the lab's is another)
    console: str

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def read(cls, path: Path) -> "BootPlan":
        return cls(**json.loads(path.read_text()))


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)            # PR_SET_PDEATHSIG


def _qmp(path: str, deadline: float, waiting):
    """QEMU's QMP monitor at ``path``, capabilities negotiated: (socket, stream), or (None, None) when
    it did not answer by ``deadline`` or ``waiting()`` turned false (QEMU ended, a stop came)."""
    while time.monotonic() < deadline and waiting():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            stream = s.makefile("rwb")
            stream.readline()
            stream.write(b'{"execute": "qmp_capabilities"}\n')
            stream.flush()
            return s, stream
        except OSError:
            s.close()
            time.sleep(0.2)
    return None, None


def _shutdown_reason(stream) -> str:
    """Events until QEMU's SHUTDOWN: its reason ("guest-reset", "guest-shutdown", …); "" when QEMU ended."""
    for raw in iter(stream.readline, b""):
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if message.get("event") == "SHUTDOWN":
            return (message.get("data") or {}).get("reason", "")
    return ""


def _say(console: str, line: str) -> None:
    with open(console, "a") as out:
        out.write(f"\n--- tunepath vmboot {time.strftime('%H:%M:%S')}: {line} ---\n")


def supervise(plan_file: Path) -> int:
    """Boot the guest from its grub.cfg until it powers off (a reboot reads grub.cfg again)."""
    plan = BootPlan.read(plan_file)
    stopping = []
    qemu: subprocess.Popen | None = None

    def stop(signum, frame):
        stopping.append(signum)
        if qemu is not None and qemu.poll() is None:
            qemu.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        entry, kernel, initrd = read_boot(Path(plan.disk), Path(plan.boot_dir))
        _say(plan.console, f"booting {entry.kernel} ({entry.title}) with: {entry.args}")
        argv = [*plan.argv, "-kernel", str(kernel), *(["-initrd", str(initrd)] if initrd else []),
                "-append", entry.args]
        qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        if stopping:                 # a stop that came while grub.cfg was read: this boot does not happen
            qemu.terminate()
        sock, stream = _qmp(plan.monitor, time.monotonic() + QMP_CONNECT_S,
                            lambda: qemu.poll() is None and not stopping)
        try:
            reason = _shutdown_reason(stream) if stream else ""
        finally:
            if sock is not None:
                sock.close()
        if stream is None:           # no monitor: QEMU runs until it ends by itself (or a stop ends it)
            qemu.wait()
        try:
            qemu.wait(timeout=30)    # after SHUTDOWN, QEMU exits (-no-reboot)
        except subprocess.TimeoutExpired:
            qemu.kill()
            qemu.wait()
        _say(plan.console, f"QEMU ended ({reason or f'status {qemu.returncode}'})")
        if reason != "guest-reset":
            break
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tunepath.lab.vmboot BOOT.json", file=sys.stderr)
        return 2
    try:
        return supervise(Path(argv[0]))
    except TunepathError as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
