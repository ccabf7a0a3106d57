"""The inventory: which machines are the server and the clients.

An inventory (``hosts.toml``) names one ``[server]`` and one or more ``[[clients]]``::

    known_hosts = "~/.ssh/known_hosts"     # optional; this is the default

    [server]
    host = "tomcat.example"                 # required
    port = 22
    user = "ubuntu"
    key_file = "~/.ssh/id_ed25519"          # optional; else the SSH agent / default keys

    [[clients]]
    host = "loadgen.example"

Without an inventory both roles are this machine, reached without SSH
(:func:`local_inventory`).

Passwords are refused: keys come from ``key_file`` or the SSH agent, root from passwordless sudo.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["HostSpec", "Inventory", "load_inventory", "local_inventory"]


@dataclass(frozen=True)
class HostSpec:
    role: str                      # "server" or "client"
    host: str
    port: int = 22
    user: str | None = None
    key_file: str | None = None

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

    @property
    def same_machine(self) -> bool:
        return self.server.local and all(c.local for c in self.clients) or \
            all((c.host, c.port) == (self.server.host, self.server.port) for c in self.clients)


def local_inventory() -> Inventory:
    return Inventory(HostSpec("server", "local"), (HostSpec("client", "local"),),
                     Path("~/.ssh/known_hosts").expanduser())


def _spec(role: str, raw, where: str) -> HostSpec:
    if not isinstance(raw, dict):
        raise TunepathError(f"{where}: [{role}] must be a table with at least host = \"…\"")
    unknown = set(raw) - {"host", "port", "user", "key_file"}
    if unknown:
        raise TunepathError(f"{where}: [{role}] has unknown key(s) {', '.join(sorted(unknown))}; "
                            "allowed: host, port, user, key_file")
    if not isinstance(raw.get("host"), str) or not raw["host"]:
        raise TunepathError(f"{where}: [{role}] needs host = \"name or address\" (or \"local\")")
    port = raw.get("port", 22)
    if not isinstance(port, int) or not 0 < port < 65536:
        raise TunepathError(f"{where}: [{role}] port must be a number from 1 to 65535")
    key = raw.get("key_file")
    if key is not None:
        key = str(Path(key).expanduser())
        if not Path(key).is_file():
            raise TunepathError(f"{where}: [{role}] key_file {key} does not exist")
    return HostSpec(role, raw["host"], port, raw.get("user"), key)


def load_inventory(path: str | os.PathLike | None) -> Inventory:
    """Read ``hosts.toml``; ``None`` means both roles on this machine."""
    if path is None:
        return local_inventory()
    path = Path(path).expanduser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TunepathError(f"inventory {path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise TunepathError(f"inventory {path}: not valid TOML ({exc})") from None
    where = str(path)
    for key in ("password", "passphrase", "sudo_password"):
        if any(key in (t or {}) for t in [data, data.get("server")] + list(data.get("clients") or [])
               if isinstance(t, dict)):
            raise TunepathError(f"{where}: '{key}' is not accepted in an inventory: passwords never go "
                                "into files that runs publish; use key files or the SSH agent, and "
                                "passwordless sudo")
    unknown = set(data) - {"server", "clients", "known_hosts"}
    if unknown:
        raise TunepathError(f"{where}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    if "server" not in data:
        raise TunepathError(f"{where}: a [server] table is required")
    clients = data.get("clients") or []
    if not isinstance(clients, list) or not clients:
        raise TunepathError(f"{where}: at least one [[clients]] table is required")
    known = Path(data.get("known_hosts", "~/.ssh/known_hosts")).expanduser()
    return Inventory(_spec("server", data["server"], where),
                     tuple(_spec("client", c, where) for c in clients), known, path)
