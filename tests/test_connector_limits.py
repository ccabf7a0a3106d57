"""The connector-limits step: each variant changes one attribute of the baseline's connector
change, on the stock connector, and "all-four" is exactly the baseline's change."""

from __future__ import annotations

import pytest

from tunepath.live.tomcatconf import render_server_xml
from tunepath.model.context import HostContext
from tunepath.steps import get_step
from tunepath.steps.baseline import tuned
from tunepath.steps.connector_limits import ATTRIBUTES

pytestmark = pytest.mark.fast

STOCK_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Server port="8005" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="8080" protocol="HTTP/1.1" connectionTimeout="20000" redirectPort="8443" />
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps">
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs" prefix="localhost_access_log" suffix=".txt" pattern="%h %l %u %t &quot;%r&quot; %s %b" />
      </Host>
    </Engine>
  </Service>
</Server>
"""


@pytest.mark.parametrize("ctx", [HostContext(), HostContext(baseline_cpus=(0,), total_cpus=2)])
def test_each_variant_sets_one_attribute_and_all_four_is_the_baselines_change(ctx):
    step = get_step("connector-limits")
    names = [v.name for v in step.variants_for(ctx)]
    assert names == ["stock-connector", *ATTRIBUTES, "all-four"]
    baseline = tuned(ctx)
    assert step.tomcat_config("stock-connector", ctx).connector == {}
    for variant, attribute in ATTRIBUTES.items():
        config = step.tomcat_config(variant, ctx)
        assert config.connector == {attribute: baseline.connector[attribute]} and not config.access_log
    assert step.tomcat_config("all-four", ctx).connector == baseline.connector
    # the thread count in the labels is the host's: online CPUs - 1
    threads = baseline.connector["maxThreads"]
    assert step.label("max-threads", ctx) == f"maxThreads {threads}"


def test_each_variant_renders_a_server_xml_with_only_its_attribute_changed():
    step, ctx = get_step("connector-limits"), HostContext()
    for variant, attribute in ATTRIBUTES.items():
        xml = render_server_xml(STOCK_XML, step.tomcat_config(variant, ctx))
        others = set(ATTRIBUTES.values()) - {attribute}
        assert f'{attribute}="' in xml and not any(f'{o}="' in xml for o in others), variant
        assert "AccessLogValve" not in xml
