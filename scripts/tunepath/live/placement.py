"""Where Tomcat and the load generator run when they share one kernel.

On one machine (or network namespaces of one machine, as in the lab) an unpinned Tomcat and
an unpinned load generator take turns on the same CPUs, and the scheduler's choices become
part of every figure. When the server and the clients share a kernel (the same boot id) and
two or more CPUs are online, the run pins them to disjoint CPU sets with ``taskset``: the load
generator gets the upper half of the online CPUs, Tomcat the rest. The CPUs the path keeps
online (``baseline_cpus``) are then Tomcat's only, and the CPU steps never take the load
generator's CPUs offline. Separate hosts are left unpinned: each has its own CPUs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host, Inventory
from tunepath.model.context import HostContext, cpu_ranges, parse_cpu_list

__all__ = ["Placement", "decide", "apply", "shares_kernel", "placement_for", "baseline_cpus"]

BOOT_ID = "cat /proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class Placement:
    """Tomcat's and the load generator's CPUs (empty: unpinned) and why."""

    server_cpus: tuple[int, ...]
    client_cpus: tuple[int, ...]
    why: str
    shared: bool = False           # the server and the clients share one kernel (and its /proc/stat)

    def note(self) -> str:
        if not self.server_cpus:
            return f"Tomcat and the load generator ran unpinned: {self.why}."
        return (f"Tomcat ran on CPU(s) {cpu_ranges(self.server_cpus)} and the load generator on CPU(s) "
                f"{cpu_ranges(self.client_cpus)} (taskset): {self.why}.")


def shares_kernel(server: Host, clients: list[Host]) -> bool:
    """Every client runs on the server's kernel (one boot id): one machine, or its namespaces."""
    ids = {h.run(BOOT_ID, check=False, timeout=15).stdout.strip() for h in (server, *clients)}
    return len(ids) == 1 and "" not in ids


def decide(online: list[int], shared: bool, pin: bool = True) -> Placement:
    """The upper half of the online CPUs for the load generator, the rest for Tomcat."""
    if not shared:
        return Placement((), (), "the server and the clients are separate hosts")
    if not pin:
        return Placement((), (), "--no-pin asked for it, although they share one kernel", shared=True)
    if len(online) < 2:
        return Placement((), (), f"they share one kernel with {len(online)} CPU online", shared=True)
    cut = len(online) - len(online) // 2
    return Placement(tuple(online[:cut]), tuple(online[cut:]),
                     "they share one kernel, so each gets CPUs of its own", shared=True)


def apply(ctx: HostContext, placement: Placement) -> HostContext:
    """The context with the placement: pinned commands, and the CPUs the path keeps online
    limited to Tomcat's (never the load generator's)."""
    if not placement.server_cpus:
        return replace(ctx, shared_kernel=placement.shared)
    keep = tuple(c for c in ctx.baseline_cpus if c not in placement.client_cpus) or placement.server_cpus
    numa = tuple(c for c in ctx.numa_cpus if c not in placement.client_cpus) or keep
    return replace(ctx, shared_kernel=True, server_pin_cpus=placement.server_cpus, client_pin_cpus=placement.client_cpus,
                   baseline_cpus=keep, numa_cpus=numa, nic_queues=len(keep))


def placement_for(server: Host, clients: list[Host], facts: dict, pin: bool = True) -> Placement:
    """Decide from the hosts: their boot ids and the server's online CPUs."""
    online = parse_cpu_list(facts.get("cpus_online") or "0")
    return decide(online, shares_kernel(server, clients), pin)


def baseline_cpus(inventory: Inventory, online: list[int], server: str) -> list[int]:
    """The CPUs the path keeps online: the inventory's ``baseline_cpus``, else the first 8 online."""
    wanted = inventory.server.baseline_cpus
    if wanted is None:
        return online[:min(8, len(online))]
    cpus = parse_cpu_list(wanted)
    missing = sorted(set(cpus) - set(online))
    if missing:
        raise TunepathError(f"on {server}: baseline_cpus {wanted} in {inventory.source} names CPU(s) "
                            f"{cpu_ranges(missing)}, which are not online (online: {cpu_ranges(online)}); "
                            "name online CPUs only")
    return cpus
