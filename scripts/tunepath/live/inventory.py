"""The inventory: which machines are the server and the clients.

An inventory (``hosts.toml``) names one ``[server]`` and one or more ``[[clients]]``::

    known_hosts = "~/.ssh/known_hosts"     # optional; this is the default

    [server]
    host = "tomcat.example"                 # required
    port = 22
    user = "ubuntu"
    key_file = "~/.ssh/id_ed25519"          # optional; else the SSH agent / default keys
    address = "10.0.0.5"                    # optional: where clients send the load (default: host)
    baseline_cpus = "0-7"                   # optional: the CPUs the path keeps online (default:
                                            # the first 8 online CPUs)

    [[clients]]
    host = "loadgen.example"

A top-level ``label = "…"`` describes the hosts in every run recorded on them (the lab
writes one saying what it is: network namespaces on one machine, not separate hardware).
A top-level ``emulated = true`` marks an emulated server (the lab's QEMU VM). The run records it
as ``run.json``'s ``emulated``; the comparison never pairs such a run with a real host, the pages
never make it a step's primary run, and :mod:`tunepath.live.measure` gives its Tomcat a longer
start-up limit. A top-level ``arch = "aarch64"`` declares the server's ``uname -m``; a run
that finds another stops before it changes anything (the lab's Arm VM writes it).

Without an inventory both roles are this machine, reached without SSH
(:func:`local_inventory`).

Passwords are refused: keys come from ``key_file`` or the SSH agent, root from passwordless sudo.

Every value is checked here, once, before anything connects: TOML gives typed values, and a
wrong type must not slip through (``port = true`` is a bool, which Python also calls an int).
Host and user names end up in ``known_hosts`` lines and in messages, so they may hold no
whitespace or control characters: a host name with a newline could otherwise append a line of
its choosing to ``known_hosts``. Each problem is one line naming the file and the key.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.model.context import cpu_ranges, parse_cpu_list

__all__ = ["HostSpec", "Inventory", "load_inventory", "local_inventory"]

MAX_INVENTORY_BYTES = 1 << 20          # an inventory is a few lines; /dev/zero is not one
HOST_KEYS = ("host", "port", "user", "key_file", "address")
SERVER_KEYS = HOST_KEYS + ("baseline_cpus",)
TOP_KEYS = ("server", "clients", "known_hosts", "label", "emulated", "arch")
MAX_LABEL = 300
SECRET_KEYS = ("password", "passphrase", "sudo_password")
HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})")
ZONE = re.compile(r"[A-Za-z0-9_.:-]{1,15}")        # a Linux interface name (IFNAMSIZ - 1)
USER_NAME = re.compile(r"[A-Za-z0-9_][^\s\x00-\x1f\x7f:/]{0,63}")


@dataclass(frozen=True)
class HostSpec:
    role: str                      # "server" or "client"
    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    address: str | None = None          # where load is sent (the host's address on the test network)
    baseline_cpus: str | None = None    # server only: the CPUs the path keeps online, e.g. "0-7"

    @property
    def load_address(self) -> str:
        """The address clients send their load to: ``address`` when given, else ``host``."""
        return self.address or self.host

    @property
    def local(self) -> bool:
        return self.host == "local"

    @property
    def label(self) -> str:
        if self.local:
            return "local"
        return f"{self.user + '@' if self.user else ''}{self.host}{':' + str(self.port) if self.port != 22 else ''}"


@dataclass(frozen=True)
class Inventory:
    server: HostSpec
    clients: tuple[HostSpec, ...]
    known_hosts: Path
    source: Path | None = None     # the file it came from; None: this machine only
    label: str | None = None       # how runs on these hosts are described (e.g. the lab's)
    emulated: bool = False         # the server is emulated (the lab's QEMU VM): its figures test the
                                   # commands, not performance; pages never rank them with real hosts
    arch: str | None = None        # the server's `uname -m` as the file declares it (checked when a run starts)

    @property
    def same_machine(self) -> bool:
        return self.server.local and all(c.local for c in self.clients) or \
            all((c.host, c.port) == (self.server.host, self.server.port) for c in self.clients)


def runner_label(env=os.environ) -> str | None:
    """What the hosts are when this machine is a runner GitHub hosts (GitHub Actions says so in
    ``GITHUB_ACTIONS`` and ``RUNNER_ENVIRONMENT``): one more kind of host, never a lab or a
    reader's server, so its runs are labeled as such. None elsewhere."""
    if env.get("GITHUB_ACTIONS") != "true" or env.get("RUNNER_ENVIRONMENT") != "github-hosted":
        return None
    arch = {"ARM64": "Arm64", "X64": "x86-64"}.get(env.get("RUNNER_ARCH", ""), env.get("RUNNER_ARCH") or "unknown")
    return (f"GitHub-hosted runner ({arch}, {env.get('ImageOS') or env.get('RUNNER_OS') or 'unknown image'}): "
            "a virtual machine of the runner fleet, server and client on one runner; not a dedicated host")


