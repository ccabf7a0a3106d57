"""One lab VM: QEMU (TCG) inside a network namespace of the lab, booted from the cached image.

Per lab, nothing touches the cached base image: the x86 VM writes to a qcow2 overlay backed by it
(:func:`make_overlay`), the Arm VM to a sparse raw copy of it (:func:`copy_disk`: its host reads
the guest's grub.cfg from that file, :mod:`tunepath.lab.vmboot`). A small ext4 seed disk (:func:`make_seed`, made without mounting)
carries what differs per lab: the host key pair, the user's authorized key, eth0's address. The
image's ``tunepath-seed.service`` installs them at each boot, before sshd and networking start.

The network lives in one namespace (``<prefix>-vm``): ``eth0``, a veth whose peer sits on the
switch's ``br0`` (:func:`ensure_vm_link`), a bridge ``br0`` and a multiqueue tap ``tap0``
(:func:`ensure_vm_network`). QEMU is started in that namespace, so the guest's NIC reaches only
the lab. The x86 guest: 2 CPUs on 2 sockets, one per NUMA node; an Intel IOMMU with interrupt
remapping; the virtio NIC (4 queue pairs) behind a PCIe expander bridge on NUMA node 1. The Arm
guest (``virt``, Neoverse-N1): 4 CPUs, 2 per NUMA node; an SMMUv3; the same NIC on the root bus
(a device tree has no expander bridge, so its NUMA node is undefined). ``VmSpec.overlay`` is the
disk the VM writes to, either kind.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.lab.system import kill_pids, process_alive, process_matches, run
from tunepath.lab.vmarch import arch
from tunepath.lab.vmboot import LOADER_MARK, BootPlan
from tunepath.lab.vmdtb import device_tree
from tunepath.lab.vmimage import console_tail, need, qemu_path

__all__ = ["VM_ADDRESS", "VM_MAC", "VM_USER", "SEED_LABEL", "VmSpec", "vm_name", "make_overlay", "copy_disk",
           "overlay_backing",
           "make_seed", "ensure_vm_link", "ensure_vm_network", "remove_vm_network", "qemu_argv", "vm_mark",
           "start_vm", "stop_vm", "host_key", "wait_ssh"]

VM_ADDRESS = "10.213.7.2"
VM_MAC = "52:54:00:d5:07:02"
VM_USER = "tunepath"
SEED_LABEL = "TPSEED"
START_TIMEOUT = 60          # seconds for QEMU to start (it daemonizes once the machine is built)
SSH_TIMEOUT = 300           # seconds for a boot under TCG (about 80 s here)
POWERDOWN_TIMEOUT = 60      # seconds for the guest to power off on ACPI's power button


@dataclass(frozen=True)
class VmSpec:
    """One VM: its name (the mark of its QEMU process), namespace, disks and run files."""

    name: str                   # tunepath-lab-<prefix>: QEMU's -name and process name
    namespace: str              # where QEMU runs, with tap0 on a bridge to the lab's switch
    overlay: Path
    seed: Path
    run_dir: Path               # console.log, qmp.sock, qemu.pid
    mac: str = VM_MAC
    node_mib: int = 2048        # memory of each of the two NUMA nodes
    queues: int = 4
    tap: str = "tap0"
    nic_node: int = 1           # the NUMA node of the NIC's PCIe expander bridge (x86) or host bridge (Arm)
    arch: str = "amd64"         # Debian's name: amd64 (q35, 2 CPUs) or arm64 (virt, Neoverse-N1, 4 CPUs)

    @property
    def console(self) -> Path:
        return self.run_dir / "console.log"

    @property
    def qmp(self) -> Path:
        return self.run_dir / "qmp.sock"

    @property
    def pidfile(self) -> Path:
        return self.run_dir / "qemu.pid"

    @property
    def host_boots(self) -> bool:
        """The host boots it from its grub.cfg (:mod:`tunepath.lab.vmboot`): the Arm VM."""
        return arch(self.arch).host_boots

    @property
    def boot_plan(self) -> Path:
        return self.run_dir / "boot.json"

    @property
    def device_tree(self) -> Path:
        """The Arm VM's device tree, its PCIe host bridge on ``nic_node`` (:mod:`tunepath.lab.vmdtb`)."""
        return self.run_dir / "virt.dtb"

    @property
    def loader_qmp(self) -> Path:
        return self.run_dir / "qmp-boot.sock"


