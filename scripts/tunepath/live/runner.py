"""``tunepath run``: record a new live run by executing the step notebooks, then rebuild.

The runner checks its options first (:func:`check_run`: ranges, steps, the inventory), so a
bad option connects to nothing. It then connects to the hosts (host keys checked: a refused
key writes nothing), takes the server's lock, records host facts, then executes each step's
notebook with Papermill in ``mode="live"``: the notebook gets the run id, the profile and
the apply flags, never the run's paths, URLs or inventory (those stay in a 0600 side file
beside the run). Executed notebooks are kept inside the run, masked like the rest of it.
If a step fails or the run is interrupted, the runner ends what was started (a step's kernel
that outlives its notebook, commands the dead step left running on the server, load
generators, httpd, Tomcat), restores ``server.xml``, ``setenv.sh`` and the host's changed
state, records the run as failed with the error, releases the lock, and leaves the published
site untouched. A server that drops out meanwhile (sshd restarting, a link down) is tried
again for :data:`tunepath.live.putback.RECONNECT_S` seconds. A Ctrl-C while the server is being put back waits until
that is done (a second one stops at once). What the restore did is noted in the run, on the
pages of the steps that changed the host. Only a run that completes triggers the site rebuild.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.held import HeldInterrupts, StopSignals
from tunepath.live.putback import patience, put_back, restore_server
from tunepath.project import project_dir
from tunepath.publish import notebooks
from tunepath.steps import REGISTRY

__all__ = ["run_path", "check_run", "select_steps", "abort_run", "LIVE_STEPS"]

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
    if site_dir is not None and Path(site_dir).is_dir():     # refused now, not after an hour of measuring
        from tunepath.publish.sitedir import check_foreign_files

        check_foreign_files(Path(site_dir).resolve(), project_dir().resolve(), public=True)
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
    with StopSignals():       # `kill PID` and a closed terminal stop the run as a Ctrl-C does
        recorder, inventory, options = start_run(runs_dir, options, names)
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
    held, step = HeldInterrupts(patience(options) + 30), None
    try:
        for i, step in enumerate(chosen, 1):
            t0 = time.monotonic()
            done = time.monotonic() - started
            progress(f"[{i}/{len(names)}] {step.name}: starting (elapsed {done:.0f} s"
                     + (f", about {done / (i - 1) * (len(names) - i + 1):.0f} s left)" if i > 1 else ")"))
            _execute_notebook(step, recorder, runs_dir, options, project / "notebooks")
            progress(f"[{i}/{len(names)}] {step.name}: done in {time.monotonic() - t0:.0f} s")
        held.hold()               # from here on the server is put back: a Ctrl-C waits for it
    except BaseException as exc:
        held.hold()
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        try:
            path = abort_run(runs_dir, run_id, options, reason, step.name if step else None)
        finally:
            held.release(raise_pending=False)
        if isinstance(exc, KeyboardInterrupt) or held.pending:     # a Ctrl-C held during the clean-up too
            raise exc if isinstance(exc, KeyboardInterrupt) else KeyboardInterrupt
        raise TunepathError(f"{reason}. The run is recorded as failed in {path}; the published site is "
                            "unchanged") from None
    try:
        final = _resume(runs_dir, run_id, options)
        try:
            note_restore(final, put_back(options, run_id, failed=False), "When the run ended")
        except TunepathError as exc:
            final.warn(f"closing the run on the hosts failed: {exc}; run `tunepath restore`")
        finally:
            final.finish()
    finally:
        held.release()            # a Ctrl-C held meanwhile stops here: recorded, restored, not rebuilt
    progress(f"run {run_id}: recorded in {final.final}")
    if build:
        build_site(site_dir=site_dir, runs_dir=runs_dir)
    return final.final


def _resume(runs_dir: Path, run_id: str, options):
    from tunepath.evidence.recorder import RunRecorder
    from tunepath.live.hosts import load_inventory
    from tunepath.live.session import masker_for

    inventory = load_inventory(options.hosts_file)
    return RunRecorder.resume(runs_dir, run_id, masker=masker_for(inventory, options, runs_dir, run_id))


def note_restore(recorder, lines: list[str], when: str, echo: bool = True) -> None:
    """Print (``echo``) and note in the run what putting the server back did, on the pages of the
    steps that changed the host (e.g. "eth0: 4 queues again" beside the queue counts the NIC step
    changed)."""
    from tunepath.live.session import progress

    for line in lines if echo else ():
        progress(f"restored {line}")
    ran = {(b.get("step"), b.get("block")) for b in recorder.record.get("blocks", []) if b.get("outcome") == "ran"}
    steps = [s.name for s in REGISTRY.steps if any((s.name, b) in ran for b in
             {b for needs in s.disruptive_needs.values() for b in needs} | set(s.optional_blocks))]
    recorder.note_put_back(lines, when, steps)


def note_in_dead_run(runs_dir: Path, run_id: str, options, lines: list[str]) -> str:
    """``tunepath restore``'s lines noted in the run whose lock it removed: its partial record in
    ``runs/.inprogress`` (a run that died) or its recorded one (a run whose own clean-up was
    incomplete). Host names are masked, as a masked run's are. Returns where it was noted, or
    why not (a run recorded elsewhere, or an unreadable record)."""
    from tunepath.evidence.recorder import INPROGRESS, RunRecorder
    from tunepath.live.hosts import load_inventory
    from tunepath.live.session import masker_for

    if not lines:
        return ""
    runs_dir = Path(runs_dir)
    found = next((d for d in (runs_dir / INPROGRESS / run_id, runs_dir / run_id) if (d / "run.json").is_file()), None)
    if found is None:
        return f"run {run_id} is not in {runs_dir} (give its --runs-dir to note this restore in it)"
    try:
        masker = masker_for(load_inventory(options.hosts_file), replace(options, mask_hosts=True))
        recorder = RunRecorder.reopen(found, masker)
        note_restore(recorder, lines, "When `tunepath restore` ran after the run had ended", echo=False)
    except (OSError, ValueError, KeyError, TunepathError) as exc:
        return f"noting this restore in run {run_id} failed ({exc})"
    return f"noted in run {run_id} ({found})"


def restore_and_note(options, force: bool = False, reboot: bool = False, runs_dir: Path | None = None) -> list[str]:
    """``tunepath restore`` (:func:`~tunepath.live.putback.restore_host`), and what it did noted in the
    run that held the lock, where ``runs_dir`` holds it (the last line says where, or why not)."""
    done, run_id = restore_server(options, force=force, reboot=reboot)
    where = note_in_dead_run(runs_dir, run_id, options, done) if runs_dir and run_id else ""
    return done + ([where] if where else [])


def _kernels() -> list[int]:
    """The step kernels this process started and that are still running (Jupyter starts them in
    their own session: a Ctrl-C reaches this process only)."""
    me, found = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8", errors="replace").rsplit(")", 1)[1].split()
            if fields[1] == me and fields[0] != "Z" and b"ipykernel" in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def end_kernels(grace: float = 5.0) -> None:
    """A step's kernel that outlives its notebook must not go on changing the server while the run
    puts it back: wait ``grace`` seconds for it to end, then end it."""
    from tunepath.live.session import progress

    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        for pid in _kernels() if sig else ():
            progress(f"a step's kernel (pid {pid}) still runs: ending it ({signal.Signals(sig).name})")
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace if sig is None else 3.0)
        while _kernels() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _kernels():
            return


def abort_run(runs_dir: Path, run_id: str, options, reason: str, step: str | None = None) -> Path:
    """End what a failed or interrupted run started, restore, record it as failed (in ``step``)."""
    from tunepath.live.session import progress, side_file

    progress(f"run {run_id}: {reason}; cleaning up")
    end_kernels()
    settled = side_file(runs_dir, run_id, ".put-back.json").is_file()     # the step's guard did it all
    recorder = _resume(runs_dir, run_id, options)
    try:
        note_restore(recorder, put_back(options, run_id, settled=settled), "When the run stopped")
    except TunepathError as exc:
        recorder.warn(f"clean-up after the failure was incomplete: {exc}; run `tunepath restore --force`")
        progress(f"clean-up after the failure was incomplete: {exc}; run `tunepath restore --force`")
    if recorder.record.get("status") != "failed":
        recorder.fail(recorder.record.get("error", {}).get("step") or step or "run", reason)
    return recorder.finish()
