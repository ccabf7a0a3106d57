"""Inventory, server.xml edits, load commands, preflight, dry-run and apply of disruptive steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath.errors import TunepathError
from tunepath.live.hosts import CommandResult, Host, HostSpec, LocalHost, load_inventory
from tunepath.live.loadgen import LoadTool
from tunepath.evidence.recorder import Masker, RunRecorder
from tunepath.evidence.store import RunStore
from tunepath.model.context import HostContext
from tunepath.steps import plan, variant_config
from tunepath.live.tomcatconf import ConfigError, TomcatConfig, render_server_xml, render_setenv

STOCK_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!-- licence header -->
<Server port="8005" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector port="8080" protocol="HTTP/1.1"
               connectionTimeout="20000"
               redirectPort="8443" />
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps">
        <!-- access log -->
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs"
               prefix="localhost_access_log" suffix=".txt" pattern="%h %l %u %t &quot;%r&quot; %s %b" />
      </Host>
    </Engine>
  </Service>
</Server>
"""


# --- inventory ------------------------------------------------------------------------------
def write(tmp_path, text) -> Path:
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return p


def test_inventory_defaults_and_clients(tmp_path):
    key = tmp_path / "id"
    key.write_text("not a real key")
    inv = load_inventory(write(tmp_path, f'[server]\nhost = "tomcat.test"\nuser = "ubuntu"\nkey_file = "{key}"\n'
                                          '[[clients]]\nhost = "c1.test"\nport = 2222\n[[clients]]\nhost = "c2.test"\n'))
    assert inv.server == HostSpec("server", "tomcat.test", 22, "ubuntu", str(key))
    assert [c.label for c in inv.clients] == ["c1.test:2222", "c2.test"]
    assert inv.known_hosts == Path("~/.ssh/known_hosts").expanduser()
    assert not inv.same_machine
    assert load_inventory(None).same_machine


@pytest.mark.parametrize("text, message", [
    ('[server]\nhost = "a"\npassword = "x"\n[[clients]]\nhost = "b"\n', "'password' is not accepted"),
    ('[[clients]]\nhost = "b"\n', "a \\[server\\] table is required"),
    ('[server]\nhost = "a"\n', "at least one \\[\\[clients\\]\\]"),
    ('[server]\nhost = "a"\nport = 70000\n[[clients]]\nhost = "b"\n', "port must be"),
    ('[server]\nhost = "a"\nkey_file = "/nope/id"\n[[clients]]\nhost = "b"\n', "key_file /nope/id does not exist"),
    ('[server]\nhost = "a"\nhots = 1\n[[clients]]\nhost = "b"\n', "unknown key"),
    ('[server\nhost = "a"\n', "not valid TOML"),
])
def test_inventory_errors_are_clear(tmp_path, text, message):
    with pytest.raises(TunepathError, match=message):
        load_inventory(write(tmp_path, text))


# --- server.xml --------------------------------------------------------------------------------
def test_stock_config_leaves_the_file_byte_identical():
    assert render_server_xml(STOCK_XML, TomcatConfig()) == STOCK_XML


def test_edits_are_idempotent_and_validated():
    cfg = variant_config("baseline", "threads", HostContext())
    once = render_server_xml(STOCK_XML, cfg)
    assert "AccessLogValve" not in once and 'maxThreads="7"' in once and 'maxKeepAliveRequests="500000"' in once
    assert "licence header" in once and "<!-- access log -->" in once        # comments survive
    assert render_server_xml(STOCK_XML, cfg) == once                           # always from the original
    pooled = render_server_xml(STOCK_XML, TomcatConfig(executor={"name": "pool", "maxThreads": "4"}))
    assert '<Executor name="pool" maxThreads="4"' in pooled and 'executor="pool"' in pooled


@pytest.mark.parametrize("config, message", [
    (TomcatConfig(connector={"maxThread": "7"}), "unknown Connector attribute 'maxThread'"),
    (TomcatConfig(connector={"maxThreads": "seven"}), "must be a whole number"),
    (TomcatConfig(connector={"protocol": "org.apache.coyote.http11.Http11AprProtocol"}), "APR connectors are gone"),
    (TomcatConfig(port=9999, access_log=False), "no HTTP Connector on port 9999"),
])
def test_bad_configs_are_refused(config, message):
    with pytest.raises(ConfigError, match=message):
        render_server_xml(STOCK_XML, config)


