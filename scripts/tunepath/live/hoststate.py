"""Safe host changes: preflight, the original state, restore, and the run lock.

Disruptive blocks (CPUs offline/online, NIC queue count, GRUB IOMMU parameters with a
reboot) run only when the run was started with ``apply`` (a reboot also needs
``allow_reboot``); otherwise they are dry-run: recorded with their exact text and the
step's variant is skipped with the reason. Before the first change the host's original
state is saved on the host (``~/.tunepath/original-state.json``); :func:`restore` puts
it back, and a step that fails or is interrupted restores what it changed.

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
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.model.context import cpu_ranges, parse_cpu_list
from tunepath.model.plan import Block
from tunepath.model.shell import heredoc, number, path, quote

GRUB_DROP_IN = "/etc/default/grub.d/99-tunepath-iommu.cfg"   # the IOMMU steps' kernel parameters

__all__ = ["boot_id", "STATE_DIR", "STATE_FILE", "LOCK_DIR", "Preflight", "preflight", "save_original_state",
           "load_original_state", "restore", "acquire_lock", "release_lock", "check_lock", "read_lock",
           "dead_owner", "clear_lock_command", "wait_for_reboot", "REBOOT_BLOCKS"]

STATE_DIR = "~/.tunepath"
STATE_FILE = f"{STATE_DIR}/original-state.json"
LOCK_DIR = f"{STATE_DIR}/lock"
REBOOT_BLOCKS = {"iommu-strict", "iommu-passthrough"}


@dataclass
class Preflight:
    ok: bool
    reason: str = ""


def current_queues_command(nic: str) -> str:
    """Prints the NIC's current number of combined queues (nothing if the driver has none);
    ``nic`` is one shell word (quoted, or ``"$dev"``)."""
    return (f"ethtool -l {nic} 2>/dev/null | awk '/Current hardware settings/{{c=1}} "
            "c && /Combined/{print $2; exit}'")


def _can_root(host: Host) -> bool:
    r = host.run("[ \"$(id -u)\" = 0 ] || sudo -n true", check=False, timeout=15)
    return r.exited == 0


def preflight(host: Host, block: Block, facts: dict, same_machine: bool) -> Preflight:
    """Can ``block`` work on this host? A 'no' carries the reason shown on the page."""
    if not _can_root(host):
        return Preflight(False, f"needs root on {host.name}, and sudo is not allowed without a password")
    bid = block.id
    if bid in ("offline-cpus", "move-cpus"):
        if bid == "move-cpus" and (facts.get("numa_nodes") or 1) < 2:
            return Preflight(False, f"the host has {facts.get('numa_nodes') or 1} NUMA node: no NIC-local "
                                    "node to move to")
        cpus = re.findall(r"cpu\$\{no\}", block.text)
        if "for no in ;" in block.text or not cpus:
            return Preflight(False, "no CPU to change")
        r = host.run("ls /sys/devices/system/cpu/cpu*/online 2>/dev/null | head -1; "
                     "test -w /sys/devices/system/cpu/cpu1/online && echo writable", check=False, timeout=15)
        if "writable" not in r.stdout:
            return Preflight(False, "CPU hotplug is not available (/sys/devices/system/cpu/cpuN/online "
                                    "is missing or read-only)")
        offline_lines = [ln for ln in block.text.splitlines() if '"echo 0 >' in ln]
        if any(re.search(r"for no in (\{0\.\.|0 )", ln) for ln in offline_lines):
            r0 = host.run("test -w /sys/devices/system/cpu/cpu0/online && echo yes", check=False, timeout=15)
            if "yes" not in r0.stdout:
                return Preflight(False, "the plan takes CPU 0 offline, which this host cannot do "
                                        "(no /sys/devices/system/cpu/cpu0/online)")
    if bid in ("set-queues", "show-queues"):
        if same_machine:
            return Preflight(False, "server and client are one machine: the traffic goes over loopback, "
                                    "so no NIC queue is in its path")
        nic = facts.get("nic") or {}
        if not nic.get("name"):
            return Preflight(False, "no NIC found (no default route)")
        if host.run("command -v ethtool", check=False, timeout=15).exited != 0:
            return Preflight(False, "ethtool is not installed on the server")
        if nic.get("queues") is None:
            return Preflight(False, f"{nic['name']} reports no channel settings (ethtool -l)")
    if bid in ("numa-topology", "nic-node") and (facts.get("numa_nodes") or 1) < 2:
        return Preflight(False, "single NUMA node: nothing to place")
    if bid in REBOOT_BLOCKS:
        if host.spec.local:
            return Preflight(False, "the server is the machine running tunepath: it will not reboot itself")
        r = host.run("command -v update-grub && test -d /etc/default/grub.d && echo ok", check=False, timeout=15)
        if "ok" not in r.stdout:
            return Preflight(False, "not a GRUB-booted Debian/Ubuntu host (update-grub or "
                                    "/etc/default/grub.d missing)")
    return Preflight(True)


def save_original_state(host: Host, facts: dict) -> dict:
    """Record the state disruptive steps change, once per host (an older record is kept)."""
    existing = load_original_state(host)
    if existing:
        return existing
    nic = (facts.get("nic") or {}).get("name")
    script = ("echo online=$(cat /sys/devices/system/cpu/online); "
              f"test -f {GRUB_DROP_IN} && echo grub_dropin=$(base64 -w0 {GRUB_DROP_IN}); "
              "echo cmdline=$(cat /proc/cmdline | base64 -w0)")
    if nic:
        script += f"; echo queues=$({current_queues_command(quote(nic, 'nic'))})"
    out = dict(re.findall(r"^(\w+)=(.*)$", host.run(script, check=False, timeout=30).stdout, re.M))
    state = {"cpus_online": out.get("online"), "nic": nic,
             "nic_queues": int(out["queues"]) if out.get("queues", "").isdigit() else None,
             "grub_dropin_b64": out.get("grub_dropin"), "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write = heredoc(quote(STATE_FILE + ".tmp"), json.dumps(state) + "\n")
    host.run(f"mkdir -p {quote(STATE_DIR)} && {write}\nmv {quote(STATE_FILE + '.tmp')} {quote(STATE_FILE)}",
             timeout=30)
    return state


def load_original_state(host: Host) -> dict | None:
    r = host.run(f"cat {quote(STATE_FILE)} 2>/dev/null", check=False, timeout=15)
    try:
        return json.loads(r.stdout) if r.stdout.strip() else None
    except json.JSONDecodeError:
        raise TunepathError(f"on {host.name}: {STATE_FILE} is damaged; inspect it before restoring by hand")


def restore(host: Host, forget: bool = False) -> list[str]:
    """Return the host to its saved original state; the list says what was done."""
    state = load_original_state(host)
    if not state:
        return []
    done = []
    want = set(parse_cpu_list(state["cpus_online"])) if state.get("cpus_online") else None
    if want is not None:
        now = set(parse_cpu_list(host.run("cat /sys/devices/system/cpu/online", timeout=15).stdout.strip()))
        on, off = sorted(want - now), sorted(now - want - {0})
        cmds = [f"echo 1 > /sys/devices/system/cpu/cpu{c}/online" for c in on]
        cmds += [f"echo 0 > /sys/devices/system/cpu/cpu{c}/online" for c in off]
        if cmds:
            host.run("; ".join(cmds), sudo=True, timeout=120)
            done.append(f"CPUs online again: {cpu_ranges(want)}")
    if state.get("nic") and state.get("nic_queues") and host.run(
            f"test -e {path('/sys/class/net', state['nic'], what='saved nic')}", check=False, timeout=15).exited == 0:
        nic = quote(state["nic"], "saved nic")
        r = host.run(current_queues_command(nic), check=False, timeout=15)
        if r.stdout.strip().isdigit() and int(r.stdout.strip()) != state["nic_queues"]:
            host.run(f"ethtool -L {nic} combined {number(state['nic_queues'], 'saved nic_queues')}", sudo=True,
                     timeout=60)
            done.append(f"{state['nic']}: {state['nic_queues']} combined queues again")
    current = host.run(f"test -f {GRUB_DROP_IN} && base64 -w0 {GRUB_DROP_IN}", check=False, timeout=15).stdout.strip()
    original = state.get("grub_dropin_b64") or ""
    if current != original:
        if original:
            host.run(f"echo {quote(original, 'saved GRUB drop-in')} | base64 -d > {GRUB_DROP_IN} && update-grub",
                     sudo=True, timeout=300)
        else:
            host.run(f"rm -f {GRUB_DROP_IN} && update-grub", sudo=True, timeout=300)
        done.append("GRUB IOMMU settings restored (takes effect at the next reboot)")
    if forget:
        host.run(f"rm -f {quote(STATE_FILE)}", check=False, timeout=15)
    return done


def _local_boot_id() -> str | None:
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
    booted = _local_boot_id()
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
    info = json.dumps({"run_id": run_id, "pid": os.getpid(), "host": platform.node(), "boot_id": _local_boot_id(),
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


def boot_id(host: Host) -> str:
    return host.run("cat /proc/sys/kernel/random/boot_id", timeout=15).stdout.strip()


def wait_for_reboot(connect, expect_in_cmdline: list[str], old_boot_id: str, timeout: float = 900) -> str:
    """Reconnect until the host has booted anew (its boot id changed), then check the kernel
    command line; returns it."""
    deadline = time.monotonic() + timeout
    time.sleep(10)
    last = ""
    while time.monotonic() < deadline:
        try:
            with connect() as host:
                if boot_id(host) == old_boot_id:
                    last = "still the old boot"
                    time.sleep(5)
                    continue
                cmdline = host.run("cat /proc/cmdline", timeout=15).stdout.strip()
                missing = [p for p in expect_in_cmdline if p not in cmdline.split()]
                if missing:
                    raise TunepathError(f"on {host.name}: after the reboot the kernel command line lacks "
                                        f"{' '.join(missing)}: {cmdline}")
                return cmdline
        except TunepathError as exc:
            if "command line lacks" in str(exc):
                raise
            last = str(exc)
            time.sleep(5)
    raise TunepathError(f"the server did not come back within {timeout:g} s after the reboot ({last})")
