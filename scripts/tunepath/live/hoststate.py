"""Safe host changes: preflight, the original state, restore, and the run lock.

Disruptive blocks (CPUs offline/online, NIC queue count, huge pages, GRUB IOMMU parameters
with a reboot) run only when the run was started with ``apply`` (a reboot also needs
``allow_reboot``); otherwise they are dry-run: recorded with their exact text and the
step's variant is skipped with the reason. Before the first change the host's original
state is saved on the host (``~/.tunepath/original-state.json``); :mod:`tunepath.live.restore`
puts it back, and a step that fails or is interrupted restores what it changed.

The run lock (``~/.tunepath/lock`` on the server) records its owner: the run, and the
process that holds it (pid, the machine's name and boot id). A lock whose owner is dead
(this machine rebooted since, or the pid is gone) is reported with the command that clears it.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live import irqs, sysctls
from tunepath.live.facts import SBIN_PATH, channels_command, current_queues_command, parse_channels
from tunepath.live.hosts import Host
from tunepath.model.context import brace_ranges, cpu_ranges
from tunepath.model.plan import Block, Sysctl
from tunepath.model.shell import heredoc, quote

GRUB_DROP_IN = "/etc/default/grub.d/99-tunepath-iommu.cfg"
# after update-grub, before the reboot: grub.cfg parses and holds the new parameter, then it is flushed
GRUB_CHECK = "sudo grub-script-check /boot/grub/grub.cfg && sudo grep -q -e {param} /boot/grub/grub.cfg && sync"   # the IOMMU steps' kernel parameters

__all__ = ["STATE_DIR", "STATE_FILE", "LOCK_DIR", "NR_HUGEPAGES", "GRUB_DROP_IN", "GRUB_CHECK", "Preflight", "preflight",
           "save_original_state", "load_original_state", "acquire_lock", "release_lock", "check_lock", "read_lock",
           "dead_owner", "clear_lock_command", "local_boot_id", "REBOOT_BLOCKS", "HUGEPAGE_BLOCKS",
           "OriginalState", "current_queues_command"]

STATE_DIR = "~/.tunepath"
STATE_FILE = f"{STATE_DIR}/original-state.json"
LOCK_DIR = f"{STATE_DIR}/lock"
REBOOT_BLOCKS = {"iommu-strict", "iommu-passthrough"}
HUGEPAGE_BLOCKS = {"reserve-hugepages"}
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"


@dataclass
class Preflight:
    ok: bool
    reason: str = ""


@dataclass(frozen=True)
class OriginalState:
    """What the disruptive steps change, as the host had it before the first change."""

    cpus_online: str | None = None
    nic: str | None = None
    nic_channels: str | None = None      # "combined" or "rx-tx" (a state saved before rx-tx existed: combined)
    nic_queues: int | None = None        # combined channels, or receive queues
    nic_tx: int | None = None            # rx-tx: transmit queues
    nr_hugepages: int | None = None
    grub_dropin_b64: str | None = None
    cmdline_b64: str | None = None       # /proc/cmdline, for the reboot that puts the kernel's parameters back
    saved: str = ""

    @classmethod
    def from_dict(cls, data) -> "OriginalState":
        if not isinstance(data, dict):
            raise ValueError("not an object")
        values = {f.name: data[f.name] for f in fields(cls) if data.get(f.name) is not None}
        for key, value in values.items():
            counts = key in ("nic_queues", "nic_tx", "nr_hugepages")
            if isinstance(value, bool) or not isinstance(value, int if counts else str) or (counts and value < 0):
                raise ValueError(f"{key} is not {'a whole number' if counts else 'a string'}")
        if values.setdefault("nic_channels", "combined" if values.get("nic_queues") else None) not in (
                None, "combined", "rx-tx"):
            raise ValueError("nic_channels is neither combined nor rx-tx")
        return cls(**values)


def _can_root(host: Host) -> bool:
    r = host.run("[ \"$(id -u)\" = 0 ] || sudo -n true", check=False, timeout=15)
    return r.exited == 0


def preflight(host: Host, block: Block, facts: dict, same_machine: bool) -> Preflight:
    """Can ``block`` work on this host? A 'no' carries the reason shown on the page."""
    settings = [Sysctl(n, v) for n, v in re.findall(r"^sudo sysctl -w (\S+?)=(\d+)$", block.text, re.M)]
    if settings and block.id not in HUGEPAGE_BLOCKS:   # its own check: a client's sudo may allow exactly these
        why = sysctls.check(host, settings)
        return Preflight(why is None, why or "")
    if not _can_root(host):
        return Preflight(False, f"needs root on {host.name}, and sudo is not allowed without a password")
    bid = block.id
    if bid == "pin-irqs":
        why = irqs.check(host, (facts.get("nic") or {}).get("name")) or (
            "single NUMA node: the NIC's node holds every CPU" if (facts.get("numa_nodes") or 1) < 2 else None)
        return Preflight(why is None, why or "")
    if bid in ("offline-cpus", "move-cpus"):
        return _cpus_check(host, block, facts)
    if bid in ("set-queues", "show-queues", "show-queues-after"):
        return _queues_check(host, block, facts, same_machine)
    if bid in ("numa-topology", "nic-node") and (facts.get("numa_nodes") or 1) < 2:
        return Preflight(False, "single NUMA node: nothing to place")
    if bid in HUGEPAGE_BLOCKS:
        return _hugepages_check(host, block)
    if bid in REBOOT_BLOCKS:
        return _reboot_check(host)
    return Preflight(True)


def _cpus_check(host: Host, block: Block, facts: dict) -> Preflight:
    """Every CPU the block brings online or takes offline has a writable sysfs ``online`` file (root)."""
    if block.id == "move-cpus" and (facts.get("numa_nodes") or 1) < 2:
        return Preflight(False, f"the host has {facts.get('numa_nodes') or 1} NUMA node: no NIC-local "
                                "node to move to")
    nic = facts.get("nic") or {}
    if block.id == "move-cpus" and not (isinstance(nic.get("numa_node"), int) and nic["numa_node"] >= 0):
        if not nic.get("name"):
            return Preflight(False, "no network interface with a default route was found: no NIC to move next to")
        return Preflight(False, f"the NIC ({nic['name']}) reports no NUMA node (its sysfs numa_node is -1 or "
                                "missing): the firmware gave its PCI bus no node, so no node is nearer to it than "
                                "another")
    cpus: set[int] = set()
    for words in re.findall(r"for no in ([^;]*);", block.text):
        for m in re.finditer(r"\{(\d+)\.\.(\d+)\}|(\d+)", words):
            cpus.update(range(int(m.group(1) or m.group(3)), int(m.group(2) or m.group(3)) + 1))
    if not cpus:
        return Preflight(False, "no CPU to change")
    r = host.run(f"for no in {brace_ranges(cpus)}; do test -w /sys/devices/system/cpu/cpu$no/online || echo $no; "
                 "done", sudo=True, check=False, timeout=30)
    fixed = sorted(int(c) for c in re.findall(r"^(\d+)$", r.stdout, re.M)) if r.exited == 0 else sorted(cpus)
    if fixed:
        zero = " (CPU 0 is not hot-pluggable on most hosts)" if 0 in fixed else ""
        return Preflight(False, f"CPU hotplug is not available for CPU {cpu_ranges(fixed)} on {host.name}: "
                                f"/sys/devices/system/cpu/cpuN/online is missing or read-only{zero}")
    return Preflight(True)


def _queues_check(host: Host, block: Block, facts: dict, same_machine: bool) -> Preflight:
    """The NIC is in the load's path, ethtool is there, and the driver takes the block's settings."""
    if same_machine:
        return Preflight(False, "server and client are one machine: the traffic goes over loopback, "
                                "so no NIC queue is in its path")
    nic = facts.get("nic") or {}
    name = nic.get("name")
    if not name:
        return Preflight(False, "no NIC found (no default route)")
    if host.run(f"{SBIN_PATH} command -v ethtool", check=False, timeout=15).exited != 0:
        return Preflight(False, f"ethtool is not installed on {host.name}")
    if nic.get("queues") is None:
        return Preflight(False, f"{name} reports no channel settings (ethtool -l {name})")
    asked = re.search(r"ethtool -L \S+ (combined|rx) (\d+)", block.text)
    if not asked:
        return Preflight(True)
    now = parse_channels(host.run(channels_command(quote(name, "nic")), check=False, timeout=15).stdout)
    kind, n, has = ("combined" if asked.group(1) == "combined" else "rx-tx"), int(asked.group(2)), \
        now.kind or nic.get("channels")
    if has and kind != has:
        return Preflight(False, f"{name} on {host.name} has {has} channels and the plan sets {kind} ones (the "
                                f"host context's nic_channels): `{block.text}` would fail")
    most = now.maximum(kind)
    if most is not None and n > most:
        return Preflight(False, f"{name} on {host.name} allows at most {most} queues (ethtool -l); the plan "
                                f"asks for {n}")
    return Preflight(True)


def _hugepages_check(host: Host, block: Block) -> Preflight:
    """The pool is writable, and the reservation leaves at least as much memory as it takes."""
    asked = re.search(r"vm\.nr_hugepages=(\d+)", block.text)
    r = host.run(f"test -w {NR_HUGEPAGES} && echo writable; grep -E '^(MemAvailable|Hugepagesize):' /proc/meminfo",
                 sudo=True, check=False, timeout=15)
    info = dict(re.findall(r"^(\w+):\s+(\d+)", r.stdout, re.M))
    if "writable" not in r.stdout or "Hugepagesize" not in info:
        return Preflight(False, f"huge pages cannot be reserved on {host.name} ({NR_HUGEPAGES} is read-only or "
                                "the kernel has no hugetlbfs)")
    want_mb = int(asked.group(1)) * int(info["Hugepagesize"]) // 1024 if asked else 0
    have_mb = int(info.get("MemAvailable", 0)) // 1024
    if want_mb * 2 > have_mb:
        return Preflight(False, f"reserving {want_mb} MB of huge pages on {host.name} would leave less than that "
                                f"for everything else ({have_mb} MB available)")
    return Preflight(True)


def _reboot_check(host: Host) -> Preflight:
    if host.spec.local:
        return Preflight(False, "the server is the machine running tunepath: it will not reboot itself")
    here = local_boot_id()
    if here and host.run("cat /proc/sys/kernel/random/boot_id", check=False, timeout=15).stdout.strip() == here:
        return Preflight(False, f"{host.name} runs on the kernel of the machine running tunepath (the same boot "
                                "id: a network namespace or a container); rebooting it would reboot this machine")
    if "ok" not in host.run(f"{SBIN_PATH} command -v update-grub && test -d /etc/default/grub.d && echo ok",
                            check=False, timeout=15).stdout:
        return Preflight(False, "not a GRUB-booted Debian/Ubuntu host (update-grub or "
                                "/etc/default/grub.d missing)")
    return Preflight(True)
def save_original_state(host: Host, facts: dict) -> OriginalState:
    """Record the state disruptive steps change, once per host (an older record is kept)."""
    existing = load_original_state(host)
    if existing:
        return existing
    nic = (facts.get("nic") or {}).get("name")
    script = ("echo online=$(cat /sys/devices/system/cpu/online); "
              f"echo hugepages=$(cat {NR_HUGEPAGES} 2>/dev/null); "
              f"test -f {GRUB_DROP_IN} && echo grub_dropin=$(base64 -w0 {GRUB_DROP_IN}); "
              "echo cmdline=$(cat /proc/cmdline | base64 -w0)")
    if nic:
        script += f"; echo channels=$({channels_command(quote(nic, 'nic'))})"
    out = dict(re.findall(r"^(\w+)=(.*)$", host.run(script, check=False, timeout=30).stdout, re.M))
    channels = parse_channels(out.get("channels", ""))
    state = OriginalState(cpus_online=out.get("online") or None, nic=nic, nic_channels=channels.kind,
                          nic_queues=channels.queues, nic_tx=channels.tx if channels.kind == "rx-tx" else None,
                          nr_hugepages=int(out["hugepages"]) if out.get("hugepages", "").isdigit() else None,
                          grub_dropin_b64=out.get("grub_dropin"), cmdline_b64=out.get("cmdline") or None,
                          saved=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    write = heredoc(quote(STATE_FILE + ".tmp"), json.dumps(asdict(state)) + "\n")
    # flushed before and after the rename: the state must be on disk before the first change, or a power
    # cut right after it (the VM fault trials) leaves an empty file and nothing to restore from
    tmp = quote(STATE_FILE + ".tmp")
    host.run(f"mkdir -p {quote(STATE_DIR)} && {write}\nsync {tmp} && mv {tmp} {quote(STATE_FILE)} && "
             f"sync {quote(STATE_DIR)}", timeout=30)
    return state


def load_original_state(host: Host) -> OriginalState | None:
    """The saved state, or None. An empty file is one a power cut left before its data reached the
    disk (written by a version that did not flush it): nothing was saved, and it is removed."""
    r = host.run(f"test -s {quote(STATE_FILE)} || rm -f {quote(STATE_FILE)}; cat {quote(STATE_FILE)} 2>/dev/null",
                 check=False, timeout=15)
    try:
        return OriginalState.from_dict(json.loads(r.stdout)) if r.stdout.strip() else None
    except (ValueError, TypeError) as exc:
        raise TunepathError(f"on {host.name}: {STATE_FILE} is damaged ({exc}); inspect it (cat {STATE_FILE}) "
                            "before restoring by hand") from None


def local_boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:        # another user's process: alive
        return True
    return True


def read_lock(host: Host) -> dict | None:
    """The lock's owner record; None when no lock is held, ``{}`` when its owner is unreadable."""
    r = host.run(f"[ -d {quote(LOCK_DIR)} ] && {{ echo held; cat {quote(LOCK_DIR + '/owner')} 2>/dev/null; }}",
                 check=False, timeout=15)
    held, _, text = r.stdout.partition("\n")
    if held != "held":
        return None
    try:
        owner = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return owner if isinstance(owner, dict) else {}


