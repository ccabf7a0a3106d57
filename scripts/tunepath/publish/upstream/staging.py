"""Where ``tunepath export --upstream DIR`` stages the path before it moves into place.

The staging directory, ``.tunepath-export-<pid>-<random>``, is made in DIR's parent, which must
exist and be writable: never in some ancestor further up (``/``, when DIR was a typo), where a
killed export would leave it for good. An export removes the staging directories beside DIR that
a killed export left: their process is gone, or they are older than a day.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["PREFIX", "make_staging", "remove_stale"]

PREFIX = ".tunepath-export-"
STALE_AFTER = 24 * 3600          # seconds: no export takes a day
_OWNER = re.compile(rf"{re.escape(PREFIX)}(\d{{1,9}})-")


def make_staging(dest: Path) -> Path:
    """A new staging directory beside ``dest`` (after removing stale ones); one line if it cannot be."""
    parent = dest.parent
    if not parent.is_dir():
        raise TunepathError(f"--upstream {dest}: its parent directory {parent} does not exist; give a "
                            "checkout, or a new directory in one that exists")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TunepathError(f"--upstream {dest}: its parent directory {parent} is not writable (the export "
                            "is staged there before it moves into place)")
    remove_stale(parent)
    try:
        return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent))
    except OSError as exc:
        raise TunepathError(f"--upstream {dest}: cannot stage the export in {parent} "
                            f"({exc.strerror or exc})") from None


def remove_stale(parent: Path, now: float | None = None) -> list[Path]:
    """Remove the staging directories in ``parent`` that a killed export left; returns them."""
    now = time.time() if now is None else now
    removed = []
    try:
        entries = [e for e in parent.iterdir() if e.name.startswith(PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        if _stale(entry, now):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _stale(entry: Path, now: float) -> bool:
    try:
        st = entry.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):       # a file or a symlink of that name is not ours
        return False
    if now - st.st_mtime > STALE_AFTER:
        return True
    owner = _OWNER.match(entry.name)
    return owner is not None and not _alive(int(owner.group(1)))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True                         # no process of ours: leave it to the age rule
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                         # EPERM: another user's process, alive
        return True
    return True