def vm_name(prefix: str) -> str:
    return f"tunepath-lab-{prefix}"


# --- disks -------------------------------------------------------------------------------------
def make_overlay(base: Path, overlay: Path) -> None:
    """A new qcow2 ``overlay`` backed by ``base`` (read-only to the VM); an old overlay is replaced."""
    overlay.unlink(missing_ok=True)
    run([need("qemu-img"), "create", "-q", "-f", "qcow2", "-b", str(base.resolve()), "-F", "raw", str(overlay)],
        f"creating the VM's overlay {overlay}")


def copy_disk(base: Path, disk: Path) -> None:
    """``disk``, a sparse copy of ``base`` the VM writes to (the Arm VM: its host reads the file, so no qcow2)."""
    tmp = disk.with_name(f".{disk.name}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        run(["cp", "--sparse=always", str(base), str(tmp)], f"copying the image {base} to {disk}")
        os.replace(tmp, disk)
    finally:
        tmp.unlink(missing_ok=True)


def overlay_backing(overlay: Path) -> Path | None:
    """The file ``overlay`` is backed by (None when it is missing or has no backing file)."""
    if not overlay.is_file():
        return None
    done = run([need("qemu-img"), "info", "-U", "--output=json", str(overlay)], f"reading {overlay}", check=False)
    try:
        backing = json.loads(done.stdout).get("backing-filename") if done.returncode == 0 else None
    except ValueError:
        return None
    return Path(backing) if backing else None


def _seed_files(directory: Path, host_key_private_path: Path, host_key_public_path: Path,
                authorized_key_text: str, address_cidr: str, gateway: str) -> None:
    try:
        address, router = ipaddress.ip_interface(address_cidr), ipaddress.ip_address(gateway)
    except ValueError as exc:
        raise TunepathError(f"lab VM: {exc}: give the guest's address as A.B.C.D/N and a gateway") from None
    if router not in address.network:
        raise TunepathError(f"lab VM: gateway {gateway} is outside {address.network}")
    keys = [line.strip() for line in authorized_key_text.splitlines() if line.strip()]
    if not keys or any(not k.isprintable() for k in keys):
        raise TunepathError("lab VM: the authorized key must be one or more printable lines (an ssh .pub file)")
    files = {"ssh_host_ed25519_key": (host_key_private_path.read_bytes(), 0o600),
             "ssh_host_ed25519_key.pub": (host_key_public_path.read_bytes(), 0o644),
             "authorized_keys": (("\n".join(keys) + "\n").encode(), 0o644),
             "interfaces-eth0": (f"# tunepath lab: from the seed disk\nauto eth0\niface eth0 inet static\n"
                                 f"    address {address.with_prefixlen}\n    gateway {router}\n".encode(), 0o644)}
    for name, (data, mode) in files.items():
        path = directory / name
        path.write_bytes(data)
        path.chmod(mode)


def make_seed(seed_img: Path, host_key_private_path: Path, host_key_public_path: Path,
              authorized_key_text: str, address_cidr: str, gateway: str) -> None:
    """The seed disk (ext4 labelled TPSEED, 8 MB, mode 0600: it holds a private host key), written
    with ``mke2fs -d`` from a private directory: no mount."""
    seed_img.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".seed-", dir=seed_img.parent))
    tmp = seed_img.with_name(f".{seed_img.name}.tmp")
    try:
        _seed_files(staging, host_key_private_path, host_key_public_path, authorized_key_text, address_cidr,
                    gateway)
        tmp.unlink(missing_ok=True)
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb"):
            pass
        run([need("mke2fs"), "-q", "-F", "-t", "ext4", "-L", SEED_LABEL, "-d", str(staging), str(tmp), "8M"],
            f"writing the VM's seed disk {seed_img}")
        os.replace(tmp, seed_img)
    finally:
        tmp.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)


