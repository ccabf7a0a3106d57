"""Step: set up Tomcat, the JDK and wrk2, then smoke-test at a modest constant rate."""

from __future__ import annotations

from pathlib import Path

from tunepath.live.actions import cleanup, run_block, verify
from tunepath.live.loadgen import detect
from tunepath.live.measure import measure
from tunepath.live.session import live_context, progress, save_context
from tunepath.live.tomcat import TOMCAT_SHA512, TOMCAT_VERSION
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.model.shell import quote
from tunepath.steps.commands import start_lines, tomcat_path

__all__ = ["STEP"]


class Setup(Step):
    name = "setup"
    title = "Set up Tomcat, the JDK and wrk2"
    kind = "setup"
    why = ('Installs a JDK and Apache Tomcat 11 on the server, opens the examples webapp to remote clients, builds wrk2 on the client and runs a short smoke test at a modest constant rate, to prove the pair can talk before any tuning starts.')
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
                  f"sed -i 's/allow=\"[^\"]*\"/allow=\".*\"/' "
                  f"{tomcat_path(ctx, 'webapps/examples/META-INF/context.xml')}"),
            Block("start-tomcat", "server", "Start Tomcat with a higher open-file limit", start_lines(ctx)),
            Block("build-wrk2", "client", "Build wrk2 from source (x86_64 client)",
                  "sudo apt-get install -y build-essential libssl-dev zlib1g-dev git\n"
                  "git clone https://github.com/giltene/wrk2.git && cd wrk2 && make\n"
                  "sudo cp wrk /usr/local/bin/wrk && sudo cp wrk /usr/local/bin/wrk2"),
            Block("smoke-test", "client", "Smoke test at a modest constant rate", ctx.load_command(smoke=True)),
        ]

    # --- live: install, open, build, smoke-test --------------------------------------------
    def run_live(self, session) -> None:
        rec, tomcat, opts = session.recorder, session.tomcat, session.options
        blocks = {b.id: b for b in self.plan(session.ctx)}
        rec.block(self.name, "install-jdk", "server", blocks["install-jdk"].text, "skipped",
                  reason=f"a JDK is present: {tomcat.check_java()}")
        tarball = Path(opts.tomcat_tarball).expanduser() if opts.tomcat_tarball else None
        progress(f"setup: installing Tomcat {TOMCAT_VERSION} into {tomcat.home}")
        version = tomcat.install(tarball, opts.tomcat_url, TOMCAT_SHA512[TOMCAT_VERSION])
        rec.block(self.name, "install-tomcat", "server", blocks["install-tomcat"].text, "ran",
                  how=("uploaded " + tarball.name + " through Fabric, SHA-512 verified") if tarball
                  else "fetched on the server, SHA-512 verified", version=version)
        hosts = rec.record["hosts"]["server"]
        hosts["facts"]["tomcat_version"] = version
        hosts["facts_missing"].pop("tomcat_version", None)
        rec.save()
        if not session.inventory.same_machine:
            tomcat.open_examples()
            rec.block(self.name, "open-examples", "server", blocks["open-examples"].text, "ran")
        else:
            rec.block(self.name, "open-examples", "server", blocks["open-examples"].text, "skipped",
                      reason="the client is on the server: the examples webapp already admits it")
        self.wrk2(session, blocks["build-wrk2"])
        verify(session, self)
        measure(session, self, "smoke", smoke=True)
        cleanup(session.server, session.tomcat, session.clients, session.run_id)

    def wrk2(self, session, block: Block) -> None:
        """Build wrk2 on the client when asked to (it needs internet and an x86_64 client)."""
        rec = session.recorder
        if session.tool.open_loop:
            rec.block(self.name, block.id, "client", block.text, "skipped", reason="wrk2 is installed")
            return
        arch = session.client.run("uname -m", timeout=15).stdout.strip()
        if not session.options.build_wrk2:
            reason = "wrk2 is absent; Debian's wrk measures instead (pass --build-wrk2 to build wrk2 on the client)"
        elif arch != "x86_64":
            reason = (f"wrk2 does not build on {arch}: its bundled LuaJIT 2.0 lacks arm64 and its option parsing "
                      "keeps getopt's result in a char; use an x86_64 client")
        else:
            progress("setup: building wrk2 on the client")
            run_block(session, self.name, block, timeout=900)
            session.tool = detect(session.client)
            # the later steps measure with wrk2: their commands (and the run's context) say so
            session.ctx = live_context(session.server, session.facts, session.tool, session.options,
                                       session.inventory, session.tomcat.home)
            save_context(session.recorder.runs_dir, session.run_id, session.ctx, session.recorder)
            return
        rec.block(self.name, block.id, "client", block.text, "skipped", reason=reason)
        rec.warn(reason)


STEP = Setup()