def local_inventory() -> Inventory:
    return Inventory(HostSpec("server", "local"), (HostSpec("client", "local"),),
                     Path("~/.ssh/known_hosts").expanduser(), label=runner_label())


def _kind(value) -> str:
    """What a TOML value is, in words (never the value itself: it may be long or hold newlines)."""
    names = {bool: "a boolean", int: "a number", float: "a decimal number", str: "a string",
             list: "an array", dict: "a table"}
    return names.get(type(value), f"a {type(value).__name__}")


def _string(raw: dict, key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise TunepathError(f"{where} {key} must be a string, not {_kind(value)}")
    if not value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise TunepathError(f"{where} {key} must be a non-empty string without control characters")
    return value


def _host(raw: dict, where: str, key: str = "host") -> str:
    host = _string(raw, key, where)
    if host is None:
        raise TunepathError(f"{where} needs host = \"name or address\" (or \"local\")")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:           # Python takes any text after an IPv6 address's '%': "fe80::1%eth0;id"
        _, percent, zone = host.partition("%")
        if percent and not ZONE.fullmatch(zone):
            raise TunepathError(f"{where} {key}: the zone after '%' must be an interface name (at most 15 "
                                "letters, digits, '_', '.', ':' or '-'), such as fe80::1%eth0")
        return host
    if len(host) > 253 or not HOST_NAME.fullmatch(host):
        raise TunepathError(f"{where} {key} must be a DNS name or an IP address (letters, digits, '.', '-', "
                            "'_'; at most 253 characters; no user@ or :port, which have their own keys)")
    return host


def _port(raw: dict, where: str) -> int:
    port = raw.get("port", 22)
    if isinstance(port, bool) or not isinstance(port, int):
        raise TunepathError(f"{where} port must be a whole number from 1 to 65535, not {_kind(port)}")
    if not 0 < port < 65536:
        raise TunepathError(f"{where} port must be a whole number from 1 to 65535, not {port}")
    return port


def _path(raw: dict, key: str, where: str) -> Path | None:
    """A path value, expanded; one line if the name cannot be a path on this system."""
    value = _string(raw, key, where)
    if value is None:
        return None
    try:
        path = Path(value).expanduser()     # "~nosuchuser/id": no such user, no home directory
        os.stat(path)
    except FileNotFoundError:
        pass
    except RuntimeError:
        raise TunepathError(f"{where} {key} {value}: no such user, so no home directory to expand "
                            "~user in") from None
    except OSError as exc:   # ENAMETOOLONG, ELOOP, EACCES on a parent, …
        raise TunepathError(f"{where} {key} {value}: {exc.strerror or exc}") from None
    return path


def _spec(role: str, raw, where: str) -> HostSpec:
    at = f"{where}: [{role}]"
    if not isinstance(raw, dict):
        raise TunepathError(f"{at} must be a table with at least host = \"…\", not {_kind(raw)}")
    allowed = SERVER_KEYS if role == "server" else HOST_KEYS
    unknown = set(raw) - set(allowed)
    if unknown:
        raise TunepathError(f"{at} has unknown key(s) {', '.join(sorted(map(repr, unknown)))}; "
                            f"allowed: {', '.join(allowed)}")
    host, port = _host(raw, at), _port(raw, at)
    address = _host(raw, at, "address") if "address" in raw else None
    cpus = _cpus(raw, at)
    user = _string(raw, "user", at)
    if user is not None and not USER_NAME.fullmatch(user):
        raise TunepathError(f"{at} user must be a login name (no spaces, ':' or '/', at most 64 characters, "
                            "not starting with '-')")
    key = _path(raw, "key_file", at)
    if key is not None and not key.is_file():
        raise TunepathError(f"{at} key_file {key} {'is not a file' if key.exists() else 'does not exist'}")
    return HostSpec(role, host, port, user, None if key is None else str(key), address, cpus)


def _cpus(raw: dict, where: str) -> str | None:
    """``baseline_cpus``: a CPU list such as "0-7,96", kept in the kernel's notation."""
    value = _string(raw, "baseline_cpus", where)
    if value is None:
        return None
    try:
        cpus = parse_cpu_list(value)
    except TunepathError as exc:
        raise TunepathError(f"{where} baseline_cpus: {exc}") from None
    if not cpus:
        raise TunepathError(f"{where} baseline_cpus must name at least one CPU, e.g. \"0-7\"")
    return cpu_ranges(cpus)


def _read(path: Path) -> dict:
    """The file's TOML; every way reading it can fail is one line naming the file."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INVENTORY_BYTES + 1)
    except FileNotFoundError:
        raise TunepathError(f"inventory {path} not found") from None
    except IsADirectoryError:
        raise TunepathError(f"inventory {path} is a directory; give the hosts.toml file") from None
    except OSError as exc:   # permission denied, name too long, an I/O error
        raise TunepathError(f"inventory {path}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > MAX_INVENTORY_BYTES:
        raise TunepathError(f"inventory {path}: larger than {MAX_INVENTORY_BYTES >> 20} MB; not a hosts.toml")
    try:
        text = data.decode("utf-8-sig")      # TOML is UTF-8; a BOM from an editor is harmless
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise TunepathError(f"inventory {path}: not UTF-8 (line {line}); save it as UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TunepathError(f"inventory {path}: not valid TOML ({exc})") from None
    except RecursionError:          # arrays or tables nested thousands deep: no inventory is
        raise TunepathError(f"inventory {path}: nested too deeply to be a hosts.toml (see "
                            "docs/user-guide.md for its shape)") from None


def _refuse_secrets(data: dict, where: str) -> None:
    clients = data.get("clients")
    tables = [data, data.get("server")] + (clients if isinstance(clients, list) else [])
    for key in SECRET_KEYS:
        if any(isinstance(t, dict) and key in t for t in tables):
            raise TunepathError(f"{where}: '{key}' is not accepted in an inventory: passwords never go "
                                "into files that runs publish; use key files or the SSH agent, and "
                                "passwordless sudo")


def load_inventory(path: str | os.PathLike | None) -> Inventory:
    """Read ``hosts.toml``; ``None`` means both roles on this machine."""
    if path is None:
        return local_inventory()
    path = Path(path).expanduser()
    data = _read(path)
    where = str(path)
    _refuse_secrets(data, where)
    unknown = set(data) - set(TOP_KEYS)
    if unknown:
        raise TunepathError(f"{where}: unknown top-level key(s) {', '.join(sorted(map(repr, unknown)))}; "
                            f"allowed: {', '.join(TOP_KEYS)}")
    if "server" not in data:
        raise TunepathError(f"{where}: a [server] table is required")
    clients = data.get("clients", [])
    if not isinstance(clients, list) or not clients or not all(isinstance(c, dict) for c in clients):
        got = "none" if clients == [] else _kind(clients) if not isinstance(clients, list) else \
            f"an array holding {_kind(next(c for c in clients if not isinstance(c, dict)))}"
        raise TunepathError(f"{where}: at least one [[clients]] table (double brackets) is required; found {got}")
    known = _path(data, "known_hosts", f"{where}:") or Path("~/.ssh/known_hosts").expanduser()
    if known.exists() and not known.is_file():
        raise TunepathError(f"{where}: known_hosts {known} is not a file")
    label = _string(data, "label", f"{where}:")
    if label is not None and len(label) > MAX_LABEL:
        raise TunepathError(f"{where}: label is longer than {MAX_LABEL} characters; describe the hosts in a line")
    emulated = data.get("emulated", False)
    if not isinstance(emulated, bool):
        raise TunepathError(f"{where}: emulated must be true or false, not {_kind(emulated)}")
    arch = data.get("arch")
    if arch is not None and not (isinstance(arch, str) and re.fullmatch(r"[a-z0-9_]{1,32}", arch)):
        raise TunepathError(f"{where}: arch must be the server's `uname -m`, such as \"aarch64\" or \"x86_64\", "
                            f"not {_kind(arch) if not isinstance(arch, str) else repr(arch[:40])}")
    return Inventory(_spec("server", data["server"], where),
                     tuple(_spec("client", c, where) for c in clients), known, path, label, emulated, arch)
