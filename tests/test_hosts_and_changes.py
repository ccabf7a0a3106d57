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

pytestmark = pytest.mark.fast

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
    two_nodes = {"numa_nodes": 2, "nic": {"name": "eth0", "queues": 4, "numa_node": None}}   # sysfs said -1
    assert "eth0) reports no NUMA node" in preflight(host, blocks["move-cpus"], two_nodes, same_machine=True).reason
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


# --- host changes on a simulated host: NIC channels (both forms), CPUs, huge pages, restore ----------------------
class Machine(Host):
    """A server whose CPUs, NIC channels, huge page pool and saved state change as commands say."""

    def __init__(self, kind="rx-tx", queues=4, cpus=(0, 1), hotplug=(1,), nr_hugepages=0, cap=None,
                 boot_id="another-boot"):
        self.spec, self.is_root, self.commands = HostSpec("server", "lab.test"), True, []
        self.kind, self.max = kind, queues
        self.rx = self.tx = self.combined = queues
        self.online, self.hotplug, self.nr, self.cap = set(cpus), set(hotplug), nr_hugepages, cap
        self.state, self.boot, self.meminfo_extra = None, boot_id, ""

    def channels(self) -> str:
        if self.kind == "combined":
            return f"max_rx=n/a max_tx=n/a max_combined={self.max} rx=n/a tx=n/a combined={self.combined} "
        return f"max_rx={self.max} max_tx={self.max} max_combined=n/a rx={self.rx} tx={self.tx} combined=n/a "

    def answer(self, c: str) -> tuple[str, int]:
        import re as _re
        from tunepath.model.context import cpu_ranges as _ranges, parse_cpu_list as _cpus

        if c.startswith("echo online="):
            return (f"online={_ranges(self.online)}\nhugepages={self.nr}\ncmdline=eA==\nchannels={self.channels()}\n", 0)
        if c.startswith(("cat ~/.tunepath/original-state.json", "test -s ~/.tunepath/original-state.json")):
            return self.state or "", 0
        if "original-state.json.tmp <<" in c:
            self.state = c.split("<<'EOF'\n", 1)[1].split("\nEOF", 1)[0]
            return "", 0
        if c.startswith("rm -f ~/.tunepath/original-state.json"):
            self.state = None
            return "", 0
        if "Pre-set maximums" in c:
            return self.channels() + "\n", 0
        if m := _re.search(r"ethtool -L \S+ (.*)$", c):
            args = dict(_re.findall(r"(combined|rx|tx) (\d+)", m.group(1)))
            if ("combined" in args) != (self.kind == "combined") or any(int(v) > self.max for v in args.values()):
                return "netlink error: Invalid argument", 1
            for k, v in args.items():
                setattr(self, k, int(v))
            return "", 0
        if "test -w /sys/devices/system/cpu/cpu$no/online" in c:
            cpus = _cpus(",".join(a if not b else f"{a}-{b}" for a, b in _re.findall(r"\{?(\d+)(?:\.\.(\d+))?\}?",
                                                                                         c.split(";")[0][len("for no in "):])))
            return "".join(f"{n}\n" for n in cpus if n not in self.hotplug), 0
        if c == "cat /sys/devices/system/cpu/online":
            return _ranges(self.online) + "\n", 0
        if "/sys/devices/system/cpu/cpu" in c and "online" in c and "echo" in c:
            for part in c.split("done"):
                if m := _re.search(r"for no in ([^;]*); do .*echo ([01]) >", part):
                    cpus = _cpus(",".join(a if not b else f"{a}-{b}"
                                          for a, b in _re.findall(r"\{?(\d+)(?:\.\.(\d+))?\}?", m.group(1))))
                    if set(cpus) - self.hotplug:
                        return "Permission denied", 1
                    self.online = self.online | set(cpus) if m.group(2) == "1" else self.online - set(cpus)
            return "", 0
        if c == "cat /proc/sys/vm/nr_hugepages":
            return f"{self.nr}\n", 0
        if m := _re.search(r"sysctl -w vm\.nr_hugepages=(\d+)", c):
            self.nr = min(int(m.group(1)), self.cap) if self.cap is not None else int(m.group(1))
            return f"vm.nr_hugepages = {m.group(1)}\n", 0
        if "test -w /proc/sys/vm/nr_hugepages" in c:
            return "writable\nMemAvailable:   24000000 kB\nHugepagesize:       2048 kB\n", 0
        if "/proc/meminfo" in c:
            return (self.meminfo_extra + f"HugePages_Total: {self.nr}\nHugePages_Free: {self.nr}\n"
                    "HugePages_Rsvd: 0\nHugepagesize: 2048 kB\n"), 0
        if c == "cat /proc/sys/kernel/random/boot_id":
            return self.boot + "\n", 0
        if "command -v update-grub" in c:
            return "/usr/sbin/update-grub\nok\n", 0
        if c.startswith("test -f /etc/default/grub.d"):
            return "", 1
        return "", 0

    def _run(self, command, timeout, display, pidfile=None):
        import shlex as _shlex

        self.commands.append(command)
        if command.startswith("sudo -n bash -c "):         # Host.run(sudo=True) for a user that is not root
            command = _shlex.split(command)[4]
        out, rc = self.answer(command.removeprefix("if [ \"$(id -u)\" = 0 ] && ! command -v sudo >/dev/null; then "
                                                   "sudo() { \"$@\"; }; fi\n").removeprefix("sudo "))
        return CommandResult(self.name, display, out, "", rc, 0.01)


