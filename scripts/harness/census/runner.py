"""Running the cases: each in a fresh temporary directory, as a user would (``python -m tunepath.cli``
in a subprocess), ``--jobs`` at a time.

A case's command runs in a session of its own (its own process group), with the case's directory
as its working directory and the environment of :func:`harness.census.sandbox.environment`. At
the timeout its whole process group is killed (SIGKILL), and so is anything the command left
running in the group after it exited. The watched directories are fingerprinted just before
the command and again after it (:mod:`harness.census.snapshot`); then the case's check runs, and
:func:`harness.census.classify.classify` gives the class.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from harness.census.case import CLOSED, Case, Outcome, Verdict
from harness.census.classify import classify
from harness.census.sandbox import environment, make_project, python, refuse_unsafe
from harness.census.snapshot import changes, snapshot

__all__ = ["PROJECT_WATCH", "Settings", "Result", "execute", "run_case", "references", "run_all", "kill_all"]

# in a case's copy of the project, what no failure may touch
PROJECT_WATCH = ("content", "data", "static", "public", "notebooks", "runs", "layouts", "config.toml")


@dataclass(frozen=True)
class Settings:
    timeout_s: float = 60.0
    jobs: int = 2


@dataclass
class Result:
    case: Case
    outcome: Outcome
    verdict: Verdict


_RUNNING: set[int] = set()          # process groups of the commands running now
_LOCK = threading.Lock()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill the process group of every command still running (the census was interrupted)."""
    with _LOCK:
        groups = sorted(_RUNNING)
    for pgid in groups:
        _kill_group(pgid)


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def _stdin(case: Case, argv: list[str]) -> tuple[list[str], object, bytes | None]:
    """(argv, stdin for Popen, bytes to write)."""
    if isinstance(case.stdin, bytes):
        return argv, subprocess.PIPE, case.stdin
    if case.stdin == CLOSED:
        return ["bash", "-c", 'exec "$@" <&-', "bash", *argv], subprocess.DEVNULL, None
    return argv, subprocess.DEVNULL, None


def execute(case: Case, tmp: Path, env: dict[str, str], timeout_s: float) -> Outcome:
    """Run the case's command once; its exit status, output and wall time."""
    argv, stdin, data = _stdin(case, [python(), "-m", "tunepath.cli", *case.command(tmp)])
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp, env=env,
                            start_new_session=True)
    with _LOCK:
        _RUNNING.add(proc.pid)
    timed_out = False
    try:
        try:
            out, err = proc.communicate(data, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            out, err = proc.communicate()
    finally:
        _kill_group(proc.pid)          # whatever the command left running in its group
        with _LOCK:
            _RUNNING.discard(proc.pid)
    return Outcome(None if timed_out else proc.returncode, _decode(out), _decode(err),
                   round(time.monotonic() - started, 3), timed_out)


def _watched(case: Case) -> tuple[str, ...]:
    extra = tuple(f"project/{name}" for name in PROJECT_WATCH) if case.project is not None else ()
    return tuple(dict.fromkeys((*case.watch, *extra)))


def _release(kept: object) -> None:
    """Close what a set-up returned (a port it holds), or each of a list of such."""
    if isinstance(kept, (list, tuple)):
        for item in kept:
            _release(item)
        return
    close = getattr(kept, "close", None)
    if callable(close):
        close()


def run_case(case: Case, settings: Settings, refs: dict[Path, dict]) -> Result:
    """One case from setup to verdict, in a temporary directory removed afterwards."""
    refuse_unsafe(case)
    with tempfile.TemporaryDirectory(prefix="tunepath-census-") as name:
        tmp = Path(name)
        project = make_project(tmp, case.project) if case.project is not None else None
        env = environment(tmp, project)
        try:
            kept = case.setup(tmp) if case.setup else None
        except Exception as exc:                   # a bug of the census, not of tunepath: stop, loudly
            raise RuntimeError(f"{case.name}: the census could not set the case up: {exc!r}") from exc
        try:
            watched = _watched(case)
            before = {w: snapshot(tmp / w) for w in watched}
            outcome = execute(case, tmp, env, settings.timeout_s)
            outcome.writes = [c for w in watched for c in changes(before[w], snapshot(tmp / w), w)]
            outcome.left = case.check(tmp, outcome.stdout) if case.check else None
        finally:
            _release(kept)
    outcome.reference = refs.get(case.reference) if case.reference else None
    return Result(case, outcome, classify(case, outcome))


def references(cases: Iterable[Case], timeout_s: float) -> dict[Path, dict]:
    """``tunepath parse`` of every intact report a case names, once each (it must parse)."""
    out: dict[Path, dict] = {}
    for path in sorted({c.reference for c in cases if c.reference is not None}):
        with tempfile.TemporaryDirectory(prefix="tunepath-census-ref-") as name:
            tmp = Path(name)
            done = subprocess.run([python(), "-m", "tunepath.cli", "parse", "--compact", str(path)],
                                  capture_output=True, cwd=tmp, env=environment(tmp, None), timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"the intact report {path} does not parse: {_decode(done.stderr).strip()}")
        out[path] = json.loads(done.stdout)
    return out


def run_all(cases: list[Case], settings: Settings, refs: dict[Path, dict],
            each: Callable[[Result, int], None] = lambda result, done: None) -> list[Result]:
    """Every case, ``settings.jobs`` at a time; ``each`` sees each result as it comes (and how many
    are done). The results come back in the order of ``cases``. Ctrl-C kills what is running."""
    results: dict[int, Result] = {}
    pool = ThreadPoolExecutor(max_workers=max(1, settings.jobs), thread_name_prefix="census")
    try:
        futures = {pool.submit(run_case, case, settings, refs): i for i, case in enumerate(cases)}
        for future in as_completed(futures):
            results[futures[future]] = result = future.result()
            each(result, len(results))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_all()
        raise
    pool.shutdown()
    return [results[i] for i in range(len(cases))]
