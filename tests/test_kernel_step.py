"""The kernel network step (issue 31, item 4): its variants' connector and sysctls, its plan, what
it reads from its recorded checks, and the lab's sudo for the clients. The sysctls on a real kernel:
tests/test_host_changes_real.py; on the lab's hosts over SSH: tests/test_lab.py."""

from __future__ import annotations

import fnmatch

import pytest

from tunepath.evidence.store import Run, Verification
from tunepath.lab.users import CLIENT_SUDO
from tunepath.model.context import HostContext
from tunepath.model.plan import Sysctl
from tunepath.parse.netstat import count, counters, increase
from tunepath.steps import get_step
from tunepath.steps.kernel_net import OVERFLOWS, SETTINGS, kernel_table

pytestmark = pytest.mark.fast
STEP = get_step("kernel-network")
NSTAT = "#kernel\nTcpExtListenOverflows           {o}                  0.0\nTcpExtListenDrops               {d}     0.0\n"


def test_every_variant_opens_a_connection_per_request_and_changes_one_thing():
    ctx = HostContext()
    connectors = {v.name: STEP.tomcat_config(v.name, ctx).connector for v in STEP.variants}
    assert all(c["maxKeepAliveRequests"] == "1" for c in connectors.values())
    assert connectors["stock"] == {"maxKeepAliveRequests": "1"}
    assert connectors["accept-count"]["acceptCount"] == "4096" and "accept-count" not in SETTINGS
    assert connectors["backlogs"]["acceptCount"] == "65535"
    assert {s.name for s in SETTINGS["backlogs"]} == {"net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog"}
    assert connectors["netdev-backlog"] == connectors["tw-reuse"] == connectors["stock"]


def test_a_variants_sysctls_are_a_disruptive_block_of_that_variant_on_the_host_it_names():
    blocks = {b.id: b for b in STEP.plan(HostContext())}
    for variant, settings in SETTINGS.items():
        block = blocks[f"sysctl-{variant}"]
        assert block.disruptive and block.variant == variant and STEP.disruptive_needs[variant] == (block.id,)
        assert block.host == settings[0].host and block.text.splitlines() == [s.command for s in settings]
    assert blocks["sysctl-tw-reuse"].host == "client"
    assert blocks["sysctl-tw-reuse"].text == "sudo sysctl -w net.ipv4.tcp_tw_reuse=1"
    # read-only blocks belong to a variant, so the plan does not run them (the step records the values itself)
    assert all(blocks[b].variant and not blocks[b].disruptive for b in ("show-sysctls", "show-sysctls-client",
                                                                        "show-overflows", "show-time-wait"))


def test_the_lab_lets_a_client_run_exactly_the_steps_client_commands_and_their_restores():
    allowed = CLIENT_SUDO
    for s in (x for settings in SETTINGS.values() for x in settings if x.host == "client"):
        for value in (s.value, "0", "2"):               # the change, and the values a restore writes back
            assert fnmatch.fnmatchcase(f"/usr/sbin/sysctl -w {s.name}={value}", allowed)
    assert not fnmatch.fnmatchcase("/usr/sbin/sysctl -w net.core.somaxconn=1", allowed)
    assert not fnmatch.fnmatchcase("/usr/sbin/sysctl -w net.ipv4.tcp_tw_reuse=1 kernel.sysrq=1", allowed)


@pytest.mark.parametrize("bad", [("somaxconn", "1"), ("net.core.somaxconn", "1; reboot"), ("net.core.x", "-1"),
                                 ("net.core.somaxconn", "1 2")])
def test_a_sysctl_that_could_carry_a_command_is_refused(bad):
    with pytest.raises(ValueError):
        Sysctl(*bad)
    assert Sysctl("net.core.somaxconn", "65535").path == "/proc/sys/net/core/somaxconn"


def test_nstat_and_ss_outputs_are_read():
    assert counters(NSTAT.format(o=12, d=13)) == {"TcpExtListenOverflows": 12, "TcpExtListenDrops": 13}
    assert increase(NSTAT.format(o=12, d=0), NSTAT.format(o=40, d=0), "TcpExtListenOverflows") == 28
    assert increase("", NSTAT.format(o=4, d=0), "TcpExtListenOverflows") is None
    assert increase(NSTAT.format(o=9, d=0), NSTAT.format(o=4, d=0), "TcpExtListenOverflows") is None   # a reboot
    assert count("18042\n") == 18042 and count("(no output)\n") is None


def _run(tmp_path, files: dict[str, tuple[str, str]]) -> Run:
    checks = []
    for name, (host, text) in files.items():
        (tmp_path / f"{name}.txt").write_text(text)
        checks.append(Verification("kernel-network", name, host, OVERFLOWS, tmp_path / f"{name}.txt"))
    return Run("r", tmp_path, {}, HostContext(), None, verifications=checks)


def test_the_table_gives_the_listen_queue_overflows_and_time_wait_sockets_per_variant(tmp_path):
    run = _run(tmp_path, {
        "sysctls-before": ("server", "net.core.somaxconn = 4096\nnet.ipv4.tcp_max_syn_backlog = 2048\n"),
        "sysctls-backlogs": ("server", "net.core.somaxconn = 65535\n"),
        "overflows-stock": ("server", f"# before the warm-up\n{NSTAT.format(o=5, d=5)}# after the measurement\n"
                                      f"{NSTAT.format(o=1205, d=1205)}"),
        "overflows-backlogs": ("server", f"# before the warm-up\n{NSTAT.format(o=7, d=7)}# after the measurement\n"
                                         f"{NSTAT.format(o=7, d=7)}"),
        "time-wait-stock": ("server", "21000\n"), "time-wait-stock-client": ("client", "5000\n")})
    table = kernel_table(run, STEP.variants).data()
    rows = {r["variant"]: r["cells"] for r in table["rows"]}
    assert list(rows) == ["stock", "backlogs"]          # only the variants whose checks were recorded
    assert rows["stock"] == {"queue": "100", "overflows": "1,200", "tw_server": "21,000", "tw_client": "5,000"}
    assert rows["backlogs"]["queue"] == "65,535" and rows["backlogs"]["overflows"] == "0"
    assert rows["backlogs"]["tw_server"] == "n/a"
    assert kernel_table(_run(tmp_path, {}), STEP.variants).analysis() is None


def test_the_interrupt_variant_pins_the_nics_interrupts_to_its_nodes_cpus():
    ctx = HostContext(nic="eth0", numa_cpus=(96, 97, 98, 99))
    block = {b.id: b for b in STEP.plan(ctx)}["pin-irqs"]
    assert block.disruptive and block.variant == "irq-affinity" and STEP.disruptive_needs["irq-affinity"] == ("pin-irqs",)
    assert block.text.splitlines() == [
        "sudo systemctl stop irqbalance",
        "for irq in $(ls /sys/class/net/eth0/device/msi_irqs 2>/dev/null || ls /sys/class/net/eth0/device/../msi_irqs "
        "2>/dev/null); do",
        "  echo 96-99 | sudo tee /proc/irq/$irq/smp_affinity_list", "done"]
    assert STEP.tomcat_config("irq-affinity", ctx).connector == {"maxKeepAliveRequests": "1"}


def test_only_the_kernel_steps_changes_are_applied_per_measurement_by_the_step():
    """The plan runs every other disruptive block itself (the JVM's huge pages, of its large-pages variant)."""
    assert STEP.measured_changes == {"sysctl-backlogs", "sysctl-netdev-backlog", "sysctl-tw-reuse", "pin-irqs"}
    assert not get_step("jvm").measured_changes
