"""Writing a set of generated files all or none, and asking whether one is already as wanted.

:func:`write_files` first looks at every target: anything in the way (a directory, a FIFO, a
socket where a file goes; a directory where its temporary file goes) stops it before it writes
anything. It then writes each file's text to a temporary file beside it and only then renames
each into place (a symbolic link of the name is replaced, never followed). A failure leaves no
temporary file behind. :func:`holds` reads a file only if it is a regular one, and no more of it
than it needs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["holds", "in_the_way", "write_files"]


def holds(path: Path, text: str) -> bool:
    """``path`` is a regular file (not a symlink) that reads as ``text`` (UTF-8, any line endings);
    nothing else is read: not a FIFO, not much more of a file than ``text``'s length."""
    data = text.encode("utf-8")
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return False
            found = f.read(2 * len(data) + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return found.replace("\r\n", "\n").replace("\r", "\n") == text


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


def in_the_way(path: Path) -> str | None:
    """Why no file can be renamed to ``path``: something there that is neither a regular file nor a
    symbolic link (both of which a rename replaces); None when nothing is in the way."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    return f"{path} is {'a directory' if stat.S_ISDIR(mode) else 'not a regular file'}"


def _stage(path: Path, text: str) -> Path:
    """``text`` in the temporary file beside ``path``; on a failure, no temporary file is left."""
    tmp = _temporary(path)
    try:
        tmp.unlink(missing_ok=True)             # left by a command killed while writing
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_files(todo: list[tuple[Path, str]], command: str) -> None:
    """Write each ``(path, text)`` of ``todo``, all or none; a failure is one line that says to rerun
    ``command``. Only a rename failing after every check passed and every text was written (which
    the checks leave to a race) can leave some files written and others not."""
    blocked = [why for path, _ in todo for why in (in_the_way(path), in_the_way(_temporary(path))) if why]
    if blocked:
        raise TunepathError(f"{'; '.join(blocked)}, where {command} writes a file (or its temporary file): move "
                            f"it away or remove it, then rerun `{command}`; nothing was written")
    staged: list[tuple[Path, Path]] = []
    try:
        for path, text in todo:
            staged.append((_stage(path, text), path))
        for tmp, path in staged:
            os.replace(tmp, path)
    except OSError as exc:
        raise TunepathError(f"cannot write {exc.filename or todo[0][0]}: {exc.strerror or exc}; make it a file you "
                            f"can write (or remove it), then rerun `{command}`") from None
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
