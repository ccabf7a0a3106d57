"""Fingerprints of directory trees, to see what a command created, changed or removed.

:func:`snapshot` walks a tree without following symbolic links and without opening anything but
regular files (a FIFO is never opened: that would block); :func:`changes` compares two snapshots.
:class:`Guard` does the same for the checkout's own trees around the whole census: no case may
change them.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ABSENT", "GUARDED", "fingerprint", "snapshot", "changes", "Guard"]

ABSENT = "absent"
# the checkout's trees a case could reach by mistake (the project's default directories)
GUARDED = ("content", "data", "static", "public", "runs", "notebooks", "layouts", "config.toml", "lab")


def fingerprint(path: Path) -> str:
    """What a path is: ``file:<sha256>``, ``dir``, ``link:<target>``, ``special:<mode>`` or :data:`ABSENT`."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return ABSENT
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    if stat.S_ISLNK(st.st_mode):
        return f"link:{os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.S_IFMT(st.st_mode):o}"
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return f"file:{digest.hexdigest()}"


def snapshot(root: Path) -> dict[str, str]:
    """Path relative to ``root`` (``.`` for root itself) → :func:`fingerprint`, for every entry."""
    root = Path(root)
    out = {".": fingerprint(root)}
    if out["."] != "dir":
        return out
    for dirpath, dirnames, filenames in os.walk(root):        # does not descend into linked directories
        for name in (*dirnames, *filenames):
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = fingerprint(path)
    return out


def changes(before: dict[str, str], after: dict[str, str], prefix: str = "") -> list[str]:
    """``created X``, ``changed X``, ``removed X`` for every entry that differs, X after ``prefix``."""
    out = []
    for rel in sorted(set(before) | set(after)):
        was, now = before.get(rel, ABSENT), after.get(rel, ABSENT)
        if was == now:
            continue
        where = prefix if rel == "." else f"{prefix}/{rel}" if prefix else rel
        verb = "created" if was == ABSENT else "removed" if now == ABSENT else "changed"
        out.append(f"{verb} {where or '.'}")
    return out


@dataclass
class Guard:
    """The checkout's own trees (:data:`GUARDED`), before and after the census."""

    root: Path
    before: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.before = self.take()

    def take(self) -> dict[str, dict[str, str]]:
        return {name: snapshot(self.root / name) for name in GUARDED}

    def changed(self) -> list[str]:
        """What differs now in the guarded trees (empty: nothing)."""
        now = self.take()
        return [c for name in GUARDED for c in changes(self.before[name], now[name], name)]
