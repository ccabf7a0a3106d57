"""``Lab``: bring the lab up, take it down, report on it, and inject faults into it.

``up`` creates only what is missing and records each thing in ``state.json`` the moment it exists;
``down`` removes exactly what ``state.json`` lists. Both hold a lock on the lab's directory, so two
commands on one lab take turns. Parts that exist but that no state lists (a namespace or a user of
the same name) are never adopted: ``up`` refuses and says how to remove them.

The faults the fault harness (``scripts/harness/faults/``) injects: :meth:`Lab.kill_sshd` (the
host's sshd, listener and sessions), :meth:`Lab.restart_sshd` and :meth:`Lab.set_link` (eth0 down
or up; SSH crosses that link too).
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from tunepath.errors import TunepathError
from tunepath.lab import netns, users
from tunepath.lab.build import build
from tunepath.lab.sshd import SSHD_COMMS, sshd_mark, start_sshd
from tunepath.lab.state import DEFAULT_PREFIX, ROLES, LabPaths, LabState, check_prefix, load_state, role, save_state
from tunepath.lab.status import PartStatus, lab_status
from tunepath.lab.system import comm, process_alive, require_root, require_tools, stop_process
from tunepath.lab.teardown import teardown

__all__ = ["Lab"]

LOCK_WAIT = 120       # seconds to wait for another `tunepath lab` command on the same lab


class Lab:
    """One lab: its namespaces are named ``<prefix>-…`` and its files live in ``directory``."""

    def __init__(self, directory: Path | str, prefix: str = DEFAULT_PREFIX):
        self.prefix = check_prefix(prefix)
        self.directory = Path(directory).expanduser().absolute()
        self.paths = LabPaths(self.directory)

    @property
    def hosts_file(self) -> Path:
        return self.paths.hosts_file

    @property
    def known_hosts(self) -> Path:
        return self.paths.known_hosts

    @property
    def key_file(self) -> Path:
        return self.paths.key_file

    @property
    def state_file(self) -> Path:
        return self.paths.state_file

    def netns(self, role_name: str) -> str:
        return netns.namespace(self.prefix, role(role_name))

    def user(self, role_name: str) -> str:
        return users.user_name(self.prefix, role(role_name).suffix)

    def address(self, role_name: str) -> str:
        return role(role_name).address

    def state(self) -> LabState | None:
        state = load_state(self.state_file)
        if state is not None and state.prefix != self.prefix:
            raise TunepathError(f"lab state {self.state_file} belongs to prefix {state.prefix!r}, not "
                                f"{self.prefix!r}: give --prefix {state.prefix} or another --dir")
        return state

    @contextmanager
    def _locked(self):
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            deadline = time.monotonic() + LOCK_WAIT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TunepathError(f"lab {self.directory}: another `tunepath lab` command holds it "
                                            f"for over {LOCK_WAIT} s") from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)

    def up(self, say: Callable[[str], None] | None = None, vm: bool = False, arch: str | None = None) -> LabState:
        """Create what is missing, restart what died; the state. ``vm``: add the server VM of ``arch``
        (None: the one the lab has, else amd64; :mod:`tunepath.lab.vmhost`, :mod:`tunepath.lab.vmarch`). Failing on a lab that was not up removes what it created;
        failing on one that was leaves state.json listing what exists."""
        require_root("up")
        require_tools()
        existed = self.directory.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._locked():
            state = self.state()
            fresh = state is None
            if fresh:
                state = LabState(self.prefix, str(self.directory), created_dir=not existed)
            try:
                build(state, self.paths, say or (lambda line: None), vm=vm, arch=arch)
            except BaseException as exc:
                if not fresh:
                    save_state(self.state_file, state)
                    if isinstance(exc, TunepathError):
                        raise TunepathError(f"{exc} ({self.state_file} lists what exists; `tunepath lab "
                                            "down` removes it)") from None
                    raise
                return self._roll_back(state, exc)
        return state

    def _roll_back(self, state: LabState, exc: BaseException):
        try:
            teardown(state, self.paths, lambda line: None)
        except TunepathError as undo:
            raise TunepathError(f"{exc}; removing what this `up` created failed too: {undo}") from None
        if isinstance(exc, TunepathError):
            raise TunepathError(f"{exc} (what this `up` had created is removed)") from None
        raise exc

    def down(self, say: Callable[[str], None] | None = None) -> list[str]:
        """Remove what state.json lists, and nothing else; what was done, one line each."""
        require_root("down")
        say = say or (lambda line: None)
        if self.directory.is_dir():
            with self._locked():
                state = self.state()
                if state is not None:
                    return teardown(state, self.paths, say)
        left = sorted(n for n in netns.namespaces() if n.startswith(f"{self.prefix}-"))
        lines = [f"nothing to remove: no lab state in {self.state_file}"] + (
            [f"note: namespaces {', '.join(left)} exist but no state lists them; if they are left from "
             "an old lab, remove them with ip netns del NAME"] if left else [])
        for line in lines:
            say(line)
        return lines

    def status(self) -> list[PartStatus]:
        return lab_status(self.state(), self.prefix, self.paths)

    def kill_sshd(self, role_name: str) -> list[int]:
        """SIGKILL every sshd process in the host's namespace, the listener and each session's:
        an sshd crash in the middle of a step. The pids killed."""
        require_root("kill_sshd")
        pids = [p for p in netns.namespace_pids(self.netns(role_name)) if comm(p) in SSHD_COMMS]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5
        while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        return pids

    def restart_sshd(self, role_name: str) -> int:
        """Stop the host's sshd listener if it runs, start a new one; its pid (sessions survive)."""
        require_root("restart_sshd")
        with self._locked():
            state = self.state()
            if state is None:
                raise TunepathError(f"lab {self.directory} is not up: run tunepath lab up")
            host, role_dir = state.host(role(role_name).name), self.paths.role_dir(role_name)
            stop_process(host.sshd_pid, sshd_mark(role_dir))
            host.sshd_pid = start_sshd(self.netns(role_name), role_dir)
            save_state(self.state_file, state)
            return host.sshd_pid

    def set_link(self, role_name: str, up: bool) -> None:
        """``ip link set eth0 down`` (or ``up``, with its default route) in the host's namespace."""
        require_root("set_link")
        netns.set_link(self.netns(role_name), up)

    def roles(self) -> tuple[str, ...]:
        return tuple(r.name for r in ROLES)
