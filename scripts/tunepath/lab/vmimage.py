"""The lab VM's disk image: Debian from Debian packages only, built once per recipe and cached.

A :class:`Recipe` (suite, architecture, packages, disk size, kernel command line, user, host name,
disk layout and the guest-side script ``vm-guest-setup.sh``) names its image by its SHA-256:
``<cache_root>/vm-<hash12>/base.raw`` (``vm-arm64-<hash12>`` for the Arm VM). :func:`ensure_image` returns that file, building it only
when it is missing. A build happens in a hidden sibling directory that is renamed into place at
the very end, so an interrupted build never leaves an image that looks complete.

The build, step by step (no loop device and no mount on this machine):

1. ``mmdebstrap --variant=minbase`` into a directory, from this machine's own apt sources (the
   entries for the recipe's suite in /etc/apt/sources.list and /etc/apt/sources.list.d/); its
   customize hook runs ``vm-guest-setup.sh configure`` in the chroot (user, sudo, sshd, seed unit,
   GRUB defaults, fstab). For arm64 its maintainer scripts run under qemu-user
   (:mod:`tunepath.lab.binfmt`), and an essential hook keeps the initramfs to the virt machine's
   modules (:mod:`tunepath.lab.vmarch`).
2. ``mke2fs -d`` writes that tree as an ext4 file system into a sparse raw file: at 1 MiB behind
   an msdos partition table (one bootable Linux partition from sector 2048) for x86, the whole
   file for arm64.
3. A throwaway QEMU boots the image's own kernel and initrd (``-kernel``/``-initrd``) with
   ``init=`` the guest script, which runs ``grub-install /dev/vda`` (x86) and ``update-grub``
   inside the guest and powers off; its serial console must end with ``TUNEPATH-BOOTLOADER-OK``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from tunepath.errors import TunepathError
from tunepath.lab.binfmt import foreign_binaries
from tunepath.lab.system import process_alive, run
from tunepath.lab.vmarch import arch

__all__ = ["PACKAGES", "VM_TOOLS", "Recipe", "default_recipe", "image_dir", "ensure_image", "need",
           "host_apt_sources", "write_mbr", "run_logged", "qemu_path", "remove_tree", "console_tail"]

SCRIPT = Path(__file__).with_name("vm-guest-setup.sh")
GUEST_SCRIPT = "/usr/local/sbin/tunepath-guest-setup"
BOOTLOADER_MARK = "TUNEPATH-BOOTLOADER-OK"
PART_START = 2048                 # sectors of 512 bytes: the partition starts at 1 MiB
SECTOR = 512
BUILD_TIMEOUT = 3600              # seconds for mmdebstrap
BOOTLOADER_TIMEOUT = 900          # seconds for the bootloader VM (TCG)
COMMAND_TIMEOUT = 600

# What the path runs on the server (read from steps/, live/facts.py, live/tomcat.py, live/hoststate.py,
# live/httpd.py, live/jvmfacts.py): Java for Tomcat, curl (Tomcat's readiness probe), ethtool, numactl,
# update-grub, sudo, sysctl, apache2 with mod_proxy_* and mod_jk, SFTP for uploads. util-linux (lscpu,
# taskset, dmesg), coreutils (timeout, base64, sha512sum), tar and gzip are in every minbase.
PACKAGES = (
    "systemd-sysv", "udev", "dbus", "libpam-systemd", "kmod",
    "openssh-server", "openssh-sftp-server", "sudo", "iproute2", "ifupdown", "netbase", "ethtool",
    "numactl", "pciutils", "procps", "util-linux", "e2fsprogs", "mawk", "curl", "wget",
    "openjdk-17-jre-headless", "apache2", "libapache2-mod-jk",
)

# program -> the Debian package that has it, for this machine (scripts/bootstrap --lab, or --lab-arm64
# for those the Arm VM alone needs)
ARM64_PACKAGES = ("qemu-system-arm", "arch-test", "device-tree-compiler")
VM_TOOLS = {"mmdebstrap": "mmdebstrap", "qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils",
            "mke2fs": "e2fsprogs", "ssh-keyscan": "openssh-client", "ip": "iproute2", "umount": "mount",
            "qemu-system-aarch64": "qemu-system-arm", "arch-test": "arch-test", "debugfs": "e2fsprogs",
            "fdtget": "device-tree-compiler", "fdtput": "device-tree-compiler"}


@dataclass(frozen=True)
class Recipe:
    """Everything the image is made of; its hash names the cached image."""

    suite: str
    arch: str                     # Debian's name (vmarch.ARCHES)
    packages: tuple[str, ...]
    disk_mib: int
    cmdline: str                  # the kernel command line's base (GRUB_CMDLINE_LINUX)
    user: str
    hostname: str
    excludes: tuple[str, ...]     # paths dpkg leaves out (path-exclude), copyright files kept
    layout: str                   # how build() lays the disk out: change it when that code changes
    setup_script: str             # vm-guest-setup.sh, verbatim

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def default_recipe(arch_name: str = "amd64") -> Recipe:
    a = arch(arch_name)
    return Recipe(suite="bookworm", arch=a.debian, packages=(*a.packages, *PACKAGES), disk_mib=6144,
                  cmdline=f"net.ifnames=0 console={a.console}", user="tunepath", hostname=f"tunepath-vm-{a.debian}"
                  if a.debian != "amd64" else "tunepath-vm",
                  # not /usr/share/man: openjdk's postinst makes alternatives for its man pages there
                  excludes=("/usr/share/doc/*", "/usr/share/locale/*"), layout=a.layout,
                  setup_script=SCRIPT.read_text())


def image_dir(cache_root: Path, recipe: Recipe) -> Path:
    return cache_root / f"vm-{'' if recipe.arch == 'amd64' else recipe.arch + '-'}{recipe.digest()[:12]}"


def need(program: str) -> str:
    """The absolute path of ``program``; its Debian package in the error when it is missing."""
    found = shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin")
    if not found:
        package = VM_TOOLS.get(program, program)
        option = "--lab-arm64" if package in ARM64_PACKAGES else "--lab"
        raise TunepathError(f"lab VM: {program} is missing: run scripts/bootstrap {option} "
                            f"(or apt-get install {package})")
    return found


def qemu_path(path: Path) -> str:
    """A path as a QEMU option value (a comma is doubled)."""
    return str(path).replace(",", ",,")


def console_tail(path: Path, lines: int = 8) -> str:
    """The last lines of a console log, on one line ('(empty)' when there is none)."""
    try:
        text = path.read_bytes()[-16384:].decode(errors="replace")
    except OSError:
        return "(no console log)"
    kept = [" ".join(line.split()) for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty)"


# --- apt sources --------------------------------------------------------------------------------
def _wanted(suites: list[str], suite: str) -> list[str]:
    return [s for s in suites if s in (suite, f"{suite}-updates", f"{suite}-security", f"{suite}/updates")]


def _one_line(text: str, suite: str) -> list[str]:
    kept = []
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0]).split()
        if len(words) >= 4 and words[0] == "deb" and _wanted([words[2]], suite) and "main" in words[3:]:
            kept.append(line.strip())
    return kept


def _stanzas(text: str, suite: str) -> list[str]:
    kept = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln for ln in block.splitlines() if not ln.startswith("#")]
        fields = {m.group(1).lower(): m.group(2).split() for ln in lines
                  if (m := re.match(r"([A-Za-z-]+):\s*(.*)$", ln))}
        suites = _wanted(fields.get("suites", []), suite)
        if ("deb" in fields.get("types", []) and suites and "main" in fields.get("components", [])
                and fields.get("enabled", ["yes"])[0].lower() != "no"):
            fixed = {"suites:": f"Suites: {' '.join(suites)}", "types:": "Types: deb"}
            kept.append("\n".join(fixed.get(ln[:ln.find(":") + 1].lower(), ln) if ":" in ln else ln
                                  for ln in lines))
    return kept


def host_apt_sources(suite: str, apt_dir: Path = Path("/etc/apt")) -> dict[str, str]:
    """This machine's apt entries for ``suite`` (and its -updates, -security), main component, as
    ``{"host.list": one-line entries, "host.sources": deb822 stanzas}`` (the empty ones left out)."""
    lines: list[str] = []
    stanzas: list[str] = []
    files = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for f in files:
        lines += _one_line(f.read_text(errors="replace"), suite) if f.is_file() else []
    for f in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        stanzas += _stanzas(f.read_text(errors="replace"), suite)
    found = {"host.list": "\n".join(lines) + "\n" if lines else "",
             "host.sources": "\n\n".join(stanzas) + "\n" if stanzas else ""}
    found = {k: v for k, v in found.items() if v}
    if not found:
        raise TunepathError(f"lab VM: no apt source for Debian {suite} (component main) in {apt_dir}/sources.list "
                            f"or {apt_dir}/sources.list.d/: add one (apt must be able to install {suite} "
                            "packages), then rerun")
    return found


# --- running the build's commands ------------------------------------------------------------------
def run_logged(argv: list[str], what: str, log: Path, timeout: float) -> None:
    """Run ``argv`` with its output appended to ``log``; a failure names the log and its last lines."""
    with open(log, "ab") as out:
        out.write(f"\n$ {shlex.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TunepathError(f"lab VM: {what}: `{argv[0]}` did not finish within {timeout:g} s; see {log}") from None
        except OSError as exc:
            raise TunepathError(f"lab VM: {what}: `{argv[0]}` could not start ({exc.strerror or exc})") from None
    if done.returncode != 0:
        raise TunepathError(f"lab VM: {what}: `{argv[0]}` exited with status {done.returncode}: "
                            f"{console_tail(log, 3)} (whole log: {log})")


def _mount_points_under(path: Path) -> list[str]:
    inside = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
        if point.startswith(f"{path}/"):
            inside.append(point)
    return sorted(inside, key=len, reverse=True)


def remove_tree(path: Path) -> None:
    """Remove a build directory: first whatever a killed mmdebstrap left mounted inside it."""
    if not path.exists():
        return
    for point in _mount_points_under(path.resolve()):
        run([need("umount"), "--lazy", point], f"unmounting {point} (left by an interrupted build)")
    if _mount_points_under(path.resolve()):
        raise TunepathError(f"lab VM: {path} still has file systems mounted inside; unmount them, then remove it")
    shutil.rmtree(path)


def _clear_stale_builds(cache_root: Path, name: str, say: Callable[[str], None]) -> None:
    for old in cache_root.glob(f".{name}.build-*"):
        pid = old.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not process_alive(int(pid)):
            remove_tree(old)
            say(f"removed {old}, left by an interrupted image build")


# --- the build -------------------------------------------------------------------------------------
def _bootstrap(recipe: Recipe, work: Path, root_uuid: str, log: Path) -> Path:
    tree = work / "tree"
    mirrors = []
    for name, text in host_apt_sources(recipe.suite).items():
        (work / name).write_text(text)
        mirrors.append(str(work / name))
    script = shlex.quote(str(work / "vm-guest-setup.sh"))
    (work / "vm-guest-setup.sh").write_text(recipe.setup_script)
    a = arch(recipe.arch)
    configure = shlex.join(["/bin/sh", "-eu", GUEST_SCRIPT, "configure", recipe.user, recipe.hostname, root_uuid,
                            recipe.cmdline])
    modules = []
    if a.initramfs_modules:          # before the kernel's package makes its initramfs: a conf.d file and a hook
        hook = ("#!/bin/sh\n# tunepath lab VM: the modules a QEMU virt machine boots from (MODULES=list)\n"
                'case "$1" in prereqs) exit 0 ;; esac\n. /usr/share/initramfs-tools/hook-functions\n'
                f"for m in {' '.join(a.initramfs_modules)}; do force_load \"$m\"; done\n")
        modules = ["--essential-hook=mkdir -p \"$1/etc/initramfs-tools/conf.d\" \"$1/etc/initramfs-tools/hooks\" && "
                   f"printf 'MODULES=list\\n' > \"$1/etc/initramfs-tools/conf.d/tunepath-vm\" && "
                   f"printf %s {shlex.quote(hook)} > \"$1/etc/initramfs-tools/hooks/tunepath-vm\" && "
                   "chmod 0755 \"$1/etc/initramfs-tools/hooks/tunepath-vm\""]
    argv = [need("mmdebstrap"), "--mode=root", "--variant=minbase", f"--architectures={a.debian}",
            f"--include={','.join(recipe.packages)}", *modules,
            "--aptopt=Acquire::Languages \"none\"",
            *(f"--dpkgopt=path-exclude={p}" for p in recipe.excludes),
            "--dpkgopt=path-include=/usr/share/doc/*/copyright",
            f"--customize-hook=install -m 0755 {script} \"$1{GUEST_SCRIPT}\"",
            f"--customize-hook=chroot \"$1\" {configure}",
            recipe.suite, str(tree), *mirrors]
    run_logged(argv, "building the VM's Debian tree with mmdebstrap", log, BUILD_TIMEOUT)
    return tree


def write_mbr(disk: Path, start: int, sectors: int) -> None:
    """An msdos partition table: one bootable Linux partition (type 0x83) of ``sectors`` from ``start``
    (LBA only; the CHS fields say "beyond 8 GB", as modern tools write them)."""
    entry = struct.pack("<B3sB3sII", 0x80, b"\xfe\xff\xff", 0x83, b"\xfe\xff\xff", start, sectors)
    with open(disk, "r+b") as f:
        f.seek(440)
        f.write(struct.pack("<I", 0x74707631) + b"\0\0" + entry + b"\0" * 48 + b"\x55\xaa")


def _make_disk(recipe: Recipe, tree: Path, disk: Path, root_uuid: str, log: Path) -> None:
    """The sparse raw disk with the ext4 root from ``tree``: one partition from 1 MiB (x86), or the
    whole disk (arm64, which the host boots: :mod:`tunepath.lab.vmboot`)."""
    size = recipe.disk_mib * 1024 * 1024
    with open(disk, "wb") as f:
        f.truncate(size)
    whole = arch(recipe.arch).host_boots
    root_start = 0 if whole else PART_START
    blocks = (size - root_start * SECTOR) // 4096
    run_logged([need("mke2fs"), "-q", "-F", "-t", "ext4", "-b", "4096", "-O", "^metadata_csum_seed,^orphan_file",
                "-E", f"offset={root_start * SECTOR},nodiscard", "-L", "tproot", "-U", root_uuid, "-d", str(tree),
                str(disk), str(blocks)], "writing the VM's root file system (mke2fs -d)", log, COMMAND_TIMEOUT)
    if disk.stat().st_size != size:
        raise TunepathError(f"lab VM: mke2fs changed the size of {disk}; see {log}")
    if not whole:
        write_mbr(disk, root_start, blocks * 4096 // SECTOR)


def _install_bootloader(recipe: Recipe, tree: Path, disk: Path, log: Path) -> None:
    kernels = sorted((tree / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise TunepathError(f"lab VM: expected one kernel in {tree / 'boot'}, found {len(kernels)}; see {log}")
    initrd = tree / "boot" / kernels[0].name.replace("vmlinuz-", "initrd.img-", 1)
    console = disk.with_name("bootloader-console.log")
    a = arch(recipe.arch)
    argv = [need(a.qemu), "-accel", "tcg,thread=multi", *a.bootloader_machine,
            "-m", "1024", "-smp", "2", "-nodefaults", "-display", "none", "-no-reboot",
            "-serial", f"file:{qemu_path(console)}",
            "-drive", f"file={qemu_path(disk)},format=raw,if=virtio",
            "-kernel", str(kernels[0]), "-initrd", str(initrd),
            "-append", f"root={a.root_device} rw console={a.console} panic=-1 init={GUEST_SCRIPT}"]
    try:
        run_logged(argv, "running grub-install and update-grub (x86) or update-grub (arm64) inside the VM", log,
                   BOOTLOADER_TIMEOUT)
    finally:
        with open(log, "ab") as out:            # the console joins the build log (the directory goes)
            out.write(b"\n--- the bootloader VM's serial console ---\n" + console.read_bytes()
                      if console.is_file() else b"")
    if BOOTLOADER_MARK not in console.read_text(errors="replace"):
        raise TunepathError(f"lab VM: GRUB's set-up failed (no {BOOTLOADER_MARK} on the console): "
                            f"{console_tail(console)} (whole log: {log})")


def _build(recipe: Recipe, work: Path, log: Path, say: Callable[[str], None]) -> dict[str, float]:
    root_uuid, times = str(uuid.uuid4()), {}
    started = time.monotonic()
    say(f"building the lab VM image in {work} (mmdebstrap: a few minutes; log {log})")
    a = arch(recipe.arch)
    if a.uname == os.uname().machine:
        tree = _bootstrap(recipe, work, root_uuid, log)
    else:                            # its maintainer scripts run under qemu-user
        need("arch-test")
        with foreign_binaries(a.uname, say):
            tree = _bootstrap(recipe, work, root_uuid, log)
    times["mmdebstrap_s"] = round(time.monotonic() - started, 1)
    say(f"Debian tree ready ({times['mmdebstrap_s']:g} s); writing the disk")
    _make_disk(recipe, tree, work / "disk.raw", root_uuid, log)
    times["disk_s"] = round(time.monotonic() - started - sum(times.values()), 1)
    say(f"disk written ({times['disk_s']:g} s); GRUB's set-up (update-grub) inside a throwaway VM")
    _install_bootloader(recipe, tree, work / "disk.raw", log)
    times["bootloader_s"] = round(time.monotonic() - started - sum(times.values()), 1)
    remove_tree(tree)
    for name in ("host.list", "host.sources", "vm-guest-setup.sh"):
        (work / name).unlink(missing_ok=True)
    return times


def ensure_image(cache_root: Path, say: Callable[[str], None], recipe: Recipe | None = None) -> Path:
    """``<cache_root>/vm-<hash12>/base.raw`` for ``recipe`` (the default one without), built only if missing."""
    recipe = recipe or default_recipe()
    final = image_dir(cache_root, recipe)
    image = final / "base.raw"
    if image.is_file():
        return image
    if os.geteuid() != 0:
        raise TunepathError(f"lab VM: building the image {image} needs root (mmdebstrap --mode=root): run "
                            "tunepath lab up as root, e.g. with sudo")
    cache_root.mkdir(parents=True, exist_ok=True)
    _clear_stale_builds(cache_root, final.name, say)
    work = cache_root / f".{final.name}.build-{os.getpid()}"
    log = cache_root / f".{final.name}.build.log"     # kept after a failure; moved into the image's directory
    remove_tree(work)
    work.mkdir(mode=0o755)
    log.write_bytes(b"")
    try:
        started = time.monotonic()
        times = _build(recipe, work, log, say)
        (work / "disk.raw").rename(work / "base.raw")
        log.replace(work / "build.log")
        script_hash = hashlib.sha256(recipe.setup_script.encode()).hexdigest()
        info = {"recipe": {**asdict(recipe), "setup_script": f"sha256:{script_hash}"},
                "digest": recipe.digest(), "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": {**times, "total_s": round(time.monotonic() - started, 1)}}
        (work / "recipe.json").write_text(json.dumps(info, indent=2) + "\n")
        if final.exists():                      # a directory of ours without its image: replace it
            remove_tree(final)
        try:
            work.rename(final)
        except OSError:
            if not image.is_file():
                raise
    finally:
        remove_tree(work)
    say(f"lab VM image ready: {image} ({info['seconds']['total_s']:g} s)")
    return image
