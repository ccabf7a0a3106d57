"""``tunepath run``: record a new live run by executing the step notebooks, then rebuild.

The runner checks its options first (:func:`check_run`: ranges, steps, the inventory), so a
bad option connects to nothing. It then connects to the hosts (host keys checked: a refused
key writes nothing), takes the server's lock, records host facts, then executes each step's
notebook with Papermill in ``mode="live"``: the notebook gets the run id, the profile and
the apply flags, never the run's paths, URLs or inventory (those stay in a 0600 side file
beside the run). Executed notebooks are kept inside the run, masked like the rest of it.
If a step fails or the run is interrupted, the runner ends what was started (load
generator, Tomcat), restores ``server.xml`` and the host's changed state, records the run
as failed with the error, releases the lock, and leaves the published site untouched.
Only a run that completes triggers the site rebuild.
"""

from __future__ import annotations

import time
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.project import project_dir
from tunepath.publish import notebooks
from tunepath.steps import REGISTRY

__all__ = ["run_path", "check_run", "select_steps", "abort_run", "restore_host", "LIVE_STEPS"]

LIVE_STEPS = [s.name for s in REGISTRY.live_steps()]   # the others only read runs: the rebuild makes them


def _execute_notebook(step, recorder, runs_dir: Path, options, notebooks_dir: Path) -> Path:
    """Execute ``step``'s notebook in live mode; the executed notebook is kept inside the run.

    Its parameters name the run, never its options: the step's session reads them from the
    run's side file (:func:`tunepath.live.session.load_options`)."""
    from tunepath.live.session import side_file, write_private

    out = recorder.dir / "notebooks" / step.notebook
    params = notebooks.parameters("live", runs_dir, recorder.dir, [recorder.run_id], profile=options.profile,
                                  apply=options.apply, allow_reboot=options.allow_reboot)
    log = side_file(runs_dir, recorder.run_id, ".kernel-stderr.log")
    if not log.exists():
        write_private(log, "")
    try:
        return notebooks.execute(notebooks_dir / step.notebook, out, params, what=f"step {step.name!r}",
                                 log_path=log, echo=True)
    finally:
        _mask_file(out, recorder)


def _mask_file(path: Path, recorder) -> None:
    """Executed notebooks print commands and outputs: mask machine paths (and host names) there too."""
    from tunepath.evidence.recorder import mask_file

    if path.is_file() and recorder.mask.pairs:
        mask_file(path, recorder.mask)


def select_steps(names: list[str] | None) -> list:
    """The live steps to run, in the path's order: ``names`` must be known, and at least one of
    them must run live (a selection of analysis steps alone would record an empty run)."""
    if names is None:
        return list(REGISTRY.live_steps())
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise TunepathError("--steps is empty: name one or more steps, comma-separated, or leave it out for all")
    for n in names:
        REGISTRY.get(n)
    chosen = [s for s in REGISTRY.live_steps() if s.name in names]
    if not chosen:
        raise TunepathError(f"--steps {','.join(names)}: measures nothing (these steps only read recorded runs; "
                            f"the rebuild makes them); choose among the live steps: {', '.join(LIVE_STEPS)}")
    return chosen


def check_run(options, steps: list[str] | None = None, runs_dir: Path | None = None,
              site_dir: Path | None = None):
    """Everything ``run_path`` can check before it connects, locks, installs or writes: the
    options (:func:`tunepath.live.session.validate`, which loads the inventory), the steps, and
    the directories. Returns the chosen steps."""
    from tunepath.live.session import validate

    chosen = select_steps(steps)
    validate(options)
    for flag, d in (("--runs-dir", runs_dir), ("--site-dir", site_dir)):
        if d is not None and Path(d).exists() and not Path(d).is_dir():
            raise TunepathError(f"{flag} {d}: is a file, not a directory")
    return chosen


def run_path(options, steps: list[str] | None = None, runs_dir: Path | None = None,
             build: bool = True, site_dir: Path | None = None) -> Path:
    """Record a live run of ``steps`` (default: all) and rebuild the site; returns the run dir."""
    from tunepath.live.session import progress
    from tunepath.live.start import clear_stale_side_files, forget_side_files, start_run

    project = project_dir()
    runs_dir = Path(runs_dir or project / "runs")
    chosen = check_run(options, steps, runs_dir, site_dir if build else None)   # in the path's order
    names = [s.name for s in chosen]
    for dead in clear_stale_side_files(runs_dir):
        progress(f"run {dead} ended without closing (its process is gone): its side files are removed; its "
                 f"partial record stays in {runs_dir / '.inprogress' / dead}; if the server still holds its "
                 "lock, run `tunepath restore --force`")
    started = time.monotonic()
    recorder, inventory = start_run(runs_dir, options, names)
    try:
        return _record(recorder, inventory, chosen, runs_dir, options, started, build, site_dir or project)
    finally:
        forget_side_files(runs_dir, recorder.run_id)      # every exit path: end, failure, interrupt


