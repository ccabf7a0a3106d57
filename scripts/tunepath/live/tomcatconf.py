"""Tomcat configuration as data: ``server.xml`` edits and ``bin/setenv.sh``.

A :class:`TomcatConfig` describes one variant (access log on or off, Connector
attributes, an optional shared Executor, JVM options). :func:`render_server_xml`
always starts from the *original* ``server.xml`` (backed up once on the host), so
applying a configuration is idempotent and reverting is restoring the backup. The
result is validated before it is written: it must parse, keep its Service, Engine and
Host, keep the HTTP Connector, and use only Connector attributes Tomcat 11 knows.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace

from tunepath.errors import TunepathError
from tunepath.model.context import HostContext
from tunepath.model.shell import heredoc, path, quote

__all__ = ["open_examples_command", "TomcatConfig", "TlsConnector", "ConfigError", "TLS_DIR", "TLS_IMPLEMENTATIONS", "render_server_xml", "validate_server_xml", "render_setenv",
           "setenv_command",
           "CONNECTOR_ATTRIBUTES", "PROTOCOLS"]

ACCESS_LOG_CLASS = "org.apache.catalina.valves.AccessLogValve"
PROTOCOLS = {
    "HTTP/1.1": "NIO (the default for HTTP/1.1)",
    "org.apache.coyote.http11.Http11NioProtocol": "NIO",
    "org.apache.coyote.http11.Http11Nio2Protocol": "NIO2",
}
# Connector attributes a variant may set (Tomcat 11 HTTP connector; a typo is an error).
CONNECTOR_ATTRIBUTES = {
    "port", "protocol", "connectionTimeout", "redirectPort", "maxThreads", "minSpareThreads",
    "maxKeepAliveRequests", "maxConnections", "acceptCount", "executor", "keepAliveTimeout",
    "useVirtualThreads", "compression", "tcpNoDelay", "socket.directBuffer", "pollerThreadPriority",
    "acceptorThreadCount", "maxHttpHeaderSize", "disableUploadTimeout", "address",
}
EXECUTOR_ATTRIBUTES = {"name", "namePrefix", "maxThreads", "minSpareThreads", "maxIdleTime",
                       "prestartminSpareThreads", "maxQueueSize", "threadPriority", "daemon"}
NUMERIC = {"port", "connectionTimeout", "redirectPort", "maxThreads", "minSpareThreads", "maxKeepAliveRequests",
           "maxConnections", "acceptCount", "keepAliveTimeout", "maxIdleTime", "maxQueueSize"}


class ConfigError(TunepathError):
    pass


# the run's certificate and key, relative to CATALINA_BASE (Tomcat resolves them there); the
# directory is removed whenever the configuration is restored (Tomcat.restore_config)
TLS_DIR = "conf/tunepath-tls"
TLS_IMPLEMENTATIONS = {
    "jsse": "org.apache.tomcat.util.net.jsse.JSSEImplementation",
    "openssl": "org.apache.tomcat.util.net.openssl.panama.OpenSSLImplementation",   # FFM, Java 22+
}
OPENSSL_LISTENER = "org.apache.catalina.core.OpenSSLLifecycleListener"
TLS_ATTRIBUTES = {"maxKeepAliveRequests", "maxThreads", "connectionTimeout"}


@dataclass(frozen=True)
class TlsConnector:
    """An HTTPS Connector beside the HTTP one: NIO with TLS through ``implementation`` (``jsse``,
    or ``openssl``: OpenSSL through the FFM API, with Tomcat's OpenSSLLifecycleListener), serving
    the certificate in :data:`TLS_DIR`; ``attributes`` are further Connector attributes."""

    port: int = 8443
    implementation: str = "jsse"
    attributes: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.implementation not in TLS_IMPLEMENTATIONS:
            raise ConfigError(f"unknown TLS implementation {self.implementation!r} "
                              f"(known: {', '.join(TLS_IMPLEMENTATIONS)})")
        _check_attrs("HTTPS Connector", dict(self.attributes), TLS_ATTRIBUTES)

    def element(self) -> ET.Element:
        conn = ET.Element("Connector", {
            "port": str(self.port), "protocol": "org.apache.coyote.http11.Http11NioProtocol",
            "connectionTimeout": "20000", **dict(self.attributes), "SSLEnabled": "true",
            "sslImplementationName": self.class_name})
        conn.text = "\n        "
        host = ET.SubElement(conn, "SSLHostConfig")
        host.text, host.tail = "\n          ", "\n    "
        cert = ET.SubElement(host, "Certificate", {"certificateFile": f"{TLS_DIR}/cert.pem",
                                                   "certificateKeyFile": f"{TLS_DIR}/key.pem", "type": "EC"})
        cert.tail = "\n        "
        return conn

    @property
    def class_name(self) -> str:
        return TLS_IMPLEMENTATIONS[self.implementation]

    def with_port(self, port: int) -> "TlsConnector":
        return replace(self, port=int(port))

    def describe(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self.attributes)
        return f"HTTPS Connector on {self.port} ({self.implementation}{extra})"


@dataclass(frozen=True)
class TomcatConfig:
    access_log: bool = True
    connector: dict[str, str] = field(default_factory=dict)
    executor: dict[str, str] | None = None
    jvm_options: tuple[str, ...] = ()
    port: int = 8080          # the HTTP Connector's port in the original server.xml
    java_home: str | None = None   # a JDK other than the one on PATH (bin/setenv.sh sets JAVA_HOME)
    ajp_secret: str | None = None  # add an AJP/1.3 Connector on 127.0.0.1:ajp_port requiring this secret
    ajp_port: int = HostContext.ajp_port
    shutdown_port: int | None = None   # <Server port>: None keeps the file's own (8005 in Tomcat's)
    tls: TlsConnector | None = None    # an HTTPS Connector beside the HTTP one

    def describe(self) -> str:
        parts = []
        if not self.access_log:
            parts.append("AccessLogValve removed")
        if self.connector:
            parts.append("Connector " + ", ".join(f"{k}={v}" for k, v in self.connector.items()))
        if self.executor:
            parts.append("Executor " + ", ".join(f"{k}={v}" for k, v in self.executor.items()))
        if self.jvm_options:
            parts.append("JVM " + " ".join(self.jvm_options))
        if self.java_home:
            parts.append(f"JAVA_HOME {self.java_home}")
        if self.ajp_secret:
            parts.append(f"AJP connector on 127.0.0.1:{self.ajp_port} with a secret")
        if self.shutdown_port:
            parts.append(f"shutdown port {self.shutdown_port}")
        if self.tls:
            parts.append(self.tls.describe())
        return "; ".join(parts) or "stock configuration"

    def to_dict(self) -> dict:
        return {"access_log": self.access_log, "connector": dict(self.connector),
                "executor": dict(self.executor) if self.executor else None,
                "jvm_options": list(self.jvm_options), "port": self.port, "java_home": self.java_home,
                "ajp": bool(self.ajp_secret), "ajp_port": self.ajp_port,
                "shutdown_port": self.shutdown_port,      # the secret itself is never recorded
                **({"tls": {"port": self.tls.port, "implementation": self.tls.implementation,
                            "attributes": dict(self.tls.attributes)}} if self.tls else {})}


def _split_prolog(text: str) -> tuple[str, str]:
    m = re.search(r"<Server\b", text)
    if not m:
        raise ConfigError("server.xml has no <Server> element: is this Tomcat's conf/server.xml?")
    return text[:m.start()], text[m.start():]


def _parse(body: str) -> ET.Element:
    try:
        return ET.fromstring(body, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    except ET.ParseError as exc:
        raise ConfigError(f"server.xml does not parse: {exc}") from None


def _http_connector(service: ET.Element, port: int) -> ET.Element:
    for conn in service.findall("Connector"):
        if conn.get("port") == str(port) and not conn.get("protocol", "HTTP/1.1").startswith("AJP"):
            return conn
    raise ConfigError(f"server.xml has no HTTP Connector on port {port}")


def _check_attrs(kind: str, attrs: dict, allowed: set) -> None:
    for key, value in attrs.items():
        if key not in allowed:
            raise ConfigError(f"unknown {kind} attribute {key!r} (known: {', '.join(sorted(allowed))})")
        if key in NUMERIC and not re.fullmatch(r"-?\d+", str(value)):
            raise ConfigError(f"{kind} attribute {key}={value!r} must be a whole number")
    if kind == "Connector" and "protocol" in attrs and attrs["protocol"] not in PROTOCOLS:
        raise ConfigError(f"unsupported protocol {attrs['protocol']!r}; Tomcat 11 offers "
                          f"{', '.join(PROTOCOLS)} (the blocking and APR connectors are gone)")


def render_server_xml(original: str, config: TomcatConfig) -> str:
    """``original`` with ``config`` applied; never edits an already-edited file."""
    if config.access_log and not config.connector and not config.executor and not config.ajp_secret \
            and not config.shutdown_port and not config.tls:
        validate_server_xml(original, config.port)
        return original                      # the stock file, byte for byte
    prolog, body = _split_prolog(original)
    root = _parse(body)
    service = root.find("Service")
    if service is None:
        raise ConfigError("server.xml has no <Service>")
    _check_attrs("Connector", config.connector, CONNECTOR_ATTRIBUTES)
    conn = _http_connector(service, config.port)
    if not config.access_log:
        for host in root.iter("Host"):
            for valve in list(host.findall("Valve")):
                if valve.get("className") == ACCESS_LOG_CLASS:
                    host.remove(valve)
    for key, value in config.connector.items():
        conn.set(key, str(value))
    if config.shutdown_port:
        root.set("port", str(config.shutdown_port))
    if config.executor:
        _check_attrs("Executor", config.executor, EXECUTOR_ATTRIBUTES)
        name = config.executor.get("name", "tunepathPool")
        execu = ET.Element("Executor", {"name": name, **{k: str(v) for k, v in config.executor.items()}})
        execu.tail = "\n    "
        service.insert(list(service).index(conn), execu)
        conn.set("executor", name)
    if config.ajp_secret:
        ajp = ET.Element("Connector", ajp_attributes(config.ajp_secret, config.ajp_port))
        ajp.tail = "\n    "
        service.insert(list(service).index(conn) + 1, ajp)
    if config.tls:
        _add_tls(root, service, conn, config.tls)
    text = prolog + ET.tostring(root, encoding="unicode") + "\n"
    validate_server_xml(text, int(config.connector.get("port", config.port)))
    return text


def _add_tls(root: ET.Element, service: ET.Element, http: ET.Element, tls: TlsConnector) -> None:
    """The HTTPS Connector after the HTTP one; OpenSSL's listener where it serves TLS (Tomcat's
    server.xml carries it commented out)."""
    if any(c.get("port") == str(tls.port) for c in service.findall("Connector")):
        raise ConfigError(f"server.xml already has a Connector on port {tls.port}: choose another HTTPS port")
    conn = tls.element()
    conn.tail = "\n    "
    service.insert(list(service).index(http) + 1, conn)
    if tls.implementation == "openssl" and not any(l.get("className") == OPENSSL_LISTENER
                                                    for l in root.findall("Listener")):
        listener = ET.Element("Listener", {"className": OPENSSL_LISTENER})
        listener.tail = "\n  "
        listeners = root.findall("Listener")
        root.insert(list(root).index(listeners[-1]) + 1 if listeners else 0, listener)


AJP_PORT = HostContext.ajp_port      # Tomcat's own; a run on another HTTP port has its own (ports_for)


def ajp_attributes(secret: str, port: int = AJP_PORT) -> dict[str, str]:
    """Tomcat's AJP connector, on loopback only, refusing requests without the secret."""
    if not re.fullmatch(r"[A-Za-z0-9_-]{16,}", secret):
        raise ConfigError("the AJP secret must be at least 16 letters, digits, '-' or '_'")
    return {"protocol": "AJP/1.3", "address": "127.0.0.1", "port": str(port), "secretRequired": "true",
            "secret": secret, "redirectPort": "8443"}


