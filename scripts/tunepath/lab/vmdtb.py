"""The Arm VM's device tree, with its PCIe host bridge on a NUMA node.

QEMU's ``virt`` machine describes the hardware to an Arm kernel in a device tree, and that tree
gives its PCIe host bridge no NUMA node: every PCI device, the NIC too, then reads ``numa_node``
-1 (a device tree has no PCIe expander bridge, which is how the x86 VM puts its NIC on node 1).
A device tree can say it another way: a ``numa-node-id`` property on the host bridge's node, which
Linux reads for the bridge's platform device; the PCI devices below it inherit the node.

So before the first boot, the host asks the same QEMU machine for its tree (``dumpdtb``), adds
that property with ``fdtput`` (Debian's device-tree-compiler), and boots with ``-dtb``. QEMU then
adds the memory nodes, the kernel command line and the initrd to it as it does to its own tree.
"""

from __future__ import annotations

from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.lab.system import run
from tunepath.lab.vmimage import need, qemu_path

__all__ = ["device_tree", "pcie_node"]

DUMP_TIMEOUT = 60


def pcie_node(names: list[str]) -> str:
    """The PCIe host bridge's node among the root's children (``pcie@10000000`` on virt)."""
    found = [n for n in names if n.startswith("pcie@")]
    if len(found) != 1:
        raise TunepathError(f"lab VM: QEMU's device tree has {len(found)} PCIe host bridges, not one "
                            f"({', '.join(found) or 'none'}): cannot put the NIC on a NUMA node")
    return "/" + found[0]


def device_tree(machine: list[str], path: Path, node: int) -> Path:
    """Write ``path``: the device tree of the QEMU ``machine`` (its program and machine options),
    with its PCIe host bridge on NUMA node ``node``."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        run([need(machine[0]), *machine[1:], "-machine", f"dumpdtb={qemu_path(tmp)}", "-nodefaults", "-display", "none"],
            "asking QEMU for the Arm VM's device tree", timeout=DUMP_TIMEOUT)
        names = run([need("fdtget"), "-l", str(tmp), "/"], "listing the device tree's nodes").stdout.split()
        bridge = pcie_node(names)
        run([need("fdtput"), "-t", "i", str(tmp), bridge, "numa-node-id", str(node)],
            f"putting {bridge} on NUMA node {node}")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
