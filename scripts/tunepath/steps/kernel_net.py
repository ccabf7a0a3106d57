"""Step: the kernel's network settings — the listen backlog (``net.core.somaxconn``,
``net.ipv4.tcp_max_syn_backlog`` and the connector's ``acceptCount``), the per-CPU receive backlog
(``net.core.netdev_max_backlog``) and TIME_WAIT reuse on the clients (``net.ipv4.tcp_tw_reuse``).

These settings act when connections open and close, so every variant closes the connection after
each response (``maxKeepAliveRequests="1"``): each request pays for a new connection, the case where
they can matter. Each variant changes one thing against the stock one (the backlog variant changes
the kernel's two limits with the ``acceptCount`` they cap).

A variant's sysctls are set before each of its measurements, and the step's other sysctls put back
to their saved values (:mod:`tunepath.live.sysctls`), so that interleaved variants each run under
their own settings; they need ``--apply``, as every host change does. The run records the values
before the step, during each variant and after it, on the server and on the clients; the listen-queue
overflows (``nstat``) around each variant's first measurement; and where the TIME_WAIT sockets were
left (``ss``), which says on which side ``tcp_tw_reuse`` could act.
"""

from __future__ import annotations

from tunepath.analysis.factstable import Column, FactsRow, FactsTable
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.live.irqs import pin_command
from tunepath.model.plan import Block, Sysctl, Variant
from tunepath.parse.netstat import count, increase
from tunepath.publish import formatting as fmt
from tunepath.steps.base import Step
from tunepath.steps.commands import connector_xml, load_blocks, restart

__all__ = ["STEP", "SETTINGS", "CONNECTOR"]

ONE_REQUEST = {"maxKeepAliveRequests": "1"}
IRQS = "irq-affinity"          # the variant that pins the NIC's interrupts (live/irqs), not a sysctl
BACKLOG = "65535"
# variant → its connector attributes (beside ONE_REQUEST) and its kernel settings
CONNECTOR = {"stock": {}, "accept-count": {"acceptCount": "4096"}, "backlogs": {"acceptCount": BACKLOG},
             "netdev-backlog": {}, "tw-reuse": {}, IRQS: {}}
SETTINGS = {
    "backlogs": (Sysctl("net.core.somaxconn", BACKLOG), Sysctl("net.ipv4.tcp_max_syn_backlog", BACKLOG)),
    "netdev-backlog": (Sysctl("net.core.netdev_max_backlog", "16384"),),
    "tw-reuse": (Sysctl("net.ipv4.tcp_tw_reuse", "1", "client"),),
}
SERVER_NAMES = ("net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.core.netdev_max_backlog")
CLIENT_NAMES = ("net.ipv4.tcp_tw_reuse",)
OVERFLOWS = "nstat -asz TcpExtListenOverflows TcpExtListenDrops"
TIME_WAIT = "ss -Htan state time-wait | wc -l"
TOMCAT_ACCEPT_COUNT = "100"        # Tomcat's default acceptCount


