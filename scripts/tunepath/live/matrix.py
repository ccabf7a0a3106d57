"""``tunepath run --matrix tomcat=11.0.A,11.0.B java=17,21,25``: one recorded run per cell.

A matrix crosses its axes (Tomcat releases, Java releases) into cells. Every cell is one ordinary
live run with the same hosts, profile and steps; only its ``--tomcat-version`` (with that release's
tarball, fetched with Maven and checked against ``versions.py``, and its own ``~/apache-tomcat-<version>``)
and its ``--java`` (the pinned JDK, installed on the server) differ. The run's facts name the
versions it ran: Tomcat's ``version.sh`` and ``java -version``.

A cell that fails (a JDK with no build for the server's architecture, a Tomcat that does not start)
is recorded as failed where it got that far, named in one line, and the next cell starts. A Ctrl-C
stops the matrix: the cell's own run puts the hosts back first. The site is rebuilt once, at the end.
Progress lines carry the cell (``TUNEPATH_PROGRESS``, which the step kernels inherit).

Each recorded cell's ``run.json`` then gets ``matrix`` (:class:`tunepath.model.run.MatrixCell`:
the matrix's id, the cell's place, its versions), once its facts are checked against the cell
(:func:`mark_cell`). The pages read it: the history page is the matrix's, the summary names it
in one line, and each step page's run heading names the cell.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.amend import amend
from tunepath.evidence.store import RunStore
from tunepath.live.session import PROGRESS_ENV, progress
from tunepath.live.tomcatfetch import fetch
from tunepath.model.run import Cell, MatrixCell
from tunepath.parse.java import java_major

__all__ = ["Cell", "CellOutcome", "parse_matrix", "check_matrix", "run_matrix", "mark_cell", "cell_mismatch"]

AXES = ("tomcat", "java")


@dataclass(frozen=True)
class CellOutcome:
    cell: Cell
    run: str | None          # the run's directory name, where one was recorded
    error: str | None        # one line; None: the run completed
    seconds: float


def parse_matrix(items: list[str]) -> list[Cell]:
    """``["tomcat=11.0.10,11.0.24", "java=17,21"]`` → the cells, Tomcat varying slowest."""
    axes: dict[str, list] = {}
    for item in items:
        axis, sep, values = item.partition("=")
        axis = axis.strip().lower()
        if not sep or axis not in AXES:
            raise TunepathError(f"--matrix {item}: give AXIS=V1,V2,… with AXIS one of {', '.join(AXES)} "
                                "(e.g. tomcat=11.0.10,11.0.24 java=17,21,25)")
        if axis in axes:
            raise TunepathError(f"--matrix: {axis} is given twice; list all its values once, comma-separated")
        listed = [v.strip() for v in values.split(",") if v.strip()]
        if not listed:
            raise TunepathError(f"--matrix {item}: no values; list them comma-separated")
        if len(set(listed)) != len(listed):
            raise TunepathError(f"--matrix {item}: a value is listed twice")
        if axis == "java":
            if not all(v.isdigit() for v in listed):
                raise TunepathError(f"--matrix {item}: Java releases are whole numbers, such as 17,21,25")
            listed = [int(v) for v in listed]
        axes[axis] = listed
    if not axes:
        raise TunepathError("--matrix: give at least one axis, such as tomcat=11.0.10,11.0.24 or java=17,21,25")
    tomcats, javas = axes.get("tomcat", [None]), axes.get("java", [None])
    return [Cell(t, j) for t, j in itertools.product(tomcats, javas)]


def cell_options(options, cell: Cell, tarball: Path | None):
    """The options of ``cell``'s run: the run's own, with the cell's Tomcat (its tarball and its own
    directory) and its Java."""
    changed = {}
    if cell.tomcat is not None:
        changed.update(tomcat_version=cell.tomcat, tomcat_home=None, tomcat_url=None,
                       tomcat_tarball=str(tarball) if tarball else None)
    if cell.java is not None:
        changed.update(java=cell.java, java_home=None)
    return replace(options, **changed)


def check_matrix(options, given: set[str], cells: list[Cell]) -> None:
    """What each cell sets may not also be given once for all: say which option to leave out.
    Each cell's options are then checked as a run's are (its Tomcat pinned, its Java pinned)."""
    clashes = []
    if cells[0].tomcat is not None:
        clashes += [f for f in ("tomcat_version", "tomcat_home", "tomcat_tarball", "tomcat_url") if f in given]
    if cells[0].java is not None:
        clashes += [f for f in ("java", "java_home") if f in given]
    if clashes:
        flags = ", ".join("--" + f.replace("_", "-") for f in clashes)
        raise TunepathError(f"--matrix sets each cell's {' and '.join(a for a in AXES if getattr(cells[0], a) is not None)}"
                            f": leave out {flags}")
    for cell in cells:
        try:
            cell_options(options, cell, None).check()
        except TunepathError as exc:
            raise TunepathError(f"--matrix cell {cell.label}: {exc}") from None


def run_matrix(options, cells: list[Cell], run_one, cache: Path, build=None) -> list[CellOutcome]:
    """Record one run per cell with ``run_one(options) -> run directory`` (``run_path`` without its
    rebuild), then ``build()`` once if any cell recorded a run. Prints a line per cell as it ends and
    a summary; returns each cell's outcome."""
    outcomes: list[CellOutcome] = []
    started, before = time.monotonic(), os.environ.get(PROGRESS_ENV)
    matrix = f"matrix-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}"
    try:
        for i, cell in enumerate(cells, 1):
            os.environ[PROGRESS_ENV] = f"cell {i}/{len(cells)} {cell.label}"
            done = time.monotonic() - started
            left = f", about {done / (i - 1) * (len(cells) - i + 1) / 60:.0f} min left" if i > 1 else ""
            progress(f"starting (matrix elapsed {done / 60:.0f} min{left})")
            t0 = time.monotonic()
            try:
                tarball = fetch(cell.tomcat, cache) if cell.tomcat is not None else None
                path = Path(run_one(cell_options(options, cell, tarball)))
                run = path.name
                mark_cell(RunStore(path.parent), run, MatrixCell(matrix, i, len(cells), cell))
                outcomes.append(CellOutcome(cell, run, None, time.monotonic() - t0))
                progress(f"recorded {run} in {(time.monotonic() - t0) / 60:.1f} min")
            except TunepathError as exc:
                line = " ".join(str(exc).split())
                outcomes.append(CellOutcome(cell, None, line, time.monotonic() - t0))
                progress(f"FAILED: {line}")
    finally:
        if before is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = before
    print(summary(outcomes), flush=True)
    if build is not None and any(o.error is None for o in outcomes):
        build()
    return outcomes


