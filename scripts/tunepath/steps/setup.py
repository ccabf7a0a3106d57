"""Step: set up Tomcat, the JDK and wrk2, then smoke-test at a modest constant rate."""

from __future__ import annotations

from pathlib import Path

from tunepath.live.actions import cleanup, install_tomcat, verify
from tunepath.live.measure import measure
from tunepath.live.wrk2 import Wrk2Source, blocks as wrk2_blocks
from tunepath.live.tomcatconf import TomcatConfig, open_examples_command
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.model.reader import VARIABLES
from tunepath.steps.base import Step
from tunepath.model.shell import quote
from tunepath.model.load import load_spec
from tunepath.steps.commands import start_lines, tomcat_path

__all__ = ["STEP"]


class Setup(Step):
    name = "setup"
    title = "Set up Tomcat, the JDK and wrk2"
    kind = "setup"
    why = ('Installs a JDK and Apache Tomcat 11 on the server, opens the examples webapp to remote clients, builds wrk2 on the client (with the project’s patch, so an Arm client works too) and runs a short smoke test at a modest constant rate, to prove the pair can talk before any tuning starts.')
    change = 'Install a JDK and Tomcat 11 on the server, build wrk2 on the client, and check with a short smoke test that Tomcat answers the client.'
    avoid = "Do not benchmark on a server that runs other work, or with a client that shares the server's CPUs: the figures then measure both."
    variants = (Variant("smoke", "Smoke test", "stock Tomcat at the smoke-test load", smoke=True),)
    verifications = ("tomcat-version",)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant == "smoke":
            return TomcatConfig()
        return super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        v = ctx.tomcat_version
        major = v.split(".")[0]
        tarball = f"apache-tomcat-{v}.tar.gz"
        dist = f"https://archive.apache.org/dist/tomcat/tomcat-{major}/v{v}/bin/{tarball}"
        return [
            Block("install-jdk", "server", "Install a JDK (Tomcat 11 needs Java 17 or later)",
                  f"sudo apt-get update && sudo apt-get install -y {quote(ctx.java_package, 'java_package')}"),
            Block("install-tomcat", "server", f"Download Tomcat {v}, check its SHA-512 and unpack it",
                  f"cd ~ && wget {quote(dist, 'URL')} {quote(dist + '.sha512', 'URL')}\n"
                  f"sha512sum -c {quote(tarball + '.sha512', 'tarball')}\n"
                  f"tar xzf {quote(tarball, 'tarball')}"),
            Block("open-examples", "server", "Let remote clients reach the examples webapp",
                  open_examples_command(tomcat_path(ctx, 'webapps/examples/META-INF/context.xml'))),
            Block("start-tomcat", "server", "Start Tomcat with a higher open-file limit", start_lines(ctx)),
            *wrk2_blocks(Wrk2Source.from_context(ctx.wrk2_source)),
            Block("smoke-test", "client", "Smoke test at a modest constant rate", load_spec(ctx, smoke=True).command()),
        ]

    def document(self, result, charts, notebook, historical_dir) -> dict:
        """The step's data, with the path's variables (``{{< variables >}}`` prints them on this page)."""
        doc = super().document(result, charts, notebook, historical_dir)
        doc["variables"] = [v.to_data() for v in VARIABLES]
        return doc

    # --- live: install, open, build, smoke-test --------------------------------------------
    def run_live(self, session) -> None:
        rec, tomcat, opts = session.recorder, session.tomcat, session.options
        blocks = {b.id: b for b in self.plan(session.ctx)}
        rec.block(self.name, "install-jdk", "server", blocks["install-jdk"].text, "skipped",
                  reason=f"a JDK is present: {tomcat.check_java()}")
        version = install_tomcat(session)
        rec.block(self.name, "install-tomcat", "server", blocks["install-tomcat"].text, "ran",
                  how=("uploaded " + Path(opts.tomcat_tarball).name + " through Fabric, SHA-512 verified")
                  if opts.tomcat_tarball else "fetched on the server, SHA-512 verified", version=version)
        if not session.inventory.same_machine:
            tomcat.open_examples()
            rec.block(self.name, "open-examples", "server", blocks["open-examples"].text, "ran")
        else:
            rec.block(self.name, "open-examples", "server", blocks["open-examples"].text, "skipped",
                      reason="the client is on the server: the examples webapp already admits it")
        self.wrk2(session, blocks)
        verify(session, self)
        measure(session, self, "smoke", smoke=True)
        cleanup(session.server, session.tomcat, session.clients, session.run_id)

    def wrk2(self, session, blocks: dict[str, Block]) -> None:
        """Record what became of wrk2's build: the run builds it when it starts, on every client
        (:func:`tunepath.live.start.build_wrk2`), so every step, not only this one, measures with it."""
        rec = session.recorder
        fact = rec.record["hosts"]["client"]["facts"].get("load_generator") or {}
        for block in wrk2_blocks(Wrk2Source.from_context(session.ctx.wrk2_source)):
            text = blocks[block.id].text
            if fact.get("built_in_s") is not None:
                rec.block(self.name, block.id, "client", text, "ran",
                          how=f"when the run started, on every client ({fact['built_in_s']:.0f} s on the first)")
            elif session.tool.open_loop:
                rec.block(self.name, block.id, "client", text, "skipped",
                          reason=f"wrk2 is installed ({session.tool.binary}, {session.tool.version})")
            else:
                rec.block(self.name, block.id, "client", text, "skipped", reason=session.tool.why)


STEP = Setup()
