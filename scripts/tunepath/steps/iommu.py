"""Step: IOMMU passthrough, non-strict, with the NUMA-local CPUs and the NIC queues kept."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.baseline import tuned
from tunepath.steps.commands import grub, load_blocks, move_cpus, restart, set_queues

__all__ = ["STEP"]


class Iommu(Step):
    name = "iommu"
    title = "IOMMU passthrough"
    kind = "tuning"
    why = ('Boots the server with `iommu.strict=0 iommu.passthrough=1`, so that network DMA skips IOMMU translation and strict TLB invalidation.')
    change = 'Boot with `iommu.strict=0 iommu.passthrough=1` on the kernel command line: a GRUB drop-in, `update-grub`, then a reboot.'
    avoid = 'Not where devices must stay isolated from memory they do not own: passthrough removes DMA protection for the default domain (devices assigned to virtual machines, untrusted devices).'
    variants = (Variant("iommu-passthrough", "IOMMU passthrough", "iommu.strict=0 iommu.passthrough=1"),)
    verifications = ("dmesg-iommu",)
    disruptive_needs = {"iommu-passthrough": ("iommu-passthrough", "move-cpus", "set-queues")}

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        return tuned(ctx) if variant == "iommu-passthrough" else super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        return [
            grub("iommu-passthrough", "Switch the IOMMU to passthrough, non-strict, and reboot",
                 "iommu.strict=0 iommu.passthrough=1"),
            move_cpus(ctx),
            set_queues(ctx),
            restart(ctx.on_numa_node()),
            *load_blocks(ctx, self.load(ctx)),
        ]


STEP = Iommu()
