"""The lab's Arm server VM (issue 32), its parts that need no QEMU: the image's recipe per
architecture, the disk's partition table, the emulated machine, the binfmt entry the image build
registers, and the inventory that declares the server's architecture. The VM itself, booted:
tests/test_lab_vm.py."""

from __future__ import annotations

import json
import struct

import pytest

from tunepath.errors import TunepathError
from tunepath.lab.binfmt import entry_line
from tunepath.lab.inventory import hosts_toml, self_hosts_toml
from tunepath.lab.state import LabState, VmState, load_state, save_state
from tunepath.lab.vm import VmSpec, qemu_argv
from tunepath.lab.vmarch import arch
from tunepath.lab.vmimage import default_recipe, image_dir, write_mbr
from tunepath.live.hosts import load_inventory

pytestmark = pytest.mark.fast


def test_each_architecture_has_its_own_recipe_and_cached_image():
    x86, arm = default_recipe("amd64"), default_recipe("aarch64")
    assert (x86.arch, arm.arch) == ("amd64", "arm64")
    assert "linux-image-amd64" in x86.packages and "grub-pc" in x86.packages
    assert "linux-image-arm64" in arm.packages and "grub2-common" in arm.packages    # update-grub, no firmware GRUB
    assert {"build-essential", "libluajit-5.1-dev", "git"} <= set(arm.packages)     # wrk2 builds on the guest
    assert not {"linux-image-amd64", "grub-pc"} & set(arm.packages)
    assert arm.cmdline.endswith("console=ttyAMA0") and x86.cmdline.endswith("console=ttyS0")
    assert image_dir(__import__("pathlib").Path("c"), arm).name.startswith("vm-arm64-")
    assert x86.digest() != arm.digest()
    with pytest.raises(TunepathError, match="choose one of amd64, arm64"):
        arch("riscv64")


def _entries(disk) -> list[tuple[int, int, int, int]]:
    data = disk.read_bytes()[446:512]
    assert data[-2:] == b"\x55\xaa"
    out = []
    for i in range(4):
        boot, _, kind, _, start, sectors = struct.unpack("<B3sB3sII", data[16 * i:16 * i + 16])
        if kind:
            out.append((boot, kind, start, sectors))
    return out


def test_the_x86_disk_has_one_bootable_linux_partition_and_the_arm_disk_none(tmp_path):
    disk = tmp_path / "d.raw"
    disk.write_bytes(b"\0" * 4096)
    write_mbr(disk, 2048, 5000)
    assert _entries(disk) == [(0x80, 0x83, 2048, 5000)]
    assert arch("amd64").root_device == "/dev/vda1" and arch("arm64").root_device == "/dev/vda"
    assert arch("arm64").host_boots and not arch("amd64").host_boots


def test_the_arm_machine_is_a_neoverse_n1_with_an_smmu_and_two_numa_nodes_booted_by_the_host(tmp_path):
    from tunepath.lab.vm import vm_mark

    spec = VmSpec("tunepath-lab-t", "t-vm", tmp_path / "disk.raw", tmp_path / "s.img", tmp_path, arch="arm64")
    argv = " ".join(qemu_argv(spec))
    assert argv.startswith("qemu-system-aarch64 -name tunepath-lab-t,process=tunepath-lab-t ")
    for part in ("-cpu neoverse-n1", "-machine virt,iommu=smmuv3,gic-version=3", "-smp 4,sockets=2,cores=2",
                 "node,nodeid=0,cpus=0-1,memdev=mem0", "node,nodeid=1,cpus=2-3,memdev=mem1",
                 f"file={tmp_path}/disk.raw,format=raw", "mq=on,vectors=10,iommu_platform=on", "-no-reboot",
                 f"path={tmp_path}/qmp-boot.sock,server=on", f"path={tmp_path}/console.log,append=on",
                 f"-dtb {tmp_path}/virt.dtb "):
        assert part in argv
    # no firmware and no kernel of its own: the boot supervisor adds the kernel grub.cfg names, per boot
    assert "-bios" not in argv and "-kernel" not in argv and "-daemonize" not in argv and "pxb-pcie" not in argv
    assert vm_mark(spec) == f"-m tunepath.lab.vmboot {tmp_path}/boot.json"
    x86 = " ".join(qemu_argv(VmSpec("n", "ns", tmp_path / "o", tmp_path / "s", tmp_path)))
    assert x86.startswith("qemu-system-x86_64 -name n,process=n ") and "intel-iommu,intremap=on" in x86
    assert "pxb-pcie,id=pxb1,bus_nr=128,numa_node=1" in x86 and x86.endswith("-daemonize") and "-dtb" not in x86


