"""``known_hosts``: read the way OpenSSH reads it, extended the way OpenSSH extends it.

paramiko's own reader raises on lines it does not understand (a garbage line, an
``@cert-authority`` or ``@revoked`` marker, a key it cannot decode), and its writer rewrites the
whole file from what it understood, dropping comments, markers and key types it does not know.
A user's ``~/.ssh/known_hosts`` holds all of those. So here:

- every line is read on its own: comments, blank lines, ``@cert-authority`` lines and key types
  paramiko does not know are skipped quietly (OpenSSH knows them; we only cannot use them), a
  line that is no host-key line at all is skipped with one warning naming its line number;
- an ``@revoked`` key is refused for every host, before authentication (OpenSSH refuses it too);
- a key trusted with ``--trust-new-hosts`` is only recorded while connecting. :meth:`HostKeyCheck.save`
  appends one ``host keytype base64`` line per new host, once every host of the inventory has
  connected: a run that fails to connect writes nothing, and every byte already in the file stays.

paramiko is imported inside the functions: this module is loaded with the hosts layer, which
commands that never connect also import.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["HostKeyError", "UnknownHostKey", "RevokedHostKey", "KnownHosts", "HostKeyCheck",
           "read_known_hosts", "append_lines"]

MAX_KNOWN_HOSTS_BYTES = 64 << 20
KNOWN_NAME = re.compile(r"\[[A-Za-z0-9_.:%-]+\]:\d{1,5}|[A-Za-z0-9_.:%-]+")   # what we may append


class HostKeyError(TunepathError):
    pass


class UnknownHostKey(HostKeyError):
    """The host's key is in no line of known_hosts, and new keys are not trusted."""

    def __init__(self, name: str, key):
        self.name, self.key = name, key
        super().__init__(f"{name}: host key {describe(key)} not in known_hosts")


class RevokedHostKey(HostKeyError):
    """The host presented a key that an ``@revoked`` line of known_hosts names."""

    def __init__(self, name: str, key, line: int):
        self.name, self.key, self.line = name, key, line
        super().__init__(f"{name}: host key {describe(key)} is @revoked (known_hosts line {line})")


def describe(key) -> str:
    """``ssh-ed25519 SHA256:…``: what ``ssh-keygen -lf`` shows, to compare by eye."""
    return f"{key.get_name()} {key.fingerprint}"


@dataclass(frozen=True)
class KnownHosts:
    path: Path
    keys: tuple = ()                       # (host name or |1| hash, paramiko key), usable lines only
    revoked: dict[str, int] = field(default_factory=dict)    # key base64 -> its @revoked line number
    ignored: tuple[int, ...] = ()          # line numbers that are no host-key line at all

    def revoked_line(self, key) -> int | None:
        return self.revoked.get(key.get_base64())


