"""Step: the load generators — wrk2, wrk, ab and JMeter against the same Tomcat."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.model.shell import number, port, quote
from tunepath.steps.base import Step
from tunepath.steps.commands import restart, warm_up

__all__ = ["STEP", "JMETER_PLAN", "JMETER_PLAN_XML"]

TOOLS = frozenset({"wrk2", "wrk", "ab", "jmeter"})   # each variant is the binary of that name
JMETER_PLAN = "~/.tunepath/jmeter-plan.jmx"
JMETER_PLAN_XML = (Path(__file__).parent / "templates" / "jmeter-plan.jmx").read_text(encoding="utf-8").rstrip("\n")


class LoadGenerators(Step):
    name = "load-generators"
    title = "Load generators: wrk2, wrk, ab and JMeter"
    why = ("Drives the same Tomcat with each load generator the client has, for the same time and number of "
           "connections, and records what each reports and how much client CPU it burns. wrk2 keeps a constant "
           "offered rate and corrects latency for coordinated omission; wrk and ab are closed loop; JMeter is "
           "measured where it runs.")
    variants = (
        Variant("wrk2", "wrk2 (open loop, constant rate)", "wrk2 at a constant offered rate, latency corrected"),
        Variant("wrk", "wrk (closed loop)", "Debian's wrk: each connection sends when the last answer arrived"),
        Variant("ab", "ab (ApacheBench, keep-alive)", "ApacheBench from apache2-utils, one thread, keep-alive"),
        Variant("jmeter", "JMeter (non-GUI)", "Apache JMeter in non-GUI mode, one thread group"),
    )
    verifications = ("load-generator-versions",)
    client_verifications = frozenset({"load-generator-versions"})

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        return TomcatConfig(access_log=False) if variant in TOOLS else super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        d, c, t = (number(ctx.duration_s, "duration"), number(ctx.connections, "connections"),
                   number(ctx.threads, "threads"))
        url, rate = quote(ctx.url, "URL"), number(ctx.rate, "rate")
        return [
            Block("load-wrk2", "client", "wrk2: a constant offered rate, latency corrected for coordinated omission",
                  f"{ctx.raise_nofile}\nwrk2 -c{c} -t{t} -R{rate} -d{d} --latency {url}", variant="wrk2"),
            Block("load-wrk", "client", "wrk: as fast as the server answers (closed loop)",
                  f"{ctx.raise_nofile}\nwrk -c{c} -t{t} -d{d} --latency {url}", variant="wrk"),
            Block("load-ab", "client", "ab: one thread, keep-alive, for the same time",
                  f"{ctx.raise_nofile}\nab -k -c {c} -t {d} -n 100000000 {url}", variant="ab"),
            Block("jmeter-plan", "client", f"JMeter: save this test plan as {JMETER_PLAN} on the client",
                  JMETER_PLAN_XML, lang="xml", variant="jmeter"),
            Block("load-jmeter", "client", "JMeter: non-GUI mode, one thread per connection, for the same time",
                  f"{ctx.raise_nofile}\njmeter -n -t {quote(JMETER_PLAN)} -Jthreads={c} -Jduration={d} "
                  f"-Jhost={quote(ctx.server_address, 'server_address')} -Jport={port(ctx.port)} "
                  f"-Jpath={quote(ctx.path, 'path')} -j ~/.tunepath/jmeter.log",
                  variant="jmeter"),
            restart(ctx),
            *warm_up(ctx),          # the warm-up (by wrk); each variant then runs its own tool
        ]

    # --- live ---------------------------------------------------------------------------
    def skip_reasons(self, session, variant: Variant) -> list[str]:
        binary = variant.name
        if session.client.run(f"command -v {quote(binary)}", check=False, timeout=15).exited == 0:
            return []
        return [f"{binary} is not installed on the client" + (
            " (wrk2 is in no package registry: build it with --build-wrk2 on an x86_64 client)"
            if binary == "wrk2" else "")]

    def load_tool(self, session, variant: str) -> str:
        return variant

    def multi_client(self, variant: str) -> bool:
        return variant not in ("ab", "jmeter")      # both measure from one client

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        if variant == "jmeter":
            upload_plan(session, blocks["jmeter-plan"].text)
        return None


def upload_plan(session, text: str) -> None:
    """The JMeter test plan onto the client, through Fabric (or a copy on this machine)."""
    fd, name = tempfile.mkstemp(suffix=".jmx")
    plan_file = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        session.client.run("mkdir -p ~/.tunepath", timeout=15)
        session.client.put(plan_file, JMETER_PLAN)
    finally:
        plan_file.unlink(missing_ok=True)


STEP = LoadGenerators()
