"""Running another architecture's programs while an image is built: the kernel's binfmt_misc entry
for qemu-user, made for the build and removed after it.

mmdebstrap builds a foreign Debian tree (the lab's arm64 VM image) by running its maintainer
scripts in a chroot, which the kernel hands to ``qemu-<cpu>-static`` through binfmt_misc. The entry
must have the ``F`` flag (the interpreter opened when it is registered, so the chroot needs no copy
of it); Debian's qemu-user-static ships such entries in ``/usr/lib/binfmt.d``. This machine has no
systemd to register them at boot, so :func:`foreign_binaries` does it for the build and puts the
machine back as it found it: the entry removed and binfmt_misc unmounted if it made them.
"""

from __future__ import annotations

import re
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tunepath.errors import TunepathError

__all__ = ["MISC", "entry_line", "foreign_binaries"]

MISC = Path("/proc/sys/fs/binfmt_misc")
CONF_DIRS = (Path("/usr/lib/binfmt.d"), Path("/etc/binfmt.d"))


def entry_line(cpu: str, conf_dirs=CONF_DIRS) -> str:
    """The registration line of ``qemu-<cpu>`` from qemu-user-static's binfmt.d file, checked to
    carry the F flag."""
    for directory in conf_dirs:
        conf = directory / f"qemu-{cpu}.conf"
        if conf.is_file():
            line = next((ln.strip() for ln in conf.read_text().splitlines() if ln.startswith(":")), "")
            fields = line.split(":")
            if len(fields) != 8 or fields[1] != f"qemu-{cpu}":
                raise TunepathError(f"lab VM: {conf} is not a binfmt entry for qemu-{cpu} (`{line[:60]}`)")
            if "F" not in fields[7]:
                raise TunepathError(f"lab VM: {conf} registers qemu-{cpu} without the F flag (a chroot could not "
                                    "start it): install qemu-user-static (apt-get install qemu-user-static)")
            return line
    raise TunepathError(f"lab VM: no binfmt entry for qemu-{cpu} in {' or '.join(map(str, conf_dirs))}: "
                        "install qemu-user-static (scripts/bootstrap --lab does)")


def _flags(entry: Path) -> str:
    m = re.search(r"^flags: *(\S*)$", entry.read_text(), re.M)
    return m.group(1) if m else ""


def _setup(cpu: str, entry: Path, say) -> tuple[bool, bool]:
    """binfmt_misc mounted and ``qemu-<cpu>`` registered, each only when missing: (mounted, registered)."""
    mounted = False
    try:
        if not (MISC / "register").exists():
            subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(MISC)], check=True,
                           capture_output=True, text=True, timeout=30)
            mounted = True
        if entry.exists():
            if "F" not in _flags(entry):
                raise TunepathError(f"lab VM: {entry} is registered without the F flag, so a chroot cannot start "
                                    f"qemu-{cpu}: remove it (echo -1 > {entry}) or install qemu-user-static")
            if entry.read_text().splitlines()[0].strip() != "enabled":
                raise TunepathError(f"lab VM: {entry} is disabled: enable it (echo 1 > {entry}), then rerun")
            return mounted, False
        (MISC / "register").write_text(entry_line(cpu))
        say(f"registered qemu-{cpu} in binfmt_misc for the image build (removed after it)")
        return mounted, True
    except subprocess.CalledProcessError as exc:
        raise TunepathError(f"lab VM: mounting binfmt_misc on {MISC} failed: {(exc.stderr or '').strip()}") from None
    except BaseException as exc:                  # binfmt_misc unmounted again if this mounted it
        if mounted:
            _teardown(entry, mounted, False)
        if isinstance(exc, OSError):
            raise TunepathError(f"lab VM: registering qemu-{cpu} in {MISC} failed ({exc.strerror or exc})") from None
        raise


def _teardown(entry: Path, mounted: bool, registered: bool) -> None:
    if registered and entry.exists():
        entry.write_text("-1")
    if mounted:
        subprocess.run(["umount", str(MISC)], check=False, capture_output=True, timeout=30)


@contextmanager
def foreign_binaries(cpu: str, say=lambda line: None) -> Iterator[None]:
    """``qemu-<cpu>`` programs run through binfmt_misc inside the block; what it changed is undone
    after it, also after a failure or an interrupt."""
    entry = MISC / f"qemu-{cpu}"
    mounted, registered = _setup(cpu, entry, say)
    try:
        yield
    finally:
        _teardown(entry, mounted, registered)
