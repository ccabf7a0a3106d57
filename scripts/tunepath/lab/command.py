"""``tunepath lab up|down|status``: what the command prints, and its exit status."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tunepath.lab.control import Lab
from tunepath.lab.state import DEFAULT_PREFIX

__all__ = ["lab_command", "PREFIX_ENV"]

PREFIX_ENV = "TUNEPATH_LAB_PREFIX"


def _lab(directory: str | None, prefix: str | None) -> Lab:
    from tunepath.project import project_dir

    chosen = prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX
    return Lab(Path(directory) if directory else project_dir() / "lab", chosen)


def lab_command(action: str, directory: str | None = None, prefix: str | None = None, vm: bool = False,
                arch: str | None = None) -> int:
    """Run ``action`` ("up", "down" or "status"), printing one line per part; the exit status.
    ``vm``: ``up`` adds the server VM of ``arch`` (amd64, or arm64: an emulated Neoverse-N1)."""
    from tunepath.lab.vmarch import arch as vm_arch

    lab = _lab(directory, prefix)
    start = time.monotonic()
    if action == "up":
        state = lab.up(say=print, vm=vm, arch=vm_arch(arch).debian if arch else None)
        print(f"lab {lab.prefix} is up ({time.monotonic() - start:.1f} s). Inventory: {lab.hosts_file}"
              + (" (the server is the VM)" if state.vm is not None else ""))
        reboot = " --allow-reboot" if state.vm is not None else ""
        print(f"next: scripts/run --hosts {lab.hosts_file} --apply{reboot}    (tunepath lab down removes the lab)")
        return 0
    if action == "down":
        lab.down(say=print)
        print(f"({time.monotonic() - start:.1f} s)")
        return 0
    parts = lab.status()
    for part in parts:
        print(part.line)
    missing = sum(not p.ok for p in parts)
    print(f"lab {lab.prefix}: " + (f"{missing} part(s) missing or dead" if missing else "every part is up"))
    return 1 if missing else 0
