"""Host changes against this machine's real kernel, without a lab: a veth with 4 queues in a network
namespace of its own, a CPU (CPU 1 here) taken offline and back, huge pages reserved and released,
and a Java 17 that reports large pages in use. Root only (CI runs as root).

Everything machine-wide (CPU hotplug, vm.nr_hugepages) happens under ``flock /tmp/tunepath-apply.lock``,
which other users of this machine take too, and is put back in finalizers however a test ends: the CPUs
online, the huge page pool at its size before the test, the namespace deleted, Java stopped by its pid.
The saved original state goes to a HOME of the test's own, never root's.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, unavailable
from tunepath.evidence.recorder import RunRecorder
from tunepath.live.facts import channels_command, gather_facts, parse_channels, parse_hugepages
from tunepath.live.hosts import HostSpec, Inventory, LocalHost
from tunepath.live.hoststate import load_original_state, preflight, save_original_state
from tunepath.live.restore import restore
from tunepath.live.loadgen import LoadTool
from tunepath.model.context import HostContext, cpu_ranges, parse_cpu_list
from tunepath.steps import plan
from tunepath.steps.jvm import PAGESIZE_LOG

pytestmark = pytest.mark.system

LOCK = Path("/tmp/tunepath-apply.lock")
CPUS = Path("/sys/devices/system/cpu")
POOL = Path("/proc/sys/vm/nr_hugepages")


def cpus_online() -> str:
    return (CPUS / "online").read_text().strip()


def last_cpu() -> int:
    """The CPU these tests take offline: the highest online one (CPU 1 on a 2-CPU machine)."""
    return parse_cpu_list(cpus_online())[-1]


def need(*parts: str) -> None:
    """Skip cleanly outside CI when a part is missing; in CI (root, CI=true) fail instead."""
    checks = {"root": os.geteuid() == 0, "ip": shutil.which("ip"), "ethtool": shutil.which("ethtool"),
              "sudo": shutil.which("sudo"), "java": shutil.which("java"),
              "CPU hotplug": last_cpu() > 0 and os.access(CPUS / f"cpu{last_cpu()}" / "online", os.W_OK),
              "huge pages": POOL.exists() and os.access(POOL, os.W_OK)}
    missing = [p for p in parts if not checks[p]]
    if missing:
        msg = f"real host-change tests need {', '.join(missing)}"
        unavailable(msg)


@pytest.fixture()
def apply_lock():
    """The machine-wide lock every helper and test that changes CPUs or huge pages takes."""
    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture()
def home(tmp_path, monkeypatch):
    """A HOME of the test's own: ~/.tunepath/original-state.json lands here, not in root's home."""
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    return path


@pytest.fixture()
def machine(apply_lock):
    """The CPUs online and the huge page pool at its size as before the test, whatever happened."""
    pool, online = POOL.read_text().strip(), parse_cpu_list(cpus_online())
    yield
    for cpu in sorted(set(online) - set(parse_cpu_list(cpus_online()))):
        (CPUS / f"cpu{cpu}" / "online").write_text("1")
    if POOL.read_text().strip() != pool:
        subprocess.run(["sysctl", "-q", "-w", f"vm.nr_hugepages={pool}"], check=False)


class NamespaceHost(LocalHost):
    """This machine, each command run inside a network namespace (``ip netns exec``)."""

    def __init__(self, netns: str):
        super().__init__(HostSpec("server", "10.213.99.1"))     # not "local": a server reached over a NIC
        self.netns = netns

    def _run(self, command, timeout, display, pidfile=None):
        return super()._run(f"ip netns exec {self.netns} bash -c {shlex.quote(command)}", timeout, display, pidfile)


@pytest.fixture()
def veth():
    """A namespace of its own holding eth0, one end of a veth pair with 4 receive and 4 transmit
    queues, with an address and a default route inside the namespace only."""
    need("root", "ip", "ethtool", "sudo")
    ns = f"tpchg-{os.getpid()}"
    sh = lambda *a: subprocess.run(["ip", *a], check=True, capture_output=True)  # noqa: E731
    sh("netns", "add", ns)
    try:
        sh("-n", ns, "link", "add", "eth0", "numtxqueues", "4", "numrxqueues", "4", "type", "veth", "peer", "name",
           "tpchg-peer", "numtxqueues", "4", "numrxqueues", "4")
        sh("-n", ns, "addr", "add", "10.213.99.1/24", "dev", "eth0")
        sh("-n", ns, "link", "set", "eth0", "up")
        sh("-n", ns, "link", "set", "tpchg-peer", "up")
        sh("-n", ns, "route", "add", "default", "via", "10.213.99.254", "dev", "eth0")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def channels(ns: str):
    out = subprocess.run(["ip", "netns", "exec", ns, "bash", "-c", channels_command("eth0")], capture_output=True,
                         text=True, check=True).stdout
    return parse_channels(out)


def test_facts_preflight_set_queues_and_restore_on_a_real_veth(veth, home, apply_lock):
    host = NamespaceHost(veth)
    facts, _ = gather_facts(host)
    assert facts["nic"]["name"] == "eth0" and facts["nic"]["channels"] == "rx-tx" and facts["nic"]["queues"] == 4
    ctx = HostContext(nic="eth0", nic_queues=1, nic_channels=facts["nic"]["channels"], total_cpus=2,
                      baseline_cpus=(0,))
    blocks = {b.id: b for b in plan("nic-queues", ctx)}
    assert blocks["set-queues"].text == "sudo ethtool -L eth0 rx 1 tx 1"
    assert preflight(host, blocks["set-queues"], facts, same_machine=False).ok
    assert "loopback" in preflight(host, blocks["set-queues"], facts, same_machine=True).reason
    combined = plan("nic-queues", HostContext(nic="eth0", nic_queues=1))[1]
    assert "has rx-tx channels" in preflight(host, combined, facts, same_machine=False).reason

    state = save_original_state(host, facts)
    assert (state.nic_channels, state.nic_queues, state.nic_tx) == ("rx-tx", 4, 4)
    assert json.loads((home / ".tunepath" / "original-state.json").read_text())["nic_channels"] == "rx-tx"
    host.run(blocks["set-queues"].text, as_written=True, timeout=30)
    assert (channels(veth).rx, channels(veth).tx) == (1, 1)
    assert "RX:\t\t1" in host.run(blocks["show-queues-after"].text, as_written=True).stdout
    done = restore(host)
    assert done == ["eth0: rx 4 tx 4 queues again on 10.213.99.1 (`ethtool -L eth0 rx 4 tx 4`)"]
    assert (channels(veth).rx, channels(veth).tx) == (4, 4)
    assert restore(host) == []


def test_restore_brings_back_cpus_queues_and_huge_pages_at_once_then_does_nothing(veth, home, machine):
    """The state a fault leaves: queues set, a CPU offline, huge pages reserved; one restore undoes all."""
    need("CPU hotplug", "huge pages")
    host = NamespaceHost(veth)
    facts, _ = gather_facts(host)
    before_pool, before_cpus, last = POOL.read_text().strip(), cpus_online(), last_cpu()
    keep = tuple(c for c in parse_cpu_list(before_cpus) if c != last)
    ctx = HostContext(nic="eth0", nic_queues=1, nic_channels="rx-tx", total_cpus=last + 1, baseline_cpus=keep)
    blocks = {b.id: b for step in ("baseline", "nic-queues", "jvm") for b in plan(step, ctx)}
    for bid in ("offline-cpus", "set-queues", "reserve-hugepages"):
        assert preflight(host, blocks[bid], facts, same_machine=False).ok, bid
    save_original_state(host, facts)
    for bid in ("offline-cpus", "set-queues", "reserve-hugepages"):
        host.run(blocks[bid].text, as_written=True, timeout=60)
    assert cpus_online() == cpu_ranges(keep) and channels(veth).rx == 1 and POOL.read_text().strip() == "664"
    done = restore(host, forget=True)
    assert [line.split(" on 10.213.99.1")[0] for line in done] == [
        f"CPUs {before_cpus} online", "eth0: rx 4 tx 4 queues again",
        f"huge pages released: {before_pool} reserved again (were 664)"]
    assert cpus_online() == before_cpus and channels(veth).rx == 4 and POOL.read_text().strip() == before_pool
    assert load_original_state(host) is None and restore(host) == []


def test_a_cpu_offline_for_real_and_back_through_the_baseline_block(home, machine):
    need("root", "sudo", "CPU hotplug")
    host = LocalHost()
    before, last = cpus_online(), last_cpu()
    keep = tuple(c for c in parse_cpu_list(before) if c != last)
    block = next(b for b in plan("baseline", HostContext(total_cpus=last + 1, baseline_cpus=keep))
                 if b.id == "offline-cpus")
    assert block.text == f'for no in {last}; do sudo bash -c "echo 0 > /sys/devices/system/cpu/cpu${{no}}/online"; done'
    facts = {"numa_nodes": 1, "cpus_online": before}
    assert preflight(host, block, facts, same_machine=True).ok
    cpu0 = next(b for b in plan("baseline", HostContext(total_cpus=last + 1, baseline_cpus=(last,)))
                if b.id == "offline-cpus")
    if not (CPUS / "cpu0" / "online").exists():
        assert "CPU 0 on local" in preflight(host, cpu0, facts, same_machine=True).reason
    save_original_state(host, facts)
    host.run(block.text, as_written=True, timeout=60)
    assert cpus_online() == cpu_ranges(keep)
    assert restore(host) == [f"CPUs {before} online on local "
                             f"(`for no in {last}; do echo 1 > /sys/devices/system/cpu/cpu$no/online; done`)"]
    assert cpus_online() == before and restore(host) == []


def _session(tmp_path, host, ctx, facts, apply=True, allow_reboot=False):
    from tunepath.live.session import LiveOptions, Session

    record = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record.update(run_id="live-real", kind="live", status="partial", measurements=[], verification=[], blocks=[],
                  warnings=[])
    rec = RunRecorder(tmp_path / "runs", record)
    inv = Inventory(host.spec, (HostSpec("client", "local"),), tmp_path / "kh")
    return Session("live-real", LiveOptions(apply=apply, allow_reboot=allow_reboot), inv, host, [host], rec,
                   LoadTool("wrk2", "wrk", None, 2), None, ctx, facts), rec


HOLD = "public class Hold { public static void main(String[] a) throws Exception { Thread.sleep(60000); } }\n"


def test_huge_pages_reserved_java_uses_them_and_they_are_released(tmp_path, home, machine):
    """The JVM step's own blocks: reserve (through `disruptive`, with apply), a Java 17 with
    -XX:+UseLargePages and the evidence flag, the page's evidence command, the release."""
    from tunepath.live.actions import disruptive, large_pages_evidence, release_hugepages

    need("root", "sudo", "java", "huge pages")
    tc = tmp_path / "tc"
    (tc / "logs").mkdir(parents=True)
    (tc / "temp").mkdir()
    host = LocalHost()
    facts, _ = gather_facts(host)
    ctx = HostContext(tomcat_home=str(tc), hugepage_kb=facts["hugepages"]["size_kb"])
    blocks = {b.id: b for b in plan("jvm", ctx)}
    session, rec = _session(tmp_path, host, ctx, facts)
    before = POOL.read_text().strip()
    assert disruptive(session, "jvm", blocks["reserve-hugepages"]) == (True, "")
    asked = int(blocks["reserve-hugepages"].text.rsplit("=", 1)[1])
    assert parse_hugepages(Path("/proc/meminfo").read_text()).total == asked
    (tmp_path / "Hold.java").write_text(HOLD)
    with open(tc / "logs" / "catalina.out", "w") as out:
        java = subprocess.Popen(["java", "-Xms64m", "-Xmx64m", "-XX:+UseLargePages", PAGESIZE_LOG,
                                 str(tmp_path / "Hold.java")], stdout=out, stderr=subprocess.STDOUT)
    try:
        (tc / "temp" / "tomcat.pid").write_text(f"{java.pid}\n")
        deadline = time.monotonic() + 60
        while "Large Page Support" not in (tc / "logs" / "catalina.out").read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
        large_pages_evidence(session, "jvm", blocks["large-pages-in-use"], 1)
    finally:
        java.kill()
        java.wait(30)
    [entry] = rec.record["verification"]
    output = (tmp_path / "runs" / ".inprogress" / "live-real" / entry["output"]).read_text()
    assert entry["name"] == "large-pages-in-use" and entry["command"] == blocks["large-pages-in-use"].text
    size = ctx.hugepage_kb // 1024
    assert "Large Page Support: Enabled (Explicit)" in output and f"page_size={size}M" in output
    pages = parse_hugepages(output)
    assert pages.total == asked and 0 < pages.in_use, output          # Free < Total: the JVM touched them
    assert not [w for w in rec.record["warnings"] if "large pages" in w]
    release_hugepages(session, "jvm")
    assert POOL.read_text().strip() == before
    assert rec.record["blocks"][-1]["block"] == "release-hugepages"
    assert rec.record["blocks"][-1]["text"] == f"sudo sysctl -w vm.nr_hugepages={before}"
    assert restore(host) == []


