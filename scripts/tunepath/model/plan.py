"""What a step is made of: its command blocks and its measured variants."""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Block", "Variant"]


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