# --- the namespace's network ------------------------------------------------------------------------
def _ip(ns: str, *args: str, what: str, check: bool = True) -> subprocess.CompletedProcess:
    return run([need("ip"), "-n", ns, *args], what, check=check)


def _has_link(ns: str, name: str) -> bool:
    return _ip(ns, "link", "show", "dev", name, what=f"looking for {name} in {ns}", check=False).returncode == 0


def ensure_vm_link(switch_ns: str, ns: str, peer: str = "vm") -> None:
    """``eth0`` in ``ns``, a veth whose peer ``peer`` is on the switch's ``br0``; no address (the
    guest has it). Both namespaces must exist."""
    if not _has_link(ns, "eth0"):
        if _has_link(switch_ns, peer):          # a peer left alone by an interrupted run
            _ip(switch_ns, "link", "del", peer, what=f"removing a half-made veth in {switch_ns}")
        _ip(ns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", switch_ns,
            what=f"creating the veth pair eth0 ({ns}) / {peer} ({switch_ns})")
    _ip(switch_ns, "link", "set", peer, "master", "br0", "up", what=f"attaching {peer} to br0 in {switch_ns}")
    for link in ("lo", "eth0"):
        _ip(ns, "link", "set", link, "up", what=f"bringing {link} up in {ns}")


def ensure_vm_network(ns: str, tap: str = "tap0") -> None:
    """A multiqueue tap ``tap`` and a bridge ``br0`` joining it to ``eth0``, all up, in ``ns``."""
    if not _has_link(ns, tap):
        _ip(ns, "tuntap", "add", "dev", tap, "mode", "tap", "multi_queue",
            what=f"creating the multiqueue tap {tap} in {ns}")
    if not _has_link(ns, "br0"):
        _ip(ns, "link", "add", "br0", "type", "bridge", "forward_delay", "0", what=f"creating br0 in {ns}")
    for link in ("eth0", tap):
        _ip(ns, "link", "set", link, "master", "br0", "up", what=f"attaching {link} to br0 in {ns}")
    _ip(ns, "link", "set", "br0", "up", what=f"bringing br0 up in {ns}")


def remove_vm_network(ns: str, tap: str = "tap0") -> None:
    """Delete ``tap`` and ``br0`` in ``ns`` (deleting the namespace removes them too)."""
    if _has_link(ns, tap):
        _ip(ns, "tuntap", "del", "dev", tap, "mode", "tap", "multi_queue", what=f"deleting {tap} in {ns}")
    if _has_link(ns, "br0"):
        _ip(ns, "link", "del", "br0", what=f"deleting br0 in {ns}")


# --- QEMU ----------------------------------------------------------------------------------------
def _machine(spec: VmSpec) -> list[str]:
    """The emulated machine: CPUs, NUMA nodes, IOMMU, firmware; and the bus the NIC sits on."""
    mib = spec.node_mib
    memory = ["-m", f"{2 * mib}M",
              "-object", f"memory-backend-ram,id=mem0,size={mib}M", "-object", f"memory-backend-ram,id=mem1,size={mib}M"]
    if spec.host_boots:            # no firmware: vmboot starts the kernel the guest's grub.cfg names
        return [arch(spec.arch).qemu, "-accel", "tcg,thread=multi", "-cpu", "neoverse-n1",
                "-machine", "virt,iommu=smmuv3,gic-version=3", "-smp", "4,sockets=2,cores=2,threads=1", *memory,
                "-numa", "node,nodeid=0,cpus=0-1,memdev=mem0", "-numa", "node,nodeid=1,cpus=2-3,memdev=mem1"]
    return [arch(spec.arch).qemu, "-accel", "tcg,thread=multi", "-cpu", "max", "-machine", "q35,kernel-irqchip=split",
            "-device", "intel-iommu,intremap=on", "-smp", "2,sockets=2,cores=1,threads=1", *memory,
            "-numa", "node,nodeid=0,cpus=0,memdev=mem0", "-numa", "node,nodeid=1,cpus=1,memdev=mem1"]