def test_iommu_stays_a_dry_run_here_even_with_apply(tmp_path, home):
    """A server on this machine's kernel (a namespace, or this very host) is never rebooted."""
    from tunepath.live.actions import disruptive

    need("root", "sudo")
    host = LocalHost(HostSpec("server", "127.0.0.1", port=2222))   # reached "over SSH", same kernel
    block = next(b for b in plan("iommu", HostContext()) if b.id == "iommu-passthrough")
    session, rec = _session(tmp_path, host, HostContext(), {"numa_nodes": 1})
    changed, reason = disruptive(session, "iommu", block)
    assert not changed and "allow_reboot" in reason and "same boot id" in reason
    assert rec.record["blocks"][-1]["outcome"] == "dry-run"
    session, rec = _session(tmp_path / "b", host, HostContext(), {"numa_nodes": 1}, allow_reboot=True)
    changed, reason = disruptive(session, "iommu", block)
    assert not changed and "would reboot this machine" in reason
    assert not (home / ".tunepath" / "original-state.json").exists()      # nothing was about to change


def test_kernel_step_sysctls_saved_switched_and_put_back_in_a_namespace(veth, home):
    """The kernel step's sysctls on a real kernel, in a namespace of the test's own (they are per
    namespace): saved once, switched per variant, put back by the restore that ends every run."""
    from tunepath.live import sysctls
    from tunepath.model.plan import Sysctl
    from tunepath.steps.kernel_net import SETTINGS

    host = NamespaceHost(veth)
    names = ("net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog")
    before = sysctls.read_values(host, names)
    assert all(v and v.isdigit() for v in before.values())
    touched = [s for settings in SETTINGS.values() for s in settings]
    assert sysctls.check(host, SETTINGS["backlogs"]) is None
    assert "net.core.netdev_max_backlog does not exist" in sysctls.check(host, SETTINGS["netdev-backlog"])
    said = sysctls.switch(host, "server", SETTINGS["backlogs"], touched)
    assert sysctls.read_values(host, names) == {n: "65535" for n in names}
    assert said == {**{n: "65535" for n in names}, "net.core.netdev_max_backlog": None}   # what it set, from one read
    assert sysctls.saved_values(host) == before            # the originals, saved before the change
    sysctls.switch(host, "server", (), touched)               # another variant: the originals again
    assert sysctls.read_values(host, names) == before
    sysctls.switch(host, "server", SETTINGS["backlogs"], touched)
    sysctls.switch(host, "server", (Sysctl("net.core.somaxconn", "512"),), touched)
    assert sysctls.saved_values(host) == before            # a second change keeps the first value saved
    lines = restore(host)                                  # what every run's end, guard and `tunepath restore` call
    assert sysctls.read_values(host, names) == before and sysctls.saved_values(host) == {}
    assert any("net.core.somaxconn=" in line and "`sudo sysctl -w net.core.somaxconn=" in line for line in lines)
    assert restore(host) == []                             # nothing left to put back
    assert not (home / ".tunepath" / "original-sysctls.json").exists()