def _record(recorder, inventory, chosen, runs_dir: Path, options, started: float, build: bool,
            site_dir: Path) -> Path:
    """Execute each chosen step's notebook; end the run (complete or failed); rebuild the site."""
    from tunepath.live.session import progress
    from tunepath.publish.build import build_site

    project = project_dir()
    names = [s.name for s in chosen]
    run_id = recorder.run_id
    progress(f"run {run_id}: server {inventory.server.label}, client(s) "
             f"{', '.join(c.label for c in inventory.clients)}, profile {options.profile}"
             f"{', apply' if options.apply else ', dry-run for disruptive steps'}")
    try:
        for i, step in enumerate(chosen, 1):
            t0 = time.monotonic()
            done = time.monotonic() - started
            progress(f"[{i}/{len(names)}] {step.name}: starting (elapsed {done:.0f} s"
                     + (f", about {done / (i - 1) * (len(names) - i + 1):.0f} s left)" if i > 1 else ")"))
            _execute_notebook(step, recorder, runs_dir, options, project / "notebooks")
            progress(f"[{i}/{len(names)}] {step.name}: done in {time.monotonic() - t0:.0f} s")
    except BaseException as exc:
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        path = abort_run(runs_dir, run_id, options, reason)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise TunepathError(f"{reason}. The run is recorded as failed in {path}; the published site is "
                            "unchanged") from None
    final = _resume(runs_dir, run_id, options)
    try:
        _finish_ok(final, options)
    except TunepathError as exc:
        final.warn(f"closing the run on the hosts failed: {exc}; run `tunepath restore`")
    finally:
        final.finish()
    progress(f"run {run_id}: recorded in {final.final}")
    if build:
        build_site(site_dir=site_dir, runs_dir=runs_dir)
    return final.final


def _hosts(options):
    from tunepath.live.hosts import load_inventory, open_hosts

    inventory = load_inventory(options.hosts_file)
    return inventory, open_hosts(inventory, options.trust_new_hosts)


def _resume(runs_dir: Path, run_id: str, options):
    from tunepath.live.hosts import load_inventory
    from tunepath.live.session import masker_for
    from tunepath.evidence.recorder import RunRecorder

    return RunRecorder.resume(runs_dir, run_id,
                              masker=masker_for(load_inventory(options.hosts_file), options, runs_dir, run_id))


def _finish_ok(recorder, options) -> None:
    """The host back to its original state (forgotten once restored) and the lock released."""
    from tunepath.live.hoststate import release_lock, restore
    from tunepath.live.session import progress

    _, hosts = _hosts(options)
    with hosts as (server, _clients):
        if options.apply:
            for line in restore(server, forget=True):
                progress(f"restored {line}")
        release_lock(server, recorder.run_id)


def abort_run(runs_dir: Path, run_id: str, options, reason: str) -> Path:
    """End what a failed or interrupted run started, restore, record it as failed."""
    from tunepath.live.hoststate import release_lock, restore
    from tunepath.live.actions import cleanup
    from tunepath.live.session import expand_home, progress
    from tunepath.live.tomcat import Tomcat

    progress(f"run {run_id}: {reason}; cleaning up")
    recorder = _resume(runs_dir, run_id, options)
    try:
        _, hosts = _hosts(options)
        with hosts as (server, clients):
            tomcat = Tomcat(server, expand_home(server, options.tomcat_home), port=options.http_port)
            try:
                cleanup(server, tomcat, clients, run_id)
            finally:
                if options.apply:
                    for line in restore(server, forget=True):
                        progress(f"restored {line}")
                release_lock(server, run_id)
    except TunepathError as exc:
        recorder.warn(f"clean-up after the failure was incomplete: {exc}; run `tunepath restore`")
    if recorder.record.get("status") != "failed":
        recorder.fail(recorder.record.get("error", {}).get("step") or "run", reason)
    return recorder.finish()


def restore_host(options, force: bool = False) -> list[str]:
    """``tunepath restore``: the server's original state, server.xml, Tomcat stopped."""
    from tunepath.live.hoststate import restore
    from tunepath.live.session import expand_home
    from tunepath.live.tomcat import Tomcat

    from tunepath.live.hoststate import LOCK_DIR
    from tunepath.live.session import validate

    validate(options)
    _, hosts = _hosts(options)
    with hosts as (server, _clients):
        owner = server.run(f"cat {LOCK_DIR}/owner 2>/dev/null", check=False, timeout=15).stdout.strip()
        if owner and not force:
            raise TunepathError(f"on {server.name}: a run holds the lock ({owner}); restoring now would pull "
                                "the host from under it. If that run died, rerun with --force")
        if owner:
            server.run(f"rm -rf {LOCK_DIR}", check=False, timeout=15)
        done = []
        tomcat = Tomcat(server, expand_home(server, options.tomcat_home), port=options.http_port)
        if tomcat.pid():
            tomcat.stop()
            done.append("Tomcat stopped")
        if tomcat.restore_config():
            done.append("server.xml restored from its backup")
        done += restore(server, forget=True)
        return done
