"""Putting a host back: its saved original state (CPUs, NIC queues, huge pages, GRUB's IOMMU
parameters, the NIC's interrupts of :mod:`tunepath.live.irqs`, and the sysctls of
:mod:`tunepath.live.sysctls`, on the clients too), then, where the
run may reboot, a reboot that puts the kernel's own parameters back.

The original state is what :func:`tunepath.live.hoststate.save_original_state` recorded before the
first change. :func:`restore` undoes each part that differs, every part tried even when another
fails. The GRUB part takes effect only at the next boot: :func:`reboot_to_original` reboots the
server when its running kernel command line differs from the saved one, waits for the new boot
(its boot id) and checks that the command line is the saved one again.
"""

from __future__ import annotations

import base64
import binascii

from tunepath.errors import TunepathError
from tunepath.live import irqs, sysctls
from tunepath.live.facts import channels_command, parse_channels
from tunepath.live.hosts import Host
from tunepath.live.hoststate import GRUB_DROP_IN, NR_HUGEPAGES, STATE_FILE, OriginalState, load_original_state
from tunepath.live.reboot import reboot_and_wait
from tunepath.model.cmdline import KernelCmdline
from tunepath.model.context import brace_ranges, cpu_ranges, parse_cpu_list
from tunepath.model.shell import number, path, quote

__all__ = ["restore", "restore_hosts", "release_hugepages", "reboot_to_original", "original_cmdline"]


def restore(host: Host, forget: bool = False) -> list[str]:
    """The host back to its saved original state (CPUs, NIC queues, huge pages, GRUB, sysctls), every part tried even
    when another fails; one line per change, naming host and command ([] when nothing differs: a second call).
    ``forget`` removes the saved state once everything is back."""
    state = load_original_state(host)
    done, problems = [], []
    for part in (_restore_cpus, _restore_queues, _restore_hugepages, _restore_grub) if state else ():
        try:
            change = part(host, state)
        except TunepathError as exc:
            problems.append(str(exc))
            continue
        if change:
            done.append(f"{change[0]} on {host.name} (`{change[1]}`)")
    for part in (sysctls.put_back, irqs.put_back):
        try:
            done += part(host)
        except TunepathError as exc:
            problems.append(str(exc))
    if problems:
        raise TunepathError("; ".join(problems) + (f"; the saved state stays in {STATE_FILE}: rerun `tunepath "
                                                   "restore`" if state else ""))
    if forget and state:
        host.run(f"rm -f {quote(STATE_FILE)}", check=False, timeout=15)
    return done


def restore_hosts(server: Host, clients=(), forget: bool = False) -> list[str]:
    """:func:`restore` on the server and the clients' saved sysctls back, every host tried even when
    another fails; one line per change. ``forget``: the server's saved state removed once it is back."""
    done, problems = [], []
    for part in (lambda: sysctls.put_back_all(clients), lambda: restore(server, forget)):
        try:
            done += part()
        except Exception as exc:                 # noqa: BLE001 (the server is put back even so)
            problems.append(str(exc))
    if problems:
        raise TunepathError("; ".join(problems))
    return done


def release_hugepages(host: Host) -> tuple[str, str] | None:
    """The huge page pool back to its saved size: (what was done, the command), or None."""
    state = load_original_state(host)
    return _restore_hugepages(host, state) if state else None


def _restore_cpus(host: Host, state: OriginalState) -> tuple[str, str] | None:
    if not state.cpus_online:
        return None
    want = set(parse_cpu_list(state.cpus_online))
    now = set(parse_cpu_list(host.run("cat /sys/devices/system/cpu/online", timeout=15).stdout.strip()))
    on, off = sorted(want - now), sorted(now - want - {0})
    cmds = [f"for no in {brace_ranges(on)}; do echo 1 > /sys/devices/system/cpu/cpu$no/online; done"] if on else []
    cmds += [f"for no in {brace_ranges(off)}; do echo 0 > /sys/devices/system/cpu/cpu$no/online; done"] if off else []
    if not cmds:
        return None
    host.run("; ".join(cmds), sudo=True, timeout=120)
    return f"CPUs {cpu_ranges(want)} online", "; ".join(cmds)


