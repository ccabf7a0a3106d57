"""The options and the course of ``python -m harness.census`` (``scripts/census``).

``--list`` prints the cases (``--only PATTERN`` keeps those whose name matches the glob) and
exits. Otherwise the intact reports the cases compare with are parsed once, the checkout's trees
are fingerprinted (:class:`harness.census.snapshot.Guard`), the cases run ``--jobs`` at a time,
each within ``--timeout`` seconds, and the trees are checked again. Then the table, one line per
case that is not ok, and the JSON results (``--json``, default ``build/census.json``). Exit
status: 0 when every case is ok and the checkout is unchanged, 1 otherwise, 2 on a usage error,
130 when interrupted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fnmatch
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from harness import ROOT
from harness.census.case import OK, Case
from harness.census.cases import all_cases
from harness.census.report import render, write_results
from harness.census.runner import Result, Settings, references, run_all
from harness.census.snapshot import Guard

__all__ = ["parser", "select", "listing", "commit", "main"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/census", description="The hostile-input census: every tunepath "
                                "command tried with hostile inputs, each case classified (docs/census.md).")
    p.add_argument("--only", metavar="PATTERN", default=None,
                   help="only the cases whose name matches this glob, e.g. 'parse/cut/*' or '*fifo*'")
    p.add_argument("--json", metavar="PATH", type=Path, default=ROOT / "build" / "census.json",
                   help="where to write the results (default build/census.json)")
    p.add_argument("--jobs", type=int, default=2, metavar="N", help="cases at once (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds a case may run before it counts as a hang (default 60)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    return p


def select(cases: list[Case], pattern: str | None) -> list[Case]:
    return [c for c in cases if pattern is None or fnmatch.fnmatchcase(c.name, pattern)]


def listing(cases: list[Case]) -> str:
    """One line per case: its name, what it expects, its command and what the input is."""
    lines = [f"{c.name}  [{c.expect}]  tunepath {shlex.join(c.argv)[:120]}" + (f"  — {c.note}" if c.note else "")
             for c in cases]
    return "\n".join(lines + [f"{len(cases)} case(s)"])


def commit() -> str:
    """The checkout's commit (short), with "+changes" when its work tree differs from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
        return done.stdout.strip() if done.returncode == 0 else ""
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def _progress(total: int, started: float):
    def each(result: Result, done: int) -> None:
        if result.verdict.cls != OK:
            print(f"  {result.case.name}: {result.verdict.cls}: {result.verdict.reason}", flush=True)
        if done % 25 == 0 or done == total:
            print(f"[{time.monotonic() - started:6.1f} s] {done}/{total} cases done", flush=True)
    return each


def _meta(argv: list[str], settings: Settings, count: int) -> dict:
    from tunepath import __version__

    return {"version": __version__, "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
            "commit": commit(), "command": shlex.join(["python", "-m", "harness.census", *argv]), "cases_run": count,
            "jobs": settings.jobs, "timeout_s": settings.timeout_s, "python": platform.python_version(),
            "machine": f"{platform.machine()}, {platform.system()} {platform.release()}"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = parser()
    args = p.parse_args(argv)
    if args.jobs < 1 or args.timeout <= 0:
        p.error("--jobs must be 1 or more and --timeout positive")
    cases = select(all_cases(), args.only)
    if args.list:
        print(listing(cases))
        return 0
    if not cases:
        p.error(f"no case matches --only {args.only!r} (--list shows them)")
    settings = Settings(timeout_s=args.timeout, jobs=args.jobs)
    meta = _meta(argv, settings, len(cases))
    started = time.monotonic()
    print(f"tunepath census: {len(cases)} cases, {settings.jobs} at a time, {settings.timeout_s:g} s each at most",
          flush=True)
    refs = references(cases, settings.timeout_s)
    guard = Guard(ROOT)
    try:
        results = run_all(cases, settings, refs, _progress(len(cases), started))
    except KeyboardInterrupt:
        print("interrupted: the running cases were killed; no results written", file=sys.stderr)
        return 130
    changed = guard.changed()
    meta["wall_s"] = round(time.monotonic() - started, 1)
    write_results(args.json, meta, results, changed)
    print(f"\ntunepath census — {meta['date']} — commit {meta['commit']} — {meta['command']} — "
          f"{meta['wall_s']:.0f} s\n")
    print(render(results, changed))
    print(f"\n(results in {args.json})")
    return 0 if not changed and all(r.verdict.cls == OK for r in results) else 1