def dead_owner(owner: dict) -> str | None:
    """Why the lock's owner is known to be dead, or None: alive, or on another machine (unknown)."""
    if not owner or owner.get("host") != platform.node():
        return None
    booted = local_boot_id()
    if owner.get("boot_id") and booted and owner["boot_id"] != booted:
        return f"{owner['host']} has rebooted since the lock was taken"
    pid = owner.get("pid")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and not _alive(pid):
        return f"its process {pid} on {owner['host']} is gone"
    return None


def clear_lock_command(host: Host, hosts_file: str | None = None) -> str:
    """What clears a dead run's lock on ``host`` and puts the server back as the run found it."""
    if hosts_file:
        return f"tunepath restore --force --hosts {quote(str(hosts_file), 'hosts file')}"
    return "tunepath restore --force" + ("" if host.spec.local else " --hosts HOSTS.toml")


def _describe(owner: dict) -> str:
    if not owner:
        return "owner unknown"
    who = f"run {owner.get('run_id', '?')}"
    if owner.get("pid"):
        who += f", pid {owner['pid']} on {owner.get('host', '?')}"
    return who + (f", since {owner['since']}" if owner.get("since") else "")


def acquire_lock(host: Host, run_id: str, hosts_file: str | None = None) -> None:
    """Take the server's run lock for ``run_id``, recording this process as its owner."""
    info = json.dumps({"run_id": run_id, "pid": os.getpid(), "host": platform.node(), "boot_id": local_boot_id(),
                       "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    lock = quote(LOCK_DIR)
    r = host.run(f"mkdir -p {quote(STATE_DIR)} && mkdir {lock} 2>/dev/null || exit 3; "
                 f"printf '%s\\n' {quote(info)} > {quote(LOCK_DIR + '/owner')} || {{ rm -rf {lock}; exit 4; }}",
                 check=False, timeout=15)
    if r.exited == 0:
        return
    owner = read_lock(host)
    if r.exited != 3 or owner is None:         # no other run's lock: this one could not be written
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit status {r.exited}"
        raise TunepathError(f"on {host.name}: could not take the lock {LOCK_DIR} ({why}); is the home directory "
                            "writable?")
    clear = clear_lock_command(host, hosts_file)
    dead = dead_owner(owner)
    if dead:
        raise TunepathError(f"on {host.name}: a dead run holds the lock ({_describe(owner)}; {dead}): clear it "
                            f"and restore the server with `{clear}`")
    raise TunepathError(f"on {host.name}: another run holds the lock ({_describe(owner)}). Wait for it to end; "
                        f"if it died, clear it with `{clear}` (or remove {LOCK_DIR} on {host.name})")


def check_lock(host: Host, run_id: str) -> None:
    owner = read_lock(host)
    if not owner or owner.get("run_id") != run_id:
        raise TunepathError(f"on {host.name}: run {run_id} does not hold the lock "
                            f"({_describe(owner) if owner is not None else 'no lock'}); start live runs with "
                            "`scripts/run`")


def release_lock(host: Host, run_id: str) -> None:
    """Remove the lock if ``run_id`` holds it; another run's lock stays."""
    owner = quote(LOCK_DIR + "/owner")
    mine = quote(json.dumps({"run_id": run_id})[1:-1])        # '"run_id": "<id>"', as json.dumps writes it
    host.run(f"grep -qF -- {mine} {owner} 2>/dev/null && rm -rf {quote(LOCK_DIR)}", check=False, timeout=15)