class KernelNetwork(Step):
    name = "kernel-network"
    title = "Kernel network settings: listen backlog, receive backlog and TIME_WAIT reuse"
    why = ("Measures the kernel's network settings that performance guides for web servers raise: the listen "
           "backlog (`net.core.somaxconn` and `net.ipv4.tcp_max_syn_backlog`, with the connector's "
           "`acceptCount`, which Tomcat passes to the kernel and the kernel caps at `somaxconn`), the per-CPU "
           "receive backlog (`net.core.netdev_max_backlog`) and, on the clients, `net.ipv4.tcp_tw_reuse`. They "
           "act when connections open and close, so every variant closes each connection after one response "
           "(`maxKeepAliveRequests=\"1\"`) and each request pays for a new connection. Each variant changes one "
           "setting against the stock one.")
    change = ("Raise Tomcat's `acceptCount` (100 by default) where many connections open at once, and the kernel's "
              "`net.core.somaxconn`, which caps it, only where your measurement shows the queue overflowing: "
              "`sudo sysctl -w net.core.somaxconn=65535`.")
    avoid = ("Where clients keep their connections open (the other steps' load), none of these settings is "
             "reached. `sysctl -w` lasts until the next reboot; a file in `/etc/sysctl.d/` keeps it.")
    variants = (
        Variant("stock", "As found", "the kernel's settings as found, Tomcat's acceptCount (100)"),
        Variant("accept-count", "acceptCount 4096", 'acceptCount="4096", within the kernel\'s somaxconn'),
        Variant("backlogs", f"Backlogs {BACKLOG}", f"somaxconn and tcp_max_syn_backlog {BACKLOG}, "
                f'acceptCount="{BACKLOG}"'),
        Variant("netdev-backlog", "netdev_max_backlog 16384", "net.core.netdev_max_backlog 16384 on the server"),
        Variant("tw-reuse", "Clients reuse TIME_WAIT", "net.ipv4.tcp_tw_reuse 1 on every client"),
        Variant(IRQS, "NIC interrupts on its node", "irqbalance stopped, the NIC's interrupts pinned to the CPUs "
                "of its NUMA node"),
    )
    verifications = ("java-version",)
    disruptive_needs = {**{v: (f"sysctl-{v}",) for v in SETTINGS}, IRQS: ("pin-irqs",)}
    measured_changes = frozenset(b for needs in disruptive_needs.values() for b in needs)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant not in CONNECTOR:
            return super().config(variant, ctx)
        return TomcatConfig(access_log=False, connector={**ONE_REQUEST, **CONNECTOR[variant]})

    def plan(self, ctx: HostContext) -> list[Block]:
        # the show blocks belong to the first variant, so the plan does not run them (prepare_live reads the values)
        blocks = [Block("show-sysctls", "server", "The server's current values",
                        f"sysctl {' '.join(SERVER_NAMES)}", variant="stock"),
                  Block("show-sysctls-client", "client", "Each client's current value",
                        f"sysctl {' '.join(CLIENT_NAMES)}", variant="stock")]
        for v in self.variants:
            if CONNECTOR[v.name] or v.name == "stock":
                blocks.append(Block(f"connector-{v.name}", "server", f"{v.label}: the HTTP Connector in "
                                    f"{ctx.tomcat_home}/conf/server.xml",
                                    connector_xml({**ONE_REQUEST, **CONNECTOR[v.name]}), lang="xml", variant=v.name))
            if v.name in SETTINGS:
                host = SETTINGS[v.name][0].host
                blocks.append(Block(f"sysctl-{v.name}", host, f"{v.label}: on {'every client' if host == 'client' else 'the server'}",
                                    "\n".join(s.command for s in SETTINGS[v.name]), disruptive=True, variant=v.name))
        blocks.append(Block("pin-irqs", "server", f"{self.label(IRQS, ctx)}: on the server",
                            pin_command(ctx.nic, ctx.numa_cpus), disruptive=True, variant=IRQS))
        return [*blocks, restart(ctx), *load_blocks(ctx, self.load(ctx)),
                Block("show-overflows", "server", "Listen-queue overflows since boot", OVERFLOWS, variant="stock"),
                Block("show-time-wait", "server", "Sockets in TIME_WAIT (on the server, then on a client)",
                      TIME_WAIT, variant="stock")]

    def prepare_live(self, session) -> None:
        """The values before the step, on the server and on the first client."""
        _record_values(session, self.name, "before")

    def run_live(self, session) -> None:
        """The standard flow, then the step's settings back on every host, and the values after it."""
        from tunepath.live import irqs
        from tunepath.live.execute import standard_flow
        from tunepath.live.sysctls import put_back, put_back_all

        standard_flow(self, session)
        if session.options.apply:
            back = put_back(session.server) + irqs.put_back(session.server) + put_back_all(session.clients)
            session.recorder.note_put_back(back, f"When {self.name} ended", [self.name])
        _record_values(session, self.name, "after")

    def before_start(self, session, variant: str, repetition: int) -> None:
        """The variant's sysctls set, the others the step changes back to their saved values; the values
        recorded before its first measurement."""
        from tunepath.live import irqs
        from tunepath.live.sysctls import switch

        if not session.options.apply:
            return
        touched = [s for settings in SETTINGS.values() for s in settings]
        wanted, known = SETTINGS.get(variant, ()), {}
        for role, hosts in (("server", [session.server]), ("client", session.clients)):
            for host in hosts:
                values = switch(host, role, wanted, touched)
                known.setdefault(role, values)          # the server's, and the first client's
        if variant == IRQS:
            irqs.pin(session.server, session.ctx.nic, session.ctx.numa_cpus)
        else:                     # the saved affinities back (if the IRQ variant ran), kept for its next round
            irqs.put_back(session.server, forget=False)
        if repetition == 1:
            _record_values(session, self.name, variant, known)

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        """Around the variant's first measurement (with its warm-up): the listen-queue counters, then where
        the TIME_WAIT sockets are."""
        if repetition > 1:
            return None
        before = session.server.run(OVERFLOWS, check=False, timeout=30).stdout

        def after() -> None:
            rec = session.recorder
            now = session.server.run(OVERFLOWS, check=False, timeout=30).stdout
            rec.verification(self.name, f"overflows-{variant}", "server", OVERFLOWS,
                             f"# before the warm-up\n{before}# after the measurement\n{now}")
            for role, host in (("server", session.server), ("client", session.client)):
                r = host.run(TIME_WAIT, check=False, timeout=30)
                rec.verification(self.name, f"time-wait-{variant}" + ("-client" if role == "client" else ""), role,
                                 TIME_WAIT, r.stdout or "(no output)\n")
        return after

    def analysis(self, result, run) -> dict | None:
        return kernel_table(run, self.variants).analysis()