def qemu_argv(spec: VmSpec) -> list[str]:
    """QEMU's command line (its program first; start_vm runs it inside the namespace). The Arm VM's
    lacks the kernel, initrd and command line, which :mod:`tunepath.lab.vmboot` adds per boot."""
    machine = _machine(spec)
    if spec.host_boots:            # a whole-disk raw image the host reads grub.cfg from; QEMU in the foreground
        disk = ["-drive", f"file={qemu_path(spec.overlay)},format=raw,if=none,id=disk0"]
        console = ["-chardev", f"file,id=console,path={qemu_path(spec.console)},append=on", "-serial", "chardev:console"]
        process = ["-no-reboot", "-chardev", f"socket,id=boot,path={qemu_path(spec.loader_qmp)},server=on,wait=off",
                   "-mon", "chardev=boot,mode=control", "-pidfile", qemu_path(spec.pidfile)]
    else:
        disk = ["-drive", f"file={qemu_path(spec.overlay)},format=qcow2,if=none,id=disk0"]
        console = ["-serial", f"file:{qemu_path(spec.console)}"]
        process = ["-pidfile", qemu_path(spec.pidfile), "-daemonize"]
    if spec.host_boots:            # a device tree has no PCIe expander bridge: the host bridge gets the node
        nic_bus = ["-dtb", str(spec.device_tree), "-device", "pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1"]
    else:
        nic_bus = ["-device", f"pxb-pcie,id=pxb1,bus_nr=128,numa_node={spec.nic_node},bus=pcie.0",
                   "-device", "pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1"]
    return [
        machine[0], "-name", f"{spec.name},process={spec.name}", *machine[1:],
        *disk,
        "-device", "virtio-blk-pci,bus=pcie.0,drive=disk0,bootindex=1",
        "-drive", f"file={qemu_path(spec.seed)},format=raw,if=none,id=seed,readonly=on",
        "-device", "virtio-blk-pci,bus=pcie.0,drive=seed",
        *nic_bus,
        "-netdev", f"tap,id=net0,ifname={spec.tap},queues={spec.queues},vhost=off,script=no,downscript=no",
        "-device", f"virtio-net-pci,bus=rp1,netdev=net0,mac={spec.mac},mq=on,vectors={2 * spec.queues + 2},"
                    "iommu_platform=on,romfile=",
        "-device", "virtio-rng-pci,bus=pcie.0",
        "-nodefaults", "-display", "none", *console,
        "-qmp", f"unix:{qemu_path(spec.qmp)},server=on,wait=off",
        *process,
    ]


def vm_mark(spec: VmSpec) -> str:
    """What the VM's process's command line holds, and no other process's: QEMU's, or for the Arm VM
    its boot supervisor's (:mod:`tunepath.lab.vmboot`)."""
    if spec.host_boots:
        return f"-m {LOADER_MARK} {spec.boot_plan}"
    return f"-name {spec.name},process={spec.name} "


def start_vm(spec: VmSpec) -> int:
    """Start the VM's QEMU in its namespace (it daemonizes once the machine is built); its pid."""
    if len(str(spec.qmp)) > 100:
        raise TunepathError(f"lab VM: {spec.qmp} is too long for a unix socket; choose a shorter lab --dir")
    if not Path("/dev/net/tun").exists():
        raise TunepathError("lab VM: /dev/net/tun is missing: load the tun module (modprobe tun), then rerun")
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    for old in (spec.pidfile, spec.qmp, spec.loader_qmp):
        old.unlink(missing_ok=True)
    if spec.host_boots:
        return _start_supervised(spec)
    argv = qemu_argv(spec)
    run([need("ip"), "netns", "exec", spec.namespace, need(argv[0]), *argv[1:]], f"starting the VM in {spec.namespace}",
        hint=f"see {spec.console}", timeout=START_TIMEOUT)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        text = spec.pidfile.read_text().strip() if spec.pidfile.is_file() else ""
        if text.isdigit() and process_matches(int(text), vm_mark(spec)):
            return int(text)
        time.sleep(0.05)
    raise TunepathError(f"lab VM: QEMU started but {spec.pidfile} names no running VM; see {spec.console}")


