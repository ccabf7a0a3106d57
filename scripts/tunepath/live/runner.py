"""``tunepath run``: record a new live run by executing the step notebooks, then rebuild.

The runner connects to the hosts first (host keys checked: a refused key writes
nothing), takes the server's lock, records host facts, then executes each step's
notebook with Papermill in ``mode="live"``. Executed notebooks are kept inside the run.
If a step fails or the run is interrupted, the runner ends what was started (load
generator, Tomcat), restores ``server.xml`` and the host's changed state, records the run
as failed with the error, releases the lock, and leaves the published site untouched.
Only a run that completes triggers the site rebuild.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.project import project_dir
from tunepath.publish import notebooks
from tunepath.steps import REGISTRY

__all__ = ["run_path", "abort_run", "restore_host", "LIVE_STEPS"]

LIVE_STEPS = [s.name for s in REGISTRY.live_steps()]   # the others only read runs: the rebuild makes them


def _execute_notebook(step, recorder, runs_dir: Path, options, notebooks_dir: Path) -> Path:
    """Execute ``step``'s notebook in live mode; the executed notebook is kept inside the run."""
    out = recorder.dir / "notebooks" / step.notebook
    live_options = {k: v for k, v in asdict(options).items()
                    if k not in ("hosts_file", "profile", "apply", "allow_reboot")}
    params = notebooks.parameters("live", runs_dir, recorder.dir, [recorder.run_id], hosts_file=options.hosts_file,
                                  profile=options.profile, apply=options.apply, allow_reboot=options.allow_reboot,
                                  live_options=live_options)
    try:
        return notebooks.execute(notebooks_dir / step.notebook, out, params, what=f"step {step.name!r}",
                                 log_path=recorder.dir.parent / f"{recorder.run_id}.kernel-stderr.log", echo=True)
    finally:
        _mask_file(out, recorder)


def _mask_file(path: Path, recorder) -> None:
    """Executed notebooks print commands and outputs: mask host names there too."""
    if path.is_file() and recorder.mask.pairs:
        path.write_text(recorder.mask(path.read_text(encoding="utf-8")), encoding="utf-8")


def run_path(options, steps: list[str] | None = None, runs_dir: Path | None = None,
             build: bool = True, site_dir: Path | None = None) -> Path:
    """Record a live run of ``steps`` (default: all) and rebuild the site; returns the run dir."""
    from tunepath.live.session import progress
    from tunepath.live.start import start_run
    from tunepath.publish.build import build_site

    project = project_dir()
    runs_dir = Path(runs_dir or project / "runs")
    names = steps or LIVE_STEPS
    for n in names:
        REGISTRY.get(n)
    chosen = [s for s in REGISTRY.live_steps() if s.name in names]   # in the path's order
    names = [s.name for s in chosen]
    started = time.monotonic()
    recorder, inventory = start_run(runs_dir, options, names)
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
        _forget_side_files(runs_dir, run_id)
        final.finish()
    progress(f"run {run_id}: recorded in {final.final}")
    if build:
        build_site(site_dir=site_dir or project, runs_dir=runs_dir)
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


def _forget_side_files(runs_dir: Path, run_id: str) -> None:
    from tunepath.evidence.recorder import INPROGRESS

    for name in (f"{run_id}.mask.json", f"{run_id}.kernel-stderr.log", f"{run_id}.context.json"):
        (Path(runs_dir) / INPROGRESS / name).unlink(missing_ok=True)


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
    _forget_side_files(runs_dir, run_id)
    return recorder.finish()


def restore_host(options, force: bool = False) -> list[str]:
    """``tunepath restore``: the server's original state, server.xml, Tomcat stopped."""
    from tunepath.live.hoststate import restore
    from tunepath.live.session import expand_home
    from tunepath.live.tomcat import Tomcat

    from tunepath.live.hoststate import LOCK_DIR

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