def _record_values(session, step: str, when: str, known: dict | None = None) -> None:
    """The step's settings on the server and the first client, recorded as ``sysctls-<when>``; ``known``:
    the values by role just read (by :func:`~tunepath.live.sysctls.switch`), else they are read."""
    from tunepath.live.sysctls import listing, read_values

    rec, known = session.recorder, known or {}
    for role, host, names, suffix in (("server", session.server, SERVER_NAMES, ""),
                                      ("client", session.client, CLIENT_NAMES, "-client")):
        values = known.get(role) or read_values(host, names)
        rec.verification(step, f"sysctls-{when}{suffix}", role, f"sysctl {' '.join(names)}",
                         listing({n: values.get(n) for n in names}))


def _value(text: str | None, name: str) -> str | None:
    for line in (text or "").splitlines():
        key, sep, value = line.partition(" = ")
        if sep and key.strip() == name:
            return value.strip()
    return None


def kernel_table(run, variants) -> FactsTable:
    """Per measured variant of ``run``: the listen queue Tomcat got, the overflows around its first
    measurement, and the TIME_WAIT sockets on each side, from the run's recorded checks."""
    step, rows = "kernel-network", []
    before = run.verification_text(step, "sysctls-before")
    for v in variants:
        overflows = run.verification_text(step, f"overflows-{v.name}")
        if overflows is None:
            continue
        during = run.verification_text(step, f"sysctls-{v.name}") or before
        accept = CONNECTOR[v.name].get("acceptCount", TOMCAT_ACCEPT_COUNT)
        cap = _value(during, "net.core.somaxconn")
        queue = min(int(accept), int(cap)) if cap and cap.isdigit() else None
        text, _, after = overflows.partition("# after the measurement")
        grew = increase(text, after, "TcpExtListenOverflows")
        tw = [count(run.verification_text(step, f"time-wait-{v.name}{suffix}") or "") for suffix in ("", "-client")]
        figures = {"queue": queue, "overflows": grew, "tw_server": tw[0], "tw_client": tw[1]}
        rows.append(FactsRow(v.name, v.label, {k: fmt.count(n) if n is not None else fmt.NA
                                               for k, n in figures.items()}))
    return FactsTable((Column("queue", "Listen queue"), Column("overflows", "Overflows"),
                       Column("tw_server", "TIME_WAIT, server"), Column("tw_client", "TIME_WAIT, client")),
                      tuple(rows),
                      "Listen queue: the smaller of the connector's acceptCount and the server's net.core.somaxconn "
                      "as recorded during the variant. Overflows: connections the full listen queue turned away "
                      "(nstat's TcpExtListenOverflows) during the variant's warm-up and first measurement. "
                      "TIME_WAIT: sockets left in that state after it (ss), on the server and on the first client.")


STEP = KernelNetwork()
