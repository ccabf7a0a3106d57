"""Where a build may write, checked before it writes anything: the site directory (``--site-dir``)
and Hugo's output (``--destination``, by default ``SITE/public``).

A build replaces what it publishes as a whole: Hugo's output directory, and in a site directory
other than the project, its copies of the site sources (``config.toml``, ``content/``,
``layouts/``, ``static/``) and the data (``data/``). So it refuses, in one line, a place holding
files no build wrote. Hugo's output carries a mark (:data:`SITE_MARK`); a site directory other than
the project carries one too, at its top, listing the files a build put in those directories
(:func:`record_site_files`, written before a build publishes and again after). A site directory
without that mark which a build made before marks existed (it has ``build/last-build.json``) is
taken as the build's. The project itself, as the site directory, is checked as it always was: its
sources are its own.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.publish.swap import OLD
from tunepath.publish.writefiles import write_files

__all__ = ["SITE_MARK", "SITE_SOURCES", "PUBLISHED_ROOTS", "check_site_dir", "check_destination",
           "check_foreign_files", "record_site_files"]

SITE_SOURCES = ("config.toml", "content", "layouts", "static")
SITE_MARK = ".tunepath-site"   # in Hugo's output, and at the top of a site directory other than the project
# what a build writes in a site directory other than the project, besides Hugo's output
PUBLISHED_ROOTS = ("config.toml", "content", "layouts", "static", "data")
MARK_MAX_BYTES = 16 << 20
SHOWN = 4                      # foreign files named in the message


def check_site_dir(site_dir: Path, project: Path, runs_dir: Path) -> None:
    """The site directory gets data/, static/, build/ and public/: never inside the runs or the
    project's own sources."""
    if site_dir.exists() and not site_dir.is_dir():
        raise TunepathError(f"--site-dir {site_dir} is a file, not a directory")
    inside = [runs_dir.resolve(), *(project / name for name in (*SITE_SOURCES, "notebooks", "scripts", "runs"))]
    for place in inside:
        if site_dir.is_relative_to(place):
            raise TunepathError(f"--site-dir {site_dir} lies inside {place}, which the build reads: give the "
                                "project itself or a directory of its own")


def check_destination(dest: Path, site_dir: Path, project: Path, runs_dir: Path) -> None:
    """Hugo's output replaces ``dest`` as a whole: it must hold nothing but an earlier site. The
    project's own ``public/`` is its own (:func:`check_foreign_files` checks another site
    directory's)."""
    for what, path in (("the site directory", site_dir), ("the project", project), ("the runs", runs_dir)):
        if path.resolve().is_relative_to(dest):
            raise TunepathError(f"--destination {dest} would replace {what} ({path}): give a directory "
                                "of its own, such as SITE/public")
    if dest.is_relative_to(runs_dir.resolve()):
        raise TunepathError(f"--destination {dest} lies inside the recorded runs ({runs_dir}): give a "
                            "directory of its own, such as SITE/public")
    if dest.exists() and not dest.is_dir():
        raise TunepathError(f"--destination {dest} is a file, not a directory")
    if dest != site_dir / "public" and _foreign_output(dest):
        raise TunepathError(f"--destination {dest} holds files no tunepath build wrote, and the build "
                            "would replace all of them: give a new or empty directory")


def _foreign_output(dest: Path) -> list[str]:
    """The entries of a Hugo output directory when it holds files but no :data:`SITE_MARK`."""
    if not dest.is_dir() or (dest / SITE_MARK).is_file():
        return []
    return sorted(p.name for p in dest.iterdir())


def check_foreign_files(site_dir: Path, project: Path, public: bool) -> None:
    """A site directory other than the project holds no file a build did not write where a build
    writes (:data:`PUBLISHED_ROOTS`, and ``public/`` when the build's Hugo output goes there)."""
    if site_dir == project:
        return
    found = [] if _made_before_marks(site_dir) else _foreign(site_dir)
    if public:
        found += [f"public/{name}" for name in _foreign_output(site_dir / "public")]
    if found:
        more = f", and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        raise TunepathError(f"--site-dir {site_dir} holds files no tunepath build wrote ({', '.join(found[:SHOWN])}"
                            f"{more}), which a build into it would replace or publish: move them out of "
                            f"{site_dir}, or give a new or empty directory (or the project itself)")


def _made_before_marks(site_dir: Path) -> bool:
    """A site directory a build published into before site directories were marked."""
    return _listed(site_dir) is None and (site_dir / "build" / "last-build.json").is_file()


def _foreign(site_dir: Path) -> list[str]:
    ours = _listed(site_dir) or set()
    return [rel for rel in _files(site_dir) if rel not in ours]


def _files(root: Path) -> list[str]:
    """Every file and symbolic link in :data:`PUBLISHED_ROOTS` under ``root``, relative to it; what a
    build killed while publishing set aside (``*.tunepath-old``) is its own, not listed."""
    out = []
    for top in PUBLISHED_ROOTS:
        path = root / top
        if path.is_symlink() or path.is_file():
            out.append(top)
            continue
        for here, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.endswith(OLD)]
            rel = Path(here).relative_to(root)
            out += [(rel / name).as_posix() for name in files if not name.endswith(OLD)]
            out += [(rel / name).as_posix() for name in dirs if (Path(here) / name).is_symlink()]
    return sorted(out)


def _listed(site_dir: Path) -> set[str] | None:
    """The files the site directory's mark lists; None when there is no mark, or it is damaged."""
    try:
        with open(os.open(site_dir / SITE_MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            files = json.loads(f.read(MARK_MAX_BYTES).decode("utf-8"))["files"]
    except (OSError, ValueError, LookupError, TypeError, RecursionError):
        return None
    return {f for f in files if isinstance(f, str)} if isinstance(files, list) else None


def record_site_files(site_dir: Path, *also: Path) -> None:
    """Mark ``site_dir`` (not the project) as a build's: list the files in its
    :data:`PUBLISHED_ROOTS`, and those in the same places under each of ``also`` (a staging
    directory about to be published), with the files the mark listed already."""
    files = (_listed(site_dir) or set()) if also else set()
    for root in (site_dir, *also):
        files.update(_files(root))
    text = json.dumps({"written_by": "tunepath build: the files a build published in this site directory "
                                     f"({', '.join(PUBLISHED_ROOTS)}); it replaces them",
                       "files": sorted(files)}, indent=1) + "\n"
    write_files([(site_dir / SITE_MARK, text)], "tunepath build")
