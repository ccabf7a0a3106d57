"""The inventory the lab writes (``<dir>/hosts.toml``), and its honest label.

The hosts are the lab's three namespaces, each reached at ``127.0.0.1:<forward port>`` as its own
user with the lab's key, checked against the lab's ``known_hosts``. ``address`` is where the
clients send load (the server's eth0 inside the lab), not where SSH goes. ``baseline_cpus`` (the
CPUs a run keeps online) is written only when this machine can take CPUs offline. ``label`` says
what the hosts are (namespaces on one machine, not separate hardware); with the VM (``up --vm``)
the server is the VM and the file says ``emulated = true``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tunepath.lab.state import ROLES, HostState, Role

__all__ = ["label", "vm_label", "cpu_count", "baseline_cpus", "hosts_toml", "self_hosts_toml", "is_virtual_machine"]

CPU_DIR = Path("/sys/devices/system/cpu")


def is_virtual_machine() -> bool:
    """The CPU says it runs under a hypervisor (the ``hypervisor`` flag of /proc/cpuinfo)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return any(line.startswith("flags") and " hypervisor" in line for line in text.splitlines())


def cpu_count(cpu_dir: Path = CPU_DIR) -> int:
    """The machine's CPUs, online or not (``present``; os.cpu_count counts only those online, and a
    run may have taken some offline)."""
    try:
        text = (cpu_dir / "present").read_text().strip()
        return sum(int(b) - int(a) + 1 if "-" in part else 1
                   for part in text.split(",") for a, _, b in [part.partition("-")])
    except (OSError, ValueError):
        return os.cpu_count() or 1


def label() -> str:
    cpus = cpu_count()
    machine = "virtual machine" if is_virtual_machine() else "machine"
    return (f"Lab: network namespaces on one {cpus}-CPU {machine} "
            "(real SSH, real veth NICs; not separate hardware)")


def baseline_cpus(cpu_dir: Path = CPU_DIR) -> str | None:
    """"0" when CPU 0 is online and another CPU can be taken offline here; else None."""
    hotplug = [p for p in cpu_dir.glob("cpu[0-9]*/online")
               if p.parent.name[3:].isdigit() and int(p.parent.name[3:]) > 0 and os.access(p, os.W_OK)]
    return "0" if hotplug else None


def _host(r: Role, prefix: str, port: int, key_file: Path, baseline: str | None) -> str:
    lines = [f'host = "127.0.0.1"', f"port = {port}", f"user = {json.dumps(f'{prefix}-{r.suffix}')}",
             f"key_file = {json.dumps(str(key_file))}", f'address = "{r.address}"']
    if r.kind == "server" and baseline is not None:
        lines.append(f"baseline_cpus = {json.dumps(baseline)}")
    return "\n".join(lines) + "\n"


def vm_label(arch: str = "amd64", clients: str = "network namespaces as clients") -> str:
    server = ("an emulated Arm Neoverse-N1 QEMU virtual machine as the server (software emulation, 4 vCPUs on 2 NUMA "
              "nodes, an SMMUv3)" if arch == "arm64" else
              "a QEMU virtual machine as the server (software emulation, 2 vCPUs on 2 NUMA nodes)")
    return (f"Lab: {server} and {clients}, on one {cpu_count()}-CPU "
            f"{'virtual machine' if is_virtual_machine() else 'machine'} (emulated: its figures test the commands, "
            "not performance)")


def _vm_host(port: int, key_file: Path, server: bool = True) -> str:
    from tunepath.lab.vm import VM_ADDRESS, VM_USER

    return "\n".join(['host = "127.0.0.1"', f"port = {port}", f"user = {json.dumps(VM_USER)}",
                      f"key_file = {json.dumps(str(key_file))}", f"address = {json.dumps(VM_ADDRESS)}",
                      *(['baseline_cpus = "0"'] if server else [])]) + "\n"


def _head(prefix: str, known_hosts: Path, text_label: str, vm_arch: str | None) -> str:
    from tunepath.lab.vmarch import arch

    return (f"# the tunepath lab {prefix!r}, written by `tunepath lab up`; `tunepath lab down` removes it\n"
            f"label = {json.dumps(text_label)}\n"
            f"known_hosts = {json.dumps(str(known_hosts))}\n"
            + (f"emulated = true\narch = {json.dumps(arch(vm_arch).uname)}\n" if vm_arch else ""))


def hosts_toml(prefix: str, hosts: list[HostState], key_file: Path, known_hosts: Path,
               baseline: str | None, vm_port: int | None = None, vm_arch: str = "amd64") -> str:
    """The inventory text. JSON strings are valid TOML basic strings (the same escapes). With the
    VM (``vm_port``, of ``vm_arch``), the server is the VM and the namespace server is left out."""
    parts = [_head(prefix, known_hosts, vm_label(vm_arch) if vm_port else label(), vm_arch if vm_port else None)]
    if vm_port is not None:
        parts.append(f"\n# the server VM: QEMU in network namespace {prefix}-vm\n[server]\n"
                     + _vm_host(vm_port, key_file))
    ports = {h.role: h.port for h in hosts}
    for r in ROLES:
        if r.kind == "server" and vm_port is not None:
            continue
        table = "[server]" if r.kind == "server" else "[[clients]]"
        parts.append(f"\n# {r.name}: network namespace {prefix}-{r.suffix}\n{table}\n"
                     + _host(r, prefix, ports[r.name], key_file, baseline))
    return "".join(parts)


def self_hosts_toml(prefix: str, key_file: Path, known_hosts: Path, vm_port: int, vm_arch: str) -> str:
    """The second inventory of a lab with a VM (``hosts-self.toml``): the VM is the server and its
    own only client. A function check of what a client does on the VM's architecture (the set-up
    step builds wrk2 there from source); its load never leaves the guest, so it measures nothing."""
    return "".join([_head(prefix, known_hosts, vm_label(vm_arch, "the same VM as its own client"), vm_arch),
                    f"\n# the server VM: QEMU in network namespace {prefix}-vm\n[server]\n" + _vm_host(vm_port, key_file),
                    "\n# the same VM as the only client\n[[clients]]\n" + _vm_host(vm_port, key_file, server=False)])
