"""Where a case runs: a fresh temporary directory, its own HOME and TMPDIR, and, for the commands
that need a project, a copy of the project's pieces with the runs the case names.

Every case sets ``TUNEPATH_PROJECT``: to its copy of the project, or to a path that holds none,
so that a command looking for the project stops in one line instead of finding the checkout the
package was imported from. Nothing here writes outside the case's directory.

:func:`refuse_unsafe` keeps the census off this machine's state: ``tunepath run`` only with
``--check-options``, ``restore`` only with an inventory (the census's point at a closed port),
``lab`` only ``status``, and ``build`` only into a ``--site-dir`` of the case.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from harness import ROOT
from harness.census.case import TMP, Case

__all__ = ["PROJECT_PIECES", "RUNS", "ALL_RUNS", "make_project", "environment", "refuse_unsafe", "python"]

# what a command that reads the project needs of it (no scripts/: the package comes from PYTHONPATH)
PROJECT_PIECES = ("config.toml", "content", "layouts", "static", "data", "notebooks")
RUNS = ROOT / "runs"
ALL_RUNS = ("*",)                  # a case's ``project``: every recorded run (a whole build needs them)
NO_PROJECT = "no-project"          # TUNEPATH_PROJECT for cases without a project: a path that is none


def python() -> str:
    """The Python that runs ``tunepath``: the one running the census."""
    return sys.executable


def make_project(tmp: Path, runs: tuple[str, ...]) -> Path:
    """``tmp/project``: a copy of :data:`PROJECT_PIECES` and of the named runs (``runs/`` empty if
    none, every run of the checkout for :data:`ALL_RUNS`)."""
    project = tmp / "project"
    project.mkdir()
    for piece in PROJECT_PIECES:
        src = ROOT / piece
        if src.is_dir():
            shutil.copytree(src, project / piece, symlinks=True)
        elif src.is_file():
            shutil.copy2(src, project / piece)
    if runs == ALL_RUNS:
        shutil.copytree(RUNS, project / "runs", symlinks=True, ignore=shutil.ignore_patterns(".inprogress"))
        return project
    (project / "runs").mkdir()
    for run_id in runs:
        shutil.copytree(RUNS / run_id, project / "runs" / run_id, symlinks=True)
    return project


def environment(tmp: Path, project: Path | None) -> dict[str, str]:
    """The command's environment: nothing of the caller's but what locates Python and the locale."""
    (tmp / "home").mkdir(exist_ok=True)
    (tmp / "tmp").mkdir(exist_ok=True)
    bin_dir = str(Path(python()).parent)
    return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(ROOT / "scripts"),
            "HOME": str(tmp / "home"), "TMPDIR": str(tmp / "tmp"), "LANG": "C.UTF-8",
            "TUNEPATH_PROJECT": str(project if project is not None else tmp / NO_PROJECT),
            "PYTHONDONTWRITEBYTECODE": "1"}


def refuse_unsafe(case: Case) -> None:
    """Raise ValueError for a case that could act on this machine or on the checkout."""
    argv = case.argv
    command = argv[0] if argv else ""
    if command == "run" and "--check-options" not in argv:
        raise ValueError(f"{case.name}: `tunepath run` only with --check-options (it would run live here)")
    if command == "restore" and "--hosts" not in argv:
        raise ValueError(f"{case.name}: `tunepath restore` only with --hosts (it would restore this machine)")
    if command == "lab" and (len(argv) < 2 or argv[1] != "status"):
        raise ValueError(f"{case.name}: `tunepath lab` only for status")
    if command == "build" and not any(a.startswith(TMP) for a in _after(argv, "--site-dir")):
        raise ValueError(f"{case.name}: `tunepath build` only into a --site-dir of the case")
    if any(str(ROOT) in a for a in argv):
        raise ValueError(f"{case.name}: an argument names the checkout ({ROOT})")


def _after(argv: tuple[str, ...], option: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == option]

