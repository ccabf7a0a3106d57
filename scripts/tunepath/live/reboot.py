"""Rebooting the server and waiting for it: the IOMMU steps' reboot and the one that puts the
kernel's parameters back at the end of a run.

A reboot is confirmed by the boot id (``/proc/sys/kernel/random/boot_id``) changing, never by the
host answering again (it may answer before it goes down); then the kernel command line is checked.
"""

from __future__ import annotations

import time

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host

__all__ = ["boot_id", "wait_for_reboot", "reboot_and_wait", "REBOOT_COMMAND"]

# the SSH session must end cleanly before the host goes down; sync: nothing written is lost to it
REBOOT_COMMAND = "sync; (sleep 2; sudo reboot) >/dev/null 2>&1 &"


def boot_id(host: Host) -> str:
    return host.run("cat /proc/sys/kernel/random/boot_id", timeout=15).stdout.strip()


def wait_for_reboot(connect, expect_in_cmdline: list[str], old_boot_id: str, timeout: float = 900) -> str:
    """Reconnect until the host has booted anew (its boot id changed), then check the kernel
    command line; returns it."""
    deadline = time.monotonic() + timeout
    time.sleep(10)
    last = ""
    while time.monotonic() < deadline:
        try:
            with connect() as host:
                if boot_id(host) == old_boot_id:
                    last = "still the old boot"
                    time.sleep(5)
                    continue
                cmdline = host.run("cat /proc/cmdline", timeout=15).stdout.strip()
                missing = [p for p in expect_in_cmdline if p not in cmdline.split()]
                if missing:
                    raise TunepathError(f"on {host.name}: after the reboot the kernel command line lacks "
                                        f"{' '.join(missing)}: {cmdline}")
                return cmdline
        except TunepathError as exc:
            if "command line lacks" in str(exc):
                raise
            last = str(exc)
            time.sleep(5)
    raise TunepathError(f"the server did not come back within {timeout:g} s after the reboot ({last})")


def reboot_and_wait(host: Host, reconnect, expect_in_cmdline: list[str], old_boot_id: str | None = None,
                    timeout: float = 900) -> tuple[Host, str]:
    """Reboot ``host`` (its connection is closed), wait for the new boot, check its command line
    holds ``expect_in_cmdline``; returns a new connection (``reconnect()``) and the command line."""
    old = old_boot_id or boot_id(host)
    host.run(REBOOT_COMMAND, timeout=30, check=False, as_written=True)
    host.close()
    cmdline = wait_for_reboot(reconnect, expect_in_cmdline, old, timeout)
    return reconnect(), cmdline
