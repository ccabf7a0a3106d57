"""The lab's server VM (``tunepath lab up --vm``): what ``up`` adds to the lab, ``down`` removes and
``status`` checks.

The VM is a real Debian guest under QEMU (TCG: software emulation, so its figures are not
benchmarks) in a namespace of its own, ``<prefix>-vm``, whose ``eth0`` is a veth to the lab's
switch like every host's, bridged there to QEMU's multiqueue tap. It boots from the cached image
(:mod:`tunepath.lab.vmimage`) through an overlay in ``<dir>/vm/``, with a seed disk carrying its
own host key (also in ``<dir>/known_hosts``), the lab's user key for its non-root user
``tunepath`` (passwordless sudo inside the guest) and its address, 10.213.7.2. The controller
reaches its sshd like the other hosts': a socat forward on 127.0.0.1 entering the switch's
namespace. With a VM, the inventory's server is the VM; the namespace server stays as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tunepath.errors import TunepathError
from tunepath.lab import netns
from tunepath.lab.sshd import HOST_KEY, banner, forward_argv, free_port, keygen, port_free, start_forward
from tunepath.lab.state import PREFIX_LENGTH, SWITCH_ADDRESS, LabPaths, VmState
from tunepath.lab.system import process_matches, stop_process
from tunepath.project import project_dir

__all__ = ["VM_DIR", "VM_DIR_FILES", "vm_namespace", "vm_spec", "new_disk", "up_vm", "wait_vm", "down_vm",
           "vm_status", "vm_known_host"]

VM_DIR = "vm"                     # in the lab's directory
VM_DIR_FILES = ("overlay.qcow2", "seed.img", "console.log", "qmp.sock", "qemu.pid", HOST_KEY, f"{HOST_KEY}.pub",
                "forward.log",
                # the Arm VM (lab/vmboot.py): its own disk, and what its boot supervisor reads and writes
                "disk.raw", "boot.json", "vmboot.log", "qmp-boot.sock", "vmlinuz", "initrd.img", "virt.dtb")


def vm_namespace(prefix: str) -> str:
    return f"{prefix}-vm"


def vm_spec(prefix: str, paths: LabPaths, arch: str = "amd64"):
    from tunepath.lab.vm import VmSpec, vm_name

    run_dir = paths.directory / VM_DIR
    disk = "disk.raw" if arch == "arm64" else "overlay.qcow2"     # the Arm VM's host reads its grub.cfg: raw
    return VmSpec(name=vm_name(prefix), namespace=vm_namespace(prefix), overlay=run_dir / disk,
                  seed=run_dir / "seed.img", run_dir=run_dir, arch=arch)


def _cache_root() -> Path:
    return project_dir() / ".cache"


def new_disk(spec, base: Path) -> None:
    """The VM's disk made anew from the cached image ``base``: a qcow2 overlay on it, or for the Arm
    VM (whose host reads the disk's grub.cfg) a sparse raw copy of it."""
    from tunepath.lab.vm import copy_disk, make_overlay

    (copy_disk if spec.host_boots else make_overlay)(base, spec.overlay)


def _disks(prefix: str, vm: VmState, paths: LabPaths, log: Callable[[str], None], save: Callable[[], None]) -> None:
    """The cached image (built when its recipe is new), the overlay on it, the seed disk."""
    from tunepath.lab.vm import VM_ADDRESS, make_seed, overlay_backing
    from tunepath.lab.vmimage import default_recipe, ensure_image

    spec = vm_spec(prefix, paths, vm.arch)
    base = ensure_image(_cache_root(), log, default_recipe(vm.arch))
    current = spec.overlay.is_file() if spec.host_boots else overlay_backing(spec.overlay) == base.resolve()
    if not current or vm.image != str(base):
        new_disk(spec, base)
        vm.image = str(base)
        save()
        log(f"made the VM's disk {spec.overlay}, " + ("a sparse copy of" if spec.host_boots else "an overlay on")
            + f" the image {base}")
    key = paths.directory / VM_DIR / HOST_KEY
    if keygen(key, f"{vm_namespace(prefix)}"):
        log(f"made the VM's host key {key}")
    make_seed(spec.seed, key, key.with_name(f"{HOST_KEY}.pub"), paths.key_file.with_name("id_ed25519.pub").read_text(),
              f"{VM_ADDRESS}/{PREFIX_LENGTH}", SWITCH_ADDRESS)


def up_vm(prefix: str, vm: VmState, paths: LabPaths, log: Callable[[str], None], save: Callable[[], None]) -> None:
    """Network, disks, QEMU and the forward: each made only when missing or dead."""
    from tunepath.lab.vm import VM_ADDRESS, ensure_vm_link, ensure_vm_network, start_vm, vm_mark

    (paths.directory / VM_DIR).mkdir(mode=0o700, exist_ok=True)
    ns, switch = vm_namespace(prefix), netns.switch_namespace(prefix)
    ensure_vm_link(switch, ns)
    ensure_vm_network(ns)
    spec = vm_spec(prefix, paths, vm.arch)
    if not process_matches(vm.pid, vm_mark(spec)):
        _disks(prefix, vm, paths, log, save)
        vm.pid = start_vm(spec)
        save()
        log(f"started the VM in {ns} ({_process(spec)} pid {vm.pid}; console {spec.console}); a first boot takes about "
            f"{'60' if spec.host_boots else '30'} s, a reboot 40-130 s")
    if vm.port is not None and process_matches(vm.socat_pid, " ".join(forward_argv(vm.port, switch, VM_ADDRESS)[1:])):
        return
    if vm.port is None or not port_free(vm.port):
        vm.port = free_port()
        save()
    vm.socat_pid = start_forward(vm.port, switch, VM_ADDRESS, paths.directory / VM_DIR / "forward.log")
    save()
    log(f"forwarding 127.0.0.1:{vm.port} to the VM's sshd at {VM_ADDRESS}:22 (socat pid {vm.socat_pid})")


def _process(spec) -> str:
    return "its boot supervisor, QEMU's parent," if spec.host_boots else "QEMU"


def vm_known_host(vm: VmState, paths: LabPaths) -> tuple[int, Path]:
    """The VM's entry of the lab's known_hosts: its forward's port and its host key."""
    if vm.port is None:
        raise TunepathError("lab VM: no forward port recorded; rerun `tunepath lab up --vm`")
    return vm.port, paths.directory / VM_DIR / f"{HOST_KEY}.pub"


def wait_vm(prefix: str, vm: VmState, paths: LabPaths) -> None:
    """Until the guest's sshd answers with the host key the lab gave it (a first boot ~30 s under TCG)."""
    from tunepath.lab.vm import VM_ADDRESS, wait_ssh

    line = wait_ssh(netns.switch_namespace(prefix), VM_ADDRESS, vm_spec(prefix, paths, vm.arch), vm.pid)
    ours = (paths.directory / VM_DIR / f"{HOST_KEY}.pub").read_text().split()[:2]
    if line.split()[1:3] != ours:
        raise TunepathError(f"lab VM: the sshd at {VM_ADDRESS} answers with another host key than "
                            f"{paths.directory / VM_DIR / HOST_KEY}.pub: the seed disk did not reach the guest; see "
                            f"{vm_spec(prefix, paths, vm.arch).console}")


def down_vm(prefix: str, vm: VmState, paths: LabPaths, note: Callable[[str], None], save: Callable[[], None]) -> None:
    """The forward, then the VM (ACPI power-off, then a kill); its namespace goes with the others."""
    from tunepath.lab.vm import VM_ADDRESS, stop_vm

    switch = netns.switch_namespace(prefix)
    if vm.socat_pid is not None and vm.port is not None and stop_process(
            vm.socat_pid, " ".join(forward_argv(vm.port, switch, VM_ADDRESS)[1:]), group=True):
        note(f"stopped the forward 127.0.0.1:{vm.port} of the VM (socat pid {vm.socat_pid})")
    vm.socat_pid = None
    save()
    if vm.pid is not None and stop_vm(vm.pid, vm_spec(prefix, paths, vm.arch)):
        note(f"powered the VM off ({_process(vm_spec(prefix, paths, vm.arch))} pid {vm.pid})")
    vm.pid = None
    save()


def vm_status(prefix: str, vm: VmState, paths: LabPaths) -> list[tuple[str, bool, str]]:
    """(part, ok, detail) of the VM's QEMU and of its sshd through the forward."""
    from tunepath.lab.vm import vm_mark

    running = process_matches(vm.pid, vm_mark(vm_spec(prefix, paths, vm.arch)))
    answer = banner(vm.port) if vm.port is not None else ""
    return [("VM", running, f"{_process(vm_spec(prefix, paths, vm.arch))} pid {vm.pid}" if running else "not running"),
            ("sshd VM", answer.startswith("SSH-"),
             f"answers through 127.0.0.1:{vm.port}" if answer.startswith("SSH-") else "no answer")]
