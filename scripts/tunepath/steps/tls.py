"""Step: HTTPS — TLS through the JDK's JSSE or through OpenSSL by FFM, with long-lived connections
and with a new connection (and handshake) per request, beside plain HTTP.

Every TLS variant adds one HTTPS Connector (NIO) beside Tomcat's HTTP one, on ``tls_port`` (8443
beside 8080), serving a certificate made for the run: ECDSA P-256, written with umask 077 under
``conf/tunepath-tls`` and removed with the rest of the configuration when the step ends, fails or is
interrupted (:meth:`tunepath.live.tomcat.Tomcat.restore_config`). The load is the path's, sent to
``https://``; the plain-HTTP variant keeps its own load and warm-up. Before each TLS variant's first
measurement the run records what a client negotiates (``openssl s_client -brief`` on the client) and
which implementation Tomcat's log names for the connector.
"""

from __future__ import annotations

from tunepath.analysis.factstable import Column, FactsRow, FactsTable
from tunepath.live.tomcatconf import TLS_DIR, TlsConnector, TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.load import load_spec
from tunepath.model.plan import Block, Variant
from tunepath.model.shell import number, quote
from tunepath.parse.tls import handshake, provider
from tunepath.publish import formatting as fmt
from tunepath.steps.base import Step
from tunepath.steps.commands import element, load_blocks, restart, tomcat_path, warm_up

__all__ = ["STEP"]

PLAIN = "http"
ONE_REQUEST = (("maxKeepAliveRequests", "1"),)       # Tomcat closes the connection after each response
TLS = {
    "jsse": TlsConnector(implementation="jsse"),
    "openssl": TlsConnector(implementation="openssl"),
    "jsse-reconnect": TlsConnector(implementation="jsse", attributes=ONE_REQUEST),
    "openssl-reconnect": TlsConnector(implementation="openssl", attributes=ONE_REQUEST),
}
LIBSSL = r"libssl\.so\.3"        # the OpenSSL Tomcat 11's FFM code binds to
CHECK_LIBSSL = f"(/sbin/ldconfig -p 2>/dev/null || ldconfig -p) | grep -o '{LIBSSL}' | head -1"


def certificate_command(ctx: HostContext) -> str:
    """A throwaway self-signed certificate and key for the benchmark, readable by its owner only."""
    where = tomcat_path(ctx, TLS_DIR)
    return (f"mkdir -p {where} && cd {where} && (umask 077 && openssl req -x509 -newkey ec "
            "-pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj '/CN=tunepath benchmark' "
            "-keyout key.pem -out cert.pem)")


def handshake_command(ctx: HostContext) -> str:
    """What a client negotiates with the HTTPS connector, in openssl's brief form."""
    target = f"{ctx.server_address}:{number(ctx.tls_port, 'TLS port')}"
    return f"openssl s_client -connect {quote(target, 'address')} -brief </dev/null 2>&1 | head -n 12"


