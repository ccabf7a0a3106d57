"""Step: the baseline's connector change, one attribute at a time — maxThreads, minSpareThreads,
maxKeepAliveRequests and maxConnections, each against the stock connector and all four together."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.commands import connector_xml, load_blocks, restart, thread_connector

__all__ = ["STEP", "ATTRIBUTES"]

# variant → the one attribute of the baseline's connector change it makes
ATTRIBUTES = {"max-threads": "maxThreads", "min-spare-threads": "minSpareThreads",
              "keep-alive": "maxKeepAliveRequests", "max-connections": "maxConnections"}


def _variants(ctx: HostContext) -> tuple[Variant, ...]:
    n = thread_connector(ctx)["maxThreads"]
    return (
        Variant("stock-connector", "Stock connector", "the stock HTTP connector, access log off"),
        Variant("max-threads", f"maxThreads {n}", f'maxThreads="{n}" only'),
        Variant("min-spare-threads", f"minSpareThreads {n}", f'minSpareThreads="{n}" only'),
        Variant("keep-alive", "maxKeepAliveRequests 500000", 'maxKeepAliveRequests="500000" only'),
        Variant("max-connections", "maxConnections 100000", 'maxConnections="100000" only'),
        Variant("all-four", "All four (the baseline's change)",
                f"maxThreads = minSpareThreads = {n}, maxKeepAliveRequests 500000, maxConnections 100000"),
    )


class ConnectorLimits(Step):
    name = "connector-limits"
    title = "Connector limits, one attribute at a time"
    why = ("The baseline's last change sets four attributes of the HTTP connector at once: `maxThreads` and "
           "`minSpareThreads` to the online CPUs minus one, `maxKeepAliveRequests` to 500000 and "
           "`maxConnections` to 100000. This step measures each alone against the stock connector, and all "
           "four together, so that their effects can be told apart. Every variant keeps the access log off.")
    change = ("Change one connector attribute at a time, and keep only those your own measurement shows to help. "
              "Where clients reuse their connections, start with `maxKeepAliveRequests`: by default Tomcat "
              "closes a connection after 100 requests.")
    avoid = ("A small `maxThreads` suits a servlet that never waits: where requests wait on a database or "
             "another service, it caps throughput.")
    verifications = ("java-version",)
    variants = _variants(HostContext())

    def variants_for(self, ctx: HostContext) -> tuple[Variant, ...]:
        """The thread count in the labels is the host's: its online CPUs - 1 (7 on the original's 8)."""
        return _variants(ctx)

    def connector(self, variant: str, ctx: HostContext) -> dict[str, str] | None:
        """The attributes ``variant`` sets on the stock HTTP connector (None: no such variant)."""
        tuned = thread_connector(ctx)
        if variant == "stock-connector":
            return {}
        if variant == "all-four":
            return dict(tuned)
        if variant in ATTRIBUTES:
            return {ATTRIBUTES[variant]: tuned[ATTRIBUTES[variant]]}
        return None

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        connector = self.connector(variant, ctx)
        if connector is None:
            return super().config(variant, ctx)
        return TomcatConfig(access_log=False, connector=connector)

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block(f"connector-{v.name}", "server", f"{v.label}: the HTTP Connector in "
                        f"{ctx.tomcat_home}/conf/server.xml", connector_xml(self.connector(v.name, ctx)),
                        lang="xml", variant=v.name)
                  for v in self.variants_for(ctx)]
        return blocks + [restart(ctx), *load_blocks(ctx, self.load(ctx))]


STEP = ConnectorLimits()
