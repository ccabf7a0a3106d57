"""``tunepath lab status``: one line per part of the lab, each checked for real.

A process counts only if its pid still runs the command the lab started; a forward counts only
if an SSH banner comes back through it (which also proves the bridge, the host's link and its
sshd). The root namespace is checked to hold no lab address and no lab route.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass

from tunepath.lab import netns
from tunepath.lab.sshd import banner, forward_argv, sshd_mark
from tunepath.lab.state import ROLES, SWITCH_ADDRESS, LabPaths, LabState
from tunepath.lab.system import process_matches
from tunepath.lab.users import sudoers_path, user_exists, user_name
from tunepath.lab.vmhost import vm_namespace, vm_status

__all__ = ["PartStatus", "lab_status"]


@dataclass(frozen=True)
class PartStatus:
    part: str          # "namespace tplab-srv", "sshd server", …
    ok: bool
    detail: str

    @property
    def line(self) -> str:
        return f"{'ok' if self.ok else 'MISSING':<8}{self.part}: {self.detail}"


def _network(prefix: str, vm: bool = False) -> list[PartStatus]:
    existing = netns.namespaces()
    switch = netns.switch_namespace(prefix)
    names = [switch] + [netns.namespace(prefix, r) for r in ROLES] + ([vm_namespace(prefix)] if vm else [])
    parts = [PartStatus(f"namespace {n}", n in existing, "exists" if n in existing else "missing") for n in names]
    if switch in existing:
        br = netns.link_summary(switch, "br0")
        parts.append(PartStatus(f"bridge br0 ({switch})", " UP " in f" {br} " and SWITCH_ADDRESS in br,
                                br or "missing"))
    for r in ROLES:
        ns = netns.namespace(prefix, r)
        if ns in existing:
            eth0, route = netns.link_summary(ns, "eth0"), netns.default_route(ns)
            ok = " UP " in f" {eth0} " and f"{r.address}/" in eth0 and SWITCH_ADDRESS in route
            parts.append(PartStatus(f"eth0 {r.name} ({ns})", ok,
                                    f"{eth0 or 'missing'}; {route or 'no default route'}"))
    return parts


def _accounts(prefix: str, paths: LabPaths) -> list[PartStatus]:
    parts = [PartStatus(f"user {name}", user_exists(name), "exists" if user_exists(name) else "missing")
             for name in (user_name(prefix, r.suffix) for r in ROLES)]
    sudoers = sudoers_path(prefix)
    mode = stat.S_IMODE(sudoers.stat().st_mode) if sudoers.is_file() else None
    parts.append(PartStatus(f"sudoers {sudoers}", mode == 0o440,
                            "missing" if mode is None else f"mode {mode:04o}"))
    for what, path in (("key", paths.key_file), ("known_hosts", paths.known_hosts),
                       ("inventory", paths.hosts_file)):
        parts.append(PartStatus(f"{what} {path}", path.is_file(), "present" if path.is_file() else "missing"))
    return parts


def _services(state: LabState, paths: LabPaths) -> list[PartStatus]:
    parts = []
    switch = netns.switch_namespace(state.prefix)
    for r in ROLES:
        host = state.host(r.name)
        alive = process_matches(host.sshd_pid, sshd_mark(paths.role_dir(r.name)))
        parts.append(PartStatus(f"sshd {r.name}", alive, f"pid {host.sshd_pid} "
                                f"{'running' if alive else 'not running'} in {netns.namespace(state.prefix, r)}"))
        forward = host.port is not None and process_matches(
            host.socat_pid, " ".join(forward_argv(host.port, switch, r.address)[1:]))
        seen = banner(host.port) if forward else ""
        parts.append(PartStatus(f"forward {r.name}", bool(seen),
                                f"127.0.0.1:{host.port} -> {r.address}:22 "
                                + (f"answers {seen}" if seen else "socat running, no SSH banner" if forward
                                   else "socat not running")))
    return parts


def lab_status(state: LabState | None, prefix: str, paths: LabPaths) -> list[PartStatus]:
    if state is None:
        left = sorted(n for n in netns.namespaces() if n.startswith(f"{prefix}-"))
        return [PartStatus("lab", False, f"not up: no {paths.state_file} (tunepath lab up creates it)"
                           + (f"; namespaces {', '.join(left)} exist without a state file" if left else ""))]
    leaks = netns.root_lab_addresses()
    vm = [PartStatus(*part) for part in vm_status(state.prefix, state.vm, paths)] if state.vm is not None else []
    return (_network(state.prefix, state.vm is not None) + _accounts(state.prefix, paths) + _services(state, paths) + vm
            + [PartStatus("root namespace", not leaks, "; ".join(leaks) if leaks
                          else "no lab address and no lab route (only the 127.0.0.1 forwards)")])
