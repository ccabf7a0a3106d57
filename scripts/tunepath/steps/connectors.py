"""Step: Tomcat 11's HTTP connectors — NIO, NIO2, and NIO with virtual threads."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.commands import connector_xml, load_blocks, restart

__all__ = ["STEP", "NIO", "NIO2"]

NIO = "org.apache.coyote.http11.Http11NioProtocol"
NIO2 = "org.apache.coyote.http11.Http11Nio2Protocol"
CONNECTORS = {"nio": {"protocol": NIO}, "nio2": {"protocol": NIO2},
              "nio-virtual": {"protocol": NIO, "useVirtualThreads": "true"}}


class Connectors(Step):
    name = "connectors"
    title = "Connectors: NIO, NIO2 and virtual threads"
    why = ("Compares the two HTTP/1.1 connector implementations of Tomcat 11, NIO (the default) and NIO2, and "
           "NIO with virtual threads (`useVirtualThreads=\"true\"`, which needs Java 21 or later). The blocking "
           "connector left Tomcat with 8.5/9.0 and the APR/native connector with 10.1. Each variant keeps the "
           "access log off and changes one thing.")
    change = 'Keep the default NIO connector. Try NIO2 (`protocol="org.apache.coyote.http11.Http11Nio2Protocol"`) or `useVirtualThreads="true"` only with a measurement of your own.'
    avoid = "Virtual threads help where requests block on a database or a remote call; this benchmark's servlet never blocks."
    variants = (
        Variant("nio", "NIO", "Http11NioProtocol with its platform-thread pool"),
        Variant("nio2", "NIO2", "Http11Nio2Protocol with its platform-thread pool"),
        Variant("nio-virtual", "NIO, virtual threads", "Http11NioProtocol with useVirtualThreads=\"true\"",
                requires_java=21),
    )
    verifications = ("java-version",)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in CONNECTORS:
            return TomcatConfig(access_log=False, connector=CONNECTORS[variant])
        return super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block(f"connector-{v.name}", "server", f"{v.label}: the HTTP Connector in "
                        f"{ctx.tomcat_home}/conf/server.xml", connector_xml(self.tomcat_config(v.name, ctx).connector),
                        lang="xml", variant=v.name)
                  for v in self.variants]
        return blocks + [restart(ctx), *load_blocks(ctx, self.load(ctx))]


STEP = Connectors()
