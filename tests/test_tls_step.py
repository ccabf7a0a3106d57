"""The TLS step (issue 31, item 1): its server.xml, its ports, its commands and what it reads from
its checks. Real Tomcat serving HTTPS: tests/test_tls_tomcat.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunepath.evidence.store import Run, Verification
from tunepath.live.tomcatconf import (TLS_DIR, ConfigError, TlsConnector, TomcatConfig, render_server_xml,
                                      validate_server_xml)
from tunepath.model.context import HostContext, ports_for, tls_port_for
from tunepath.parse.tls import handshake, provider
from tunepath.steps import get_step
from tunepath.steps.tls import certificate_command, handshake_command, tls_table

pytestmark = pytest.mark.fast
DATA = Path(__file__).parent / "data" / "tls"
STOCK = ('<?xml version="1.0" encoding="UTF-8"?>\n<Server port="8005" shutdown="SHUTDOWN">\n'
         '  <Listener className="org.apache.catalina.startup.VersionLoggerListener" />\n'
         '  <Service name="Catalina">\n    <Connector port="8080" protocol="HTTP/1.1" connectionTimeout="20000" '
         'redirectPort="8443" />\n    <Engine name="Catalina" defaultHost="localhost">\n'
         '      <Host name="localhost" appBase="webapps" />\n    </Engine>\n  </Service>\n</Server>\n')


def _connectors(text: str):
    import xml.etree.ElementTree as ET
    root = ET.fromstring(text.split("?>", 1)[1])
    return root, root.find("Service").findall("Connector")


# --- server.xml -------------------------------------------------------------------------------
def test_the_https_connector_comes_after_the_http_one_with_its_implementation_and_certificate():
    text = render_server_xml(STOCK, TomcatConfig(tls=TlsConnector(port=8443, implementation="jsse")))
    root, (http, https) = _connectors(text)
    assert http.attrib == {"port": "8080", "protocol": "HTTP/1.1", "connectionTimeout": "20000",
                           "redirectPort": "8443"}
    assert https.get("port") == "8443" and https.get("SSLEnabled") == "true"
    assert https.get("sslImplementationName") == "org.apache.tomcat.util.net.jsse.JSSEImplementation"
    cert = https.find("SSLHostConfig/Certificate")
    assert cert.get("certificateFile") == f"{TLS_DIR}/cert.pem" and cert.get("type") == "EC"
    assert not [l for l in root.findall("Listener") if "OpenSSL" in l.get("className")]
    validate_server_xml(text)


def test_openssl_adds_its_listener_once_and_keeps_the_connections_limit_asked_for():
    tls = TlsConnector(implementation="openssl", attributes=(("maxKeepAliveRequests", "1"),))
    text = render_server_xml(STOCK, TomcatConfig(access_log=False, tls=tls))
    root, (_, https) = _connectors(text)
    listeners = [l.get("className") for l in root.findall("Listener")]
    assert listeners.count("org.apache.catalina.core.OpenSSLLifecycleListener") == 1
    assert https.get("maxKeepAliveRequests") == "1"
    assert https.get("sslImplementationName").endswith("openssl.panama.OpenSSLImplementation")


def test_a_port_taken_an_unknown_implementation_or_attribute_is_refused_in_words():
    with pytest.raises(ConfigError, match="already has a Connector on port 8080"):
        render_server_xml(STOCK, TomcatConfig(tls=TlsConnector(port=8080)))
    with pytest.raises(ConfigError, match="unknown TLS implementation 'boringssl'"):
        TlsConnector(implementation="boringssl")
    with pytest.raises(ConfigError, match="unknown HTTPS Connector attribute 'clientAuth'"):
        TlsConnector(attributes=(("clientAuth", "true"),))
    with pytest.raises(ConfigError, match="must be a whole number"):
        TlsConnector(attributes=(("maxKeepAliveRequests", "one"),))


def test_the_recorded_configuration_names_the_https_connector():
    config = TomcatConfig(tls=TlsConnector(port=9443, implementation="openssl"))
    assert config.to_dict()["tls"] == {"port": 9443, "implementation": "openssl", "attributes": {}}
    assert "HTTPS Connector on 9443 (openssl)" in config.describe()
    assert "tls" not in TomcatConfig().to_dict()


# --- ports ------------------------------------------------------------------------------------
@pytest.mark.parametrize("http", [8080, 8081, 16998, 16999, 32001, 32700, 32000, 1, 65535])
def test_the_https_port_is_tomcats_beside_8080_and_never_a_port_the_run_uses_already(http):
    tls = tls_port_for(http)
    assert tls == 8443 if http == 8080 else 32001 <= tls <= 32700
    assert tls != http and tls not in ports_for(http)


# --- commands -----------------------------------------------------------------------------------
def test_the_plan_makes_a_private_p256_certificate_and_sends_the_load_to_https():
    step, ctx = get_step("tls"), HostContext(warmup_s=30)
    blocks = {b.id: b for b in step.plan(ctx)}
    cert = blocks["certificate"].text
    assert "umask 077" in cert and "ec_paramgen_curve:prime256v1" in cert and "-nodes" in cert
    assert cert == certificate_command(ctx) and TLS_DIR in cert
    assert "https://${tomcat_ip}:8443/" in blocks["load"].text and "https://" in blocks["warm-up"].text
    assert "http://${tomcat_ip}:8080/" in blocks["load-http"].text
    assert "http://${tomcat_ip}:8080/" in blocks["warm-up-http"].text
    assert {b.variant for b in blocks.values() if b.id.startswith("connector-")} == {
        "jsse", "openssl", "jsse-reconnect", "openssl-reconnect"}
    assert 'maxKeepAliveRequests="1"' in blocks["connector-openssl-reconnect"].text
    assert "OpenSSLLifecycleListener" in blocks["connector-openssl"].text
    assert "OpenSSLLifecycleListener" not in blocks["connector-jsse"].text


def test_each_variant_configures_tomcat_on_the_runs_https_port_and_plain_http_has_none():
    step, ctx = get_step("tls"), HostContext(tls_port=32123)
    assert step.tomcat_config("jsse", ctx).tls == TlsConnector(port=32123, implementation="jsse")
    assert step.tomcat_config("openssl-reconnect", ctx).tls.attributes == (("maxKeepAliveRequests", "1"),)
    assert step.tomcat_config("http", ctx).tls is None
    assert step.load(ctx).url.startswith("https://") and ":32123/" in step.load(ctx).url
    assert "32123" in handshake_command(ctx) and "-brief" in handshake_command(ctx)
    assert [v.requires_java for v in step.variants] == [17, 22, 17, 22, 17]


# --- what the checks printed --------------------------------------------------------------------
def test_the_negotiated_protocol_and_cipher_are_read_from_openssls_brief_and_full_output():
    brief = (DATA / "s_client-brief.txt").read_text()
    h = handshake(brief)
    assert (h.protocol, h.cipher, h.key_exchange) == ("TLSv1.3", "TLS_AES_256_GCM_SHA384", "X25519")
    full = handshake("---\nNew, TLSv1.2, Cipher is ECDHE-ECDSA-AES128-GCM-SHA256\n")
    assert (full.protocol, full.cipher) == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")
    refused = handshake("connect:errno=111\n")
    assert (refused.protocol, refused.cipher) == (None, None)


def test_the_implementation_is_read_from_tomcats_log_for_the_https_port():
    log = (DATA / "catalina-ffm.txt").read_text()
    assert provider(log, 18443) == "OpenSSL through FFM (OpenSSL 3.0.19 27 Jan 2026)"
    assert provider(log, 18444) == "JSSE (the JDK's own)"
    assert provider(log, 9999) is None and provider("") is None


def test_the_table_has_a_row_per_checked_variant_from_the_runs_files(tmp_path):
    (tmp_path / "h.txt").write_text((DATA / "s_client-brief.txt").read_text())
    (tmp_path / "p.txt").write_text('INFO Initializing ProtocolHandler ["https-jsse-nio-8443"]\n')
    V = Verification
    run = Run("r", tmp_path, {}, HostContext(), None, verifications=[
        V("tls", "handshake-jsse", "client", "c", tmp_path / "h.txt"),
        V("tls", "provider-jsse", "server", "c", tmp_path / "p.txt"),
        V("gc", "handshake-openssl", "client", "c", tmp_path / "h.txt")])
    table = tls_table(run, get_step("tls").variants).data()
    assert [r["variant"] for r in table["rows"]] == ["jsse"]
    assert table["rows"][0]["cells"] == {"protocol": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384",
                                         "group": "X25519", "provider": "JSSE (the JDK's own)"}
    assert set(table["text_columns"]) == {c["key"] for c in table["columns"]}
    assert tls_table(Run("r", tmp_path, {}, HostContext(), None), get_step("tls").variants).analysis() is None