LAB_FACTS = {"numa_nodes": 1, "cpus_online": "0-1", "nic": {"name": "eth0", "channels": "rx-tx", "queues": 4}}
LAB_CTX = HostContext(total_cpus=2, baseline_cpus=(0,), nic="eth0", nic_queues=1, nic_channels="rx-tx")


def _lab_session(tmp_path, host: Host, apply: bool, allow_reboot: bool = False, same_machine: bool = False):
    from tunepath.live.hosts import Inventory
    from tunepath.live.session import LiveOptions, Session

    record = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record.update(run_id="live-lab", kind="live", status="partial", measurements=[], verification=[], blocks=[],
                  warnings=[])
    rec = RunRecorder(tmp_path / "runs", record)
    client = HostSpec("client", "lab.test") if same_machine else HostSpec("client", "lab.test", port=2222)
    inv = Inventory(HostSpec("server", "lab.test"), (client,), tmp_path / "kh")
    return Session("live-lab", LiveOptions(apply=apply, allow_reboot=allow_reboot), inv, host, [host], rec,
                   LoadTool("wrk2", "wrk", None, 2), None, LAB_CTX, LAB_FACTS), rec


def test_set_queues_renders_combined_for_the_page_and_rx_tx_for_a_veth():
    blocks = {b.id: b for b in plan("nic-queues", HostContext())}
    assert blocks["set-queues"].text == "sudo ethtool -L ${net} combined 8"
    assert blocks["set-queues"].title == "Set 8 combined queues on ${net}"
    lab = {b.id: b for b in plan("nic-queues", LAB_CTX)}
    assert lab["set-queues"].text == "sudo ethtool -L eth0 rx 1 tx 1"
    assert [b.id for b in plan("nic-queues", LAB_CTX)][:3] == ["show-queues", "set-queues", "show-queues-after"]
    from tunepath.steps import REGISTRY
    assert REGISTRY.get("nic-queues").label("queues-8", LAB_CTX) == "1 NIC queue"
    assert REGISTRY.get("nic-queues").label("queues-8", HostContext()) == "8 NIC queues"
    with pytest.raises(TunepathError, match="nic_channels: 'both' is not combined or rx-tx"):
        HostContext.from_dict({"nic_channels": "both"})
    with pytest.raises(TunepathError, match="nic_channels"):
        HostContext(nic_channels="rx")