def _restore_queues(host: Host, state: OriginalState) -> tuple[str, str] | None:
    if not (state.nic and state.nic_queues) or host.run(
            f"test -e {path('/sys/class/net', state.nic, what='saved nic')}", check=False, timeout=15).exited != 0:
        return None
    nic = quote(state.nic, "saved nic")
    now = parse_channels(host.run(channels_command(nic), check=False, timeout=15).stdout)
    n = number(state.nic_queues, "saved nic_queues")
    if state.nic_channels == "rx-tx":
        tx = number(state.nic_tx or state.nic_queues, "saved nic_tx")
        if now.rx is None or (now.rx, now.tx) == (int(n), int(tx)):
            return None
        args = f"rx {n} tx {tx}"
    else:
        if now.combined is None or now.combined == int(n):
            return None
        args = f"combined {n}"
    command = f"ethtool -L {nic} {args}"
    host.run(command, sudo=True, timeout=60)
    return f"{state.nic}: {args} queues again", command


def _restore_hugepages(host: Host, state: OriginalState) -> tuple[str, str] | None:
    if state.nr_hugepages is None:
        return None
    now = host.run(f"cat {NR_HUGEPAGES}", check=False, timeout=15).stdout.strip()
    if not now.isdigit() or int(now) == state.nr_hugepages:
        return None
    command = f"sysctl -w vm.nr_hugepages={number(state.nr_hugepages, 'saved nr_hugepages')}"
    host.run(command, sudo=True, timeout=120)
    return f"huge pages released: {state.nr_hugepages} reserved again (were {now})", command


def _restore_grub(host: Host, state: OriginalState) -> tuple[str, str] | None:
    current = host.run(f"test -f {GRUB_DROP_IN} && base64 -w0 {GRUB_DROP_IN}", check=False, timeout=15).stdout.strip()
    original = state.grub_dropin_b64 or ""
    if current == original:
        return None
    if original:
        command = f"echo {quote(original, 'saved GRUB drop-in')} | base64 -d > {GRUB_DROP_IN} && update-grub && sync"
    else:
        command = f"rm -f {GRUB_DROP_IN} && update-grub && sync"
    host.run(command, sudo=True, timeout=300)
    return "GRUB IOMMU settings restored (takes effect at the next reboot)", command


def original_cmdline(state: OriginalState | None) -> str | None:
    """The kernel command line the host had before the run's first change (None: not saved)."""
    if state is None or not state.cmdline_b64:
        return None
    try:
        return base64.b64decode(state.cmdline_b64, validate=True).decode("utf-8", "replace").strip() or None
    except (binascii.Error, ValueError):
        return None


def reboot_to_original(host: Host, reconnect, forget: bool = True) -> tuple[Host, list[str]]:
    """Reboot ``host`` if the kernel it runs has other parameters than before the run (GRUB was put
    back, but only a boot applies it); wait for the new boot and check the command line is the
    saved one. Returns the host to use from then on (a new connection after a reboot) and what was
    done. ``forget`` removes the saved state once the host is as it was."""
    state = load_original_state(host)
    wanted = original_cmdline(state)
    now = host.run("cat /proc/cmdline", timeout=15).stdout.strip()
    lines = []
    if wanted is not None and now != wanted:
        host, got = reboot_and_wait(host, reconnect, wanted.split())
        if got != wanted:
            raise TunepathError(f"on {host.name}: after the reboot the kernel command line is `{got}`, not the "
                                f"original `{wanted}`; the saved state stays in {STATE_FILE}")
        shown = KernelCmdline.parse(got).shown
        shown = f"`{shown}`" if shown else "none of the path's kernel parameters"
        lines.append(f"rebooted {host.name}: the kernel command line is the original again ({shown}; "
                     "full line in the run record)")
    if forget and state is not None:
        host.run(f"rm -f {quote(STATE_FILE)}", check=False, timeout=15)
    return host, lines
