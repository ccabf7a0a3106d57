"""Step: a proxy in front — Apache httpd with mod_proxy_http and with mod_proxy_ajp."""

from __future__ import annotations

import secrets
from dataclasses import replace

from tunepath.live.httpd import PROXY_PORT, Httpd, httpd_conf
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
        proxied = ctx.url.replace(f":{ctx.port}/", f":{PROXY_PORT}/")
        blocks = [Block("ajp-connector", "server", f"The AJP Connector added to {ctx.tomcat_home}/conf/server.xml",
                        element("Connector", ajp_attributes(ctx.ajp_secret)), lang="xml", variant="ajp")]
        for mode in ("http", "ajp"):
            conf = httpd_conf(mode, ctx.httpd_dir, ctx.port, ctx.ajp_secret)
            blocks.append(Block(f"httpd-{mode}", "server", f"Start a private httpd on port {PROXY_PORT} "
                                f"with mod_proxy_{mode}",
                                f"mkdir -p {ctx.httpd_dir} && cat > {ctx.httpd_dir}/httpd.conf <<'EOF'\n{conf}EOF\n"
                                f"apache2 -f {ctx.httpd_dir}/httpd.conf -k start", variant=mode))
        blocks += [restart(ctx), *warm_up(ctx)]
        rate = f" -R{ctx.rate}" if ctx.open_loop else ""
        latency = " --latency" if ctx.latency_flag else ""
        for v, url in (("direct", ctx.url), ("http", proxied), ("ajp", proxied)):
            blocks.append(Block(f"load-{v}", "client", f"Load through {'Tomcat directly' if v == 'direct' else 'httpd'}",
                                f"{ctx.raise_nofile}\n{ctx.load_generator} -c{ctx.connections} -t{ctx.threads}{rate} "
                                f"-d{ctx.duration_s}{latency} {url}", variant=v))
        return blocks

    # --- live ---------------------------------------------------------------------------
    def prepare_live(self, session) -> None:
        """A fresh AJP secret for this run: in the commands run, masked in everything recorded."""
        secret = secrets.token_urlsafe(24)
        session.ctx = replace(session.ctx, ajp_secret=secret)
        session.recorder.mask.add(secret, HostContext().ajp_secret)

    def skip_reasons(self, session, variant: Variant) -> list[str]:
        if variant.name == "direct":
            return []
        why = Httpd(session.server, session.ctx.httpd_dir).available()
        return [why] if why else []

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        if variant == "direct":
            return None
        from tunepath.live.actions import run_block
        from tunepath.live.session import progress

        httpd = Httpd(session.server, session.ctx.httpd_dir)
        httpd.stop()
        run_block(session, self.name, blocks[f"httpd-{variant}"], timeout=60, repetition=repetition)
        httpd.wait_ready()
        progress(f"{self.name}/{variant}: httpd answers on port {PROXY_PORT}")

        def stop() -> None:
            httpd.stop()
            httpd.shred_conf()
        return stop


STEP = Proxy()
