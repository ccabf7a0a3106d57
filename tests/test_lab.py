"""The lab (`tunepath lab up|down|status`): real namespaces, veths, sshd, users and sudo, as root.

The live tests build one lab with a prefix and a directory of their own (``tpt<pid>`` under
pytest's tmp), so they never meet a real lab or another helper's. The lab comes down in a
finaliser even when a test fails, and a last safety net removes anything of the test prefix that
``down`` missed. The last live test is ``down`` itself, checked to leave nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import ROOT, unavailable
from tunepath.errors import TunepathError
from tunepath.lab import Lab
from tunepath.lab.inventory import baseline_cpus, cpu_count, hosts_toml
from tunepath.lab.sshd import banner
from tunepath.lab.state import ROLES, LabState, check_prefix, load_state, save_state
from tunepath.lab.system import process_alive, require_tools
from tunepath.live.hosts import connect, load_inventory

pytestmark = pytest.mark.fast

live = pytest.mark.system     # the tests on a real lab (the rest are fast)
TOOLS = ("ip", "socat", "sudo", "visudo", "ethtool", "ssh-keygen", "useradd", "userdel", "curl")
SBIN = "PATH=$PATH:/usr/sbin:/sbin"          # a user's SSH session on Debian has no /usr/sbin


def _need_parts():
    missing = ([] if os.geteuid() == 0 else ["root"]) + [t for t in TOOLS if not shutil.which(t)] \
        + ([] if Path("/usr/sbin/sshd").exists() else ["sshd"])
    if missing:
        msg = f"lab tests need {', '.join(missing)} (run as root after scripts/bootstrap --lab)"
        unavailable(msg)


def _scrub(prefix: str) -> None:
    """Remove anything of ``prefix`` that is left (only test prefixes come here)."""
    assert prefix.startswith("tp") and prefix not in ("tplab", "tplabdev")
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    for ns in [n for n in names if n.startswith(f"{prefix}-")]:
        for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            subprocess.run(["kill", "-KILL", pid], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    for suffix in ("srv", "c1", "c2"):
        subprocess.run(["userdel", "-r", f"{prefix}-{suffix}"], capture_output=True)
    Path(f"/etc/sudoers.d/{prefix}-lab").unlink(missing_ok=True)


def _leftovers(prefix: str) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    users = [u for u in (f"{prefix}-srv", f"{prefix}-c1", f"{prefix}-c2")
             if subprocess.run(["id", u], capture_output=True).returncode == 0]
    return [n for n in names if n.startswith(f"{prefix}-")] + users + \
        [str(p) for p in [Path(f"/etc/sudoers.d/{prefix}-lab")] if p.exists()]


@contextmanager
def running_lab(tmp_path_factory, prefix: str, vm: bool = False, arch: str = "amd64"):
    """A lab of its own (``prefix``), up for the block and down afterwards, whatever happens;
    ``up_seconds`` is how long ``up`` took. ``vm``: with a server VM of ``arch``."""
    lab = Lab(tmp_path_factory.mktemp("vmlab" if vm else "lab") / "lab", prefix)
    _scrub(prefix)
    started = time.monotonic()
    try:
        lab.up(vm=vm, arch=arch) if vm else lab.up()
        lab.up_seconds = time.monotonic() - started
        yield lab
    finally:
        try:
            lab.down()
        finally:
            _scrub(prefix)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    _need_parts()
    with running_lab(tmp_path_factory, f"tpt{os.getpid()}") as lab:     # unique among running processes
        yield lab


def _hosts(lab):
    inventory = load_inventory(lab.hosts_file)
    return inventory, [connect(spec, inventory) for spec in (inventory.server, *inventory.clients)]


def _channels(host) -> tuple[int, int]:
    out = host.run(f"{SBIN} ethtool -l eth0").stdout
    current = out.split("Current hardware settings:")[1].split()
    return int(current[current.index("RX:") + 1]), int(current[current.index("TX:") + 1])


@live
def test_up_creates_every_part_and_status_says_so(lab):
    assert lab.up_seconds < 20
    parts = lab.status()
    assert all(p.ok for p in parts), [p.line for p in parts if not p.ok]
    assert {p.part.split()[0] for p in parts} >= {"namespace", "bridge", "eth0", "user", "sudoers", "sshd",
                                                  "forward", "root"}
    state = lab.state()
    assert sorted(state.namespaces) == sorted(f"{lab.prefix}-{s}" for s in ("net", "srv", "c1", "c2"))
    assert state.users == [f"{lab.prefix}-srv", f"{lab.prefix}-c1", f"{lab.prefix}-c2"]
    sudoers = Path(state.sudoers)
    assert stat.S_IMODE(sudoers.stat().st_mode) == 0o440 and f"{lab.prefix}-srv " in sudoers.read_text()
    assert f"{lab.prefix}-c1 ALL=(root) NOPASSWD: /usr/sbin/sysctl -w net.ipv4.tcp_tw_reuse=[0-2]\n" in sudoers.read_text()
    assert f"{lab.prefix}-c1 ALL=(ALL)" not in sudoers.read_text()
    known = lab.known_hosts.read_text().splitlines()
    assert [line.split()[0] for line in known] == [f"[127.0.0.1]:{h.port}" for h in state.hosts]
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "tunepath"), "lab", "status", "--prefix", lab.prefix,
                          "--dir", str(lab.directory)], capture_output=True, text=True)
    assert out.returncode == 0 and "every part is up" in out.stdout, out.stdout + out.stderr


@live
def test_up_twice_keeps_keys_and_ports_and_restarts_what_died(lab):
    before = lab.state()
    keys = [lab.key_file.read_bytes()] + [(lab.directory / r.name / "ssh_host_ed25519_key").read_bytes()
                                          for r in ROLES]
    said = []
    lab.up(say=said.append)
    assert said == [f"lab {lab.prefix} is already up in {lab.directory}: every part runs; nothing to do"]
    assert lab.state() == before
    os.kill(before.host("server").socat_pid, signal.SIGKILL)        # a forward and an sshd die
    os.kill(before.host("client2").sshd_pid, signal.SIGKILL)
    lab.set_link("client1", False)                                      # and a link is down
    while process_alive(before.host("server").socat_pid) or process_alive(before.host("client2").sshd_pid):
        time.sleep(0.02)
    assert not all(p.ok for p in lab.status())
    said.clear()
    after = lab.up(say=said.append)
    assert [h.port for h in after.hosts] == [h.port for h in before.hosts]
    assert after.host("server").socat_pid != before.host("server").socat_pid
    assert after.host("client2").sshd_pid != before.host("client2").sshd_pid
    assert after.host("client1") == before.host("client1")
    assert len(said) == 3 and said[0].startswith("brought eth0 of client1"), said
    assert "sshd for client2" in said[1] and "forwarding" in said[2] and "to server's sshd" in said[2], said
    assert keys == [lab.key_file.read_bytes()] + [(lab.directory / r.name / "ssh_host_ed25519_key").read_bytes()
                                                  for r in ROLES]
    assert all(p.ok for p in lab.status())


@live
def test_each_host_is_its_own_user_and_nic_over_ssh(lab):
    inventory, hosts = _hosts(lab)
    try:
        assert "network namespaces" in inventory.label and "not separate hardware" in inventory.label
        assert inventory.known_hosts == lab.known_hosts
        assert inventory.server.baseline_cpus == baseline_cpus()
        for host, r in zip(hosts, ROLES):
            assert host.spec.address == r.address
            assert host.run("id -un").stdout.strip() == f"{lab.prefix}-{r.suffix}"
            assert sorted(host.run("ls /sys/class/net").stdout.split()) == ["eth0", "lo"]
            assert f" {r.address}/24" in " ".join(host.run("ip -br -4 addr show eth0").stdout.split()) + " "
            assert "default via 10.213.7.254 dev eth0" in host.run("ip route show default").stdout
            assert _channels(host) == (4, 4)
    finally:
        for host in hosts:
            host.close()


@live
def test_server_user_changes_its_queues_with_sudo_and_clients_only_their_tcp_tw_reuse(lab):
    _, (server, client1, client2) = _hosts(lab)
    try:
        server.run("sudo -n true")
        server.run(f"{SBIN} sudo -n ethtool -L eth0 rx 2 tx 2")
        assert _channels(server) == (2, 2)
        assert _channels(client1) == (4, 4)       # the server's NIC alone
        for client in (client1, client2):
            with pytest.raises(TunepathError, match="sudo asks for a password"):
                client.run("true", sudo=True)
        # a client's sudo allows exactly the kernel step's client setting, in its own namespace
        was = client1.run("cat /proc/sys/net/ipv4/tcp_tw_reuse").stdout.strip()
        client1.run("sudo -n sysctl -w net.ipv4.tcp_tw_reuse=1")
        assert client1.run("cat /proc/sys/net/ipv4/tcp_tw_reuse").stdout.strip() == "1"
        assert client2.run("cat /proc/sys/net/ipv4/tcp_tw_reuse").stdout.strip() == was      # not its namespace
        assert Path("/proc/sys/net/ipv4/tcp_tw_reuse").read_text().strip() == was          # nor the machine's
        client1.run(f"sudo -n sysctl -w net.ipv4.tcp_tw_reuse={was}")
        assert client1.run("sudo -n sysctl -w net.core.somaxconn=1", check=False).exited != 0
    finally:
        client1.run("sudo -n sysctl -w net.ipv4.tcp_tw_reuse=2", check=False)
        server.run(f"{SBIN} sudo -n ethtool -L eth0 rx 4 tx 4", check=False)
        assert _channels(server) == (4, 4)
        for host in (server, client1, client2):
            host.close()


@live
def test_a_client_reaches_the_server_over_the_bridge_and_the_root_namespace_cannot(lab):
    _, (server, client1, client2) = _hosts(lab)
    token = f"lab-probe-{os.getpid()}"
    try:
        server.run(f"mkdir -p ~/www && echo {token} > ~/www/probe.txt && cd ~/www && "
                   "(setsid /usr/bin/python3 -m http.server 8089 --bind 10.213.7.1 </dev/null >/dev/null 2>&1 "
                   "& echo $! > ~/www.pid)")
        fetch = ("for i in $(seq 100); do curl -sf --max-time 2 http://10.213.7.1:8089/probe.txt && exit 0; "
                 "sleep 0.1; done; exit 1")
        assert client1.run(fetch).stdout.strip() == token
        assert client2.run(fetch).stdout.strip() == token
    finally:
        server.run("kill $(cat ~/www.pid); rm -rf ~/www ~/www.pid", check=False)
        for host in (server, client1, client2):
            host.close()
    for what in (["-4", "-o", "addr", "show"], ["-4", "route", "show", "table", "all"]):
        assert "10.213.7." not in subprocess.run(["ip", *what], capture_output=True, text=True).stdout
    ports = {h.port for h in lab.state().hosts}
    listening = [line.split()[1] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                 if line.split()[3] == "0A" and int(line.split()[1].split(":")[1], 16) in ports]
    assert sorted(listening) == sorted(f"0100007F:{p:04X}" for p in ports)   # 127.0.0.1 only


@live
def test_faults_sshd_killed_and_restarted_link_down_and_up(lab):
    port = lab.state().host("server").port
    _, (server, *clients) = _hosts(lab)
    try:
        session = server.run("echo $PPID").stdout.strip()
        killed = lab.kill_sshd("server")
        assert lab.state().host("server").sshd_pid in killed and len(killed) >= 2   # listener and session
        assert not process_alive(int(session)) and banner(port, 1) == ""
        with pytest.raises(TunepathError):
            server.run("true", timeout=5)
        assert banner(lab.state().host("client1").port, 2).startswith("SSH-2.0-")    # the others stay up
        pid = lab.restart_sshd("server")
        assert lab.state().host("server").sshd_pid == pid and banner(port, 3).startswith("SSH-2.0-")
        lab.set_link("server", False)
        assert banner(port, 1.5) == ""              # SSH crosses the server's link: it is cut too
        lab.set_link("server", True)
        assert banner(port, 5).startswith("SSH-2.0-")
        assert all(p.ok for p in lab.status()), [p.line for p in lab.status() if not p.ok]
    finally:
        lab.set_link("server", True)
        for host in (server, *clients):
            host.close()


@live
def test_a_server_whose_link_is_cut_during_a_command_is_declared_lost_in_seconds(lab):
    """Issue 30, item 2: with no keepalive, a cut link stalled a command for its whole timeout (300 s
    for update-grub). The SSH link now gives up after sshlink.LOST_S seconds without an answer."""
    import threading

    from tunepath.live.sshlink import LOST_S

    _, (server, *clients) = _hosts(lab)
    ended: dict = {}

    def long_command():
        started = time.monotonic()
        try:
            server.run("sleep 240", timeout=300)
        except TunepathError as exc:
            ended["error"] = str(exc)
        ended["after_s"] = time.monotonic() - started

    try:
        worker = threading.Thread(target=long_command, daemon=True)
        worker.start()
        time.sleep(2)
        cut = time.monotonic()
        lab.set_link("server", False)
        worker.join(LOST_S + 40)
        stall = time.monotonic() - cut
        assert "lost the host" in ended.get("error", ""), ended
        assert stall < LOST_S + 15, stall          # not the command's 300 s
    finally:
        lab.set_link("server", True)
        for host in (server, *clients):
            host.close()


@live
def test_up_refuses_a_namespace_it_did_not_create_and_rolls_back_a_failed_up(tmp_path, monkeypatch):
    _need_parts()
    prefix = f"tpu{os.getpid()}"
    _scrub(prefix)
    try:
        subprocess.run(["ip", "netns", "add", f"{prefix}-c1"], check=True)
        with pytest.raises(TunepathError, match=f"ip netns del {prefix}-c1"):
            Lab(tmp_path / "a", prefix).up()
        assert _leftovers(prefix) == [f"{prefix}-c1"] and not (tmp_path / "a").exists()
        subprocess.run(["ip", "netns", "del", f"{prefix}-c1"], check=True)

        def broken(*args, **kwargs):
            raise TunepathError("the forward broke")
        monkeypatch.setattr("tunepath.lab.build.start_forward", broken)
        with pytest.raises(TunepathError, match="the forward broke .what this `up` had created is removed"):
            Lab(tmp_path / "b", prefix).up()
        assert _leftovers(prefix) == [] and not (tmp_path / "b").exists()
    finally:
        _scrub(prefix)


@live
def test_down_removes_everything_it_created_and_nothing_else(lab):
    state = lab.state()
    pids = [p for h in state.hosts for p in (h.sshd_pid, h.socat_pid)]
    other = Path(lab.directory).parent / "unrelated.txt"
    other.write_text("not the lab's")
    lines = lab.down()
    assert lines[-1] == f"lab {lab.prefix} is down"
    assert _leftovers(lab.prefix) == []
    assert not any(process_alive(p) for p in pids)
    assert not lab.directory.exists() and other.read_text() == "not the lab's"
    assert all(banner(h.port, 0.5) == "" for h in state.hosts)
    assert lab.down() == [f"nothing to remove: no lab state in {lab.state_file}"]


# ---- without root: the parts that need no namespace ---------------------------------------------

def test_prefix_is_checked():
    assert check_prefix("tplab") == "tplab"
    for bad in ("", "TP", "1lab", "tp-lab", "tp.lab", "averylongprefix", "tp lab"):
        with pytest.raises(TunepathError, match="lower-case letters and digits"):
            check_prefix(bad)


def test_state_round_trips_and_a_damaged_one_is_one_line(tmp_path):
    state = LabState("tplab", str(tmp_path), True, ["tplab-net"], ["tplab-srv"], "/etc/sudoers.d/tplab-lab",
                     ["hosts.toml"])
    state.host("server").port, state.host("server").sshd_pid = 40000, 123
    save_state(tmp_path / "state.json", state)
    assert load_state(tmp_path / "state.json") == state
    assert load_state(tmp_path / "missing.json") is None
    raw = json.loads((tmp_path / "state.json").read_text())
    raw["hosts"][0]["port"] = "22; rm -rf /"
    (tmp_path / "state.json").write_text(json.dumps(raw))
    with pytest.raises(TunepathError, match="server.port must be a positive whole number"):
        load_state(tmp_path / "state.json")


def test_a_state_nested_too_deeply_is_a_damaged_state_in_one_line(tmp_path, capsys):
    """Issue 30, item 6 (the census): `lab status` with a state.json of 100,000 nested lists was a
    RecursionError traceback."""
    from tunepath.cli import main

    (tmp_path / "state.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TunepathError, match=r"state.json: not JSON \(nested too deeply\); remove the lab's parts"):
        load_state(tmp_path / "state.json")
    assert main(["lab", "status", "--dir", str(tmp_path), "--prefix", "tpcensus"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "nested too deeply" in err, err


def test_the_inventory_it_writes_is_one_tunepath_reads(tmp_path):
    key, known = tmp_path / "id with space", tmp_path / "known_hosts"
    key.write_text("not a real key")
    state = LabState("tplab", str(tmp_path))
    for port, h in zip((40001, 40002, 40003), state.hosts):
        h.port = port
    (tmp_path / "hosts.toml").write_text(hosts_toml("tplab", state.hosts, key, known, "0"))
    inventory = load_inventory(tmp_path / "hosts.toml")
    assert (inventory.server.port, inventory.server.user, inventory.server.address) == (40001, "tplab-srv",
                                                                                          "10.213.7.1")
    assert inventory.server.baseline_cpus == "0" and inventory.server.key_file == str(key)
    assert [(c.port, c.user, c.address) for c in inventory.clients] == [(40002, "tplab-c1", "10.213.7.11"),
                                                                          (40003, "tplab-c2", "10.213.7.12")]
    assert inventory.known_hosts == known and inventory.label.startswith("Lab: network namespaces on one ")
    assert f"{cpu_count()}-CPU" in inventory.label
    (tmp_path / "present").write_text("0-3,5\n")           # CPUs offline still count: the machine's
    assert cpu_count(tmp_path) == 5
    (tmp_path / "hosts.toml").write_text(hosts_toml("tplab", state.hosts, key, known, None))
    assert load_inventory(tmp_path / "hosts.toml").server.baseline_cpus is None


def test_not_root_is_one_line_before_anything_is_touched(tmp_path, monkeypatch, capsys):
    from tunepath.cli import main

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    for action in ("up", "down"):
        assert main(["lab", action, "--prefix", "tpnone", "--dir", str(tmp_path / "lab")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"tunepath lab {action} needs root" in err, err
    assert not (tmp_path / "lab").exists()


def test_missing_packages_are_named_with_the_command_that_installs_them(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None if name in ("socat", "ethtool") else f"/usr/bin/{name}")
    with pytest.raises(TunepathError, match=r"missing socat, ethtool: run scripts/bootstrap --lab, "
                                            r"or apt-get install socat ethtool"):
        require_tools()


@live
def test_a_state_cannot_make_down_remove_what_is_not_the_labs(tmp_path):
    from tunepath.lab.teardown import teardown
    from tunepath.lab.state import LabPaths

    outside = tmp_path / "precious"
    outside.write_text("keep")
    state = LabState("tplab", str(tmp_path / "lab"), files=["../precious"])
    (tmp_path / "lab").mkdir()
    save_state(tmp_path / "lab" / "state.json", state)
    with pytest.raises(TunepathError, match="which the lab never writes"):
        teardown(state, LabPaths(tmp_path / "lab"), lambda line: None)
    assert outside.read_text() == "keep" and (tmp_path / "lab" / "state.json").exists()
