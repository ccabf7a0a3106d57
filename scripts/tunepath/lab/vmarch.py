"""What differs between the lab's x86 and Arm server VMs: the Debian architecture, its kernel and
bootloader packages, the disk layout, the QEMU that emulates it, and how the guest boots.

- **amd64**: one ext4 partition behind an msdos table, GRUB for BIOS (``grub-pc``) in the MBR gap;
  QEMU ``q35`` runs it and reboots it itself.
- **arm64**: the whole disk is one ext4 file system (no partition table, no firmware bootloader).
  The host boots it (:mod:`tunepath.lab.vmboot`): before each boot it reads the guest's own
  ``/boot/grub/grub.cfg``, which the guest's ``update-grub`` wrote, and starts QEMU ``virt``
  (``-cpu neoverse-n1``) with the kernel, initrd and command line of its first entry. That is the
  route issue 32 allows: firmware that runs GRUB loses the two NUMA nodes here (UEFI's AAVMF
  fakes one node; U-Boot 2023.01 says "Out of memory" with a NUMA device tree and cannot start
  EFI). Its initramfs holds only the modules a virt machine needs (``MODULES=list``): building
  the full one under qemu-user took most of an image build.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunepath.errors import TunepathError
from tunepath.live.wrk2 import packages as wrk2_packages

__all__ = ["Arch", "ARCHES", "arch"]

INITRAMFS_MODULES = ("virtio_pci", "virtio_mmio", "virtio_blk", "virtio_net", "virtio_rng", "ext4")
# The Arm guest can be its own client (the lab's hosts-self.toml): the set-up step builds wrk2 on it
# from source, and the guest has no route to a package archive, so the image holds wrk2's build
# dependencies for the source a run uploads (a tarball: --wrk2-source).
ARM_CLIENT_PACKAGES = wrk2_packages("tarball")


@dataclass(frozen=True)
class Arch:
    debian: str                   # Debian's name: amd64, arm64
    uname: str                    # the kernel's: x86_64, aarch64
    qemu: str                     # the emulator's program
    packages: tuple[str, ...]     # the kernel, the bootloader, and what else this guest holds
    console: str                  # the serial console's device
    layout: str                   # how vmimage lays the disk out (part of the image's recipe)
    host_boots: bool              # whole-disk ext4 booted by the host from the guest's grub.cfg (vmboot)
    bootloader_machine: tuple[str, ...]   # QEMU options of the throwaway VM that installs the bootloader
    initramfs_modules: tuple[str, ...] = ()   # MODULES=list with these; () keeps Debian's default (most)

    @property
    def root_device(self) -> str:
        return "/dev/vda" if self.host_boots else "/dev/vda1"


ARCHES = {
    "amd64": Arch(debian="amd64", uname="x86_64", qemu="qemu-system-x86_64",
                  packages=("linux-image-amd64", "grub-pc"), console="ttyS0",
                  layout="msdos:p1@1MiB:ext4:grub-i386-pc:1", host_boots=False,
                  bootloader_machine=("-cpu", "max", "-machine", "q35")),
    "arm64": Arch(debian="arm64", uname="aarch64", qemu="qemu-system-aarch64",
                  packages=("linux-image-arm64", "grub2-common", *ARM_CLIENT_PACKAGES),
                  console="ttyAMA0", layout="whole-disk:ext4:grub.cfg-read-by-the-host:1", host_boots=True,
                  bootloader_machine=("-cpu", "neoverse-n1", "-machine", "virt,gic-version=3"),
                  initramfs_modules=INITRAMFS_MODULES),
}


def arch(name: str) -> Arch:
    """The lab VM's architecture by Debian's or the kernel's name (arm64 or aarch64, amd64 or x86_64)."""
    for a in ARCHES.values():
        if name in (a.debian, a.uname):
            return a
    raise TunepathError(f"no lab VM for the architecture {name!r}: choose one of {', '.join(ARCHES)}")
