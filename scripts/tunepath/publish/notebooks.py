"""The step notebooks: one template, one parameter builder, one Papermill call site.

:func:`render` writes a step's notebook from the template: a title and the step's own
narrative (``Step.why``), the parameters cell Papermill fills in, the few
:mod:`tunepath.pipeline` calls every step makes, and the step's extra cells
(``Step.notebook_cells``). ``tunepath notebooks`` writes them all into ``notebooks/``, named
by the registry's order (``NN-<name>.ipynb``) and marked (:data:`MARK`, kept by Jupyter on
save), and removes the marked numbered notebooks no step owns any more (a user's unmarked
``01-my-analysis.ipynb`` stays, named in one line); ``tunepath notebooks --check`` (and a
test) fails when a committed notebook differs from its rendering.

:func:`parameters` is what every execution passes (the replay build and a live run
alike), and :func:`execute` the only place Papermill is called.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import stat
import sys
import textwrap
import threading
from contextlib import contextmanager
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.publish.interrupt import INTERRUPT_GRACE_S, Kernels, interruptible, running
from tunepath.publish.writefiles import holds, write_files
from tunepath.project import project_dir
from tunepath.settings import LIVE, NOTEBOOK, literal

__all__ = ["render", "write_all", "check_all", "generated", "MARK", "parameters", "relative", "execute",
           "quiet_kernel_manager", "quiet_papermill"]

MODES_NOTE = ("Run it as it is (JupyterLab's Run All, `scripts/notebook` opens it) to replay the recorded runs: "
              "it parses the load generator's raw output from every selected run, draws one chart per run (a run "
              "is one server and one client: runs from different hosts are never one series) and writes the data "
              "the page shows. Set `mode = \"live\"` (and `hosts_file`, or leave it `None` for this machine) to run "
              "this one step on your hosts first: that records a new run of it under `runs/`, restores the hosts "
              "afterwards, and shows the new run's table and charts. `scripts/build` replays every notebook; "
              "`scripts/run` runs them all live.")
ANALYSIS_NOTE = ("This notebook is executed by Papermill: `scripts/build` runs it over the recorded runs; it "
                 "runs nothing on any host.")
PARAMETERS_NOTE = ("# PARAMETERS: edit them here, or give them to Papermill (-p NAME VALUE), which puts its\n"
                   "# values in a cell after this one.")
LIVE_NOTE = ("# LIVE MODE ONLY: the options of `tunepath run`, with the same meanings (`tunepath run --help`\n"
             "# names the option of each).")
WRAP = 100
NUMBERED = re.compile(r"^\d{2}-[a-z0-9-]+\.ipynb$")
MARK = {"generated": True}       # metadata.tunepath of every notebook render() writes


def _cell(kind: str, source: str, cell_id: str, tags: tuple[str, ...] = ()) -> dict:
    cell = {"cell_type": kind, "id": cell_id, "metadata": {"tags": list(tags)} if tags else {},
            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _rows(rows: list[tuple[str, str, str]]) -> list[str]:
    """Each parameter as ``name = value`` under its meaning (a comment, wrapped)."""
    lines = []
    for name, value, comment in rows:
        lines += [f"# {line}" for line in textwrap.wrap(comment, WRAP - 2)] + [f"{name} = {value}"]
    return lines


def _parameters_cell(step) -> str:
    """The parameters Papermill fills in, from :mod:`tunepath.settings` (the same names, defaults and
    meanings as ``tunepath run``'s options) and the step's own (``Step.notebook_parameters``)."""
    own = [(s.name, literal(s.default), s.help) for s in NOTEBOOK]
    live = [(s.name, literal(s.default), s.help) for s in LIVE] if step.live else []
    extra = list(step.notebook_parameters)
    cell = [PARAMETERS_NOTE, "", *_rows(own)]
    if live:
        cell += ["", LIVE_NOTE, "", *_rows(live)]
    if extra:
        cell += ["", "# THIS STEP'S OWN", "", *_rows(extra)]
    return "\n".join(cell)


def _step_call(step) -> str:
    return ("from tunepath import pipeline\n\n"
            "# every parameter above, by its name\n"
            f"result = pipeline.step(\"{step.name}\", **pipeline.parameters(globals()))\n"
            "pipeline.table(result)")


def _sections(step) -> list[tuple[str, str]]:
    cells = list(step.notebook_cells)
    if step.live:
        cells += [("markdown", "## Noise flags\n\nWhat may have disturbed each measurement (CPU steal, other load, "
                               "a saturated client, errors)."),
                  ("code", "pipeline.flags(result)"),
                  ("markdown", "## The commands\n\nThe exact commands of this step, rendered for each run's hosts. "
                               "The page prints the same blocks from the data this notebook writes."),
                  ("code", "pipeline.show_commands(result)")]
    cells += [("markdown", "## Charts"),
              ("code", "charts = pipeline.draw_charts(result, site_dir)\npipeline.show_charts(result, charts)"),
              ("markdown", f"## Publish\n\nIn replay mode, writes `{step.data_file}` for Hugo. In live mode the "
                           "measurements are already in the recorded run: this cell prints the command that rebuilds "
                           "the site with it."),
              ("code", "pipeline.publish(result, charts, site_dir, mode)")]
    return cells


def render(step) -> str:
    """The notebook of ``step`` (a step object), as the JSON text written to disk."""
    intro = f"# Step {step.number}: {step.title}\n\n{step.why}\n\n{MODES_NOTE if step.live else ANALYSIS_NOTE}"
    cells = [("markdown", intro), ("code", _parameters_cell(step)), ("code", _step_call(step)), *_sections(step)]
    nb = {"cells": [_cell(kind, source, f"{step.name}-{i}", ("parameters",) if i == 1 else ())
                    for i, (kind, source) in enumerate(cells)],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}, "tunepath": MARK},
          "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _stale(notebooks_dir: Path, registry) -> list[Path]:
    """Numbered notebooks in ``notebooks_dir`` that no step of ``registry`` owns."""
    owned = {s.notebook for s in registry}
    return [p for p in sorted(Path(notebooks_dir).glob("*.ipynb")) if NUMBERED.match(p.name) and p.name not in owned]


def generated(path: Path) -> bool:
    """``path`` is a regular file (not a symlink) whose notebook metadata carries :data:`MARK`."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            meta = json.loads(f.read(64 << 20) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else b"")
        return meta["metadata"]["tunepath"] == MARK
    except (OSError, ValueError, LookupError, TypeError, RecursionError):
        return False


def _not_ours(path: Path) -> str:
    return (f"{path.name} belongs to no step but has no tunepath mark (`tunepath notebooks` did not write it): "
            f"left in {path.parent}, not removed; if it is yours, rename it without the NN- prefix or move it, else "
            "delete it")


def write_all(notebooks_dir: Path, registry) -> list[str]:
    """Write every step's notebook that differs from its rendering, all or none (:func:`write_files`);
    remove the numbered notebooks no step owns that this command wrote (:func:`generated`), and name
    the others. Returns what changed, one line each."""
    notebooks_dir = Path(notebooks_dir)
    todo = [(notebooks_dir / step.notebook, render(step)) for step in registry]
    todo = [(path, text) for path, text in todo if not holds(path, text)]
    if todo:
        notebooks_dir.mkdir(parents=True, exist_ok=True)
        write_files(todo, "tunepath notebooks")
    changed = [f"wrote {path.name}" for path, _ in todo]
    for path in _stale(notebooks_dir, registry):
        if generated(path):
            path.unlink()
            changed.append(f"removed {path.name} (no step owns it)")
        else:
            changed.append(_not_ours(path))
    return changed


def check_all(notebooks_dir: Path, registry) -> list[str]:
    """What differs between ``notebooks_dir`` and the registry's renderings (empty: nothing)."""
    notebooks_dir, problems = Path(notebooks_dir), []
    for step in registry:
        path = notebooks_dir / step.notebook
        if not path.is_file():
            problems.append(f"{path.name} is missing (step {step.name})")
        elif not holds(path, render(step)):
            problems.append(f"{path.name} differs from the template's rendering of step {step.name}")
    return problems + [f"{p.name} belongs to no step" if generated(p) else _not_ours(p)
                       for p in _stale(notebooks_dir, registry)]


def parameters(mode: str, runs_dir: Path, site_dir: Path, run_ids: list[str] | None = None, *,
               cwd: Path | None = None, **live) -> dict:
    """The Papermill parameters of a step's notebook (part of the replay build's cache key): the
    notebook's own and the live settings given in ``live`` (names of :data:`tunepath.settings.LIVE`).

    ``runs_dir`` and ``site_dir`` are given relative to ``cwd``, the directory the kernel runs
    in: :func:`execute` runs it in the notebook's own directory, by default the project's
    ``notebooks/``. Papermill prints the parameters into the executed notebooks, which are
    published, and a path of the machine that built them has no place there."""
    unknown = sorted(set(live) - {s.name for s in LIVE})
    if unknown:
        raise TypeError(f"not live settings: {', '.join(unknown)}")
    base = Path(cwd) if cwd is not None else project_dir() / "notebooks"
    return {"mode": mode, "run_ids": list(run_ids or []), "runs_dir": relative(runs_dir, base),
            "site_dir": relative(site_dir, base), **live}


def relative(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` (both resolved), in POSIX form: ``../runs``, ``.``."""
    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def quiet_kernel_manager(log_path: str | None, cwd: str | None = None, env: dict | None = None,
                         preloaded=None, started: Kernels | None = None):
    """A kernel manager whose kernel writes its stderr to ``log_path``, not the terminal.

    ipykernel 7 warns on every start that its TCP transport is unencrypted (the kernel
    listens on 127.0.0.1 only); a build's output should show progress, not that. The kernel
    starts in ``cwd`` (given to the kernel itself: Papermill's own ``cwd`` changes the whole
    process's directory, which notebooks executing side by side in threads must not do),
    with ``env`` added to this process's environment. With ``preloaded`` (a
    :class:`tunepath.publish.kernels.Preloaded`) the kernel is forked from the build's
    preloading process where it can be. The pid of each kernel it starts is added to
    ``started`` (:func:`execute` interrupts it on a Ctrl-C; once interrupted, a kernel is shut down
    at once, not gracefully).
    """
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kw):
            if started is not None and started.interrupted:    # a Ctrl-C came first: no kernel to start
                raise TunepathError("interrupted before the notebook's kernel started")
            if cwd is not None:
                kw.setdefault("cwd", cwd)
            if env:
                kw["env"] = {**kw.get("env", os.environ), **env}
            if not log_path:
                return await super().start_kernel(**kw)
            with open(log_path, "ab") as log:   # the kernel keeps its own copy of the fd
                kw.setdefault("stderr", log)
                return await super().start_kernel(**kw)

        async def shutdown_kernel(self, now: bool = False, restart: bool = False):
            # after a Ctrl-C the kernel's cell has ended (its step put the server back): no
            # graceful half second to wait for
            return await super().shutdown_kernel(now=now or bool(started and started.interrupted), restart=restart)

        async def _async_launch_kernel(self, kernel_cmd, **kw):   # jupyter_client's hook for this
            forked = preloaded.fork(kernel_cmd, kw, log_path) if preloaded is not None else None
            if forked is None:
                await super()._async_launch_kernel(kernel_cmd, **kw)
            else:
                provisioner = self.provisioner
                provisioner.process, provisioner.pid, provisioner.pgid = forked, forked.pid, forked.pid
                provisioner.cwd = kw.get("cwd")
                self._reconcile_connection_info(provisioner.connection_info)
            if started is not None and getattr(self.provisioner, "pid", None):
                started.pids.append(self.provisioner.pid)

    return QuietKernelManager


_QUIET = threading.Lock()
_QUIET_STATE = {"running": 0, "level": logging.NOTSET}


@contextmanager
def quiet_papermill():
    """Papermill's logger (nbclient logs through it) at CRITICAL while any execution runs: failures
    become one line (:func:`execute`). Counted, so executions side by side restore it once, when
    the last one ends."""
    log = logging.getLogger("papermill")
    with _QUIET:
        if _QUIET_STATE["running"] == 0:
            _QUIET_STATE["level"] = log.level
            log.setLevel(logging.CRITICAL)
        _QUIET_STATE["running"] += 1
    try:
        yield
    finally:
        with _QUIET:
            _QUIET_STATE["running"] -= 1
            if _QUIET_STATE["running"] == 0:
                log.setLevel(_QUIET_STATE["level"])


def execute(source: Path, output: Path, params: dict, *, log_path: Path, what: str, echo: bool = False,
            env: dict | None = None, save_cells: bool = True, preloaded=None) -> Path:
    """Execute one notebook with Papermill; a failure is one sentence naming the cell and the kept output.

    ``echo`` streams the notebook's printed output (a live run's progress) to this terminal.
    ``env``: environment variables for the kernel besides this process's. ``save_cells``:
    write the executed notebook after every cell (a live run, so an interrupted one keeps
    what ran), not only at the end and on failure (the replay build). ``preloaded``: fork
    the kernel from the replay build's preloading process (:mod:`tunepath.publish.kernels`).
    Safe to call from several threads at once.

    Called in the main thread, Papermill runs in a thread of its own, so that a Ctrl-C reaches
    this process at once (nbclient, in the main thread, would take SIGINT for itself and only ask
    the busy kernel to shut down): the Ctrl-C is passed on to the kernel, which stops its cell and
    puts back what the cell changed (a live step's guard restores the server), and is raised here
    once the kernel's cell has ended, or after :data:`INTERRUPT_GRACE_S` seconds. A Ctrl-C
    meanwhile says so and waits on; a third one stops waiting."""
    call = functools.partial(_execute, source, output, params, log_path=log_path, what=what, echo=echo, env=env,
                             save_cells=save_cells, preloaded=preloaded)
    if Path(source).is_file() and threading.current_thread() is threading.main_thread():
        kernels = Kernels()
        return interruptible(functools.partial(call, started=kernels), kernels, what)
    with running(Kernels()) as kernels:      # a build's: a Ctrl-C in its main thread ends them (end_running)
        return call(started=kernels)


def _execute(source: Path, output: Path, params: dict, *, log_path: Path, what: str, echo: bool,
             env: dict | None, save_cells: bool, preloaded, started: Kernels | None = None) -> Path:
    import papermill
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    if not Path(source).is_file():
        raise TunepathError(f"{what}: notebook {source} is missing (run `tunepath notebooks` to write it)")
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    manager = quiet_kernel_manager(str(log_path), cwd=str(Path(source).parent.resolve()), env=env,
                                   preloaded=preloaded, started=started)
    try:
        with quiet_papermill():
            papermill.execute_notebook(str(Path(source).resolve()), str(Path(output).resolve()), parameters=params,
                                       kernel_name="python3", progress_bar=False, log_output=False,
                                       request_save_on_cell_execute=save_cells, kernel_manager_class=manager,
                                       **({"stdout_file": sys.stdout} if echo else {}))
    except PapermillExecutionError as exc:
        raise TunepathError(f"{what}: notebook {Path(source).name} failed in cell {exc.exec_count}: "
                            f"{exc.ename}: {exc.evalue.strip()} (the executed notebook is kept at {output})") from None
    except (DeadKernelError, CellTimeoutError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TunepathError(f"{what}: notebook {Path(source).name}: the kernel stopped ({first}); its stderr is "
                            f"in {log_path}") from None
    finally:
        _relative_paths(Path(output), Path(source).parent)
    return Path(output)


def _relative_paths(output: Path, cwd: Path) -> None:
    """Papermill records where it read and wrote the notebook (``metadata.papermill``) as given:
    rewrite both relative to the kernel's directory, as the parameters are."""
    import nbformat

    try:
        nb = nbformat.read(str(output), as_version=4)
        meta = nb.metadata.papermill
    except (OSError, ValueError, AttributeError):
        return                       # no executed notebook (Papermill failed before writing it)
    for key in ("input_path", "output_path"):
        if isinstance(meta.get(key), str):
            meta[key] = relative(meta[key], cwd)
    tmp = output.with_name(f".{output.name}.tmp")
    nbformat.write(nb, str(tmp))
    os.replace(tmp, output)
