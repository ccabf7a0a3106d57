"""Step: a proxy in front — Apache httpd with mod_proxy_http and with mod_proxy_ajp."""

from __future__ import annotations

import secrets
import time
from dataclasses import replace

from tunepath.live.httpd import PROXY_PORT, SECRET_PLACEHOLDER, Httpd, httpd_conf, start_command
from tunepath.live.tomcatconf import TomcatConfig, ajp_attributes
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.commands import element, restart, warm_up

__all__ = ["STEP"]


class Proxy(Step):
    name = "proxy"
    title = "A proxy in front: Apache httpd with mod_proxy_http and mod_proxy_ajp"
    why = ("Measures Tomcat directly, then through a private Apache httpd that forwards HTTP (mod_proxy_http) or "
           "AJP (mod_proxy_ajp, to Tomcat's AJP connector, which requires a per-run secret that is never "
           "recorded).")
    variants = (
        Variant("direct", "Tomcat direct", "the client talks to Tomcat's HTTP connector"),
        Variant("http", "httpd + mod_proxy_http", "Apache httpd forwards HTTP to Tomcat's HTTP connector"),
        Variant("ajp", "httpd + mod_proxy_ajp",
                "Apache httpd forwards AJP to Tomcat's AJP connector (with a secret)"),
    )

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in ("direct", "http"):
            return TomcatConfig(access_log=False)
        if variant == "ajp":
            return TomcatConfig(access_log=False, ajp_secret=ctx.ajp_secret)
        return super().config(variant, ctx)

    def shares_server(self, variant: str) -> bool:
        return variant != "direct"

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block("ajp-connector", "server", f"The AJP Connector added to {ctx.tomcat_home}/conf/server.xml",
                        element("Connector", ajp_attributes(ctx.ajp_secret)), lang="xml", variant="ajp")]
        for mode in ("http", "ajp"):
            conf = httpd_conf(mode, ctx.httpd_dir, ctx.port, ctx.ajp_secret)
            blocks.append(Block(f"httpd-{mode}", "server", f"Start a private httpd on port {PROXY_PORT} "
                                f"with mod_proxy_{mode}", start_command(ctx.httpd_dir, conf), variant=mode))
        blocks += [restart(ctx), *warm_up(ctx)]
        proxied = replace(ctx, port=PROXY_PORT)          # the same load, sent to httpd
        for v, target in (("direct", ctx), ("http", proxied), ("ajp", proxied)):
            blocks.append(Block(f"load-{v}", "client", f"Load through {'Tomcat directly' if v == 'direct' else 'httpd'}",
                                target.load_command(), variant=v))
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
        why = Httpd(session.server, session.ctx.httpd_dir).available()
        return [why] if why else []

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        if variant == "direct":
            return None
        from tunepath.live.session import progress

        ctx, block = session.ctx, blocks[f"httpd-{variant}"]
        httpd = Httpd(session.server, ctx.httpd_dir)
        started = time.monotonic()
        # the block's effect, with its configuration uploaded: the AJP secret never goes on a command line
        httpd.start(httpd_conf(variant, ctx.httpd_dir, ctx.port, ctx.ajp_secret))
        session.recorder.block(self.name, block.id, block.host, block.text, "ran", exit_status=0,
                               duration_s=round(time.monotonic() - started, 3),
                               how="httpd.conf uploaded (mode 0600), never passed on a command line",
                               **({"repetition": repetition} if repetition > 1 else {}))
        progress(f"{self.name}/{variant}: httpd answers on port {PROXY_PORT}")

        def stop() -> None:
            httpd.stop()
            httpd.shred_conf()
        return stop


STEP = Proxy()
