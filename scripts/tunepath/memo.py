"""One replay build's shared results: what several step notebooks of the same build compute alike.

Every step notebook of a replay build runs in its own kernel, and each used to read and
validate every recorded run and parse the same raw reports again (most steps replay the
same runs). The build (:mod:`tunepath.publish.build`) gives its kernels a directory of
their own in the staging directory (the environment variable :data:`ENV`); the first
kernel that needs a value computes it and stores it there (pickled, written atomically),
the others load it. A file lock per value makes the kernels that need the same value at
the same time compute it once. Without the variable (a notebook run by hand, a live run)
nothing is stored and every value is computed as before. The directory lives and dies
with one build, so it never outlives the runs it was computed from.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Callable, TypeVar

__all__ = ["ENV", "memo_dir", "shared"]

ENV = "TUNEPATH_REPLAY_MEMO"
T = TypeVar("T")


def memo_dir() -> Path | None:
    """Where this build's kernels share values, or None outside a replay build."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def shared(kind: str, key: list, compute: Callable[[], T]) -> T:
    """``compute()``, or the value another kernel of this build computed for the same ``kind``
    and ``key`` (JSON-able; include everything the value depends on within one build)."""
    root = memo_dir()
    if root is None:
        return compute()
    digest = hashlib.sha256(json.dumps([kind, key], sort_keys=True, default=str).encode()).hexdigest()[:40]
    path = root / f"{kind}-{digest}.pickle"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{kind}-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)       # released when the file closes, even if compute() fails
        if path.is_file():
            try:
                return pickle.loads(path.read_bytes())
            except Exception:                  # noqa: BLE001 - unreadable: compute it again
                pass
        value = compute()
        try:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:                      # noqa: BLE001 - not picklable: each kernel computes its own
            return value
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return value