def test_broken_server_xml_and_setenv():
    with pytest.raises(ConfigError, match="does not parse"):
        render_server_xml("<Server><Service>", TomcatConfig(access_log=False))
    assert render_setenv(TomcatConfig()) is None
    assert "CATALINA_OPTS='-Xms1g -Xmx1g'" in render_setenv(TomcatConfig(jvm_options=("-Xms1g", "-Xmx1g")))


# --- load commands -------------------------------------------------------------------------------
def test_live_context_renders_closed_loop_commands_without_rate():
    ctx = HostContext(server_address="127.0.0.1", open_loop=False, latency_flag=True, warmup_s=15,
                      threads=2, connections=64, duration_s=15, total_cpus=2, baseline_cpus=(0, 1))
    blocks = {b.id: b for b in plan("baseline", ctx)}
    assert "offline-cpus" not in blocks                      # nothing to take offline on 2 CPUs
    assert blocks["load"].text.splitlines()[1] == (
        "wrk -c64 -t2 -d15 --latency http://127.0.0.1:8080/examples/servlets/servlet/HelloWorldExample")
    assert "-d15" in blocks["warm-up"].text and "closed loop" in blocks["load"].title
    assert 'maxThreads="1"' in blocks["thread-config"].text   # threads = CPUs - 1, at least 1


# --- preflight, dry-run, apply ------------------------------------------------------------------------
class FakeHost(Host):
    """A host that answers preflight probes positively and records what it is asked to run."""

    def __init__(self):
        self.spec = HostSpec("server", "fake.test")
        self.commands: list[str] = []
        self.is_root = True

    def _run(self, command, timeout, display, pidfile=None):
        self.commands.append(command)
        out = ""
        if "cpu0/online" in command:
            out = "yes\n"
        elif "test -w /sys/devices/system/cpu/cpu1/online" in command:
            out = "/sys/devices/system/cpu/cpu1/online\nwritable\n"
        elif "update-grub" in command and "command -v" in command:
            out = "/usr/sbin/update-grub\nok\n"
        elif command.startswith("echo online="):
            out = "online=0-191\ncmdline=eA==\nqueues=32\n"
        elif "cat ~/.tunepath/original-state.json" in command:
            out = ""
        return CommandResult(self.name, display, out, "", 0, 0.01)


C8G_FACTS = {"numa_nodes": 2, "nic": {"name": "enP11p4s0", "queues": 32, "numa_node": 1}, "cpus_online": "0-191"}


def _session(tmp_path, apply: bool, allow_reboot: bool = False):
    from tunepath.live.session import LiveOptions, Session
    from tunepath.live.hosts import Inventory

    record = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record.update(run_id="live-test", kind="live", status="partial", measurements=[], verification=[])
    rec = RunRecorder(tmp_path / "runs", record)
    server = FakeHost()
    inv = Inventory(HostSpec("server", "fake.test"), (HostSpec("client", "client.test"),), tmp_path / "kh")
    ctx = RunStore(ROOT / "runs").load("reference-aws-c8g").context
    return Session("live-test", LiveOptions(apply=apply, allow_reboot=allow_reboot), inv, server, [server],
                   rec, LoadTool("wrk2", "wrk", None, 128), None, ctx, C8G_FACTS), rec, server


DISRUPTIVE = [(step, b) for step in ("baseline", "nic-queues", "numa", "iommu")
              for b in plan(step, RunStore(ROOT / "runs").load("reference-aws-c8g").context) if b.disruptive]


@pytest.mark.parametrize("step, block", DISRUPTIVE, ids=lambda x: getattr(x, "id", x))
def test_dry_run_records_the_exact_commands_and_changes_nothing(tmp_path, step, block):
    from tunepath.live.actions import disruptive as _disruptive

    session, rec, server = _session(tmp_path, apply=False)
    changed, reason = _disruptive(session, step, block)
    assert not changed and reason.startswith("dry-run")
    [entry] = rec.record["blocks"]
    assert entry["outcome"] == "dry-run" and entry["text"] == block.text
    assert not any(block.text in c for c in server.commands)          # nothing was executed
    assert not any("original-state" in c and "cat >" in c for c in server.commands)


def test_expected_dry_run_commands_for_the_reference_host():
    texts = {b.id: b.text for _, b in DISRUPTIVE}
    assert texts["offline-cpus"] == ('for no in {8..191}; do sudo bash -c "echo 0 > '
                                     '/sys/devices/system/cpu/cpu${no}/online"; done')
    assert texts["set-queues"] == "sudo ethtool -L enP11p4s0 combined 8"
    assert texts["move-cpus"].splitlines()[0].startswith("for no in {96..103}; do sudo bash -c \"echo 1")
    assert "{0..95} {104..191}" in texts["move-cpus"]
    assert texts["iommu-passthrough"].splitlines() == [
        "echo 'GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX iommu.strict=0 iommu.passthrough=1\"' | "
        "sudo tee /etc/default/grub.d/99-tunepath-iommu.cfg", "sudo update-grub && sudo reboot"]