def validate_server_xml(text: str, port: int = 8080) -> None:
    _, body = _split_prolog(text)
    root = _parse(body)
    service = root.find("Service")
    if service is None or service.find("Engine") is None or service.find("Engine/Host") is None:
        raise ConfigError("server.xml lost its Service, Engine or Host")
    conn = _http_connector(service, port)
    _check_attrs("Connector", {k: v for k, v in conn.attrib.items() if k != "SSLEnabled"}, CONNECTOR_ATTRIBUTES)
    executors = {e.get("name") for e in service.findall("Executor")}
    if conn.get("executor") and conn.get("executor") not in executors:
        raise ConfigError(f"Connector uses executor {conn.get('executor')!r}, which is not defined")


def render_setenv(config: TomcatConfig) -> str | None:
    """``bin/setenv.sh`` for the JVM options, or None when there is nothing to set (neither options
    nor a JDK). The JDK's line is the shell's to write (:func:`setenv_command`)."""
    if not config.jvm_options and not config.java_home:
        return None
    for opt in config.jvm_options:
        if not opt.startswith("-"):
            raise ConfigError(f"JVM option {opt!r} must start with '-'")
    lines = ["#!/bin/sh", "# written by tunepath; removed when the configuration is restored"]
    if config.jvm_options:
        lines.append(f"CATALINA_OPTS={quote(' '.join(config.jvm_options), 'JVM options')}")
    return "\n".join(lines) + "\n"


