"""The hosts layer: run commands on the server and the clients.

The hosts come from an inventory (``hosts.toml``, read by :mod:`tunepath.live.inventory`);
without one both roles are this machine, reached without SSH. Remote hosts go
through Fabric, with two guards Fabric lacks: host keys are checked against
``known_hosts`` (an unknown or changed key stops the run; trusting a new host is an
explicit option), and every remote command runs under ``timeout`` on the host, so a
command that outlives its limit is ended there, not merely abandoned.

Secrets never travel as parameters: keys come from ``key_file`` or the agent. Steps that
need root use ``sudo -n``: a server where sudo asks for a password gets a clear error saying how
to allow passwordless sudo (and disruptive steps are skipped by their preflight). There is no way
to give tunepath a sudo password, on purpose: ``sudo`` also runs inside the commands the pages
print, where a password could only travel in the command line or a file.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import stat
import subprocess
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.inventory import HostSpec, Inventory, load_inventory, local_inventory
from tunepath.live.knownhosts import HostKeyCheck, HostKeyError
from tunepath.live.sshlink import CONNECT_TIMEOUT, keep_alive, lost, marked, ssh_failure, unmarked, wait_interruptibly

__all__ = ["HostSpec", "Inventory", "load_inventory", "local_inventory", "Host", "LocalHost", "SSHHost",
           "CommandResult", "CommandFailed", "HostKeyError", "connect", "connect_all", "open_hosts",
           "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 120          # seconds, for one command
KILL_GRACE = 5                 # seconds between TERM and KILL when a command times out
SUDO_HOWTO = ("Allow the user passwordless sudo: on the host, run "
              "echo \"$(id -un) ALL=(ALL) NOPASSWD: ALL\" | sudo tee /etc/sudoers.d/tunepath && "
              "sudo chmod 0440 /etc/sudoers.d/tunepath (remove the file after the run)")
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
            raise TunepathError(f"on {self.name}: `{command}` needs root, and sudo asks for a password "
                                f"(tunepath never sends one). {SUDO_HOWTO}")
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
        from tunepath.model.shell import LIVE_MEMBER, quote

        r = self._run(f"pf={quote(pidfile, 'pid file')}; [ -s \"$pf\" ] || exit 3; g=$(cat \"$pf\"); rm -f \"$pf\"; "
                      f"case $g in ''|*[!0-9]*) exit 3;; esac; kill -TERM -- -$g 2>/dev/null || exit 4; {LIVE_MEMBER} "
                      f"for i in $(seq 30); do live || exit 0; sleep 0.1; done; "
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
            from tunepath.model.shell import quote
            command = f"echo $$ > {quote(pidfile, 'pid file')}; exec bash -c {shlex.quote(command)}"
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
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            copy_keeping_mode(Path(local), target)
        except OSError as exc:
            raise TunepathError(f"on {self.name}: copying {local} to {remote} failed "
                                f"({exc.strerror or exc})") from None

    def get(self, remote: str, local: Path) -> None:
        try:
            copy_keeping_mode(Path(os.path.expanduser(remote)), Path(local))
        except OSError as exc:
            raise TunepathError(f"on {self.name}: copying {remote} to {local} failed "
                                f"({exc.strerror or exc})") from None


def copy_keeping_mode(source: Path, target: Path) -> None:
    """Copy bytes and permission bits, as Fabric's ``put`` does, without a moment where the target
    is more open than either: it is truncated and made 0600 before the first byte is written, and
    gets the source's mode only when complete (a 0600 server.xml holding the AJP secret stays 0600)."""
    mode = stat.S_IMODE(os.stat(source).st_mode)
    data = source.read_bytes()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)       # a target that existed keeps its mode through O_TRUNC
        while data:
            data = data[os.write(fd, data):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


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

    def __init__(self, spec: HostSpec, known_hosts: Path, trust_new_host: bool = False,
                 check: HostKeyCheck | None = None):
        """``check``: the host-key policy shared by the hosts of one inventory (:func:`connect_all`);
        the keys it trusts are written by its owner, never here."""
        from fabric import Connection

        self.spec, self._home = spec, None
        self.check = check or HostKeyCheck(known_hosts, trust_new_host)
        self.known_hosts = self.check.path
        self.trust_new_host = self.check.trust_new
        connect_kwargs = {"look_for_keys": spec.key_file is None, "allow_agent": True,
                          "banner_timeout": CONNECT_TIMEOUT, "auth_timeout": CONNECT_TIMEOUT}
        if spec.key_file:
            connect_kwargs["key_filename"] = spec.key_file
        self.conn = Connection(spec.host, user=spec.user, port=spec.port, connect_timeout=CONNECT_TIMEOUT,
                               connect_kwargs=connect_kwargs)
        # Fabric sets AutoAddPolicy and loads no known_hosts: undo both before connecting.
        self.check.prepare(self.conn.client, self._known_name())
        self._open()

    def _open(self) -> None:
        try:
            self.conn.open()
        except Exception as exc:
            self.conn.client.close()      # a refused host key leaves paramiko's transport running
            raise ssh_failure(self.name, self.spec, self.known_hosts, self._known_name(), exc) from None
        keep_alive(self.conn.transport)

    def _known_name(self) -> str:
        return self.spec.host if self.spec.port == 22 else f"[{self.spec.host}]:{self.spec.port}"

    def _run(self, command: str, timeout: float, display: str, pidfile: str | None = None) -> CommandResult:
        limit = max(1, int(timeout + 0.999))
        # a non-interactive SSH session of a plain user on Debian has no /usr/sbin in its PATH,
        # where ethtool and sysctl live: the pages' commands must run there as a reader types them
        # (one simple command, so the login shell execs it: the command's parent stays sshd)
        remote = (f'env PATH="$PATH:/usr/sbin:/sbin" timeout --kill-after={KILL_GRACE}s {limit}s '
                  f"bash -c {shlex.quote(command)}")
        before = ""
        if pidfile:   # timeout makes itself a process-group leader; exec (and env's) keep this shell's pid
            from tunepath.model.shell import quote
            before = f"echo $$ > {quote(pidfile, 'pid file')}; "
        start = time.monotonic()
        try:
            promise = self.conn.run(marked(remote, before), hide=True, warn=True, in_stream=False,
                                    timeout=limit + KILL_GRACE + 10, asynchronous=True)
            wait_interruptibly(promise.runner, self._end_group)    # a Ctrl-C ends the command on the host at once
            res = promise.join()
        except Exception as exc:   # invoke's CommandTimedOut and transport errors
            name = type(exc).__name__
            if name == "CommandTimedOut":
                return CommandResult(self.name, display, "", str(exc), 124, time.monotonic() - start,
                                     timeout, True)
            raise (lost(self.name, display) if not self.conn.is_connected else
                   TunepathError(f"on {self.name}: `{display}` failed: {exc}")) from None
        if not self.conn.is_connected:      # the link died under the command (no answer for LOST_S)
            raise lost(self.name, display)
        timed_out = res.exited in (124, 137) and time.monotonic() - start >= limit
        return CommandResult(self.name, display, res.stdout, unmarked(res.stderr), res.exited,
                             time.monotonic() - start, timeout, timed_out)

    def _end_group(self, pid: int) -> None:
        self.conn.run(f"kill -TERM -- -{int(pid)}", hide=True, warn=True, in_stream=False, timeout=10)

    def _absolute(self, remote: str) -> str:
        """``~/x`` as the path the host's commands mean (``$HOME``): SFTP starts in the passwd home."""
        if not remote.startswith("~/"):
            return remote
        if self._home is None:
            home = self.run('printf %s "$HOME"', timeout=15, hint="cannot read $HOME on the host").stdout.strip()
            if not home.startswith("/"):
                raise TunepathError(f"on {self.name}: $HOME is {home!r}, not an absolute path; set it")
            self._home = home
        return f"{self._home.rstrip('/')}/{remote[2:]}"

    def put(self, local: Path, remote: str) -> None:
        """Upload, keeping the file's mode (Fabric's ``put`` chmods to it afterwards). The target is
        first made empty and 0600 on the host, so it is never readable by others while the bytes
        arrive (SFTP alone creates it 0644 and chmods only at the end)."""
        path = self._absolute(remote)
        # shlex.quote, not model.shell.quote: the shell must name exactly the file SFTP writes, so no
        # ``~`` or ``$HOME`` may expand here
        self.run(f"umask 077 && : > {shlex.quote(path)} && chmod 600 {shlex.quote(path)}", timeout=30,
                 hint=f"cannot create {remote} on the host")
        try:
            self.conn.put(str(local), path)
        except Exception as exc:   # paramiko's SFTP errors
            raise TunepathError(f"on {self.name}: uploading {local} to {remote} failed ({exc or type(exc).__name__}); "
                                "is SFTP enabled in the host's sshd (Subsystem sftp)?") from None

    def get(self, remote: str, local: Path) -> None:
        try:
            self.conn.get(self._absolute(remote), str(local))
        except Exception as exc:
            raise TunepathError(f"on {self.name}: downloading {remote} failed ({exc or type(exc).__name__})") from None

    def close(self) -> None:
        self.conn.close()


def connect_all(inventory: Inventory, trust_new_hosts: bool = False) -> tuple[Host, list[Host]]:
    """The server and every client, connected. The host keys trusted on the way are appended to
    known_hosts only once all of them connected; if one fails, those already open are closed and
    nothing is written. The caller closes the hosts (or uses :func:`open_hosts`)."""
    remote = not (inventory.server.local and all(c.local for c in inventory.clients))
    check = HostKeyCheck(inventory.known_hosts, trust_new_hosts) if remote else None
    specs = [inventory.server, *inventory.clients]
    hosts: list = [None] * len(specs)

    def one(i: int) -> None:          # side by side: a run's start, each step's and its clean-up
        try:
            hosts[i] = connect(specs[i], inventory, trust_new_hosts, check)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below, in the inventory's order
            hosts[i] = exc

    threads = [threading.Thread(target=one, args=(i,), name=f"connect {s.label}", daemon=True)
               for i, s in enumerate(specs)]
    for t in threads:
        t.start()
    for t in threads:                 # daemons: a Ctrl-C here leaves at once, a connection in flight dies with us
        t.join()
    failed = [h for h in hosts if isinstance(h, BaseException)]
    if failed:
        for h in hosts:
            if isinstance(h, Host):
                h.close()
        raise failed[0]
    if check is not None:
        check.save()
    return hosts[0], hosts[1:]


@contextmanager
def open_hosts(inventory: Inventory, trust_new_hosts: bool = False):
    """``(server, clients)``, all closed on exit — also when a later connection fails."""
    server, clients = connect_all(inventory, trust_new_hosts)
    with ExitStack() as stack:
        for host in (server, *clients):
            stack.callback(host.close)
        yield server, clients


def connect(spec: HostSpec, inventory: Inventory, trust_new_hosts: bool = False,
            check: HostKeyCheck | None = None) -> Host:
    """One host. Without ``check`` (a host on its own), a key trusted for it is appended to
    known_hosts as soon as it connected; with one, the owner of ``check`` appends (:func:`connect_all`)."""
    if spec.local:
        return LocalHost(spec)
    if check is not None:
        return SSHHost(spec, inventory.known_hosts, trust_new_hosts, check)
    host = SSHHost(spec, inventory.known_hosts, trust_new_hosts)
    try:
        host.check.save()
    except BaseException:
        host.close()
        raise
    return host
