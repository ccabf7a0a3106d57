"""``tunepath lab up``, step by step: files, network, users, sshd, forwards, inventory.

Each part is created only when missing, and recorded in ``state.json`` before it is created
(removing a part that is not there is harmless, leaking one is not). Nothing of the same name that
no state lists is ever adopted: :func:`refuse_foreign` stops first, saying how to remove it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tunepath.errors import TunepathError
from tunepath.lab import netns, users
from tunepath.lab.inventory import baseline_cpus, hosts_toml, self_hosts_toml
from tunepath.lab.sshd import (HOST_KEY, free_port, keygen, known_hosts_text, port_free, forward_argv,
                               sshd_mark, start_forward, start_sshd, wait_banner, write_config)
from tunepath.lab.state import ROLES, LabPaths, LabState, VmState, save_state
from tunepath.lab.system import process_matches
from tunepath.lab.vmhost import VM_DIR, up_vm, vm_known_host, vm_namespace, wait_vm

__all__ = ["build", "refuse_foreign", "lab_namespaces", "lab_users", "lab_files"]


def lab_namespaces(prefix: str) -> list[str]:
    """Every namespace a lab of ``prefix`` may have (the VM's only with ``up --vm``)."""
    return [netns.switch_namespace(prefix)] + [netns.namespace(prefix, r) for r in ROLES] + [vm_namespace(prefix)]


def lab_users(prefix: str) -> list[str]:
    return [users.user_name(prefix, r.suffix) for r in ROLES]


def lab_files() -> list[str]:
    """The names ``up`` may create in the lab directory (``down`` removes nothing else)."""
    return ["id_ed25519", "id_ed25519.pub", "known_hosts", "hosts.toml", "hosts-self.toml"] + [r.name for r in ROLES] + [VM_DIR]


class _Log:
    """``say``, counting what changed (no change at all: the lab was already up)."""

    def __init__(self, say: Callable[[str], None]):
        self.say, self.changes = say, 0

    def __call__(self, line: str) -> None:
        self.changes += 1
        self.say(line)


def refuse_foreign(state: LabState, paths: LabPaths) -> None:
    """Stop if a namespace, user, sudoers file or lab file of ours exists that no state lists."""
    existing = netns.namespaces()
    for name in lab_namespaces(state.prefix):
        if name in existing and name not in state.namespaces:
            raise TunepathError(f"lab up: network namespace {name} exists but {paths.state_file} does not list "
                                f"it: if it is left from an old lab, remove it (ip netns del {name}); "
                                "else choose another --prefix")
    for name in lab_users(state.prefix):
        if users.user_exists(name) and name not in state.users:
            raise TunepathError(f"lab up: user {name} exists but {paths.state_file} does not list it: if it is "
                                f"left from an old lab, remove it (userdel -r {name}); else choose another --prefix")
    sudoers = users.sudoers_path(state.prefix)
    if sudoers.exists() and state.sudoers != str(sudoers):
        raise TunepathError(f"lab up: {sudoers} exists but {paths.state_file} does not list it: remove it if it "
                            "is left from an old lab, else choose another --prefix")
    for name in lab_files():
        if (paths.directory / name).exists() and name not in state.files:
            raise TunepathError(f"lab up: {paths.directory / name} exists but the lab did not write it: choose "
                                "an empty --dir (the lab writes its key, inventory and sshd files there)")


def _files(state: LabState, paths: LabPaths, log: _Log) -> None:
    for name in ("id_ed25519", "id_ed25519.pub") + tuple(r.name for r in ROLES):
        state.add_file(name)
    save_state(paths.state_file, state)
    if keygen(paths.key_file, f"tunepath-lab-{state.prefix}"):
        log(f"made the lab's user key {paths.key_file}")
    for r in ROLES:
        role_dir = paths.role_dir(r.name)
        role_dir.mkdir(mode=0o755, exist_ok=True)
        if keygen(role_dir / HOST_KEY, f"{netns.namespace(state.prefix, r)}"):
            log(f"made the host key of {r.name} ({role_dir / HOST_KEY})")


def _network(state: LabState, paths: LabPaths, log: _Log) -> None:
    existing = netns.namespaces()
    wanted = lab_namespaces(state.prefix)
    for name in wanted if state.vm is not None else wanted[:-1]:
        if name not in existing:
            if name not in state.namespaces:
                state.namespaces.append(name)
                save_state(paths.state_file, state)
            netns.add_namespace(name)
            log(f"created network namespace {name}")
    netns.ensure_switch(state.prefix)
    for r in ROLES:
        ns = netns.namespace(state.prefix, r)
        was = netns.link_summary(ns, "eth0") if ns in existing else ""
        netns.ensure_host(state.prefix, r)
        if was and " UP " not in f" {was} ":
            log(f"brought eth0 of {r.name} ({ns}) up again, with its default route")


def _accounts(state: LabState, paths: LabPaths, log: _Log) -> None:
    public = paths.key_file.with_name("id_ed25519.pub").read_text()
    for name in lab_users(state.prefix):
        if not users.user_exists(name):
            if name not in state.users:
                state.users.append(name)
                save_state(paths.state_file, state)
            users.create_user(name)
            log(f"created user {name}")
        users.authorize(name, public)
    sudoers = users.sudoers_path(state.prefix)
    server, *clients = lab_users(state.prefix)
    if not sudoers.is_file() or sudoers.read_text() != users.sudoers_text(server, clients):
        state.sudoers = str(sudoers)
        save_state(paths.state_file, state)
        users.write_sudoers(sudoers, server, clients)
        log(f"wrote {sudoers}: passwordless sudo for {server}; {', '.join(clients)} may run "
            f"`{users.CLIENT_SUDO}` only")


def _sshd(state: LabState, paths: LabPaths, log: _Log) -> None:
    for r, user in zip(ROLES, lab_users(state.prefix)):
        host, role_dir, ns = state.host(r.name), paths.role_dir(r.name), netns.namespace(state.prefix, r)
        write_config(role_dir, user, ns)
        mark = sshd_mark(role_dir)
        if process_matches(host.sshd_pid, mark):
            continue
        ours = [p for p in netns.namespace_pids(ns) if process_matches(p, mark)]
        if ours:                     # our listener, whose pid an interrupted `up` did not record
            host.sshd_pid = ours[0]
        else:
            host.sshd_pid = start_sshd(ns, role_dir)
            log(f"started sshd for {r.name} in {ns} (pid {host.sshd_pid})")
        save_state(paths.state_file, state)


def _forwards(state: LabState, paths: LabPaths, log: _Log) -> None:
    switch = netns.switch_namespace(state.prefix)
    for r in ROLES:
        host = state.host(r.name)
        if host.port is not None and process_matches(host.socat_pid, " ".join(forward_argv(host.port, switch,
                                                                                            r.address)[1:])):
            continue
        if host.port is None or not port_free(host.port):
            old, host.port = host.port, free_port()
            if old is not None:
                log(f"port {old} is taken now: the forward of {r.name} moves to {host.port}")
            save_state(paths.state_file, state)
        host.socat_pid = start_forward(host.port, switch, r.address, paths.role_dir(r.name) / "forward.log")
        save_state(paths.state_file, state)
        log(f"forwarding 127.0.0.1:{host.port} to {r.name}'s sshd at {r.address}:22 (socat pid {host.socat_pid})")


def _write(path: Path, text: str, state: LabState, paths: LabPaths, log: _Log) -> None:
    state.add_file(path.name)
    save_state(paths.state_file, state)
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.replace(path)
        log(f"wrote {path}")


def _vm(state: LabState, paths: LabPaths, log: _Log) -> None:
    if state.vm is None:
        return
    state.add_file(VM_DIR)
    save_state(paths.state_file, state)
    up_vm(state.prefix, state.vm, paths, log, lambda: save_state(paths.state_file, state))


def build(state: LabState, paths: LabPaths, say: Callable[[str], None], vm: bool = False,
          arch: str | None = None) -> None:
    """Make what is missing. ``vm``: add the server VM of ``arch`` (None: the one the lab has, else
    amd64); a lab that has one keeps it."""
    log = _Log(say)
    refuse_foreign(state, paths)
    if vm and state.vm is not None and arch is not None and state.vm.arch != arch:
        raise TunepathError(f"lab {state.prefix} already has an {state.vm.arch} server VM: take the lab down "
                            f"(tunepath lab down) before you bring it up with an {arch} one")
    if vm and state.vm is None:
        state.vm = VmState(arch=arch or "amd64")
    save_state(paths.state_file, state)
    for part in (_files, _network, _accounts, _sshd, _forwards, _vm):
        part(state, paths, log)
    entries = [(state.host(r.name).port, paths.role_dir(r.name) / f"{HOST_KEY}.pub") for r in ROLES]
    if state.vm is not None:
        entries.append(vm_known_host(state.vm, paths))
    _write(paths.known_hosts, known_hosts_text(entries), state, paths, log)
    _write(paths.hosts_file, hosts_toml(state.prefix, state.hosts, paths.key_file, paths.known_hosts,
                                        baseline_cpus(), state.vm.port if state.vm else None,
                                        state.vm.arch if state.vm else "amd64"), state, paths, log)
    if state.vm is not None and state.vm.arch == "arm64":      # only its image holds wrk2's build dependencies
        _write(paths.self_hosts_file, self_hosts_toml(state.prefix, paths.key_file, paths.known_hosts, state.vm.port,
                                                      state.vm.arch), state, paths, log)
    for r in ROLES:
        wait_banner(state.host(r.name).port, f"{r.name}'s sshd")
    if state.vm is not None:
        wait_vm(state.prefix, state.vm, paths)
    if not log.changes:
        say(f"lab {state.prefix} is already up in {paths.directory}: every part runs; nothing to do")
