"""The kernel's TCP counters and socket counts, from the kernel step's recorded checks.

- ``nstat -asz TcpExtListenOverflows TcpExtListenDrops`` prints absolute counters, one per line
  (``TcpExtListenOverflows   12   0.0``) after a ``#kernel`` line: :func:`counters`;
- ``ss -Htan state time-wait | wc -l`` prints one number: :func:`count`.
"""

from __future__ import annotations

import re

__all__ = ["counters", "count", "increase"]

_COUNTER = re.compile(r"^(\w+)\s+(\d+)\b", re.M)


def counters(text: str) -> dict[str, int]:
    """Each counter ``nstat`` printed, by name."""
    return {name: int(value) for name, value in _COUNTER.findall(text or "") if not name.startswith("#")}


def increase(before: str, after: str, name: str) -> int | None:
    """How much the counter ``name`` grew between two ``nstat`` outputs (None: either lacks it)."""
    a, b = counters(before).get(name), counters(after).get(name)
    return None if a is None or b is None or b < a else b - a


def count(text: str) -> int | None:
    """The one number a ``… | wc -l`` printed (None: none)."""
    m = re.fullmatch(r"\s*(\d+)\s*", text or "")
    return int(m.group(1)) if m else None
