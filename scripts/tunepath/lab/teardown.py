"""``tunepath lab down``: remove what ``state.json`` lists, and nothing else.

Order: the forwards (no new connection can start), the sshd listeners, the VM (ACPI power-off, then
a kill), any process still inside the
lab's namespaces (a session, a Tomcat the path left running: a namespace with a process in it
would outlive ``ip netns del``), the namespaces (their veths go with them), the users
(``userdel -r``, each only while the account still matches the creation mark ``up`` wrote into
its home, :func:`tunepath.lab.users.not_ours`; another account is left and named), the sudoers
file, the files the lab wrote, the state itself. A process is only
signalled after ``/proc`` shows it is still the one the lab started. Entries a state may not name
(another prefix's namespace, a file outside the lab's names) are refused, whatever the file says.
The state is rewritten after each removal, so a ``down`` that fails part-way can simply be rerun.
"""

from __future__ import annotations

import os
from typing import Callable

from tunepath.errors import TunepathError
from tunepath.lab import netns, users
from tunepath.lab.build import lab_files, lab_namespaces, lab_users
from tunepath.lab.sshd import HOST_KEY, forward_argv, sshd_mark
from tunepath.lab.state import ROLES, LabPaths, LabState, role, save_state
from tunepath.lab.system import comm, kill_pids, stop_process
from tunepath.lab.vmhost import VM_DIR, VM_DIR_FILES, down_vm

__all__ = ["teardown", "ROLE_DIR_FILES"]

ROLE_DIR_FILES = ("sshd_config", HOST_KEY, f"{HOST_KEY}.pub", "sshd.pid", "sshd.log", "forward.log")


def _processes(state: LabState, paths: LabPaths, note: Callable[[str], None]) -> None:
    switch = netns.switch_namespace(state.prefix)
    for r in ROLES:
        host = state.host(r.name)
        if host.socat_pid is not None and host.port is not None and stop_process(
                host.socat_pid, " ".join(forward_argv(host.port, switch, r.address)[1:]), group=True):
            note(f"stopped the forward 127.0.0.1:{host.port} of {r.name} (socat pid {host.socat_pid})")
        host.socat_pid = None
        save_state(paths.state_file, state)
    for r in ROLES:
        host = state.host(r.name)
        if stop_process(host.sshd_pid, sshd_mark(paths.role_dir(r.name))):
            note(f"stopped sshd of {r.name} (pid {host.sshd_pid})")
        host.sshd_pid = None
        save_state(paths.state_file, state)
    if state.vm is not None:
        down_vm(state.prefix, state.vm, paths, note, lambda: save_state(paths.state_file, state))


def _namespaces(state: LabState, paths: LabPaths, note: Callable[[str], None]) -> None:
    allowed = lab_namespaces(state.prefix)
    for name in list(state.namespaces):
        if name not in allowed:
            raise TunepathError(f"{paths.state_file} lists namespace {name!r}, which is not one of this lab's "
                                f"({', '.join(allowed)}); it is left alone")
        pids = netns.namespace_pids(name)
        if pids:
            names = sorted({comm(p) or "?" for p in pids})
            left = kill_pids(pids)
            note(f"ended {len(pids) - len(left)} process(es) still in {name} ({', '.join(names)})")
            if left:
                raise TunepathError(f"processes {left} in {name} did not end on SIGKILL")
        netns.delete_namespace(name)
        state.namespaces.remove(name)
        save_state(paths.state_file, state)
        note(f"deleted network namespace {name}")


def _accounts(state: LabState, paths: LabPaths, note: Callable[[str], None]) -> None:
    for name in list(state.users):
        if name not in lab_users(state.prefix):
            raise TunepathError(f"{paths.state_file} lists user {name!r}, which is not one of this lab's; "
                                "it is left alone")
        existed, why = users.user_exists(name), users.not_ours(name)
        if why is None:
            users.delete_user(name)
        state.users.remove(name)
        save_state(paths.state_file, state)
        if why is not None:
            note(f"left user {name} alone: it is not one the lab created ({why}); if it is left from an old lab, "
                 f"remove it by hand (userdel -r {name})")
        elif existed:
            note(f"removed user {name} and its home (userdel -r)")
    if state.sudoers is not None:
        path = users.sudoers_path(state.prefix)
        if state.sudoers != str(path):
            raise TunepathError(f"{paths.state_file} lists sudoers file {state.sudoers!r}, not {path}; "
                                "it is left alone")
        if path.exists():
            users.remove_sudoers(path)
            note(f"removed {path}")
        state.sudoers = None
        save_state(paths.state_file, state)


def _files(state: LabState, paths: LabPaths, note: Callable[[str], None]) -> None:
    for name in list(state.files):
        if name not in lab_files():
            raise TunepathError(f"{paths.state_file} lists file {name!r}, which the lab never writes; "
                                "it is left alone")
        path = paths.directory / name
        if path.is_dir() and not path.is_symlink():
            for inner in VM_DIR_FILES if name == VM_DIR else (role(name) and ROLE_DIR_FILES):
                (path / inner).unlink(missing_ok=True)
            try:
                path.rmdir()
            except OSError:
                raise TunepathError(f"{path} holds files the lab did not write; remove them, then rerun") from None
        elif path.exists() or path.is_symlink():
            path.unlink()
        state.files.remove(name)
        save_state(paths.state_file, state)
    note(f"removed the lab's files in {paths.directory}")


def teardown(state: LabState, paths: LabPaths, say: Callable[[str], None]) -> list[str]:
    """Remove what ``state`` lists; each thing done, one line. A part that fails stays listed and the
    rest is still removed; then one error names what is left."""
    lines: list[str] = []

    def note(line: str) -> None:
        lines.append(line)
        say(line)

    failed = []
    for part in (_processes, _namespaces, _accounts, _files):
        try:
            part(state, paths, note)
        except TunepathError as exc:
            failed.append(str(exc))
    if failed:
        save_state(paths.state_file, state)
        raise TunepathError(f"lab down left parts behind: {'; '.join(failed)}. {paths.state_file} still lists "
                            "them: rerun `tunepath lab down` once that is fixed")
    paths.state_file.unlink(missing_ok=True)      # the VM's cached image stays in .cache/ for the next lab
    if state.created_dir:
        try:
            os.rmdir(paths.directory)
        except OSError:
            note(f"left {paths.directory}: it holds files the lab did not write")
    note(f"lab {state.prefix} is down")
    return lines