class Tls(Step):
    name = "tls"
    title = "HTTPS: JSSE or OpenSSL, and what a handshake costs"
    why = ("Serves the same servlet over HTTPS through Tomcat's two TLS implementations: the JDK's own JSSE, and "
           "OpenSSL through Java's FFM API (Tomcat 11 on Java 22 or later, with the system's libssl; no Tomcat "
           "Native library). Connections stay open as in the other steps, so the figures show the steady cost of "
           "encryption; two more variants close each connection after one response (`maxKeepAliveRequests=\"1\"`), "
           "so every request pays for a new connection and its TLS handshake (wrk2 offers to resume its TLS "
           "session on each new connection, so the handshake is the abbreviated one where the server resumes). "
           "Plain HTTP is measured beside them, against the same Tomcat.")
    change = ("Terminate TLS in Tomcat with `sslImplementationName=\"org.apache.tomcat.util.net.openssl.panama."
              "OpenSSLImplementation\"` and Tomcat's `OpenSSLLifecycleListener` where the JDK is 22 or later and "
              "your measurement favors it; otherwise keep JSSE. Let clients keep their connections open.")
    avoid = ("Where a proxy or load balancer in front of Tomcat terminates TLS, Tomcat's implementation does not "
             "matter. The OpenSSL variant needs Java 22 or later and libssl 3 on the server.")
    variants = (
        Variant("jsse", "JSSE", "HTTPS Connector, JSSEImplementation, connections kept alive"),
        Variant("openssl", "OpenSSL (FFM)", "HTTPS Connector, OpenSSLImplementation through FFM, "
                "OpenSSLLifecycleListener, connections kept alive", requires_java=22),
        Variant("jsse-reconnect", "JSSE, a new connection per request",
                "JSSE with maxKeepAliveRequests=\"1\": a new connection and TLS handshake for every request"),
        Variant("openssl-reconnect", "OpenSSL (FFM), a new connection per request",
                "OpenSSL through FFM with maxKeepAliveRequests=\"1\"", requires_java=22),
        Variant(PLAIN, "Plain HTTP", "the HTTP Connector on port 8080, no TLS"),
    )
    answer_variants = ("openssl", "jsse-reconnect", PLAIN)
    verifications = ("java-version",)

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in TLS:
            return TomcatConfig(access_log=False, tls=TLS[variant].with_port(ctx.tls_port))
        if variant == PLAIN:
            return TomcatConfig(access_log=False)
        return super().config(variant, ctx)

    def load(self, ctx: HostContext):
        """The path's load, sent to the HTTPS connector."""
        return load_spec(ctx).with_(url=ctx.https_url)

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block("certificate", "server", "A certificate for the benchmark: ECDSA P-256, readable by you only "
                        "(a production server uses its own)", certificate_command(ctx))]
        for v in self.variants:
            tls = self.tomcat_config(v.name, ctx).tls
            if tls:
                blocks.append(Block(f"connector-{v.name}", "server", f"{v.label}: the HTTPS Connector in "
                                    f"{ctx.tomcat_home}/conf/server.xml", tls_xml(tls), lang="xml", variant=v.name))
        plain = load_spec(ctx)
        return [*blocks, restart(ctx), *load_blocks(ctx, self.load(ctx)),
                *warm_up(ctx, plain, f"warm-up-{PLAIN}"),
                Block(f"load-{PLAIN}", "client", "The same load over plain HTTP", plain.command(), variant=PLAIN)]

    def skip_reasons(self, session, variant: Variant) -> list[str]:
        if variant.name not in TLS or TLS[variant.name].implementation != "openssl":
            return []
        found = session.server.run(CHECK_LIBSSL, check=False, timeout=30).stdout.strip()
        return [] if found else ["no libssl.so.3 on the server (install OpenSSL 3's library, libssl3 on Debian)"]

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        """Before a TLS variant's first measurement: what a client negotiates, and the implementation
        Tomcat's log names for the connector (since this start)."""
        if variant not in TLS or repetition > 1:
            return None
        ctx, rec = session.ctx, session.recorder
        command = handshake_command(ctx)
        r = session.client.run(command, check=False, timeout=30, as_written=True)
        rec.verification(self.name, f"handshake-{variant}", "client", command, r.stdout + r.stderr)
        log = session.tomcat.file("logs/catalina.out")
        command = (f"tail -c +{int(session.tomcat.log_offset) + 1} {log} | "
                   "grep -E 'ProtocolHandler \\[\"https-|OpenSSL successfully initialized' | head -n 4")
        r = session.server.run(command, check=False, timeout=30)
        rec.verification(self.name, f"provider-{variant}", "server", command, r.stdout or "(no line)\n")
        return None

    def analysis(self, result, run) -> dict | None:
        return tls_table(run, self.variants).analysis()


def tls_xml(tls: TlsConnector) -> str:
    """The Connector a reader adds to server.xml (and the listener OpenSSL needs)."""
    attrs = {"port": str(tls.port), "protocol": "org.apache.coyote.http11.Http11NioProtocol",
             "SSLEnabled": "true", **dict(tls.attributes), "sslImplementationName": tls.class_name}
    opening = element("Connector", attrs, indent="")[:-3] + ">"
    text = (f'{opening}\n    <SSLHostConfig>\n        <Certificate certificateFile="{TLS_DIR}/cert.pem"\n'
            f'                     certificateKeyFile="{TLS_DIR}/key.pem" type="EC" />\n    </SSLHostConfig>\n'
            "</Connector>")
    if tls.implementation == "openssl":
        text = ("<!-- with the other Listeners at the top of server.xml -->\n"
                '<Listener className="org.apache.catalina.core.OpenSSLLifecycleListener" />\n\n' + text)
    return text


def tls_table(run, variants) -> FactsTable:
    """Per TLS variant of ``run``: the protocol and cipher a client negotiated and the implementation
    Tomcat named, from the run's recorded checks."""
    rows = []
    for v in variants:
        shake, named = run.verification_text("tls", f"handshake-{v.name}"), run.verification_text("tls", f"provider-{v.name}")
        if shake is None and named is None:
            continue
        h = handshake(shake or "")
        rows.append(FactsRow(v.name, v.label, {
            "protocol": h.protocol or fmt.NA, "cipher": h.cipher or fmt.NA, "group": h.key_exchange or fmt.NA,
            "provider": provider(named or "", run.context.tls_port) or fmt.NA}))
    return FactsTable((Column("protocol", "Protocol"), Column("cipher", "Cipher"), Column("group", "Key exchange"),
                       Column("provider", "Implementation")), tuple(rows),
                      "Recorded before each variant's first measurement: `openssl s_client -brief` on the client, "
                      "and the HTTPS connector's protocol handler as Tomcat's log names it.")


STEP = Tls()
