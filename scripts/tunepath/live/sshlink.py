"""The SSH link to a host: what each way of failing to connect means for a person, and a link that
notices within seconds when its host is gone.

A server that dies, or whose link is cut, in the middle of a long command would otherwise be
noticed only when the command's own timeout ran out (five minutes for ``update-grub``): TCP keeps
resending into silence for many minutes. So every SSH connection asks its host for an answer every
:data:`KEEPALIVE_S` seconds (an SSH keepalive request that wants a reply, as OpenSSH's
``ServerAliveInterval`` does), and closes the link when none came for :data:`LOST_S` seconds. A
relay in between (a port forward, a jump host) answers for TCP, so only an answer from sshd counts;
its socket also gives up on unacknowledged data after LOST_S (Linux's ``TCP_USER_TIMEOUT``). The
command in progress then ends with :func:`lost`: the run puts the host back once it answers again.

A Ctrl-C while a command runs ends that command on its host at once (:func:`wait_interruptibly`):
without a terminal, Fabric would wait for the command's end (a measurement's whole duration) before
the step's clean-up could start, and the command would go on after it.
"""

from __future__ import annotations

import socket
import threading
import time

from tunepath.errors import TunepathError
from tunepath.live.knownhosts import HostKeyError, RevokedHostKey, UnknownHostKey, describe

__all__ = ["ssh_failure", "keep_alive", "lost", "marked", "unmarked", "wait_interruptibly", "KEEPALIVE_S", "LOST_S", "CONNECT_TIMEOUT"]

CONNECT_TIMEOUT = 15           # seconds, for an SSH connection
KEEPALIVE_S = 5                # a request that wants an answer this often, so that a silent link is noticed
LOST_S = 20                    # unacknowledged this long, the host is lost
STOP_WAIT_S = 2.0              # after a Ctrl-C, how long a command may take to end on its host


def keep_alive(transport) -> None:
    """A watchdog on ``transport`` (a Paramiko Transport) that closes it when the host stops
    answering for LOST_S, and a socket that gives up after LOST_S."""
    if transport is None:
        return
    threading.Thread(target=_watch, args=(transport,), name="tunepath-ssh-watchdog", daemon=True).start()
    sock = transport.sock
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_S), ("TCP_KEEPINTVL", KEEPALIVE_S),
                        ("TCP_KEEPCNT", max(1, LOST_S // KEEPALIVE_S)), ("TCP_USER_TIMEOUT", LOST_S * 1000)):
        if hasattr(socket, name):          # Linux; elsewhere the keepalive requests alone
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, option, value in options:
        try:
            sock.setsockopt(level, option, value)
        except (OSError, AttributeError):  # not a TCP socket (a proxy command): keepalive requests only
            pass


def _watch(transport) -> None:
    """Every KEEPALIVE_S, a request that wants a reply; no reply within LOST_S closes the link."""
    while transport.is_active():
        time.sleep(KEEPALIVE_S)
        asked = threading.Thread(target=_ask, args=(transport,), daemon=True)
        asked.start()
        asked.join(LOST_S)
        if asked.is_alive() and transport.is_active():
            transport.close()            # the command in progress ends: the host is lost
            return


def _ask(transport) -> None:
    try:
        transport.global_request("keepalive@openssh.com", wait=True)    # sshd refuses it: a reply all the same
    except Exception:                    # the transport closed meanwhile: the loop sees it
        pass


PID_MARK = "tunepath-pid:"        # the first line a command prints on stderr: the pid of its process group


def marked(remote: str, before: str = "") -> str:
    """``remote`` (one simple command) preceded by a line on stderr that names its process group
    (``timeout``, which wraps every command, leads one of its own with the shell's pid, which
    ``exec`` keeps), and by ``before`` (commands ending in ``;``)."""
    return f"echo {PID_MARK}$$ >&2; {before}exec {remote}"


def unmarked(stderr: str) -> str:
    """A command's stderr without the line :func:`marked` added."""
    if stderr.startswith(PID_MARK):
        return stderr.split("\n", 1)[1] if "\n" in stderr else ""
    return stderr


def wait_interruptibly(runner, end_group) -> None:
    """Wait until the command of ``runner`` (a Fabric runner started asynchronously, its command
    :func:`marked`) has ended on its host. A Ctrl-C meanwhile ends the command's process group on
    the host (``end_group(pid)``, over a channel of its own: sshd's own "signal" request is refused
    for root logins), waits up to STOP_WAIT_S for the command to end, closes the channel and raises
    the KeyboardInterrupt: the step's clean-up starts within seconds, and the command does not land
    after it."""
    channel = runner.channel
    try:
        while not (channel.exit_status_ready() or channel.closed):
            channel.status_event.wait(0.2)
    except KeyboardInterrupt:
        try:
            first = "".join(runner.stderr).split("\n", 1)[0]
            pid = first[len(PID_MARK):].strip() if first.startswith(PID_MARK) else ""
            if pid.isdigit():
                end_group(int(pid))
                channel.status_event.wait(STOP_WAIT_S)
        finally:
            runner.stop()              # the timer cancelled, the channel closed
        raise


def lost(name: str, display: str) -> TunepathError:
    """The error of a command whose host stopped answering."""
    return TunepathError(f"on {name}: lost the host during `{display}`: no answer for {LOST_S} s (it went down, "
                         "rebooted or lost its link); the run puts it back once it answers again")


def ssh_failure(name: str, spec, known, known_name: str, exc: Exception) -> TunepathError:
    """One line for each way connecting to ``name`` fails (``known``: its known_hosts file, where
    it is ``known_name``); host-key problems say what to do."""
    import paramiko

    if isinstance(exc, paramiko.BadHostKeyException):
        return HostKeyError(
            f"{name}: the host key differs from the one in {known} (it sent {describe(exc.key)}): "
            f"the host was reinstalled, or someone is in the middle. Nothing was run. If the change is "
            f"expected, remove the old entry (ssh-keygen -R '{known_name}' -f {known}) and "
            f"connect once with --trust-new-hosts")
    if isinstance(exc, RevokedHostKey):
        return HostKeyError(
            f"{name}: the host key ({describe(exc.key)}) is marked @revoked in {known} (line "
            f"{exc.line}). Nothing was run. A revoked key is never accepted: the host needs a new key")
    if isinstance(exc, UnknownHostKey):
        return HostKeyError(
            f"{name}: host key unknown (not in {known}; it sent {describe(exc.key)}). Nothing was "
            f"run. Check its fingerprint, then add it (ssh-keyscan -p {spec.port} {spec.host} "
            f">> {known}) or rerun with --trust-new-hosts")
    if isinstance(exc, TunepathError):
        return exc
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return TunepathError(f"{name}: no SSH connection within {CONNECT_TIMEOUT} s "
                             "(host down, wrong port, or a firewall)")
    why = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, paramiko.SSHException):
        return TunepathError(f"{name}: SSH failed: {why}")
    if isinstance(exc, OSError):
        return TunepathError(f"{name}: cannot connect: {exc.strerror or why}")
    return TunepathError(f"{name}: SSH failed ({type(exc).__name__}: {why})")
