"""The hosts layer: run commands on the server and the clients.

The hosts come from an inventory (``hosts.toml``, read by :mod:`tunepath.live.inventory`);
without one both roles are this machine, reached without SSH. Remote hosts go
through Fabric, with two guards Fabric lacks: host keys are checked against
``known_hosts`` (an unknown or changed key stops the run; trusting a new host is an
explicit option), and every remote command runs under ``timeout`` on the host, so a
command that outlives its limit is ended there, not merely abandoned.

Secrets never travel as parameters: keys come from ``key_file`` or the agent. Steps that
need root use ``sudo -n``: a server where sudo asks for a password gets a clear error (and
disruptive steps are skipped by their preflight) instead of a password in a file.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.inventory import HostSpec, Inventory, load_inventory, local_inventory

__all__ = ["HostSpec", "Inventory", "load_inventory", "local_inventory", "Host", "LocalHost", "SSHHost",
           "CommandResult", "CommandFailed", "HostKeyError", "connect", "open_hosts", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 120          # seconds, for one command
CONNECT_TIMEOUT = 15           # seconds, for an SSH connection
KILL_GRACE = 5                 # seconds between TERM and KILL when a command times out
SUDO_SHIM = 'if [ "$(id -u)" = 0 ] && ! command -v sudo >/dev/null; then sudo() { "$@"; }; fi\n'


class CommandFailed(TunepathError):
    def __init__(self, result: "CommandResult", hint: str = ""):
        self.result = result
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        why = f"timed out after {result.timeout:g} s and was ended on the host" if result.timed_out \
            else f"exited with status {result.exited}"
        msg = f"on {result.host}: `{result.command}` {why}"
        if tail:
            msg += ": " + " | ".join(tail)
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class HostKeyError(TunepathError):
    pass


@dataclass
class CommandResult:
    host: str
    command: str
    stdout: str
    stderr: str
    exited: int
    duration_s: float
    timeout: float = 0.0
    timed_out: bool = False
    child_cpu_s: float | None = None     # user + system CPU of the command's processes (child_times)

    @property
    def ok(self) -> bool:
        return self.exited == 0 and not self.timed_out


class Host:
    """One host: ``run`` a shell command, ``put``/``get`` files. Subclasses do the transport."""

    spec: HostSpec
    is_root: bool | None = None

    @property
    def name(self) -> str:
        return self.spec.label

    def run(self, command: str, timeout: float = DEFAULT_TIMEOUT, sudo: bool = False, check: bool = True,
            hint: str = "", pidfile: str | None = None, as_written: bool = False,
            child_times: bool = False) -> CommandResult:
        """Run ``command`` with bash on the host. With ``pidfile``, the command's process group
        id is written there first, so :meth:`kill_group` can end it from another connection.
        ``as_written``: a command from a page, run exactly as printed; where root has no sudo
        (a minimal container), its ``sudo`` prefixes run the command directly."""
        wrapped = self._sudo(command) if sudo else command
        if as_written:
            wrapped = SUDO_SHIM + wrapped
        if child_times:   # the CPU the command's processes used, from bash's `times`, on stderr
            wrapped = f"{wrapped}\n__rc=$?; echo '{TIMES_MARK}' >&2; times >&2; exit $__rc"
        result = self._run(wrapped, timeout, display=command, pidfile=pidfile)
        if child_times:
            result.stderr, result.child_cpu_s = _split_times(result.stderr)
        if sudo and result.exited != 0 and "a password is required" in result.stderr:
            raise TunepathError(f"on {self.name}: `{command}` needs root, and sudo asks for a password: "
                                "allow this user passwordless sudo for the tuning commands")
        if check and not result.ok:
            raise CommandFailed(result, hint)
        return result

    def _sudo(self, command: str) -> str:
        if self.is_root is None:
            self.is_root = self._run("id -u", 15, display="id -u").stdout.strip() == "0"
        if self.is_root:
            return command
        return f"sudo -n bash -c {shlex.quote(command)}"

    def _run(self, command: str, timeout: float, display: str,
             pidfile: str | None = None) -> CommandResult:  # pragma: no cover
        raise NotImplementedError

    def kill_group(self, pidfile: str) -> bool:
        """End the process group recorded in ``pidfile`` (TERM, then KILL); True if one was running."""
        r = self._run(f"pf={pidfile}; [ -s $pf ] || exit 3; g=$(cat $pf); rm -f $pf; "
                      f"kill -TERM -- -$g 2>/dev/null || exit 4; "
                      f"for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- -$g 2>/dev/null || exit 0; sleep 0.3; done; "
                      f"kill -KILL -- -$g 2>/dev/null; exit 0", 30, display=f"kill group from {pidfile}")
        return r.exited == 0

    def put(self, local: Path, remote: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def get(self, remote: str, local: Path) -> None:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


TIMES_MARK = "@@tunepath-times@@"


def _split_times(stderr: str) -> tuple[str, float | None]:
    """Remove the `times` report from stderr; return the children's user + system seconds."""
    head, mark, tail = stderr.rpartition(TIMES_MARK + "\n")
    if not mark:
        return stderr, None
    lines = tail.strip().splitlines()
    total = None
    if len(lines) >= 2:
        secs = [int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", lines[1])]
        total = round(sum(secs), 3) if secs else None
    return head, total


class LocalHost(Host):
    """This machine, without SSH. A timed-out command's whole process group is ended."""

    def __init__(self, spec: HostSpec | None = None):
        self.spec = spec or HostSpec("server", "local")

    def _run(self, command: str, timeout: float, display: str, pidfile: str | None = None) -> CommandResult:
        start = time.monotonic()
        if pidfile:
            command = f"echo $$ > {pidfile}; exec bash -c {shlex.quote(command)}"
        proc = subprocess.Popen(["bash", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                cwd=os.path.expanduser("~"))     # as over SSH: commands start at home
        try:
            out, err = proc.communicate(None, timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _end_group(proc)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:
            _end_group(proc)
            raise
        return CommandResult(self.name, display, out, err, proc.returncode, time.monotonic() - start,
                             timeout, timed_out)

    def put(self, local: Path, remote: str) -> None:
        target = Path(os.path.expanduser(remote))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(local).read_bytes())

    def get(self, remote: str, local: Path) -> None:
        Path(local).write_bytes(Path(os.path.expanduser(remote)).read_bytes())


def _end_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(KILL_GRACE)
            return
        except subprocess.TimeoutExpired:
            continue


class SSHHost(Host):
    """A remote host through Fabric, with host-key checking and on-host timeouts."""

    def __init__(self, spec: HostSpec, known_hosts: Path, trust_new_host: bool = False):
        import paramiko
        from fabric import Connection

        self.spec = spec
        self.known_hosts = Path(known_hosts).expanduser()
        self.trust_new_host = trust_new_host
        connect_kwargs = {"look_for_keys": spec.key_file is None, "allow_agent": True,
                          "banner_timeout": CONNECT_TIMEOUT, "auth_timeout": CONNECT_TIMEOUT}
        if spec.key_file:
            connect_kwargs["key_filename"] = spec.key_file
        self.conn = Connection(spec.host, user=spec.user, port=spec.port, connect_timeout=CONNECT_TIMEOUT,
                               connect_kwargs=connect_kwargs)
        client = self.conn.client
        # Fabric sets AutoAddPolicy and loads no known_hosts: undo both before connecting.
        if self.known_hosts.is_file():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy() if trust_new_host
                                           else paramiko.RejectPolicy())
        self._open()

    def _open(self) -> None:
        import paramiko

        try:
            self.conn.open()
        except paramiko.BadHostKeyException:
            raise HostKeyError(
                f"{self.name}: the host key differs from the one in {self.known_hosts}: the host was "
                f"reinstalled, or someone is in the middle. Nothing was run. If the change is expected, "
                f"remove the old entry (ssh-keygen -R '{self._known_name()}' -f {self.known_hosts}) and "
                f"connect once with trust_new_hosts") from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostKeyError(
                    f"{self.name}: host key unknown (not in {self.known_hosts}). Nothing was run. Check its "
                    f"fingerprint, then add it (ssh-keyscan -p {self.spec.port} {self.spec.host} >> "
                    f"{self.known_hosts}) or rerun with trust_new_hosts") from None
            raise TunepathError(f"{self.name}: SSH failed: {exc}") from None
        except (socket.timeout, TimeoutError):
            raise TunepathError(f"{self.name}: no SSH connection within {CONNECT_TIMEOUT} s "
                                "(host down, wrong port, or a firewall)") from None
        except OSError as exc:
            raise TunepathError(f"{self.name}: cannot connect: {exc.strerror or exc}") from None
        if self.trust_new_host:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            self.conn.client.save_host_keys(str(self.known_hosts))

    def _known_name(self) -> str:
        return self.spec.host if self.spec.port == 22 else f"[{self.spec.host}]:{self.spec.port}"

    def _run(self, command: str, timeout: float, display: str, pidfile: str | None = None) -> CommandResult:
        limit = max(1, int(timeout + 0.999))
        remote = f"timeout --kill-after={KILL_GRACE}s {limit}s bash -c {shlex.quote(command)}"
        if pidfile:   # timeout makes itself a process-group leader; exec keeps this shell's pid
            remote = f"echo $$ > {pidfile}; exec {remote}"
        start = time.monotonic()
        try:
            res = self.conn.run(remote, hide=True, warn=True, in_stream=False, timeout=limit + KILL_GRACE + 10)
        except Exception as exc:   # invoke's CommandTimedOut and transport errors
            name = type(exc).__name__
            if name == "CommandTimedOut":
                return CommandResult(self.name, display, "", str(exc), 124, time.monotonic() - start,
                                     timeout, True)
            raise TunepathError(f"on {self.name}: `{display}` failed: {exc}") from None
        timed_out = res.exited in (124, 137) and time.monotonic() - start >= limit
        return CommandResult(self.name, display, res.stdout, res.stderr, res.exited, time.monotonic() - start,
                             timeout, timed_out)

    def put(self, local: Path, remote: str) -> None:
        try:
            self.conn.put(str(local), remote[2:] if remote.startswith("~/") else remote)
        except Exception as exc:   # paramiko's SFTP errors
            raise TunepathError(f"on {self.name}: uploading {local} to {remote} failed ({exc or type(exc).__name__}); "
                                "is SFTP enabled in the host's sshd (Subsystem sftp)?") from None

    def get(self, remote: str, local: Path) -> None:
        try:
            self.conn.get(remote[2:] if remote.startswith("~/") else remote, str(local))
        except Exception as exc:
            raise TunepathError(f"on {self.name}: downloading {remote} failed ({exc or type(exc).__name__})") from None

    def close(self) -> None:
        self.conn.close()


@contextmanager
def open_hosts(inventory: Inventory, trust_new_hosts: bool = False):
    """``(server, clients)``, all closed on exit — also when a later connection fails."""
    with ExitStack() as stack:
        server = stack.enter_context(connect(inventory.server, inventory, trust_new_hosts))
        clients = [stack.enter_context(connect(c, inventory, trust_new_hosts)) for c in inventory.clients]
        yield server, clients


def connect(spec: HostSpec, inventory: Inventory, trust_new_hosts: bool = False) -> Host:
    if spec.local:
        return LocalHost(spec)
    return SSHHost(spec, inventory.known_hosts, trust_new_hosts)
