"""A NIC's interrupts pinned to the CPUs of its NUMA node, with irqbalance stopped, and put back.

The interrupts are the NIC's PCI device's MSI vectors (``/sys/class/net/<nic>/device/msi_irqs``; a
virtio NIC's ``device`` is a virtio device, whose PCI parent holds them). A veth, a bridge or the
loopback device has none: nothing to pin. Before the first change the host keeps, in :data:`SAVED`
(``~/.tunepath/original-irqs.json``), each interrupt's ``smp_affinity_list`` and whether systemd ran
irqbalance; :func:`put_back` writes the affinities back and starts irqbalance again if it ran, then
removes the file. :mod:`tunepath.live.restore` calls it with the other parts of a host's state.
"""

from __future__ import annotations

import json
import re
import time

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.model.context import cpu_ranges
from tunepath.model.shell import heredoc, path, quote

__all__ = ["SAVED", "nic_irqs", "check", "pin", "put_back", "list_command", "pin_command"]

SAVED = "~/.tunepath/original-irqs.json"
IRQBALANCE_ACTIVE = "systemctl is-active --quiet irqbalance 2>/dev/null"


def list_command(nic: str) -> str:
    """The NIC's interrupt numbers, one per line (its PCI device's MSI vectors)."""
    return (f"ls {path('/sys/class/net', nic, 'device/msi_irqs', what='nic')} 2>/dev/null || "
            f"ls {path('/sys/class/net', nic, 'device/../msi_irqs', what='nic')} 2>/dev/null")


def pin_command(nic: str, cpus) -> str:
    """What a reader runs: irqbalance stopped (it would move them again), each interrupt on ``cpus``."""
    return ("sudo systemctl stop irqbalance\n"
            f"for irq in $({list_command(nic)}); do\n"
            f"  echo {cpu_ranges(cpus)} | sudo tee /proc/irq/$irq/smp_affinity_list\n"
            "done")


def nic_irqs(host: Host, nic: str) -> list[int]:
    r = host.run(list_command(nic), check=False, timeout=15)
    return sorted(int(n) for n in re.findall(r"^(\d+)$", r.stdout, re.M))


def check(host: Host, nic: str | None) -> str | None:
    """Why the NIC's interrupts cannot be pinned on ``host`` (None: they can)."""
    if not nic:
        return "no NIC found (no default route)"
    irqs = nic_irqs(host, nic)
    if not irqs:
        return (f"{nic} on {host.name} has no interrupts of its own (no msi_irqs: a veth or another virtual "
                "device whose packets the kernel handles in software): nothing to pin")
    files = " ".join(f"/proc/irq/{n}/smp_affinity_list" for n in irqs)
    r = host.run(f"for f in {files}; do test -w $f || echo $f; done", sudo=True, check=False, timeout=15)
    if r.exited != 0 or r.stdout.strip():
        return f"needs root on {host.name} to write {r.stdout.split()[0] if r.stdout.split() else files.split()[0]}"
    stray = host.run(f"pgrep -x irqbalance >/dev/null && ! {IRQBALANCE_ACTIVE} && echo stray", check=False, timeout=15)
    if "stray" in stray.stdout:
        return f"irqbalance runs on {host.name} outside systemd: stop it first, or it moves the interrupts again"
    return None


def _saved(host: Host) -> dict | None:
    r = host.run(f"cat {SAVED} 2>/dev/null", check=False, timeout=15)
    if not r.stdout.strip():
        return None
    try:
        data = json.loads(r.stdout)
        affinity = data["affinity"]
        if not isinstance(data["irqbalance"], bool) or not all(
                k.isdigit() and re.fullmatch(r"[0-9,-]+", v) for k, v in affinity.items()):
            raise ValueError("unexpected values")
        return data
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TunepathError(f"on {host.name}: {SAVED} is damaged ({exc}); inspect it (cat {SAVED}) before putting "
                            "the interrupts back by hand") from None


def _save(host: Host, irqs: list[int]) -> dict:
    saved = _saved(host)
    if saved is not None:
        return saved
    files = " ".join(f"/proc/irq/{n}/smp_affinity_list" for n in irqs)
    out = host.run(f"for f in {files}; do echo \"$f=$(cat $f)\"; done; {IRQBALANCE_ACTIVE} && echo irqbalance=yes",
                   check=False, timeout=15).stdout
    affinity = dict(re.findall(r"^/proc/irq/(\d+)/smp_affinity_list=([0-9,-]+)$", out, re.M))
    data = {"saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "irqbalance": "irqbalance=yes" in out,
            "affinity": affinity}
    tmp = SAVED + ".tmp"
    host.run(f"mkdir -p ~/.tunepath && {heredoc(tmp, json.dumps(data, sort_keys=True) + chr(10))}\n"
             f"sync {tmp} && mv {tmp} {SAVED} && sync ~/.tunepath", timeout=30)
    return data


def pin(host: Host, nic: str, cpus) -> list[str]:
    """Save, stop irqbalance where systemd runs it, and pin each of the NIC's interrupts to ``cpus``."""
    irqs = nic_irqs(host, nic)
    saved = _save(host, irqs)
    done = []
    if saved["irqbalance"] and host.run(IRQBALANCE_ACTIVE, check=False, timeout=15).exited == 0:
        host.run("systemctl stop irqbalance", sudo=True, timeout=60)
        done.append("irqbalance stopped")
    want = quote(cpu_ranges(cpus), "CPU list")
    host.run(" && ".join(f"echo {want} > /proc/irq/{n}/smp_affinity_list" for n in irqs), sudo=True, timeout=30)
    return done + [f"interrupts {', '.join(map(str, irqs))} of {nic} on CPUs {cpu_ranges(cpus)}"]


def put_back(host: Host, forget: bool = True) -> list[str]:
    """Each saved interrupt's affinity written back, irqbalance started again if systemd ran it; the
    saved file removed once all is back (``forget``). One line per change, naming the host."""
    saved = _saved(host)
    if saved is None:
        return []
    now = host.run("; ".join(f"echo {n}=$(cat /proc/irq/{n}/smp_affinity_list 2>/dev/null)" for n in saved["affinity"])
                   or "true", check=False, timeout=15).stdout
    current = dict(re.findall(r"^(\d+)=(\S*)$", now, re.M))
    differ = {n: v for n, v in saved["affinity"].items() if current.get(n, v) != v}
    done = []
    if differ:
        command = " && ".join(f"echo {v} > /proc/irq/{n}/smp_affinity_list" for n, v in sorted(differ.items()))
        host.run(command, sudo=True, timeout=30)
        done.append(f"the affinity of interrupts {', '.join(sorted(differ, key=int))} again on {host.name}")
    if saved["irqbalance"] and host.run(IRQBALANCE_ACTIVE, check=False, timeout=15).exited != 0:
        host.run("systemctl start irqbalance", sudo=True, timeout=60)
        done.append(f"irqbalance started again on {host.name} (`sudo systemctl start irqbalance`)")
    if forget:
        host.run(f"rm -f {SAVED}", check=False, timeout=15)
    return done
