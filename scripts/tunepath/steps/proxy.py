"""Step: a proxy in front — Apache httpd with mod_proxy_http, mod_proxy_ajp and mod_jk.

The proxy listens where the clients send their load (``live/httpd.listen_address``: loopback when
they run on the server, the server's address in a lab or across hosts); Tomcat's HTTP and AJP
connectors stay on 127.0.0.1 behind it, and the AJP connector requires the per-run secret, which
mod_proxy_ajp sends as ``secret=`` and mod_jk as ``worker.tomcat.secret`` in its
``workers.properties``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import replace

from tunepath.live.httpd import (SECRET_PLACEHOLDER, Httpd, httpd_conf, jk_conf, listen_address,
                                 start_command, workers_properties)
from tunepath.live.tomcatconf import TomcatConfig, ajp_attributes
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.model.load import load_spec
from tunepath.steps.commands import element, restart, warm_up

__all__ = ["STEP", "proxy_files"]

PROXIES = ("http", "ajp", "jk")          # the variants httpd serves
MODULE = {"http": "mod_proxy_http", "ajp": "mod_proxy_ajp", "jk": "mod_jk"}


def proxy_files(mode: str, ctx: HostContext) -> tuple[str, str | None]:
    """The private httpd's configuration for ``mode``, and mod_jk's workers file (None otherwise)."""
    address = listen_address("127.0.0.1" if ctx.loopback else ctx.server_address)
    if mode == "jk":
        return (jk_conf(ctx.httpd_dir, ctx.proxy_port, address=address),
                workers_properties(ctx.ajp_secret, ctx.ajp_port))
    return httpd_conf(mode, ctx.httpd_dir, ctx.port, ctx.ajp_secret, ctx.proxy_port, address=address,
                      ajp_port=ctx.ajp_port), None


class Proxy(Step):
    name = "proxy"
    title = "A proxy in front: Apache httpd with mod_proxy_http, mod_proxy_ajp and mod_jk"
    why = ("Measures Tomcat directly, then through a private Apache httpd that forwards HTTP (mod_proxy_http) or "
           "AJP (mod_proxy_ajp, and the Tomcat project's mod_jk, to Tomcat's AJP connector, which requires a per-run "
           "secret that is never recorded).")
    change = 'Where you need a front end, forward HTTP with `mod_proxy_http` (`ProxyPass / http://127.0.0.1:8080/`); AJP needs a `secret` on both sides.'
    avoid = 'Do not add a proxy for speed: each hop adds work and latency. Add it for what it gives (TLS termination, static files, one entry point).'
    variants = (
        Variant("direct", "Tomcat direct", "the client talks to Tomcat's HTTP connector"),
        Variant("http", "httpd + mod_proxy_http", "Apache httpd forwards HTTP to Tomcat's HTTP connector"),
        Variant("ajp", "httpd + mod_proxy_ajp",
                "Apache httpd forwards AJP to Tomcat's AJP connector (with a secret)"),
        Variant("jk", "httpd + mod_jk",
                "Apache httpd's mod_jk forwards AJP to Tomcat's AJP connector (with a secret)"),
    )

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in ("direct", "http", "ajp", "jk"):
            # one configuration for all four (the AJP connector listens throughout, used by ajp and jk
            # only), so that one JVM serves a whole round: what differs is in front of Tomcat
            return TomcatConfig(access_log=False, ajp_secret=ctx.ajp_secret, ajp_port=ctx.ajp_port)
        return super().config(variant, ctx)

    def shares_server(self, variant: str) -> bool:
        return variant != "direct"

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block("ajp-connector", "server", f"The AJP Connector added to {ctx.tomcat_home}/conf/server.xml "
                        "(the ajp and jk variants)", element("Connector", ajp_attributes(ctx.ajp_secret, ctx.ajp_port)),
                        lang="xml", variant="ajp")]
        for mode in PROXIES:
            conf, workers = proxy_files(mode, ctx)
            blocks.append(Block(f"httpd-{mode}", "server", f"Start a private httpd on port {ctx.proxy_port} "
                                f"with {MODULE[mode]}", start_command(ctx.httpd_dir, conf, workers), variant=mode))
        blocks += [restart(ctx), *warm_up(ctx)]      # one JVM for all four: warmed once per round
        proxied = replace(ctx, port=ctx.proxy_port)      # the same load, sent to httpd
        for v in ("direct", *PROXIES):
            target = ctx if v == "direct" else proxied
            blocks.append(Block(f"load-{v}", "client", f"Load through {'Tomcat directly' if v == 'direct' else 'httpd'}",
                                load_spec(target).command(), variant=v))
        return blocks

    # --- live ---------------------------------------------------------------------------
    def run_live(self, session) -> None:
        """The standard flow; while the run's AJP secret is live, no error carries it."""
        from tunepath.live.actions import secret_hidden
        from tunepath.live.execute import standard_flow

        secret_hidden(lambda: standard_flow(self, session), lambda: session.ctx.ajp_secret, SECRET_PLACEHOLDER)

    def prepare_live(self, session) -> None:
        """A fresh AJP secret for this run: in the commands run, masked in everything recorded."""
        secret = secrets.token_urlsafe(24)
        session.ctx = replace(session.ctx, ajp_secret=secret)
        session.recorder.mask.add(secret, SECRET_PLACEHOLDER)

    def skip_reasons(self, session, variant: Variant) -> list[str]:
        if variant.name == "direct":
            return []
        why = Httpd(session.server, session.ctx.httpd_dir).available(variant.name)
        return [why] if why else []

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        if variant == "direct":
            return None
        from tunepath.live.session import progress

        ctx, block = session.ctx, blocks[f"httpd-{variant}"]
        httpd = Httpd(session.server, ctx.httpd_dir, listen_address(ctx.server_address), ctx.proxy_port)
        started = time.monotonic()
        # the block's effect, with its files uploaded: the AJP secret never goes on a command line
        httpd.start(*proxy_files(variant, ctx))
        files = "httpd.conf and workers.properties" if variant == "jk" else "httpd.conf"
        session.recorder.block(self.name, block.id, block.host, block.text, "ran", exit_status=0,
                               duration_s=round(time.monotonic() - started, 3),
                               how=f"{files} uploaded (mode 0600), never passed on a command line",
                               **({"repetition": repetition} if repetition > 1 else {}))
        progress(f"{self.name}/{variant}: httpd answers on port {ctx.proxy_port}")

        def stop() -> None:
            httpd.stop()
            httpd.shred_conf()
        return stop


STEP = Proxy()