def _start_supervised(spec: VmSpec) -> int:
    """The Arm VM: its boot supervisor started in the namespace (detached); its pid once QEMU runs."""
    device_tree(_machine(spec), spec.device_tree, spec.nic_node)
    argv = qemu_argv(spec)
    BootPlan([need(argv[0]), *argv[1:]], str(spec.overlay), str(spec.run_dir), str(spec.loader_qmp),
             str(spec.console)).write(spec.boot_plan)
    log = spec.run_dir / "vmboot.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with open(log, "ab") as out:
        proc = subprocess.Popen([need("ip"), "netns", "exec", spec.namespace, sys.executable, "-m", LOADER_MARK,
                                 str(spec.boot_plan)], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            text = spec.pidfile.read_text().strip() if spec.pidfile.is_file() else ""
            if text.isdigit() and process_alive(int(text)):
                return proc.pid
            if proc.poll() is not None:
                raise TunepathError(f"lab VM: its boot supervisor ended (status {proc.returncode}): "
                                    f"{console_tail(log, 3)}; see {spec.console}")
            time.sleep(0.1)
        raise TunepathError(f"lab VM: QEMU did not start within {START_TIMEOUT} s; see {log} and {spec.console}")
    except BaseException:          # not recorded yet: nobody else could end it (its QEMU dies with it)
        kill_pids([proc.pid])
        raise


def _qmp_powerdown(sock_path: Path) -> bool:
    """ACPI's power button through QMP; True if QEMU took the command."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(sock_path))
            stream = s.makefile("rwb")
            stream.readline()                                   # the greeting
            for command in ("qmp_capabilities", "system_powerdown"):
                stream.write(json.dumps({"execute": command}).encode() + b"\n")
                stream.flush()
                while True:
                    reply = json.loads(stream.readline() or b"{}")
                    if "return" in reply or "error" in reply or not reply:
                        break
                if "return" not in reply:
                    return False
            return True
    except (OSError, ValueError):
        return False


def stop_vm(pid: int | None, spec: VmSpec, timeout: float = POWERDOWN_TIMEOUT) -> bool:
    """Power the VM off (ACPI, up to ``timeout`` s), then SIGTERM/SIGKILL; only if ``pid`` is still
    this VM's QEMU. True if it was ours."""
    if pid is None or not process_matches(pid, vm_mark(spec)):
        return False
    if _qmp_powerdown(spec.qmp):
        deadline = time.monotonic() + timeout
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    if process_matches(pid, vm_mark(spec)):
        left = kill_pids([pid])
        if left:
            raise TunepathError(f"lab VM: QEMU (pid {pid}) did not end on SIGKILL")
    spec.qmp.unlink(missing_ok=True)
    spec.pidfile.unlink(missing_ok=True)
    return True


def host_key(switch_ns: str, address: str, wait: float = 3) -> str:
    """``ssh-keyscan`` of ``address``'s ed25519 key from the switch's namespace ('' if none answers)."""
    done = run([need("ip"), "netns", "exec", switch_ns, need("ssh-keyscan"), "-T", str(int(wait)), "-t", "ed25519",
                address], f"asking {address}:22 for its host key", check=False, timeout=wait + 10)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    return lines[0].strip() if done.returncode == 0 and lines else ""


def wait_ssh(switch_ns: str, address: str, spec: VmSpec, pid: int | None = None,
             timeout: float = SSH_TIMEOUT) -> str:
    """Wait until the guest's sshd at ``address`` answers (from the switch's namespace); its host key
    line (``<address> ssh-ed25519 AAAA…``). With ``pid``, a QEMU that exits ends the wait at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid is not None and not process_matches(pid, vm_mark(spec)):
            raise TunepathError(f"lab VM: QEMU (pid {pid}) exited before sshd answered; the end of "
                                f"{spec.console}: {console_tail(spec.console)}")
        line = host_key(switch_ns, address)
        if line:
            return line
        time.sleep(2)
    raise TunepathError(f"lab VM: no sshd answered at {address}:22 within {timeout:g} s; the end of "
                        f"{spec.console}: {console_tail(spec.console)}")
