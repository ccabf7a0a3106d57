"""A reader's commands: the path's variables in place of what differs from host to host.

A page prints each command block twice from the same step template: once for a reader's
context (:func:`reader_context`: ``$TOMCAT_HOME``, ``${tomcat_ip}`` … where the run had its own
directory, address, port, NIC and JDK) and, folded away, as the run executed it (its recorded
context). :func:`bindings` are the values the run gave those variables, read from its recorded
context; :func:`bind` puts them into a reader's text, which gives back the run's command exactly
(``tests/test_reader_commands.py`` checks that for every recorded run and block).

Values that are choices of the path (heap sizes, threads, rates, the CPUs a run kept online)
stay literal: they are what a step teaches, not where a host differs. :data:`VARIABLES` is the
one list the renderer, the set-up page (``{{< variables >}}``) and the tests share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tunepath.model.context import HostContext
from tunepath.model.shell import PLACEHOLDERS, PORT_PLACEHOLDER
from tunepath.versions import TOMCAT_VERSION

__all__ = ["Variable", "VARIABLES", "Binding", "reader_context", "path_context", "bindings", "bind", "used"]


@dataclass(frozen=True)
class Variable:
    """One of the path's variables: the context field it stands for, where it is set, what it means."""

    name: str          # the shell variable: TOMCAT_HOME, tomcat_ip …
    field: str         # the HostContext field whose value it replaces
    hosts: str         # where a reader sets it: "server", "client" or "server and client"
    meaning: str
    example: str       # a value, for the export line of the set-up page

    @property
    def shell(self) -> str:
        """How the commands write it: ``$TOMCAT_HOME`` (environment), ``${tomcat_ip}`` (the path's own)."""
        return f"${self.name}" if self.name.isupper() else f"${{{self.name}}}"

    def to_data(self) -> dict:
        return {"name": self.name, "shell": self.shell, "hosts": self.hosts, "meaning": self.meaning,
                "example": self.example, "export": f"export {self.name}={self.example}"}


VARIABLES: tuple[Variable, ...] = (
    Variable("TOMCAT_HOME", "tomcat_home", "server",
             "the directory Tomcat is unpacked in (the set-up step unpacks it in your home directory)",
             f"~/apache-tomcat-{TOMCAT_VERSION}"),
    Variable("JAVA_HOME", "java_home", "server",
             "the JDK Tomcat runs on: the line below finds the default java's; give another JDK's directory to "
             "run Tomcat on that one (the JVM step writes it into bin/setenv.sh)",
             '"$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")"'),
    Variable("net", "nic", "server", "the server's network interface that carries the load (ip -br link lists them)",
             "eth0"),
    Variable("tomcat_ip", "server_address", "client",
             "the server's address as the client reaches it (an IP address or a host name)", "192.0.2.10"),
    Variable("WRK2", "load_generator", "client",
             "the wrk2 binary on the client (the set-up step builds it as ~/.tunepath/bin/wrk2; the original path "
             "installed it as wrk, the name Debian gives its closed-loop wrk)", "~/.tunepath/bin/wrk2"),
    Variable("tomcat_port", "port", "server and client",
             "Tomcat's HTTP port (8080 in the stock conf/server.xml); the proxy's httpd.conf reads it from the "
             "server's environment", "8080"),
)
assert {v.name for v in VARIABLES} <= PLACEHOLDERS and PORT_PLACEHOLDER == VARIABLES[-1].shell


@dataclass(frozen=True)
class Binding:
    """The value one run gave a variable. ``value`` None: the run did not use it (no JDK of its own);
    ``recorded`` False: the run's record names only the variable (a reference run's default, or a
    JDK path masked as ``$JAVA_HOME``)."""

    name: str
    shell: str
    value: str | None
    recorded: bool
    note: str = ""

    def to_data(self) -> dict:
        return {"name": self.name, "shell": self.shell, "value": self.value, "recorded": self.recorded,
                "note": self.note}