def test_nic_interrupts_pinned_and_put_back_on_this_machines_nic(home, apply_lock):
    """The kernel step's NIC-interrupt variant on a real NIC of this machine (a virtio NIC's interrupts are
    its PCI parent's): each pinned to CPU 0, then every affinity back as it was. A veth has none."""
    from tunepath.live import irqs

    need("root")
    host = LocalHost()
    nics = [n.name for n in Path("/sys/class/net").iterdir() if irqs.nic_irqs(host, n.name)]
    if not nics:
        pytest.skip("no NIC of this machine has interrupts of its own (msi_irqs)")
    nic, numbers = nics[0], irqs.nic_irqs(host, nics[0])
    files = [Path(f"/proc/irq/{n}/smp_affinity_list") for n in numbers]
    before = [f.read_text().strip() for f in files]
    try:
        assert irqs.check(host, nic) is None
        said = irqs.pin(host, nic, (0,))
        assert [f.read_text().strip() for f in files] == ["0"] * len(files)
        assert said[-1] == f"interrupts {', '.join(map(str, numbers))} of {nic} on CPUs 0"
        assert (home / ".tunepath" / "original-irqs.json").exists()
        irqs.pin(host, nic, (0,))                       # a second round keeps the first saved values
        lines = restore(host)                           # what every run's end, guard and `tunepath restore` call
        assert [f.read_text().strip() for f in files] == before
        assert not (home / ".tunepath" / "original-irqs.json").exists()
        assert lines == ([f"the affinity of interrupts {', '.join(str(n) for n, b in zip(numbers, before) if b != '0')} "
                          f"again on {host.name}"] if any(b != "0" for b in before) else [])
    finally:
        for f, value in zip(files, before):
            f.write_text(value)


def test_a_veth_has_no_interrupts_to_pin(veth):
    from tunepath.live import irqs

    reason = irqs.check(NamespaceHost(veth), "eth0")
    assert reason.startswith("eth0 on ") and "has no interrupts of its own" in reason and "veth" in reason