def cell_mismatch(cell: Cell, server_facts: dict) -> str | None:
    """Where a run's server facts (Tomcat's ``version.sh``, ``java -version``) disagree with the
    cell it was recorded for, what they say; None where they agree."""
    tomcat, java = server_facts.get("tomcat_version"), java_major(server_facts.get("java_version") or "")
    if cell.tomcat is not None and tomcat != cell.tomcat:
        return f"the server ran Tomcat {tomcat or '(version not recorded)'}, not {cell.tomcat}"
    if cell.java is not None and java != cell.java:
        return f"the server ran Java {java or '(version not recorded)'}, not {cell.java}"
    return None


def mark_cell(store: RunStore, run_id: str, cell: MatrixCell) -> Path:
    """Write ``cell`` into the recorded run's ``run.json`` (``matrix``), after checking that the
    run's facts name the cell's versions: a run that ran other versions is not its cell."""
    wrong = cell_mismatch(cell.cell, store.load(run_id).server.facts)
    if wrong:
        raise TunepathError(f"run {run_id} was recorded for the matrix cell {cell.words}, but {wrong}: it is "
                            "kept, not marked as that cell; check the server's JAVA_HOME and Tomcat directory")
    return amend(store, run_id, "matrix", cell.to_data())


def summary(outcomes: list[CellOutcome]) -> str:
    """The matrix in a few lines: how many cells recorded, then one line per failed cell."""
    ok = [o for o in outcomes if o.error is None]
    lines = [f"matrix: {len(ok)} of {len(outcomes)} cells recorded"
             + (f" ({', '.join(o.run for o in ok)})" if ok else "")]
    lines += [f"matrix: cell {o.cell.label} failed: {o.error}" for o in outcomes if o.error is not None]
    return "\n".join(lines)


def matrix_command(options, given: set[str], items: list[str], steps, runs_dir: Path | None,
                   site_dir: Path | None, build: bool, check_only: bool) -> int:
    """``tunepath run --matrix …``: check every cell's options first (nothing connects before all
    pass), then record the cells and rebuild once. Exit status 1 if a cell failed."""
    from tunepath.live.runner import check_run, run_path
    from tunepath.project import project_dir

    cells = parse_matrix(items)
    check_matrix(options, given, cells)
    chosen = check_run(options, steps, runs_dir, site_dir if build else None)
    if check_only:
        print(f"options are valid: a matrix of {len(cells)} cells ({'; '.join(c.label for c in cells)}); steps "
              f"{', '.join(s.name for s in chosen)}; profile {options.profile}")
        return 0

    def rebuild() -> None:
        from tunepath.publish.build import build_site

        build_site(site_dir=site_dir or project_dir(), runs_dir=runs_dir)

    outcomes = run_matrix(options, cells, lambda o: run_path(o, steps=steps, runs_dir=runs_dir, build=False),
                          project_dir() / ".cache", rebuild if build else None)
    return 0 if all(o.error is None for o in outcomes) else 1
