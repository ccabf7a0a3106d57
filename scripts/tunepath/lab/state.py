"""The lab's roles and addresses, and ``state.json``: everything ``up`` created, for ``down``.

``up`` writes the state after each thing it creates, so a half-finished ``up`` still leaves a true
list behind; ``down`` removes exactly what the list names and rewrites it after each removal.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["Role", "ROLES", "ROLE_NAMES", "SWITCH", "SWITCH_ADDRESS", "PREFIX_LENGTH", "DEFAULT_PREFIX",
           "HostState", "VmState", "LabState", "LabPaths", "role", "check_prefix", "load_state", "save_state"]

DEFAULT_PREFIX = "tplab"
SWITCH = "net"                    # the namespace holding the bridge: <prefix>-net
SWITCH_ADDRESS = "10.213.7.254"
PREFIX_LENGTH = 24
PREFIX = re.compile(r"[a-z][a-z0-9]{0,9}")    # a user name <prefix>-srv stays short and portable
MAX_STATE_BYTES = 1 << 20


@dataclass(frozen=True)
class Role:
    name: str          # "server", "client1", "client2": what the API and the messages call it
    suffix: str        # in the namespace and user names: <prefix>-srv
    address: str       # eth0's address in the namespace
    kind: str          # the inventory's role: "server" or "client"


ROLES = (Role("server", "srv", "10.213.7.1", "server"),
         Role("client1", "c1", "10.213.7.11", "client"),
         Role("client2", "c2", "10.213.7.12", "client"))
ROLE_NAMES = tuple(r.name for r in ROLES)


def role(name: str) -> Role:
    for r in ROLES:
        if r.name == name:
            return r
    raise TunepathError(f"lab: unknown role {name!r}; the lab's roles are {', '.join(ROLE_NAMES)}")


def check_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not PREFIX.fullmatch(prefix):
        raise TunepathError(f"lab prefix {prefix!r}: use 1 to 10 lower-case letters and digits, starting "
                            f"with a letter (default {DEFAULT_PREFIX})")
    return prefix


@dataclass
class HostState:
    role: str
    port: int | None = None            # the loopback forward's port (kept across `up`)
    sshd_pid: int | None = None        # the sshd listener in the host's namespace
    socat_pid: int | None = None       # the forward's listener in the root namespace


@dataclass
class VmState:
    """The server VM of ``lab up --vm`` (:mod:`tunepath.lab.vmhost`)."""
    image: str | None = None           # the cached base image its overlay is backed by
    pid: int | None = None             # QEMU
    port: int | None = None            # the loopback forward's port
    socat_pid: int | None = None       # the forward's listener
    arch: str = "amd64"                # Debian's name of its architecture: amd64 or arm64 (lab/vmarch.py)


@dataclass
class LabState:
    prefix: str
    directory: str
    created_dir: bool = False                               # `up` made the directory: `down` removes it
    namespaces: list[str] = field(default_factory=list)     # created by `up`
    users: list[str] = field(default_factory=list)          # created by `up`
    sudoers: str | None = None                              # the sudoers file `up` wrote
    files: list[str] = field(default_factory=list)          # generated, relative to the directory
    hosts: list[HostState] = field(default_factory=lambda: [HostState(r.name) for r in ROLES])
    vm: VmState | None = None                               # the server VM, with `up --vm`

    def host(self, name: str) -> HostState:
        role(name)
        return next(h for h in self.hosts if h.role == name)

    def add_file(self, relative: str) -> None:
        if relative not in self.files:
            self.files.append(relative)


@dataclass(frozen=True)
class LabPaths:
    """Where a lab's files are: all of them inside its directory."""
    directory: Path

    @property
    def state_file(self) -> Path:
        return self.directory / "state.json"

    @property
    def hosts_file(self) -> Path:
        return self.directory / "hosts.toml"

    @property
    def self_hosts_file(self) -> Path:
        """The inventory with the VM as its own client (written with the VM only)."""
        return self.directory / "hosts-self.toml"

    @property
    def known_hosts(self) -> Path:
        return self.directory / "known_hosts"

    @property
    def key_file(self) -> Path:
        return self.directory / "id_ed25519"

    def role_dir(self, name: str) -> Path:
        return self.directory / role(name).name


def _int_or_none(value, where: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise TunepathError(f"{where} must be a positive whole number or null")


def _strings(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TunepathError(f"{where} must be a list of strings")
    return list(value)


def _from_json(data, where: str) -> LabState:
    if not isinstance(data, dict) or not isinstance(data.get("prefix"), str) \
            or not isinstance(data.get("directory"), str) or not isinstance(data.get("hosts"), list):
        raise TunepathError(f"{where}: not a lab state (needs prefix, directory and hosts)")
    hosts = []
    for raw in data["hosts"]:
        if not isinstance(raw, dict) or raw.get("role") not in ROLE_NAMES:
            raise TunepathError(f"{where}: hosts holds an entry that is not one of {', '.join(ROLE_NAMES)}")
        hosts.append(HostState(raw["role"], *(_int_or_none(raw.get(k), f"{where}: {raw['role']}.{k}")
                                               for k in ("port", "sshd_pid", "socat_pid"))))
    if sorted(h.role for h in hosts) != sorted(ROLE_NAMES):
        raise TunepathError(f"{where}: hosts must name each of {', '.join(ROLE_NAMES)} once")
    sudoers = data.get("sudoers")
    if sudoers is not None and not isinstance(sudoers, str):
        raise TunepathError(f"{where}: sudoers must be a path or null")
    return LabState(check_prefix(data["prefix"]), data["directory"], data.get("created_dir") is True,
                    _strings(data.get("namespaces", []), f"{where}: namespaces"),
                    _strings(data.get("users", []), f"{where}: users"), sudoers,
                    _strings(data.get("files", []), f"{where}: files"), hosts, _vm(data.get("vm"), where))


def _vm(raw, where: str) -> VmState | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not (raw.get("image") is None or isinstance(raw.get("image"), str)):
        raise TunepathError(f"{where}: vm must be null or an object with arch, image, pid, port and socat_pid")
    arch = raw.get("arch", "amd64")          # a state written before the Arm VM has none: x86
    if arch not in ("amd64", "arm64"):
        raise TunepathError(f"{where}: vm.arch must be amd64 or arm64, not {arch!r}")
    pid, port, socat_pid = (_int_or_none(raw.get(k), f"{where}: vm.{k}") for k in ("pid", "port", "socat_pid"))
    return VmState(arch=arch, image=raw.get("image"), pid=pid, port=port, socat_pid=socat_pid)


def load_state(path: Path) -> LabState | None:
    """The state in ``path``; None when there is none (no lab here)."""
    try:
        # without blocking, and only a regular file: a FIFO or a device there must not hang the command
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TunepathError(f"lab state {path}: not a regular file; remove it (tunepath lab up writes a new one)")
            raw = f.read(MAX_STATE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TunepathError(f"lab state {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = " (nested too deeply)" if isinstance(exc, RecursionError) else ""
        raise TunepathError(f"lab state {path}: not JSON{why}; remove the lab's parts by hand "
                            "(ip netns del, userdel -r) and the file") from None
    return _from_json(data, f"lab state {path}")


def save_state(path: Path, state: LabState) -> None:
    """Write ``state`` atomically (a crash leaves the old file or the new one, never half of one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    os.replace(tmp, path)
