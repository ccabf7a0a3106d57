"""The lab's server VM (``tunepath lab up --vm``): what it writes (inventory, state) without a VM,
and, as root where QEMU can run, one real cycle of the IOMMU change on a real guest kernel."""

from __future__ import annotations

import json

import pytest

from tunepath.errors import TunepathError
from tunepath.lab.inventory import hosts_toml
from tunepath.lab.state import LabState, VmState, load_state, save_state
from tunepath.live.hosts import load_inventory

pytestmark = pytest.mark.system


def test_with_a_vm_the_inventory_s_server_is_the_vm_and_its_label_says_emulated(tmp_path):
    key, known = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    key.write_text("not a real key")
    state = LabState("tplab", str(tmp_path))
    for port, h in zip((40001, 40002, 40003), state.hosts):
        h.port = port
    (tmp_path / "hosts.toml").write_text(hosts_toml("tplab", state.hosts, key, known, "0", vm_port=40009))
    inventory = load_inventory(tmp_path / "hosts.toml")
    server = inventory.server
    assert (server.port, server.user, server.address, server.baseline_cpus) == (40009, "tunepath", "10.213.7.2", "0")
    assert [(c.port, c.user) for c in inventory.clients] == [(40002, "tplab-c1"), (40003, "tplab-c2")]
    assert "QEMU virtual machine as the server" in inventory.label and "emulated" in inventory.label
    assert inventory.emulated is True           # the mark runs record, not the label's words


def test_the_vm_s_state_round_trips_and_a_damaged_one_is_one_line(tmp_path):
    state = LabState("tplab", str(tmp_path), vm=VmState("/x/.cache/vm-abc/base.raw", 4242, 40009, 4343))
    save_state(tmp_path / "state.json", state)
    assert load_state(tmp_path / "state.json") == state
    raw = json.loads((tmp_path / "state.json").read_text())
    raw["vm"]["pid"] = -1
    (tmp_path / "state.json").write_text(json.dumps(raw))
    with pytest.raises(TunepathError, match="vm.pid must be a positive whole number"):
        load_state(tmp_path / "state.json")
    raw["vm"] = "up"
    (tmp_path / "state.json").write_text(json.dumps(raw))
    with pytest.raises(TunepathError, match="vm must be null or an object"):
        load_state(tmp_path / "state.json")


# --- one real cycle on a real guest kernel (root, QEMU) ------------------------------------------

def _need_vm_parts():
    import os
    import shutil
    from pathlib import Path

    from conftest import unavailable

    tools = ("ip", "socat", "sudo", "ssh-keygen", "mmdebstrap", "qemu-system-x86_64", "qemu-img", "ssh-keyscan")
    missing = ([] if os.geteuid() == 0 else ["root"]) + [t for t in tools if not shutil.which(t)] \
        + ([] if Path("/dev/net/tun").exists() else ["/dev/net/tun"])
    if missing:
        unavailable(f"the VM cycle needs {', '.join(missing)} (run as root after scripts/bootstrap --lab)")


@pytest.fixture(scope="module")
def vm_lab(tmp_path_factory):
    """A lab with the server VM. The image is built once per machine and cached in .cache/vm-*."""
    import os

    from test_lab import running_lab

    _need_vm_parts()
    with running_lab(tmp_path_factory, f"tpv{os.getpid() % 100000}", vm=True) as lab:
        yield lab


def _dmesg_domain(host) -> str:
    out = host.run("sudo -n dmesg | grep -i 'default domain type' || true", timeout=30).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


def test_the_iommu_change_reboots_the_vm_and_the_restore_reboots_it_back(vm_lab):
    """apply (GRUB drop-in, update-grub, reboot, wait on the boot id), verify (/proc/cmdline, dmesg),
    restore (drop-in back, update-grub), reboot, verify: the commands the IOMMU page prints."""
    from tunepath.live.hosts import connect, load_inventory
    from tunepath.live.hoststate import GRUB_DROP_IN, load_original_state, save_original_state
    from tunepath.live.reboot import reboot_and_wait
    from tunepath.live.restore import reboot_to_original, restore
    from tunepath.model.context import HostContext
    from tunepath.steps import plan

    inventory = load_inventory(vm_lab.hosts_file)
    reconnect = lambda: connect(inventory.server, inventory)          # noqa: E731
    host = reconnect()
    try:
        before = host.run("cat /proc/cmdline", timeout=15).stdout.strip()
        assert "iommu.passthrough" not in before and "Translated" in _dmesg_domain(host)
        save_original_state(host, {})
        block = next(b for b in plan("iommu", HostContext.from_dict({})) if b.id == "iommu-passthrough")
        grub, _, _ = block.text.partition("\nsudo update-grub")
        host.run(grub, timeout=60, as_written=True)
        host.run("sudo update-grub", timeout=300, as_written=True)
        host, cmdline = reboot_and_wait(host, reconnect, ["iommu.strict=0", "iommu.passthrough=1"])
        assert "Passthrough" in _dmesg_domain(host), _dmesg_domain(host)
        assert host.run(f"test -f {GRUB_DROP_IN}", check=False, timeout=15).exited == 0
        done = restore(host, forget=False)
        assert any("GRUB IOMMU settings restored" in line for line in done), done
        host, lines = reboot_to_original(host, reconnect)
        assert lines and "the kernel command line is the original again" in lines[0]
        assert host.run("cat /proc/cmdline", timeout=15).stdout.strip() == before
        assert "Translated" in _dmesg_domain(host)
        assert host.run(f"test -e {GRUB_DROP_IN}", check=False, timeout=15).exited != 0
        assert load_original_state(host) is None                     # forgotten once the host is as it was
    finally:
        host.close()
