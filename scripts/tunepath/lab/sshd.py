"""SSH into the lab: one OpenSSH server per host namespace, reached only through loopback forwards.

Each host namespace runs its own ``sshd`` (``ip netns exec <ns> /usr/sbin/sshd -f
<dir>/<role>/sshd_config``) on port 22, with its own host key, letting in only that host's user
by key. The controller (the root namespace) has no route into the lab: for each host a ``socat``
in the root namespace listens on ``127.0.0.1:<port>`` and, per connection, runs
``ip netns exec <prefix>-net socat STDIO TCP:<host address>:22``, so every SSH connection crosses
the bridge and the host's veth. Taking the host's link down cuts its SSH, as on a real network.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.lab.system import process_matches, run, tool

__all__ = ["SSHD", "keygen", "write_config", "config_path", "start_sshd", "sshd_mark", "forward_argv",
           "start_forward", "free_port", "port_free", "banner", "wait_banner", "known_hosts_text"]

SSHD = "/usr/sbin/sshd"
HOST_KEY = "ssh_host_ed25519_key"
START_TIMEOUT = 10          # seconds for an sshd or a forward to answer
SSHD_COMMS = ("sshd", "sshd-session", "sshd-auth")   # OpenSSH 9.8+ splits sshd in three


def keygen(path: Path, comment: str) -> bool:
    """An ed25519 key pair at ``path`` (kept if there is one); True if it was made now."""
    if path.is_file() and path.with_name(path.name + ".pub").is_file():
        return False
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".pub").unlink(missing_ok=True)
    run([tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        f"making the key {path}")
    return True


def _value(path: Path) -> str:
    """A path as an sshd_config value: quoted when it holds a space; quotes cannot be expressed."""
    text = str(path)
    if '"' in text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise TunepathError(f"lab directory {path}: a path with a '\"' or a control character cannot go into "
                            "sshd_config; choose another --dir")
    return f'"{text}"' if any(c.isspace() for c in text) else text


def config_path(role_dir: Path) -> Path:
    return role_dir / "sshd_config"


def write_config(role_dir: Path, user: str, ns: str) -> Path:
    """The host's sshd_config: port 22 in its namespace, its own host key, its one user, keys only."""
    config = config_path(role_dir)
    config.write_text(
        f"# tunepath lab: the sshd of network namespace {ns} (written by `tunepath lab up`)\n"
        "Port 22\nListenAddress 0.0.0.0\n"
        f"HostKey {_value(role_dir / HOST_KEY)}\nPidFile {_value(role_dir / 'sshd.pid')}\n"
        f"AuthorizedKeysFile .ssh/authorized_keys\nAllowUsers {user}\nPermitRootLogin no\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPrintMotd no\n"
        "X11Forwarding no\nMaxStartups 100:30:200\nMaxSessions 100\nSubsystem sftp internal-sftp\n")
    return config


def sshd_mark(role_dir: Path) -> str:
    """What the listener's command line holds (sshd rewrites its title but keeps its arguments)."""
    return f"-f {config_path(role_dir)} "


def start_sshd(ns: str, role_dir: Path) -> int:
    """Start the host's sshd in ``ns`` (it goes to the background itself); its pid."""
    config, pidfile = config_path(role_dir), role_dir / "sshd.pid"
    Path("/run/sshd").mkdir(exist_ok=True)           # sshd's privilege separation directory (`-t` checks it too)
    run([SSHD, "-t", "-f", str(config)], f"checking {config}")
    pidfile.unlink(missing_ok=True)
    run([tool("ip"), "netns", "exec", ns, SSHD, "-f", str(config), "-E", str(role_dir / "sshd.log")],
        f"starting sshd in {ns}", hint=f"see {role_dir / 'sshd.log'}")
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        text = pidfile.read_text().strip() if pidfile.is_file() else ""
        if text.isdigit() and process_matches(int(text), sshd_mark(role_dir)):
            return int(text)
        time.sleep(0.05)
    raise TunepathError(f"lab: sshd in {ns} did not start within {START_TIMEOUT} s (no pid in {pidfile}); "
                        f"see {role_dir / 'sshd.log'}")


def forward_argv(port: int, switch_ns: str, address: str) -> list[str]:
    ip, socat = tool("ip"), tool("socat")
    for program in (ip, socat):
        if any(c.isspace() or c in "'\"\\:,!" for c in program):
            raise TunepathError(f"lab: {program}: a path socat cannot take in an EXEC address")
    return [socat, f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork",
            f"EXEC:'{ip} netns exec {switch_ns} {socat} STDIO TCP:{address}:22'"]


def start_forward(port: int, switch_ns: str, address: str, log: Path) -> int:
    """``socat`` on 127.0.0.1:``port`` in the root namespace, in its own session (it outlives
    ``tunepath``; its forked connections share its process group); its pid."""
    argv = forward_argv(port, switch_ns, address)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TunepathError(f"lab: the forward on 127.0.0.1:{port} exited with status {proc.returncode}; "
                                f"see {log}")
        if not port_free(port):
            proc.returncode = 0       # not ours to wait for: it runs on after tunepath exits
            return proc.pid
        time.sleep(0.02)
    proc.kill()
    raise TunepathError(f"lab: the forward did not listen on 127.0.0.1:{port} within {START_TIMEOUT} s; see {log}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def banner(port: int, timeout: float = 3.0) -> str:
    """The SSH banner read through the forward on ``port`` ('' when nothing answers)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            data = b""
            while b"\n" not in data and len(data) < 256:
                chunk = s.recv(256)
                if not chunk:
                    break
                data += chunk
            return data.decode(errors="replace").strip() if data.startswith(b"SSH-") else ""
    except OSError:
        return ""


def wait_banner(port: int, what: str, timeout: float = START_TIMEOUT) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = banner(port, min(3.0, max(0.5, deadline - time.monotonic())))
        if found:
            return found
        time.sleep(0.1)
    raise TunepathError(f"lab: {what}: no SSH banner through 127.0.0.1:{port} within {timeout:g} s "
                        "(`tunepath lab status` shows which part is down)")


def known_hosts_text(entries: list[tuple[int, Path]]) -> str:
    """``[127.0.0.1]:<port> <type> <key>`` for each (forward port, host key .pub)."""
    lines = []
    for port, pub in entries:
        kind, key = pub.read_text().split()[:2]
        lines.append(f"[127.0.0.1]:{port} {kind} {key}\n")
    return "".join(lines)