@pytest.mark.parametrize("text, kind, queues, maximum", [
    ("Channel parameters for eth0:\nPre-set maximums:\nRX:\t\t4\nTX:\t\t4\nOther:\t\tn/a\nCombined:\tn/a\n"
     "Current hardware settings:\nRX:\t\t2\nTX:\t\t3\nOther:\t\tn/a\nCombined:\tn/a\n", "rx-tx", 2, 4),
    ("Channel parameters for ens5:\nPre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\nCombined:\t32\n"
     "Current hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\nCombined:\t8\n", "combined", 8, 32),
    ("Channel parameters for x:\nPre-set maximums:\nRX:\t\t0\nTX:\t\t0\nOther:\t\t1\nCombined:\t63\n"
     "Current hardware settings:\nRX:\t\t0\nTX:\t\t0\nOther:\t\t1\nCombined:\t16\n", "combined", 16, 63),
    ("", None, None, None),
])
def test_channel_commands_read_ethtool_output_of_both_forms(tmp_path, text, kind, queues, maximum):
    """The real awk of channels_command and current_queues_command, over a stub ethtool."""
    import subprocess
    from tunepath.live.facts import channels_command, current_queues_command, parse_channels

    (tmp_path / "ethtool").write_text(f"#!/bin/sh\nprintf '%s' '{text}'\n")
    (tmp_path / "ethtool").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    run = lambda cmd: subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True).stdout  # noqa
    got = parse_channels(run(channels_command("eth0")))
    assert (got.kind, got.queues, got.maximum(kind) if kind else None) == (kind, queues, maximum)
    assert run(current_queues_command("eth0")).strip() == (str(queues) if queues else "")


def test_save_and_restore_rx_tx_queues_cpus_and_huge_pages_then_nothing_twice():
    from tunepath.live.hoststate import load_original_state, save_original_state
    from tunepath.live.restore import restore

    host = Machine()
    state = save_original_state(host, LAB_FACTS)
    assert (state.nic_channels, state.nic_queues, state.nic_tx, state.nr_hugepages, state.cpus_online) == \
        ("rx-tx", 4, 4, 0, "0-1")
    assert load_original_state(host) == state
    host.answer("ethtool -L eth0 rx 1 tx 1")
    host.answer('for no in 1; do sudo bash -c "echo 0 > /sys/devices/system/cpu/cpu${no}/online"; done')
    host.answer("sysctl -w vm.nr_hugepages=664")
    assert (host.rx, host.tx, host.online, host.nr) == (1, 1, {0}, 664)
    done = restore(host)
    assert (host.rx, host.tx, host.online, host.nr) == (4, 4, {0, 1}, 0)
    assert done == [
        "CPUs 0-1 online on lab.test (`for no in 1; do echo 1 > /sys/devices/system/cpu/cpu$no/online; done`)",
        "eth0: rx 4 tx 4 queues again on lab.test (`ethtool -L eth0 rx 4 tx 4`)",
        "huge pages released: 0 reserved again (were 664) on lab.test (`sysctl -w vm.nr_hugepages=0`)"]
    assert restore(host) == []                      # idempotent: nothing left to do
    assert restore(host, forget=True) == [] and host.state is None and restore(host) == []


def test_restore_puts_combined_queues_back_from_a_state_saved_before_rx_tx_existed():
    from tunepath.live.restore import restore

    host = Machine(kind="combined", queues=32)
    host.state = json.dumps({"cpus_online": "0-1", "nic": "eth0", "nic_queues": 32, "grub_dropin_b64": None})
    host.answer("ethtool -L eth0 combined 8")
    assert restore(host) == ["eth0: combined 32 queues again on lab.test (`ethtool -L eth0 combined 32`)"]
    assert host.combined == 32 and restore(host) == []


def test_a_failing_part_of_restore_does_not_stop_the_others_and_keeps_the_state():
    from tunepath.live.hoststate import save_original_state
    from tunepath.live.restore import restore

    host = Machine(hotplug=())                      # CPU 1 cannot come back
    save_original_state(host, LAB_FACTS)
    host.online, host.nr = {0}, 664
    with pytest.raises(TunepathError) as err:
        restore(host, forget=True)
    assert "on lab.test" in str(err.value) and "echo 1 > /sys/devices/system/cpu/cpu$no/online" in str(err.value)
    assert "\n" not in str(err.value) and "tunepath restore" in str(err.value)
    assert host.nr == 0 and host.state is not None   # huge pages released anyway; state kept for a retry


