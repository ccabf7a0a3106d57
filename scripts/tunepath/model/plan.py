"""What a step is made of: its command blocks and its measured variants."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

__all__ = ["Block", "Variant", "Sysctl"]


@dataclass(frozen=True)
class Block:
    """One command block: what a reader copies and what the notebook runs."""

    id: str
    host: str          # "server" or "client"
    title: str
    text: str
    lang: str = "bash"
    disruptive: bool = False
    variant: str | None = None   # a block that belongs to one variant (applied with its configuration)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Variant:
    """A measured configuration of a step."""

    name: str
    label: str
    description: str
    smoke: bool = False        # measured with the smoke-test load instead of the full one
    requires_java: int = 17    # the lowest Java major version the variant can run on


_SYSCTL_NAME = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)+")


@dataclass(frozen=True)
class Sysctl:
    """One kernel setting a variant runs under, on the server or on every client."""

    name: str          # net.core.somaxconn
    value: str         # a whole number
    host: str = "server"

    def __post_init__(self):
        if not _SYSCTL_NAME.fullmatch(self.name) or not self.value.isdigit() or self.host not in ("server", "client"):
            raise ValueError(f"not a sysctl setting: {self.name}={self.value} on {self.host}")

    @property
    def path(self) -> str:
        """Its file under /proc/sys."""
        return "/proc/sys/" + self.name.replace(".", "/")

    @property
    def command(self) -> str:
        """What sets it (the lab's clients may run exactly this through sudo, nothing wider)."""
        return f"sudo sysctl -w {self.name}={self.value}"
