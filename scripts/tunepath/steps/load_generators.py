"""Step: the load generators — wrk2, wrk, ab, siege and JMeter against the same Tomcat.

Each tool reads what the step writes on the client, never a user's own settings:

* **siege** reads ``~/.siege/siege.conf`` (and creates it, from Debian's template, on its first run)
  unless ``-R FILE`` names another file; the step writes :data:`SIEGE_RC` and passes ``-R``.
  Debian's template sends ``Connection: close`` on every request, parses each HTML page and
  fetches its images (``parser = true``), caps the users at 255 (``limit``) and prints JSON; the
  step's file asks for what the other tools do: one GET per transaction over kept-alive HTTP/1.1
  connections, and the plain summary, which siege prints on stderr (hence ``2>&1``). ``limit`` is
  raised to the connections when they are more than 255 (siege would otherwise pause 10 s and
  cap them). ``failures`` is raised from 1024 to 100,000 because siege 4.0.7 counts one failed
  transaction each time Tomcat closes a kept-alive connection (after ``maxKeepAliveRequests``, 100
  responses), which would end a run of 20,000 requests per second within seconds; a server that
  refuses every connection still stops it, after at most 100,000 short error lines. ``-t NS``
  runs until the start of second N: between N − 1 and N seconds (siege's timer counts whole
  seconds); siege measures the time it really ran.
* **JMeter** runs the plan the step writes (:data:`JMETER_PLAN`, JMeter 5.6 or later), writes
  every sample to a CSV results file and, after the run, its dashboard with percentiles computed
  over every sample (``statistic_window=-1``: by default the last 20,000 only); the dashboard's
  ``statistics.json`` is printed after JMeter's own summary, and both are parsed
  (:mod:`tunepath.parse.jmeter`). ``scripts/bootstrap --load-tools`` installs JMeter 5.6.3 from
  Maven Central's artefacts as ``/usr/local/bin/jmeter`` on this machine; another client needs a
  JMeter 5.6 or later of its own on its PATH (the variant is skipped, with the reason, otherwise).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.model.shell import number, port, quote
from tunepath.steps.base import Step
from tunepath.model.load import load_spec
from tunepath.steps.commands import restart, warm_up

__all__ = ["STEP", "JMETER_PLAN", "JMETER_PLAN_XML", "SIEGE_RC", "siege_rc", "versions"]

TOOLS = frozenset({"wrk2", "wrk", "ab", "siege", "jmeter"})   # each variant is the binary of that name
JMETER_PLAN = "~/.tunepath/jmeter-plan.jmx"
JMETER_RESULTS = "~/.tunepath/jmeter.jtl"
JMETER_REPORT = "~/.tunepath/jmeter-report"
JMETER_PLAN_XML = (Path(__file__).parent / "templates" / "jmeter-plan.jmx").read_text(encoding="utf-8").rstrip("\n")
JMETER_MAJOR = 5                      # the plan's format; Debian's 2.13 cannot load it (nor any plan)
SIEGE_RC = "~/.tunepath/siegerc"
SIEGE_LIMIT = 255                     # siege's default cap on users
def versions(ctx: HostContext) -> str:
    """The versions of the tools on the client (JMeter's banner ends with its version)."""
    return (f"{quote(ctx.wrk2, 'wrk2')} -v 2>&1 | head -1; wrk -v 2>&1 | head -1; ab -V | head -1; "
            "siege --version 2>&1 | grep -m1 SIEGE; "
            "echo \"JMeter $(jmeter -j /dev/null --version 2>&1 | grep -Eo '[0-9]+[.][0-9]+([.][0-9]+)?$' | tail -1)\"")


def siege_rc(ctx: HostContext) -> str:
    """siege's settings for the step (``siege -R`` reads no other file)."""
    limit = max(SIEGE_LIMIT, int(number(ctx.connections, "connections")))
    return "\n".join([
        "# tunepath: siege's settings for the load-generators step (siege -R reads this file, no other).",
        "# One GET per transaction over kept-alive HTTP/1.1 connections, as wrk, ab -k and JMeter send it;",
        "# the plain summary (on stderr); no pause and no cap below the connections asked for.",
        "protocol = HTTP/1.1",
        "connection = keep-alive",
        "chunked = true",
        "parser = false",
        "cache = false",
        "internet = false",
        "delay = 0",
        "timeout = 30",
        "failures = 100000",
        f"limit = {limit}",
        "verbose = false",
        "quiet = false",
        "json_output = false",
        "color = off",
        "logging = false",
        "show-logfile = false",
    ])


class LoadGenerators(Step):
    name = "load-generators"
    title = "Load generators: wrk2, wrk, ab, siege and JMeter"
    why = ("Drives the same Tomcat with each load generator the client has, for the same time and number of "
           "connections, and records what each reports and how much client CPU it burns. wrk2 keeps a constant "
           "offered rate and corrects latency for coordinated omission; wrk, ab, siege and JMeter are closed "
           "loop.")
    change = 'Measure with an open-loop, latency-corrected generator (wrk2 at a fixed rate, `-R`), and read server CPU per request and latency at that rate.'
    avoid = 'Closed-loop tools (wrk, ab, siege, JMeter) slow down when the server does, so their latencies hide queueing. Use them to find a capacity, not to read latency.'
    variants = (
        Variant("wrk2", "wrk2 (open loop, constant rate)", "wrk2 at a constant offered rate, latency corrected"),
        Variant("wrk", "wrk (closed loop)", "Debian's wrk: each connection sends when the last answer arrived"),
        Variant("ab", "ab (ApacheBench, keep-alive)", "ApacheBench from apache2-utils, one thread, keep-alive"),
        Variant("siege", "siege (benchmark mode, keep-alive)",
                "siege 4 from Debian: one thread per simulated user, no delay between requests, keep-alive"),
        Variant("jmeter", "JMeter 5.6 (non-GUI)", "Apache JMeter 5.6 in non-GUI mode, one thread group"),
    )
    verifications = ("load-generator-versions",)
    client_verifications = frozenset({"load-generator-versions"})

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        return TomcatConfig(access_log=False) if variant in TOOLS else super().config(variant, ctx)

    def verify_commands(self, ctx: HostContext) -> dict[str, str]:
        return {"load-generator-versions": versions(ctx)}

    def plan(self, ctx: HostContext) -> list[Block]:
        d, c, t = (number(ctx.duration_s, "duration"), number(ctx.connections, "connections"),
                   number(ctx.threads, "threads"))
        url = quote(ctx.url, "URL")
        pin = ctx.pinned("client")
        return [
            Block("load-wrk2", "client", "wrk2: a constant offered rate, latency corrected for coordinated omission",
                  load_spec(ctx).with_(
                      tool=ctx.wrk2, rate=ctx.rate, latency=True, uncorrected=ctx.uncorrected).command(),
                  variant="wrk2"),
            Block("load-wrk", "client", "wrk: as fast as the server answers (closed loop)",
                  f"{ctx.raise_nofile}\n{pin}wrk -c{c} -t{t} -d{d} --latency {url}", variant="wrk"),
            Block("load-ab", "client", "ab: one thread, keep-alive, for the same time",
                  f"{ctx.raise_nofile}\n{pin}ab -k -c {c} -t {d} -n 100000000 {url}", variant="ab"),
            Block("siegerc", "client", f"siege: save these settings as {SIEGE_RC} on the client",
                  siege_rc(ctx), lang="ini", variant="siege"),
            Block("load-siege", "client", "siege: benchmark mode (no delay), one simulated user per connection, "
                  "for the same time; its summary goes to stderr",
                  f"{ctx.raise_nofile}\n{pin}siege -R {quote(SIEGE_RC)} -b -c {c} -t {d}S {url} 2>&1", variant="siege"),
            Block("jmeter-plan", "client", f"JMeter: save this test plan as {JMETER_PLAN} on the client",
                  JMETER_PLAN_XML, lang="xml", variant="jmeter"),
            Block("load-jmeter", "client", "JMeter: non-GUI mode, one thread per connection, for the same time; "
                  "then its dashboard's statistics, computed over every sample",
                  f"{ctx.raise_nofile}\n{pin}jmeter -n -t {quote(JMETER_PLAN)} -Jthreads={c} -Jduration={d} "
                  f"-Jhost={quote(ctx.server_address, 'server_address')} -Jport={port(ctx.port)} "
                  f"-Jpath={quote(ctx.path, 'path')} -j ~/.tunepath/jmeter.log -l {quote(JMETER_RESULTS)} -f "
                  f"-e -o {quote(JMETER_REPORT)} -Jjmeter.reportgenerator.statistic_window=-1\n"
                  f"cat {quote(JMETER_REPORT)}/statistics.json",
                  variant="jmeter"),
            restart(ctx),
            *warm_up(ctx),          # one JVM, warmed once per round (by wrk); each variant then runs its own tool
        ]

    # --- live ---------------------------------------------------------------------------
    def skip_reasons(self, session, variant: Variant) -> list[str]:
        binary = variant.name
        if binary == "wrk2" and not session.tool.open_loop:
            return [f"wrk2 is not installed on the client ({session.tool.why or 'build it with --wrk2-source'})"]
        if binary == "wrk" and not session.tool.closed_loop:
            return ["the client has no closed-loop wrk: its `wrk` is wrk2 (it accepts --rate), so there is no "
                    "closed-loop run to compare (apt-get install wrk, and install wrk2 as wrk2)"]
        if binary not in ("wrk", "wrk2") and \
                session.client.run(f"command -v {quote(binary)}", check=False, timeout=15).exited != 0:
            return [f"{binary} is not installed on the client" + (
                " (scripts/bootstrap --load-tools installs JMeter 5.6.3 on this machine)" if binary == "jmeter"
                else "")]
        if binary == "jmeter":
            return jmeter_too_old(session.client)
        return []

    def load_tool(self, session, variant: str) -> str:
        return variant

    def multi_client(self, variant: str) -> bool:
        return variant not in ("ab", "jmeter")      # both measure from one client

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        if variant == "jmeter":
            upload(session, blocks["jmeter-plan"].text, JMETER_PLAN)
        elif variant == "siege":
            upload(session, blocks["siegerc"].text, SIEGE_RC)
        return None


def jmeter_too_old(client) -> list[str]:
    """Why the client's ``jmeter`` cannot run the plan (older than 5), else nothing."""
    out = client.run("jmeter -j /dev/null --version 2>&1", check=False, timeout=60).stdout
    found = re.findall(r"(?m)(\d+)\.(\d+)(?:\.\d+)?(?: r\d+)?\s*$", out)
    if found and int(found[-1][0]) < JMETER_MAJOR:
        return [f"the client's jmeter is {found[-1][0]}.{found[-1][1]}, which cannot load the step's test plan "
                f"(JMeter {JMETER_MAJOR}.x; Debian's 2.13 loads none on Debian 12): scripts/bootstrap "
                "--load-tools installs JMeter 5.6.3"]
    return []


def upload(session, text: str, target: str) -> None:
    """A file the step writes onto every client (the JMeter plan, siege's settings: siege runs on
    all of them at once), through Fabric (or a copy on this machine)."""
    fd, name = tempfile.mkstemp(suffix=".tunepath")
    local = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        for client in session.clients:
            client.run("mkdir -p ~/.tunepath", timeout=15)
            client.put(local, target)
    finally:
        local.unlink(missing_ok=True)


STEP = LoadGenerators()
