"""Step: run Tomcat on the CPUs of the NIC's NUMA node."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.baseline import tuned
from tunepath.steps.commands import load_blocks, move_cpus, nic_numa_node, restart

__all__ = ["STEP"]


class Numa(Step):
    name = "numa"
    title = "Run Tomcat on the NIC's NUMA node"
    kind = "tuning"
    why = ('Moves the online CPUs to the NUMA node the NIC is attached to, so packets and the threads serving them share a node.')
    change = "Put Tomcat's online CPUs on the NUMA node the NIC is attached to (read it from `/sys/class/net/${net}/device/numa_node`)."
    avoid = 'Skip it on a one-node server, where there is nothing to move, and where the node file reads `-1` (no locality information).'
    variants = (Variant("numa-local", "CPUs on the NIC's NUMA node", "the online CPUs moved to the NIC's node"),)
    verifications = ("numactl-h", "nic-numa-node", "lscpu")
    probes = ("numa-topology", "nic-node")
    disruptive_needs = {"numa-local": ("move-cpus",)}

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        return tuned(ctx) if variant == "numa-local" else super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        return [
            Block("numa-topology", "server", "Show the NUMA nodes, their CPUs and distances", "numactl -H"),
            Block("nic-node", "server", f"Find the NUMA node of {ctx.nic}",
                  nic_numa_node(ctx)),
            move_cpus(ctx),
            restart(ctx.on_numa_node()),
            *load_blocks(ctx, self.load(ctx)),
        ]


STEP = Numa()
