"""Step: the baseline — stock Tomcat, the access log off, then a thread pool sized to the CPUs."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext, cpu_ranges
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.commands import (access_log_valve_xml, connector_xml, grub, load_blocks, offline_all_but,
                                     restart, thread_connector)

__all__ = ["STEP", "tuned"]


def tuned(ctx: HostContext) -> TomcatConfig:
    """The configuration every later tuning step keeps: access log off, threads = CPUs − 1."""
    return TomcatConfig(access_log=False, connector=thread_connector(ctx))


class Baseline(Step):
    name = "baseline"
    title = "Baseline: stock, access log off, thread count"
    kind = "tuning"
    why = ("Measures three configurations of Tomcat on 8 online CPUs: as shipped, with the access-log valve "
           "removed, and with the HTTP connector's worker pool set to 7 threads. The stock figure is the "
           "reference every later step is compared with, on the same host only.")
    change = 'In `conf/server.xml`, remove the `AccessLogValve`, and set the HTTP connector\'s `maxThreads` and `minSpareThreads` to the online CPUs minus one, with `maxKeepAliveRequests="500000"`.'
    avoid = 'Keep the access log where you need it for auditing or troubleshooting. Where requests wait on a database or another service, size `maxThreads` up, not down.'
    answer_variants = ('access-log-off', 'threads')
    variants = (
        Variant("stock", "Stock configuration", "Tomcat as shipped"),
        Variant("access-log-off", "Access log off", "AccessLogValve removed from server.xml"),
        Variant("threads", "7 threads, keep-alive and connection limits raised",
                "maxThreads = minSpareThreads = 7, maxKeepAliveRequests 500000, maxConnections 100000"),
    )
    verifications = ("dmesg-iommu", "lscpu")
    disruptive_needs = {"stock": ("iommu-strict", "offline-cpus")}
    # the baseline still measures on a host whose IOMMU or CPU count cannot be aligned: the page says so
    optional_blocks = frozenset({"iommu-strict", "offline-cpus"})

    def variants_for(self, ctx: HostContext) -> tuple[Variant, ...]:
        """The thread variant's label gives the real count: online CPUs - 1 (7 on the original's 8)."""
        n = thread_connector(ctx)["maxThreads"]
        threads = Variant("threads", f"{n} thread{'s' if n != '1' else ''}, keep-alive and connection limits raised",
                          f"maxThreads = minSpareThreads = {n}, maxKeepAliveRequests 500000, maxConnections 100000")
        return (*self.variants[:2], threads)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        configs = {"stock": TomcatConfig(), "access-log-off": TomcatConfig(access_log=False)}
        if variant == "threads":
            return tuned(ctx)
        return configs[variant] if variant in configs else super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        home = ctx.tomcat_home
        kept = set(ctx.baseline_cpus) | set(ctx.client_pin_cpus)     # a client on this kernel keeps its CPUs
        client = f" (and the load generator's {cpu_ranges(ctx.client_pin_cpus)})" if ctx.client_pin_cpus else ""
        offline = [] if len(kept) >= ctx.total_cpus else [
            Block("offline-cpus", "server",
                  f"Keep CPUs {cpu_ranges(ctx.baseline_cpus)}{client} online and take every other CPU offline",
                  offline_all_but(ctx, ctx.baseline_cpus), disruptive=True)]
        return [
            grub("iommu-strict", "Align the IOMMU with stock Ubuntu (strict, translated) and reboot",
                 "iommu.strict=1 iommu.passthrough=0"),
            *offline,
            restart(ctx),
            *load_blocks(ctx, self.load(ctx)),
            Block("disable-access-log", "server", f"Remove this Valve from {home}/conf/server.xml",
                  access_log_valve_xml(), lang="xml"),
            Block("thread-config", "server", f"The HTTP Connector in {home}/conf/server.xml after the change",
                  connector_xml(thread_connector(ctx)), lang="xml"),
        ]


STEP = Baseline()
