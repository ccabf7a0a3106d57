"""Replacing published paths by their staged versions, all or nothing.

:func:`publish` renames each published path aside (``NAME.tunepath-old``) and its staged
replacement in, two renames on one file system each; if any rename fails, every one done so
far is undone. :func:`recover` repairs what a build killed in the middle of :func:`publish`
left behind.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["OLD", "publish", "recover", "remove"]

OLD = ".tunepath-old"        # suffix of a published path while its replacement is renamed in


def recover(published: Path) -> None:
    """Undo what a build killed in the middle of :func:`publish` left: the old version back if
    the new one never arrived, else the old one removed."""
    old = published.with_name(published.name + OLD)
    if old.exists() or old.is_symlink():
        if not (published.exists() or published.is_symlink()):
            os.rename(old, published)
        else:
            remove(old)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def publish(pairs: list[tuple[Path, Path]]) -> None:
    """Replace each published path by its staged one, ``(staged, published)``: two renames on one
    file system each (the published one aside, the staged one in); all undone if any fails."""
    done: list[tuple[Path, Path, bool]] = []
    try:
        for staged, published in pairs:
            if not (staged.exists() or staged.is_symlink()):
                continue
            recover(published)
            old = published.with_name(published.name + OLD)
            had = published.exists() or published.is_symlink()
            if had:
                os.rename(published, old)
            done.append((staged, published, had))
            published.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staged, published)
    except BaseException:
        for staged, published, had in reversed(done):
            if published.exists() or published.is_symlink():
                os.rename(published, staged)
            if had:
                os.rename(published.with_name(published.name + OLD), published)
        raise
    for _, published, had in done:
        if had:
            remove(published.with_name(published.name + OLD))
