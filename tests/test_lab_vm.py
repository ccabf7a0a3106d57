"""The lab's server VMs (``tunepath lab up --vm [--arch arm64]``): what they write (inventory, state)
without a VM, and, as root where QEMU can run, one real cycle of the IOMMU change on a real guest
kernel of each: x86 (GRUB reboots it) and Arm (the host boots what its grub.cfg names)."""

from __future__ import annotations

import json
import re

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

def _need_vm_parts(arch: str = "amd64"):
    import os
    import shutil
    from pathlib import Path

    from conftest import unavailable

    tools = ("ip", "socat", "sudo", "ssh-keygen", "mmdebstrap", "qemu-system-x86_64", "qemu-img", "ssh-keyscan")
    if arch == "arm64":
        tools += ("qemu-system-aarch64", "qemu-aarch64-static", "arch-test", "debugfs", "fdtget", "fdtput")
    missing = ([] if os.geteuid() == 0 else ["root"]) + [t for t in tools if not shutil.which(t)] \
        + ([] if Path("/dev/net/tun").exists() else ["/dev/net/tun"])
    if missing:
        unavailable(f"the VM cycle needs {', '.join(missing)} (run as root after scripts/bootstrap "
                    f"{'--lab-arm64' if arch == 'arm64' else '--lab'})")


@pytest.fixture(scope="module")
def vm_lab(tmp_path_factory):
    """A lab with the server VM. The image is built once per machine and cached in .cache/vm-*."""
    import os

    from test_lab import running_lab

    _need_vm_parts()
    with running_lab(tmp_path_factory, f"tpv{os.getpid() % 100000}", vm=True) as lab:
        yield lab


@pytest.fixture(scope="module")
def arm_lab(tmp_path_factory):
    """A lab with the Arm server VM (an emulated Neoverse-N1); its image is cached in .cache/vm-arm64-*."""
    import os

    from test_lab import running_lab

    _need_vm_parts("arm64")
    with running_lab(tmp_path_factory, f"tpa{os.getpid() % 100000}", vm=True, arch="arm64") as lab:
        yield lab


def _dmesg_domain(host) -> str:
    out = host.run("sudo -n dmesg | grep -i 'default domain type' || true", timeout=30).stdout
    return out.strip().splitlines()[-1] if out.strip() else ""


def test_the_iommu_change_reboots_the_vm_and_the_restore_reboots_it_back(vm_lab):
    """apply (GRUB drop-in, update-grub, reboot, wait on the boot id), verify (/proc/cmdline, dmesg),
    restore (drop-in back, update-grub), reboot, verify: the commands the IOMMU page prints."""
    _iommu_cycle(vm_lab)


def test_the_arm_vm_is_a_two_node_neoverse_n1_whose_own_update_grub_decides_its_reboot(arm_lab):
    """The Arm VM: aarch64, Neoverse-N1, 2 NUMA nodes, the SMMUv3 translating, a 4-queue NIC that
    `ethtool -L` changes; and the IOMMU cycle, whose reboots boot what the guest's grub.cfg names."""
    from tunepath.live.hosts import connect, load_inventory

    inventory = load_inventory(arm_lab.hosts_file)
    assert inventory.arch == "aarch64" and inventory.emulated
    host = connect(inventory.server, inventory)
    try:
        assert host.run("uname -m", timeout=30).stdout.strip() == "aarch64"
        assert "Neoverse-N1" in host.run("lscpu", timeout=30).stdout
        assert host.run("ls -d /sys/devices/system/node/node[0-9]*", timeout=30).stdout.split() == [
            "/sys/devices/system/node/node0", "/sys/devices/system/node/node1"]
        assert "arm-smmu-v3" in host.run("sudo -n dmesg", timeout=30).stdout
        # the device tree puts the PCIe host bridge on node 1 (lab/vmdtb.py): the NIC is read as the NUMA step reads it
        assert host.run("cat /sys/class/net/eth0/device/../numa_node", timeout=30).stdout.strip() == "1"
        # wrk2's build dependencies are in the image, so the VM can be its own client (hosts-self.toml)
        assert host.run("dpkg -s build-essential libluajit-5.1-dev libssl-dev git >/dev/null && echo ok",
                        timeout=60).stdout.strip() == "ok"
        channels = host.run("sudo -n ethtool -l eth0", timeout=30).stdout
        assert re.search(r"Pre-set maximums:.*?Combined:\s+4", channels, re.S), channels
        host.run("sudo -n ethtool -L eth0 combined 2", timeout=60)
        assert re.search(r"Current hardware settings:.*?Combined:\s+2", host.run("sudo -n ethtool -l eth0",
                                                                                  timeout=30).stdout, re.S)
        host.run("sudo -n ethtool -L eth0 combined 4", timeout=60)
    finally:
        host.close()
    _iommu_cycle(arm_lab)


def _iommu_cycle(lab) -> None:
    from tunepath.live.hosts import connect, load_inventory
    from tunepath.live.hoststate import GRUB_DROP_IN, load_original_state, save_original_state
    from tunepath.live.reboot import reboot_and_wait
    from tunepath.live.restore import reboot_to_original, restore
    from tunepath.model.context import HostContext
    from tunepath.steps import plan

    inventory = load_inventory(lab.hosts_file)
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


def test_the_host_reads_the_boot_entry_and_its_files_even_from_a_disk_that_lost_power(tmp_path):
    """The Arm VM's boot (lab/vmboot.read_boot) on a real ext4 file (mke2fs -d), also after its block
    bitmap was damaged as a power cut can leave it: GRUB does not check bitmaps, nor does the host."""
    import re as _re
    import shutil
    import subprocess
    from pathlib import Path

    from conftest import unavailable
    from tunepath.lab.vmboot import read_boot

    if not (shutil.which("mke2fs") or Path("/sbin/mke2fs").exists()) or not shutil.which("debugfs"):
        unavailable("mke2fs and debugfs are missing (apt-get install e2fsprogs)")
    tree = tmp_path / "tree"
    (tree / "boot" / "grub").mkdir(parents=True)
    (tree / "boot" / "vmlinuz-6.1.0-57-arm64").write_bytes(b"kernel" * 1000)
    (tree / "boot" / "initrd.img-6.1.0-57-arm64").write_bytes(b"initrd" * 1000)
    (tree / "boot" / "grub" / "grub.cfg").write_text(
        "menuentry 'Debian GNU/Linux' {\n\tlinux\t/boot/vmlinuz-6.1.0-57-arm64 root=UUID=f9a9 ro iommu.strict=1\n"
        "\tinitrd\t/boot/initrd.img-6.1.0-57-arm64\n}\n")
    disk = tmp_path / "disk.raw"
    subprocess.run([shutil.which("mke2fs") or "/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-d", str(tree),
                    str(disk), "8M"], check=True)
    stats = subprocess.run(["debugfs", "-R", "stats", str(disk)], capture_output=True, text=True).stdout
    bitmap = int(_re.search(r"block bitmap at (\d+)", stats).group(1))
    with open(disk, "r+b") as f:                    # what a power cut mid-write can leave: a torn bitmap
        f.seek(bitmap * 4096)
        f.write(b"\xa5" * 4096)
    entry, kernel, initrd = read_boot(disk, tmp_path / "boot")
    assert entry.args == "root=UUID=f9a9 ro iommu.strict=1" and entry.kernel == "/boot/vmlinuz-6.1.0-57-arm64"
    assert kernel.read_bytes() == b"kernel" * 1000 and initrd.read_bytes() == b"initrd" * 1000