def test_the_arm_vm_s_nic_gets_its_node_from_the_one_pcie_host_bridge_of_the_device_tree():
    from tunepath.lab.vmdtb import pcie_node

    assert pcie_node(["chosen", "memory@40000000", "pcie@10000000", "smmuv3@9050000"]) == "/pcie@10000000"
    with pytest.raises(TunepathError, match="0 PCIe host bridges, not one"):
        pcie_node(["chosen", "pl011@9000000"])
    with pytest.raises(TunepathError, match="2 PCIe host bridges"):
        pcie_node(["pcie@10000000", "pcie@20000000"])


GRUB_CFG = """set default="0"
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-45c2' {
	load_video
	insmod ext2
	echo	'Loading Linux 6.1.0-57-arm64 ...'
	linux	/boot/vmlinuz-6.1.0-57-arm64 root=UUID=45c2 ro net.ifnames=0 console=ttyAMA0 iommu.strict=0 iommu.passthrough=1
	echo	'Loading initial ramdisk ...'
	initrd	/boot/initrd.img-6.1.0-57-arm64
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-45c2' {
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-57-arm64 (recovery mode)' {
		linux	/boot/vmlinuz-6.1.0-57-arm64 root=UUID=45c2 ro single
	}
}
"""


def test_the_host_boots_the_entry_grub_would_with_its_command_line():
    from tunepath.lab.vmboot import first_entry

    entry = first_entry(GRUB_CFG)
    assert (entry.title, entry.kernel, entry.initrd) == ("Debian GNU/Linux", "/boot/vmlinuz-6.1.0-57-arm64",
                                                         "/boot/initrd.img-6.1.0-57-arm64")
    assert entry.args == "root=UUID=45c2 ro net.ifnames=0 console=ttyAMA0 iommu.strict=0 iommu.passthrough=1"
    with pytest.raises(TunepathError, match="boots entry '2' by default"):
        first_entry(GRUB_CFG.replace('set default="0"', 'set default="2"'))
    with pytest.raises(TunepathError, match="no menuentry: run update-grub"):
        first_entry("set timeout=0\n")


def test_the_binfmt_entry_must_let_a_chroot_start_qemu(tmp_path):
    good = ":qemu-aarch64:M::\\x7fELF\\x02:\\xff\\xff\\xff:/usr/libexec/qemu-binfmt/aarch64-binfmt-P:FPC\n"
    (tmp_path / "qemu-aarch64.conf").write_text("# a comment\n" + good)
    assert entry_line("aarch64", (tmp_path,)) == good.strip()
    (tmp_path / "qemu-aarch64.conf").write_text(good.replace(":FPC", ":OC"))
    with pytest.raises(TunepathError, match="without the F flag.*qemu-user-static"):
        entry_line("aarch64", (tmp_path,))
    with pytest.raises(TunepathError, match="no binfmt entry for qemu-riscv64"):
        entry_line("riscv64", (tmp_path,))


