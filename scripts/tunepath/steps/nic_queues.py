"""Step: as many NIC queues as online CPUs."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.baseline import tuned
from tunepath.steps.commands import load_blocks, nic, restart, set_queues

__all__ = ["STEP"]


class NicQueues(Step):
    name = "nic-queues"
    title = "Match NIC queues to online CPUs"
    kind = "tuning"
    why = ("Reduces the NIC's combined queues to the number of online CPUs, so that every queue's interrupts land on a CPU that is actually online.")
    # the name stays "queues-8" (the original's 8 CPUs) in every run; label and description give the real count
    change = "Set the NIC's combined queues to the number of online CPUs: `sudo ethtool -L ${net} combined 8`."
    avoid = "Leave the driver's default where every CPU is online and each queue already has a CPU of its own. The setting does not survive a reboot."
    variants = (Variant("queues-8", "8 NIC queues", "ethtool -L combined 8"),)
    verifications = ("ethtool-l",)
    probes = ("show-queues", "show-queues-after")
    disruptive_needs = {"queues-8": ("set-queues",)}

    def variants_for(self, ctx: HostContext) -> tuple[Variant, ...]:
        n = ctx.nic_queues
        how = f"rx {n} tx {n}" if ctx.nic_channels == "rx-tx" else f"combined {n}"
        return (Variant("queues-8", f"{n} NIC queue{'s' if n != 1 else ''}", f"ethtool -L {how}"),)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        return tuned(ctx) if variant == "queues-8" else super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        return [
            Block("show-queues", "server", f"Show the queue counts of {ctx.nic}", f"ethtool -l {nic(ctx)}"),
            set_queues(ctx),
            Block("show-queues-after", "server", f"Show the queue counts of {ctx.nic} after the change",
                  f"ethtool -l {nic(ctx)}"),
            restart(ctx),
            *load_blocks(ctx, self.load(ctx)),
        ]


STEP = NicQueues()