def setenv_command(home: str, config: TomcatConfig) -> str:
    """The shell command that writes (or removes) ``bin/setenv.sh`` for ``config``. A JDK goes in
    as the line ``JAVA_HOME=…`` that bash's ``printf %q`` quotes as it writes it: the file holds the
    JDK's path, a reader's ``$JAVA_HOME`` expanded too (written into a quoted here-document, the
    file would hold ``JAVA_HOME=$JAVA_HOME`` and pin nothing)."""
    text = render_setenv(config)
    target = path(home, "bin/setenv.sh", what="tomcat_home")
    if text is None:
        return f"rm -f {target}"
    command = heredoc(target, text)
    if config.java_home:
        command += f"\nprintf 'JAVA_HOME=%q\\n' {quote(config.java_home, 'java_home')} >> {target}"
    return command


def open_examples_command(context_xml: str) -> str:
    """The shell command that lets remote clients reach the examples webapp: its
    ``META-INF/context.xml`` (``context_xml``, a shell word) admits local clients only, through a
    RemoteAddrValve (Tomcat 11.0.10: a regular expression) or a RemoteCIDRValve (11.0.15 and later:
    networks, which refuses a regular expression and leaves the webapp undeployed, every request
    404). The command removes that valve, whichever it is and over however many lines it spans."""
    return ("sed -i '/<Valve className=\"org\\.apache\\.catalina\\.valves\\.Remote/{:a;/\\/>/!{N;ba};d}' "
            f"{context_xml}")