def test_the_arm_vm_s_inventory_declares_aarch64_and_its_state_keeps_the_architecture(tmp_path):
    key, known = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    key.write_text("not a real key")
    state = LabState("tplab", str(tmp_path), vm=VmState("/c/vm-arm64-x/base.raw", 11, 40009, 12, arch="arm64"))
    for port, h in zip((40001, 40002, 40003), state.hosts):
        h.port = port
    (tmp_path / "hosts.toml").write_text(hosts_toml("tplab", state.hosts, key, known, "0", 40009, "arm64"))
    inventory = load_inventory(tmp_path / "hosts.toml")
    assert inventory.arch == "aarch64" and inventory.emulated
    assert "Neoverse-N1" in inventory.label and "emulated" in inventory.label
    (tmp_path / "hosts-self.toml").write_text(self_hosts_toml("tplab", key, known, 40009, "arm64"))
    alone = load_inventory(tmp_path / "hosts-self.toml")      # the VM as its own client (wrk2 built on aarch64)
    assert alone.arch == "aarch64" and alone.emulated and alone.same_machine
    assert [(c.port, c.user) for c in alone.clients] == [(40009, alone.server.user)]
    assert "its own client" in alone.label and alone.server.baseline_cpus == "0"
    save_state(tmp_path / "state.json", state)
    assert load_state(tmp_path / "state.json") == state
    raw = json.loads((tmp_path / "state.json").read_text())
    del raw["vm"]["arch"]                      # a state from before the Arm VM: its VM was x86
    (tmp_path / "state.json").write_text(json.dumps(raw))
    assert load_state(tmp_path / "state.json").vm.arch == "amd64"
    raw["vm"]["arch"] = "sparc"
    (tmp_path / "state.json").write_text(json.dumps(raw))
    with pytest.raises(TunepathError, match="vm.arch must be amd64 or arm64"):
        load_state(tmp_path / "state.json")


@pytest.mark.parametrize("value, message", [('"ARM 64"', "must be the server's `uname -m`"),
                                            ("64", "must be the server's `uname -m`")])
def test_an_inventory_s_arch_is_checked_when_read_and_against_the_server_when_a_run_starts(tmp_path, value, message):
    from types import SimpleNamespace

    from tunepath.live.start import check_arch

    base = '[server]\nhost = "127.0.0.1"\n[[clients]]\nhost = "127.0.0.1"\n'
    (tmp_path / "bad.toml").write_text(f"arch = {value}\n" + base)
    with pytest.raises(TunepathError, match=message):
        load_inventory(tmp_path / "bad.toml")
    (tmp_path / "ok.toml").write_text('arch = "aarch64"\n' + base)
    inventory = load_inventory(tmp_path / "ok.toml")
    server = SimpleNamespace(name="lab-vm", run=lambda *a, **k: SimpleNamespace(stdout="x86_64\n"))
    with pytest.raises(TunepathError, match="says the server is aarch64, but `uname -m` on lab-vm says x86_64"):
        check_arch(server, inventory)
    check_arch(SimpleNamespace(name="v", run=lambda *a, **k: SimpleNamespace(stdout="aarch64\n")), inventory)


def test_lab_down_knows_every_file_either_vm_writes_in_its_directory(tmp_path):
    """`lab down` removes only the names it knows (VM_DIR_FILES): a file the VM writes that is not
    among them leaves the lab's directory behind with an error."""
    from tunepath.lab.state import LabPaths
    from tunepath.lab.vmhost import VM_DIR_FILES, vm_spec

    for name in ("amd64", "arm64"):
        spec = vm_spec("tplab", LabPaths(tmp_path), name)
        written = [spec.overlay, spec.seed, spec.console, spec.qmp, spec.pidfile]
        if spec.host_boots:
            written += [spec.boot_plan, spec.loader_qmp, spec.device_tree, spec.run_dir / "vmboot.log",
                        spec.run_dir / "vmlinuz", spec.run_dir / "initrd.img"]
        assert {p.name for p in written} <= set(VM_DIR_FILES), name