def _read_bytes(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TunepathError(f"known_hosts {path} is not a regular file")
            data = f.read(MAX_KNOWN_HOSTS_BYTES + 1)
    except FileNotFoundError:
        return b""
    except IsADirectoryError:
        raise TunepathError(f"known_hosts {path} is a directory, not a file; set known_hosts in the "
                            "inventory to a file") from None
    except OSError as exc:
        raise TunepathError(f"known_hosts {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_KNOWN_HOSTS_BYTES:
        raise TunepathError(f"known_hosts {path}: larger than {MAX_KNOWN_HOSTS_BYTES >> 20} MB; not a "
                            "known_hosts file")
    return data


def _parse_line(raw: bytes):
    """``None`` (nothing to use: blank, comment, marker we skip, key type paramiko lacks),
    ``("revoked", base64)``, ``("key", names, key)``, or ``"bad"`` (no host-key line at all)."""
    from paramiko import HostKeys
    from paramiko.hostkeys import HostKeyEntry

    try:
        fields = raw.decode("utf-8").split()
    except UnicodeDecodeError:
        return "bad"
    if not fields or fields[0].startswith("#"):
        return None
    marker = fields.pop(0) if fields[0].startswith("@") else None
    if len(fields) < 3 or marker not in (None, "@revoked", "@cert-authority"):
        return "bad"
    if marker == "@revoked":
        return ("revoked", fields[2])
    if marker == "@cert-authority":
        return None
    try:
        entry = HostKeyEntry.from_line(" ".join(fields[:3]))
    except Exception:      # InvalidHostKey (bad base64) and ValueError & co. (a key's bytes)
        return "bad"
    if entry is None:      # a key type paramiko does not know (sk-…, certificates)
        return None
    names = []
    for name in entry.hostnames:
        try:
            if name.startswith("|1|"):
                HostKeys.hash_host("check", name)      # a hashed name with a broken salt
            names.append(name)
        except Exception:
            continue
    return ("key", tuple(names), entry.key) if names else "bad"


def read_known_hosts(path: str | os.PathLike) -> KnownHosts:
    """Every usable line of ``path`` (a missing file is an empty one); never raises for a line."""
    path = Path(path).expanduser()
    keys, revoked, ignored = [], {}, []
    for lineno, raw in enumerate(_read_bytes(path).split(b"\n"), 1):
        parsed = _parse_line(raw)
        if parsed == "bad":
            ignored.append(lineno)
        elif parsed and parsed[0] == "revoked":
            revoked.setdefault(parsed[1], lineno)
        elif parsed:
            keys.extend((name, parsed[2]) for name in parsed[1])
    if ignored:
        shown = ", ".join(map(str, ignored[:5])) + (", …" if len(ignored) > 5 else "")
        print(f"tunepath: warning: {path}: ignored {len(ignored)} line(s) that are no host-key lines "
              f"(line {shown}); ssh-keygen -F <host> -f {path} shows what is there", file=sys.stderr)
    return KnownHosts(path, tuple(keys), revoked, tuple(ignored))


class HostKeyCheck:
    """The host-key policy of one connection attempt to an inventory's hosts (paramiko's
    ``MissingHostKeyPolicy`` interface). The keys it trusts are kept in memory until :meth:`save`."""

    def __init__(self, known_hosts: str | os.PathLike, trust_new: bool = False):
        self.known = read_known_hosts(known_hosts)
        self.trust_new = trust_new
        self.new: dict[str, object] = {}      # known_hosts name -> the key trusted for it in this run

    @property
    def path(self) -> Path:
        return self.known.path

    def prepare(self, client, host: str | None = None) -> None:
        """Give ``client`` the usable keys (never a revoked one) and this policy. With ``host`` (its
        known_hosts name, ``[name]:port`` off port 22), only the lines for that host: paramiko adds
        keys one by one in quadratic time, which a long known_hosts turns into minutes."""
        from paramiko import HostKeys

        keys = client.get_host_keys()
        for name, key in self.known.keys:
            if host is not None and name != host and not (
                    name.startswith("|1|") and HostKeys.hash_host(host, name) == name):
                continue
            if self.known.revoked_line(key) is None:
                keys.add(name, key.get_name(), key)
        for name, key in list(self.new.items()):     # a host trusted a moment ago (connections run side by side)
            keys.add(name, key.get_name(), key)
        client.set_missing_host_key_policy(self)

    def missing_host_key(self, client, hostname: str, key) -> None:
        """paramiko calls this before authenticating, for a key that no usable line holds."""
        line = self.known.revoked_line(key)
        if line is not None:
            raise RevokedHostKey(hostname, key, line)
        if not self.trust_new or not KNOWN_NAME.fullmatch(hostname):
            raise UnknownHostKey(hostname, key)
        self.new[hostname] = key

    def lines(self) -> list[str]:
        return [f"{name} {key.get_name()} {key.get_base64()}" for name, key in self.new.items()]

    def save(self) -> list[str]:
        """Append the keys trusted so far (call it once every host has connected); the lines added."""
        added = self.lines()
        if added:
            append_lines(self.path, added)
        self.new.clear()
        return added


def append_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path`` with O_APPEND, after a newline if the file lacks its last one;
    create it 0600 (its directory 0700) if missing. No byte already in the file changes."""
    if any("\n" in line or "\r" in line or len(line.split()) != 3 for line in lines):
        raise TunepathError(f"refusing to append a malformed line to {path}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            size = os.fstat(fd).st_size
            lead = b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""
            data = lead + "".join(f"{line}\n" for line in lines).encode()
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise TunepathError(f"cannot add the new host key(s) to {path} ({exc.strerror or exc}); add them "
                            f"yourself: {' ; '.join(lines)}") from None