def test_apply_saves_the_original_state_first_then_runs_the_block(tmp_path):
    from tunepath.live.actions import disruptive as _disruptive

    session, rec, server = _session(tmp_path, apply=True)
    block = next(b for s, b in DISRUPTIVE if b.id == "set-queues")
    changed, _ = _disruptive(session, "nic-queues", block)
    assert changed
    saved = next(i for i, c in enumerate(server.commands) if "original-state.json.tmp" in c)
    ran = next(i for i, c in enumerate(server.commands) if c.endswith(block.text))
    assert saved < ran
    assert rec.record["blocks"][-1]["outcome"] == "ran"


def test_apply_without_allow_reboot_keeps_grub_as_dry_run(tmp_path):
    from tunepath.live.actions import disruptive as _disruptive

    session, rec, server = _session(tmp_path, apply=True, allow_reboot=False)
    block = next(b for s, b in DISRUPTIVE if b.id == "iommu-passthrough")
    changed, reason = _disruptive(session, "iommu", block)
    assert not changed and "allow_reboot" in reason
    assert not any("tee /etc/default/grub.d" in c or "reboot" in c for c in server.commands)


def test_preflight_refusals_on_this_machine():
    from tunepath.live.hoststate import preflight

    host = LocalHost()
    ctx = RunStore(ROOT / "runs").load("reference-aws-c8g").context
    blocks = {b.id: b for step in ("nic-queues", "numa", "iommu") for b in plan(step, ctx)}
    facts = {"numa_nodes": 1, "nic": {"name": "eth0", "queues": None}}
    assert "loopback" in preflight(host, blocks["set-queues"], facts, same_machine=True).reason
    assert "NUMA node" in preflight(host, blocks["move-cpus"], facts, same_machine=True).reason
    assert "will not reboot itself" in preflight(host, blocks["iommu-passthrough"], facts, True).reason


def test_masker_replaces_whole_names_only():
    m = Masker({"vm": "server", "10.1.2.3": "server"})
    assert m("vm runs a JVM on kvm at http://10.1.2.3:8080 not 10.1.2.30") == \
        "server runs a JVM on kvm at http://server:8080 not 10.1.2.30"
    assert m({"a": ["vm"]}) == {"a": ["server"]}


# --- the proxy step -----------------------------------------------------------------------------
def test_proxy_plan_shows_a_placeholder_never_a_secret():
    from tunepath.live.httpd import httpd_conf
    from tunepath.live.tomcatconf import ajp_attributes

    blocks = {b.id: b for b in plan("proxy", HostContext(httpd_dir="/srv/httpd"))}
    assert 'secret="AJP_SECRET_GENERATED_PER_RUN"' in blocks["ajp-connector"].text
    assert "ProxyPass /examples/ ajp://127.0.0.1:8009/examples/ secret=AJP_SECRET_GENERATED_PER_RUN" \
        in blocks["httpd-ajp"].text
    assert "ProxyPass /examples/ http://127.0.0.1:8080/examples/" in blocks["httpd-http"].text
    assert blocks["load-http"].text.endswith(":8081/examples/servlets/servlet/HelloWorldExample")
    assert blocks["load-direct"].text.endswith(":8080/examples/servlets/servlet/HelloWorldExample")
    assert httpd_conf("http", "/srv/httpd").startswith("# tunepath") and "Listen 127.0.0.1:8081" in \
        httpd_conf("ajp", "/srv/httpd")
    with pytest.raises(ConfigError, match="at least 16"):
        ajp_attributes("short")
    with pytest.raises(TunepathError, match="unknown proxy mode"):
        httpd_conf("jk", "/srv/httpd")


def test_ajp_connector_is_loopback_only_and_requires_the_secret():
    secret = "0123456789abcdefXYZ_-"
    text = render_server_xml(STOCK_XML, variant_config("proxy", "ajp", HostContext(ajp_secret=secret)))
    assert (f'<Connector protocol="AJP/1.3" address="127.0.0.1" port="8009" secretRequired="true" '
            f'secret="{secret}"') in text
    masked = Masker()
    masked.add(secret, "AJP_SECRET_GENERATED_PER_RUN")
    assert secret not in masked(text) and "AJP_SECRET_GENERATED_PER_RUN" in masked(text)