def reader_context(ctx: HostContext) -> HostContext:
    """``ctx`` with the path's variables where a host has its own value. A run without a JDK of
    its own (the server's default java) keeps none; a run whose clients were on the server keeps
    that fact (``loopback``), which decides where the proxy listens."""
    values = {v.field: v.shell for v in VARIABLES}
    if not ctx.java_home:
        values.pop("java_home")
    if not ctx.open_loop:         # Debian's closed-loop wrk is `wrk` everywhere: no variable for it
        values.pop("load_generator")
    return replace(ctx, **values, loopback=ctx.on_loopback)


def path_context(ctx: HostContext) -> HostContext:
    """What a page prints for a reader: :func:`reader_context` without the run's own choices. No CPU
    pinning (a lab's server and client share one kernel), the path's CPU sets and queue count (the
    original's host), the path's load (the original's threads, connections and rate) in place
    of a probed test rate, and Tomcat's conventional ports in place of a run's own. A rate sweep keeps its points, which are its variants. A run's literal
    commands stay in its folded "as run" block."""
    path = HostContext()
    return replace(reader_context(ctx), server_pin_cpus=(), client_pin_cpus=(), fixed_cpus=(),
                   total_cpus=path.total_cpus, baseline_cpus=path.baseline_cpus, numa_cpus=path.numa_cpus,
                   nic_queues=path.nic_queues, threads=path.threads, connections=path.connections,
                   rate=path.rate, sweep_rates=ctx.rates, sweep_warmup_rate=ctx.warmup_rate,
                   smoke_threads=path.smoke_threads, smoke_connections=path.smoke_connections,
                   smoke_rate=path.smoke_rate, shutdown_port=path.shutdown_port, ajp_port=path.ajp_port,
                   proxy_port=path.proxy_port, tls_port=path.tls_port)


def _note(var: Variable, value: str) -> str:
    if var.name == "JAVA_HOME":
        return "a JDK outside /usr and /opt: its path is masked in the record"
    return "not recorded: the run's context keeps the variable"


def bindings(ctx: HostContext, recorded_fields=None) -> list[Binding]:
    """The values the run of ``ctx`` gave the path's variables, in :data:`VARIABLES`' order.
    ``recorded_fields``: the fields its record names (None: all); another field's value is the
    path's default, and its note says so."""
    out = []
    for var in VARIABLES:
        value = getattr(ctx, var.field)
        if var.field == "load_generator" and not ctx.open_loop:
            out.append(Binding(var.name, var.shell, None, True, "none: this run drove the load with Debian's "
                               "closed-loop wrk"))
            continue
        if value is None:
            out.append(Binding(var.name, var.shell, None, True, "none: the server's default java"))
            continue
        text = str(value)
        recorded = text not in (var.shell, f"${{{var.name}}}", f"${var.name}")
        note = "" if recorded else _note(var, text)
        if recorded and recorded_fields is not None and var.field not in recorded_fields:
            note = "the path's default: the run's record does not name it"
        out.append(Binding(var.name, var.shell, text, recorded, note))
    return out


def _pattern(names) -> re.Pattern:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"\$\{{({alternatives})\}}|\$({alternatives})(?![A-Za-z0-9_])")


def bind(text: str, values: dict[str, str]) -> str:
    """``text`` with each variable of ``values`` (``$TOMCAT_HOME``, ``${tomcat_ip}``) replaced by its
    value, as the shell would expand it; other ``$`` words stay."""
    if not values:
        return text
    return _pattern(values).sub(lambda m: values[m.group(1) or m.group(2)], text)


def used(text: str) -> list[str]:
    """The path's variables ``text`` uses, in :data:`VARIABLES`' order."""
    found = {m.group(1) or m.group(2) for m in _pattern([v.name for v in VARIABLES]).finditer(text)}
    return [v.name for v in VARIABLES if v.name in found]
