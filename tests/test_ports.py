"""Issue 30, item 3: runs never collide on Tomcat's ports. Beside HTTP port 8080 a run uses Tomcat's
conventional shutdown, AJP and proxy ports (8005, 8009, 8081); on any other HTTP port it uses three
of its own, derived from it, so two runs on one machine (each on its own HTTP port, as they must
be), or a run and the test suite, never share one. The reader's commands keep the conventional ones."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tunepath.live.tomcatconf import TomcatConfig, render_server_xml
from tunepath.model.context import HostContext, ports_for
from tunepath.model.reader import path_context
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

STOCK = """<?xml version="1.0" encoding="UTF-8"?>
<Server port="8005" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="8080" protocol="HTTP/1.1" connectionTimeout="20000" redirectPort="8443" />
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="true" autoDeploy="true" />
    </Engine>
  </Service>
</Server>
"""


def test_beside_8080_the_ports_are_tomcats_own_and_elsewhere_a_runs_own():
    assert ports_for(8080) == (8005, 8009, 8081)
    for start in (1024, 10000, 18080, 24000, 58000):   # 10000 and 24000: 16998, 16999 and 27998 among them
        seen: dict[int, int] = {}
        for http in range(start, start + 7333):              # any HTTP ports less than 7,333 apart …
            for p in (ports := ports_for(http)):
                assert p not in seen, (http, p, seen.get(p))  # … never share a port
                seen[p] = http
            if http != 8080:
                assert all(10000 <= p < 32768 for p in ports) and not {8005, 8009, 8081} & set(ports)


def test_for_every_http_port_its_four_ports_are_distinct():
    """Census (docs/census.md): HTTP ports 16999, 27998 and 16998 derived their own port as Tomcat's
    shutdown, AJP or proxy port, and `tunepath run --check-options` called them valid."""
    for http in range(1, 65536):
        ports = ports_for(http)
        assert len({http, *ports}) == 4, (http, ports)
        assert http == 8080 or all(10000 <= p <= 32000 for p in ports), (http, ports)
    for http in (16998, 16999, 27998):                     # the three that fell among their own
        assert set(ports_for(http)) & {31999, 32000}
        for neighbor in (http - 1, http + 1):               # the spare differs from a neighbor's ports
            assert not set(ports_for(http)) & set(ports_for(neighbor)), (http, neighbor)


def test_ports_away_from_the_three_that_fell_among_their_own_are_as_they_were():
    """Runs already recorded keep what their context says: only 16998, 16999 and 27998 changed."""
    assert ports_for(8005) == (12016, 12017, 12018) and ports_for(18180) == (20542, 20543, 20544)
    for http in range(1, 65536):
        if http not in (8080, 16998, 16999, 27998):
            base = 10000 + 3 * (http % 7333)
            assert ports_for(http) == (base, base + 1, base + 2), http


def test_a_runs_shutdown_and_ajp_ports_reach_server_xml_and_the_stock_file_stays_byte_for_byte():
    assert render_server_xml(STOCK, TomcatConfig()) == STOCK
    text = render_server_xml(STOCK, TomcatConfig(shutdown_port=31000, ajp_secret="s" * 20, ajp_port=31001))
    assert '<Server port="31000" shutdown="SHUTDOWN">' in text and 'port="31001"' in text and "8005" not in text


def _ctx(http: int) -> HostContext:
    shutdown, ajp, proxy = ports_for(http)
    return replace(HostContext(), port=http, shutdown_port=shutdown, ajp_port=ajp, proxy_port=proxy)


def test_the_proxy_step_uses_the_runs_ports_and_the_reader_sees_tomcats_own():
    ctx = _ctx(18080)
    _, ajp, proxy = ports_for(18080)
    run = {b.id: b.text for b in REGISTRY.get("proxy").plan(ctx)}
    assert f'port="{ajp}"' in run["ajp-connector"] and f"Listen 127.0.0.1:{proxy}" in run["httpd-http"] \
        or f"Listen {proxy}" in run["httpd-http"]
    assert f"ajp://127.0.0.1:{ajp}/" in run["httpd-ajp"] and f".port={ajp}" in run["httpd-jk"]
    assert run["load-http"].endswith(f":{proxy}/examples/servlets/servlet/HelloWorldExample")
    reader = {b.id: b.text for b in REGISTRY.get("proxy").plan(path_context(ctx))}
    assert 'port="8009"' in reader["ajp-connector"] and "ajp://127.0.0.1:8009/" in reader["httpd-ajp"]
    assert reader["load-http"].endswith(":8081/examples/servlets/servlet/HelloWorldExample")
    assert str(proxy) not in "".join(reader.values()) and str(ajp) not in "".join(reader.values())