def test_restoring_the_hosts_tries_every_client_and_the_server_even_when_one_fails(monkeypatch):
    from tunepath.live import restore as restore_mod

    server, good, bad = (Machine() for _ in range(3))
    tried = []

    def fake_restore(host, forget=False):
        tried.append(("server", forget))
        raise TunepathError("CPU 1 did not come back on lab.test")

    def fake_put_back(host):
        tried.append("bad" if host is bad else "good")
        if host is bad:
            raise TunepathError("sysctl refused on client-1")
        return ["net.ipv4.tcp_tw_reuse=2 again on client-2"]

    monkeypatch.setattr(restore_mod, "restore", fake_restore)
    monkeypatch.setattr(restore_mod.sysctls, "put_back", fake_put_back)
    with pytest.raises(TunepathError) as err:
        restore_mod.restore_hosts(server, (bad, good), forget=True)
    assert tried == ["bad", "good", ("server", True)]
    assert str(err.value) == "sysctl refused on client-1; CPU 1 did not come back on lab.test"
    monkeypatch.setattr(restore_mod, "restore", lambda host, forget=False: [])
    assert restore_mod.restore_hosts(server, (good,)) == ["net.ipv4.tcp_tw_reuse=2 again on client-2"]


def test_preflight_for_a_veth_in_a_namespace_and_for_cpu_hotplug():
    from tunepath.live.hoststate import preflight

    blocks = {b.id: b for step in ("baseline", "nic-queues") for b in plan(step, LAB_CTX)}
    host = Machine()
    assert preflight(host, blocks["set-queues"], LAB_FACTS, same_machine=False).ok
    assert preflight(host, blocks["show-queues-after"], LAB_FACTS, same_machine=False).ok
    assert "loopback" in preflight(host, blocks["set-queues"], LAB_FACTS, same_machine=True).reason
    combined = plan("nic-queues", replace_ctx(nic_channels="combined"))[1]
    assert "has rx-tx channels and the plan sets combined ones" in preflight(host, combined, LAB_FACTS, False).reason
    too_many = plan("nic-queues", replace_ctx(nic_queues=8))[1]
    assert "allows at most 4 queues" in preflight(host, too_many, LAB_FACTS, False).reason
    assert blocks["offline-cpus"].text == ('for no in 1; do sudo bash -c "echo 0 > '
                                           '/sys/devices/system/cpu/cpu${no}/online"; done')
    assert preflight(host, blocks["offline-cpus"], LAB_FACTS, False).ok
    cpu0 = plan("baseline", replace_ctx(baseline_cpus=(1,)))[1]
    reason = preflight(host, cpu0, LAB_FACTS, False).reason
    assert "CPU 0 on lab.test" in reason and "not hot-pluggable" in reason


def replace_ctx(**changes) -> HostContext:
    from dataclasses import replace
    return replace(LAB_CTX, **changes)


def test_reserving_huge_pages_is_a_dry_run_without_apply(tmp_path):
    from tunepath.live.actions import disruptive

    host = Machine()
    session, rec = _lab_session(tmp_path, host, apply=False)
    block = {b.id: b for b in plan("jvm", LAB_CTX)}["reserve-hugepages"]
    assert block.text == "sudo sysctl -w vm.nr_hugepages=664" and block.disruptive
    changed, reason = disruptive(session, "jvm", block)
    assert not changed and reason.startswith("dry-run") and host.nr == 0 and host.state is None
    assert rec.record["blocks"][-1]["outcome"] == "dry-run"


def test_huge_pages_reserved_with_apply_and_released_after_the_step(tmp_path):
    from tunepath.live.actions import disruptive, release_hugepages

    host = Machine(nr_hugepages=3)
    session, rec = _lab_session(tmp_path, host, apply=True)
    block = {b.id: b for b in plan("jvm", LAB_CTX)}["reserve-hugepages"]
    assert disruptive(session, "jvm", block) == (True, "")
    assert host.nr == 664 and json.loads(host.state)["nr_hugepages"] == 3     # the original saved first
    release_hugepages(session, "jvm")
    assert host.nr == 3
    assert rec.record["blocks"][-1] == {"step": "jvm", "block": "release-hugepages", "host": "server",
                                        "text": "sudo sysctl -w vm.nr_hugepages=3", "outcome": "ran"}
    release_hugepages(session, "jvm")                # nothing left to release: nothing recorded
    assert rec.record["blocks"][-1]["outcome"] == "ran" and len(rec.record["blocks"]) == 2


