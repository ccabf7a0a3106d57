"""Benchmark 1 of ``python -m harness.bench``: the replay build, cold and warm, against Papermill's floor.

Each round builds into a fresh temporary site directory (**cold**: nothing cached at all,
every notebook executes, every chart is drawn, then Hugo), builds again into it with
nothing changed (**warm**: the execution cache skips every notebook), then once more with
``--no-cache`` (**no-cache**: every notebook executes again, as ``tunepath build
--no-cache`` does in a site built before; charts whose inputs did not change are not drawn
again), and then has Papermill execute as many **trivial** notebooks (one code cell,
``x = 1``, the same ``python3`` kernel) one after the other as the cold build executed. The
trivial figure is what executing that many notebooks costs at the least on this machine:
a build's **ratio** to it says how much the build adds (the notebooks' own work, HTML,
Hugo) beyond starting a kernel per notebook. The figures are each round's, and their
medians.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tunepath
from harness.bench import say

__all__ = ["bench_builds", "bench_trivial", "TRIVIAL_SCRIPT"]

# run by a child Python: N trivial notebooks executed one after the other; the time is the loop's
TRIVIAL_SCRIPT = r"""
import json, logging, sys, time
from pathlib import Path
import papermill
n, where = int(sys.argv[1]), Path(sys.argv[2])
cell = {"cell_type": "code", "id": "trivial", "metadata": {}, "execution_count": None, "outputs": [],
        "source": ["x = 1"]}
nb = {"cells": [cell], "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
      "name": "python3"}, "language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
source = where / "trivial.ipynb"
source.write_text(json.dumps(nb))
logging.getLogger("papermill").setLevel(logging.CRITICAL)
t0 = time.monotonic()
for i in range(n):
    papermill.execute_notebook(str(source), str(where / f"trivial-{i}.ipynb"), kernel_name="python3",
                               progress_bar=False, log_output=False, cwd=str(where))
print(json.dumps({"notebooks": n, "wall_s": round(time.monotonic() - t0, 3)}))
"""


def _child_env(jobs: int | None = None) -> dict:
    env = dict(os.environ)
    here = str(Path(tunepath.__file__).resolve().parents[1])     # the tunepath being benchmarked
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if jobs is not None:
        env["TUNEPATH_BUILD_JOBS"] = str(jobs)
    return env


def _timed_build(label: str, site_dir: Path, runs_dir: Path | None, steps: list[str] | None,
                 hugo: bool, jobs: int | None, no_cache: bool = False) -> dict:
    cmd = [sys.executable, "-m", "tunepath.cli", "build", "--site-dir", str(site_dir)]
    if no_cache:
        cmd.append("--no-cache")
    if runs_dir:
        cmd += ["--runs-dir", str(runs_dir)]
    if steps:
        cmd += ["--steps", ",".join(steps)]
    if not hugo:
        cmd.append("--no-hugo")
    say(f"build ({label}): {' '.join(cmd[1:])}")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=_child_env(jobs), cwd=str(site_dir))
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = (tail + [line])[-15:]
        say(f"  [{label} {time.monotonic() - t0:6.1f} s] {line}")
    status = proc.wait()
    wall = time.monotonic() - t0
    result = {"label": label, "wall_s": round(wall, 2), "exit_status": status}
    last = site_dir / "build" / "last-build.json"
    if status == 0 and last.is_file():
        done = json.loads(last.read_text())
        result.update(steps=len(done["steps"]), executed=len(done["executed"]),
                      unchanged=len(done["unchanged"]), hugo_s=done.get("hugo_s"),
                      hashing_s=done.get("hashing_s"), workers=done.get("workers"))
    elif status != 0:
        result["error"] = "\n".join(tail)
    return result


def bench_trivial(n: int) -> dict:
    """Papermill executing ``n`` trivial notebooks one after the other (seconds of the loop alone)."""
    where = Path(tempfile.mkdtemp(prefix="tunepath-bench-trivial-"))
    try:
        say(f"papermill: {n} trivial notebooks (x = 1), one after the other")
        proc = subprocess.run([sys.executable, "-c", TRIVIAL_SCRIPT, str(n), str(where)], capture_output=True,
                              text=True, env=_child_env(), cwd=str(where))
        if proc.returncode != 0:
            return {"notebooks": n, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _round(steps, hugo: bool, runs_dir, keep: bool, jobs: int | None) -> dict:
    site = Path(tempfile.mkdtemp(prefix="tunepath-bench-site-"))
    try:
        cold = _timed_build("cold", site, runs_dir, steps, hugo, jobs)
        warm = _timed_build("warm", site, runs_dir, steps, hugo, jobs) if cold["exit_status"] == 0 else None
        again = (_timed_build("no-cache", site, runs_dir, steps, hugo, jobs, no_cache=True)
                 if warm and warm["exit_status"] == 0 else None)
    finally:
        if keep:
            say(f"  site kept: {site}")
        else:
            shutil.rmtree(site, ignore_errors=True)
    trivial = bench_trivial(cold.get("executed") or 0) if cold.get("executed") else None

    def ratio(run: dict | None) -> float | None:
        ok = run and run["exit_status"] == 0 and trivial and trivial.get("wall_s")
        return round(run["wall_s"] / trivial["wall_s"], 2) if ok else None

    return {"cold": cold, "warm": warm, "no_cache": again, "trivial": trivial, "ratio": ratio(cold),
            "no_cache_ratio": ratio(again), "site_dir": str(site) if keep else None}


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def bench_builds(steps: list[str] | None, hugo: bool = True, runs_dir: Path | None = None,
                 keep: bool = False, rounds: int = 1, jobs: int | None = None) -> dict:
    """``rounds`` × (a cold build into a fresh site directory, a warm one and a ``--no-cache``
    one into the same, the trivial notebooks); the medians, and the round whose cold build is
    the median's."""
    done = []
    for i in range(rounds):
        say(f"round {i + 1}/{rounds}")
        done.append(_round(steps, hugo, runs_dir, keep, jobs))
        if done[-1]["cold"]["exit_status"] != 0 or done[-1]["no_cache"] is None:
            break
    ok = [r for r in done if r["cold"]["exit_status"] == 0]
    typical = sorted(ok, key=lambda r: r["cold"]["wall_s"])[(len(ok) - 1) // 2] if ok else done[-1]
    medians = {"cold_s": _median([r["cold"]["wall_s"] for r in ok]),
               "warm_s": _median([r["warm"]["wall_s"] for r in ok if r["warm"]]),
               "no_cache_s": _median([r["no_cache"]["wall_s"] for r in ok if r["no_cache"]]),
               "trivial_s": _median([(r["trivial"] or {}).get("wall_s") for r in ok]),
               "ratio": _median([r["ratio"] for r in ok]),
               "no_cache_ratio": _median([r["no_cache_ratio"] for r in ok])}
    return {"steps": steps or "all", "hugo": hugo, "rounds": done, "medians": medians, "jobs": jobs,
            "cold": typical["cold"], "warm": typical["warm"], "no_cache": typical.get("no_cache"),
            "trivial": typical["trivial"]}