def test_fewer_huge_pages_than_asked_skips_the_variant_with_the_reason(tmp_path):
    from tunepath.live.actions import disruptive

    host = Machine(cap=600)                          # fragmented memory: the kernel finds only 600
    session, rec = _lab_session(tmp_path, host, apply=True)
    block = {b.id: b for b in plan("jvm", LAB_CTX)}["reserve-hugepages"]
    changed, reason = disruptive(session, "jvm", block)
    assert not changed and "reserved only 600 of the 664 huge pages" in reason and "lab.test" in reason
    assert host.nr == 0 and any("reserved only 600" in w for w in rec.record["warnings"])


def test_large_pages_evidence_is_recorded_per_measurement_and_a_miss_is_warned(tmp_path):
    from tunepath.live.actions import large_pages_evidence

    host = Machine(nr_hugepages=664)
    host.meminfo_extra = ("[0.001s][4242][info][pagesize] Large page support enabled. Usable page sizes: 4k, 2M.\n"
                          "[0.020s][4242][info][gc,init ] Large Page Support: Enabled (Explicit)\n")
    session, rec = _lab_session(tmp_path, host, apply=True)
    block = {b.id: b for b in plan("jvm", LAB_CTX)}["large-pages-in-use"]
    large_pages_evidence(session, "jvm", block, 1)
    large_pages_evidence(session, "jvm", block, 2)
    assert [v["name"] for v in rec.record["verification"]] == ["large-pages-in-use", "large-pages-in-use-r2"]
    out = (tmp_path / "runs" / ".inprogress" / "live-lab" / rec.record["verification"][0]["output"]).read_text()
    assert "Large Page Support: Enabled (Explicit)" in out and "HugePages_Total: 664" in out
    assert any("did not report large pages in use" in w and "HugePages_Free 664" in w for w in rec.record["warnings"])


def test_huge_pages_are_sized_from_the_heap_and_the_page_size():
    from tunepath.steps.jvm import PAGESIZE_LOG, hugepages_for

    assert hugepages_for(1024, 2048) == 512 + 120 + 32
    assert hugepages_for(64, 2048) == 32 + 120 + 2
    assert hugepages_for(1024, 524288) == 3                  # 512 MB pages (64 KB base pages)
    big = {b.id: b for b in plan("jvm", replace_ctx(hugepage_kb=524288))}
    assert big["reserve-hugepages"].text == "sudo sysctl -w vm.nr_hugepages=3"
    assert PAGESIZE_LOG in variant_config("jvm", "large-pages", HostContext()).jvm_options


def test_iommu_stays_a_dry_run_with_apply_and_without_allow_reboot(tmp_path):
    from tunepath.live.actions import disruptive
    from tunepath.live.hoststate import local_boot_id

    block = next(b for b in plan("iommu", LAB_CTX) if b.id == "iommu-passthrough")
    host = Machine(boot_id=local_boot_id())          # a namespace of this machine: same kernel
    session, rec = _lab_session(tmp_path, host, apply=True)
    changed, reason = disruptive(session, "iommu", block)
    assert not changed and "allow_reboot" in reason and "same boot id" in reason
    assert rec.record["blocks"][-1]["outcome"] == "dry-run"
    session, rec = _lab_session(tmp_path / "2", host, apply=True, allow_reboot=True)
    changed, reason = disruptive(session, "iommu", block)
    assert not changed and "would reboot this machine" in reason and rec.record["blocks"][-1]["outcome"] == "skipped"
    assert not any("grub.d/99" in c and "tee" in c or "reboot" in c.split() for c in host.commands)


def test_a_user_with_sudo_gets_the_hotplug_and_huge_page_checks_through_sudo():
    """sysfs CPU files and vm.nr_hugepages are writable by root only: a lab user's plain `test -w` says no."""
    from tunepath.live.hoststate import preflight

    host = Machine()
    host.is_root = False
    blocks = {b.id: b for step in ("baseline", "jvm") for b in plan(step, LAB_CTX)}
    assert preflight(host, blocks["offline-cpus"], LAB_FACTS, False).ok
    assert preflight(host, blocks["reserve-hugepages"], LAB_FACTS, False).ok
    checks = [c for c in host.commands if "test -w" in c]
    assert len(checks) == 2 and all(c.startswith("sudo -n bash -c ") for c in checks)
