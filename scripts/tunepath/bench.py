"""Benchmarks of the pipeline itself (not of Tomcat): ``python -m tunepath.bench``.

1. **Replay build**, cold and warm: ``tunepath build`` into a fresh temporary site
   directory (no cache: every notebook executes, then Hugo), then the same command
   into the same directory again with nothing changed (the execution cache should skip
   every notebook). Wall seconds of each command, and how many notebooks it executed;
   then Papermill executing as many trivial notebooks (``x = 1``) one after the other,
   and the cold build's ratio to that (:mod:`tunepath.bench_build`). ``--rounds N``
   repeats all three and gives the medians.
2. **Parse throughput**: every report file of the shared wrk/wrk2 fixtures and of
   ``runs/*/raw/`` parsed over and over for a fixed time, with
   :func:`tunepath.parse.reports.parse_report_file` (read + recognise + parse) and with
   :func:`tunepath.parse.reports.parse_report` on text already in memory (parse only):
   reports per second and MB per second. Files that are not reports (commands, stderr,
   the fixtures of failures) are counted and left out.
3. **Orchestration overhead of live steps**, from the recorded live runs: per step, wall
   time minus the time spent generating load (the ``load``, ``load-VARIANT``,
   ``warm-up`` and ``smoke-test`` blocks). Wall time is ``step_timings[STEP].wall_s``
   of the run record; a run recorded before that field existed falls back to the
   Papermill duration of the step's executed notebook kept in the run (an estimate,
   marked as such), or else reports "not recorded".
4. **Recorded path runs** (:mod:`tunepath.bench_path`): per complete live run, its wall
   time, measurements and those left out, the median relative half-width of its
   configurations' intervals, and the baseline's key comparison (stock against the
   thread-count variant), read from the runs through the frames the pages use.
5. **Statistics** (:mod:`tunepath.bench_stats`): a seeded simulation of the stopping rule and
   the tests: detection of a real 5 % difference, false-significant rate, coverage of the
   medians' intervals against the level they state, the thread sweep's family-wise error, and
   the ``two-modes`` and ``shapes-differ`` flags. Its Markdown table is docs/statistics.md's
   (``--stats-md PATH`` writes it; ``--stats-trials N``, default 10,000 per case). Only with
   ``--only …,stats``; it exits 1 when a target is missed.

Usage::

    scripts/bench [--quick] [--json PATH] [--steps LIST] [--parse-seconds S] [--rounds N] [--jobs N] [--keep]
                  [--only build,parse,overhead,path,stats] [--stats-trials N] [--stats-md PATH]

``--quick`` builds two steps instead of the whole path, without Hugo (the pages need
every step's data), and parses for 2 s per mode.
The results are printed as a table and written as JSON (default ``build/bench.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path

from tunepath.bench_build import bench_builds, bench_trivial
from tunepath.bench_report import render
from tunepath.project import project_dir

__all__ = ["bench_builds", "bench_trivial", "bench_parse", "bench_overhead", "main"]

ROOT = project_dir(required=False) or Path.cwd()
FIXTURES = ROOT.parent / "shared" / "fixtures"
QUICK_STEPS = ["baseline", "jvm"]
LOAD_BLOCKS = ("load", "warm-up", "smoke-test", "capacity-probe")   # plus load-VARIANT
_T0 = time.monotonic()


def _say(message: str) -> None:
    print(message, flush=True)


def _clock() -> str:
    return f"{time.monotonic() - _T0:6.1f} s"


# --- 1. replay build, cold and warm: tunepath.bench_build --------------------------------


# --- 2. parse throughput ----------------------------------------------------------------

def report_files(fixtures: Path = FIXTURES, runs_dir: Path | None = None) -> tuple[list[Path], list[str]]:
    """Candidate files: the fixtures' wrk/ and wrk2/ and every run's raw/ (sorted)."""
    runs_dir = Path(runs_dir) if runs_dir else ROOT / "runs"
    notes = []
    files: list[Path] = []
    for sub in ("wrk", "wrk2"):
        d = Path(fixtures) / sub
        if d.is_dir():
            files += sorted(p for p in d.iterdir() if p.is_file())
        else:
            notes.append(f"{d}: absent, skipped")
    if runs_dir.is_dir():
        files += sorted(p for p in runs_dir.glob("*/raw/*")
                        if p.is_file() and not p.relative_to(runs_dir).parts[0].startswith("."))
    return files, notes


def _timed_loop(fn, items, seconds: float, label: str) -> tuple[int, int, float]:
    """Call fn on every item, pass after pass, until ``seconds`` have passed."""
    count = nbytes = 0
    t0 = time.perf_counter()
    next_note = t0 + 1.0
    while True:
        for item, size in items:
            fn(item)
            count += 1
            nbytes += size
        now = time.perf_counter()
        if now >= next_note:
            _say(f"  [parse {label} {now - t0:4.1f} s] {count} reports")
            next_note = now + 1.0
        if now - t0 >= seconds:
            return count, nbytes, now - t0


def bench_parse(seconds: float = 5.0, fixtures: Path = FIXTURES, runs_dir: Path | None = None) -> dict:
    from tunepath.parse.wrk import ParseError
    from tunepath.parse.reports import parse_report, parse_report_file

    files, notes = report_files(fixtures, runs_dir)
    reports, rejected = [], []
    for path in files:
        try:
            parse_report_file(path)
            reports.append(path)
        except ParseError:
            rejected.append(path)
    if not reports:
        return {"error": "no report files found", "notes": notes}
    sizes = {p: p.stat().st_size for p in reports}
    _say(f"[{_clock()}] parse: {len(reports)} reports ({sum(sizes.values()) / 1024:.0f} KiB), "
         f"{len(rejected)} other files left out; {seconds:g} s per mode")
    out = {"files": len(reports), "bytes_per_pass": sum(sizes.values()), "not_reports": len(rejected),
           "not_reports_examples": sorted({p.suffix or p.name for p in rejected}), "notes": notes,
           "seconds_per_mode": seconds}
    texts = [(p.read_bytes().decode("utf-8", errors="replace"), sizes[p]) for p in reports]
    for label, fn, items in (("file", parse_report_file, [(p, sizes[p]) for p in reports]),
                             ("memory", parse_report, texts)):
        count, nbytes, took = _timed_loop(fn, items, seconds, label)
        out[label] = {"reports": count, "seconds": round(took, 3), "reports_per_s": round(count / took, 1),
                      "mb_per_s": round(nbytes / took / 1e6, 2), "us_per_report": round(took / count * 1e6, 1)}
    return out


# --- 3. orchestration overhead of live steps -------------------------------------------------

def _load_block(step: str, block_id: str, measured: frozenset = frozenset()) -> bool:
    """Whether a recorded block generated load: a load, warm-up, smoke test or capacity probe, or
    ``load-VARIANT`` of one of the step's variants (the registry's, or ``measured``: the variants the
    run measured, such as the rate sweep's rates, which depend on the run)."""
    if block_id in LOAD_BLOCKS:
        return True
    if not block_id.startswith("load-"):
        return False
    if block_id.removeprefix("load-") in measured:
        return True
    try:
        from tunepath.steps import get_step

        return block_id.removeprefix("load-") in {v.name for v in get_step(step).variants}
    except Exception:   # noqa: BLE001 - a step no longer defined: judge by the name alone
        return True


def _notebook_duration(run_dir: Path, step: str) -> float | None:
    """Papermill's duration of the step's executed notebook kept in the run, if any."""
    for nb in sorted((run_dir / "notebooks").glob(f"[0-9][0-9]-{step}.ipynb")):
        try:
            meta = json.loads(nb.read_text(encoding="utf-8"))["metadata"].get("papermill", {})
        except (OSError, ValueError, KeyError):
            continue
        if isinstance(meta.get("duration"), (int, float)):
            return float(meta["duration"])
    return None


def _live_records(runs_dir: Path):
    """``(run directory, run record)`` of every live run under ``runs_dir``, by name."""
    for meta in sorted(runs_dir.glob("*/run.json")):
        if meta.parent.name.startswith("."):
            continue
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if record.get("kind") == "live":
            yield meta.parent, record


def _step_order(blocks: list[dict], timings: dict) -> list[str]:
    """The run's steps in the order their blocks were recorded, then those with timings only."""
    order: list[str] = []
    for name in [b.get("step") for b in blocks] + list(timings):
        if name and name not in order:
            order.append(name)
    return order


def _step_wall(run_dir: Path, step: str, timings: dict) -> tuple[float | None, str]:
    """The step's wall seconds, and where they come from."""
    wall = (timings.get(step) or {}).get("wall_s")
    if isinstance(wall, (int, float)):
        return wall, "recorded (step_timings)"
    wall = _notebook_duration(run_dir, step)
    return wall, ("estimated (Papermill duration of the run's executed notebook)"
                  if wall is not None else "not recorded")


def _unrecorded_warmups(step: str, mine: list[dict], measured: frozenset, all_kept: bool) -> tuple[int, int, float]:
    """``(repeated load blocks, warm-ups not kept, their estimated seconds)`` of one step.

    Repetitions after the first restart Tomcat and warm up again; runs recorded before
    live.py kept every repetition's blocks hold the first repetition's only: estimate
    the warm-ups not kept (one per repeated load block, at the mean warm-up duration)."""
    warmups = [b["duration_s"] for b in mine if b.get("block") == "warm-up"]
    repeated = sum(1 for b in mine if _load_block(step, b.get("block", ""), measured)
                   and b.get("block") != "warm-up" and (b.get("repetition") or 1) > 1)
    if all_kept:     # a run that kept every repetition's warm-up (one JVM for a sweep has one)
        return repeated, 0, 0.0
    kept = sum(1 for b in mine if b.get("block") == "warm-up" and (b.get("repetition") or 1) > 1)
    unrecorded = max(0, repeated - kept) if warmups else 0
    unrecorded_s = sum(warmups) / len(warmups) * unrecorded if warmups else 0.0
    return repeated, unrecorded, unrecorded_s


def _step_overhead(run_dir: Path, step: str, blocks: list[dict], timings: dict,
                   measured: frozenset = frozenset(), all_kept: bool = False) -> dict:
    """One step's row: wall, load, other blocks, overhead (plain and adjusted)."""
    mine = [b for b in blocks if b.get("step") == step and isinstance(b.get("duration_s"), (int, float))]
    load = sum(b["duration_s"] for b in mine if _load_block(step, b.get("block", ""), measured))
    other = sum(b["duration_s"] for b in mine if not _load_block(step, b.get("block", ""), measured))
    wall, source = _step_wall(run_dir, step, timings)
    repeated, unrecorded, unrecorded_s = _unrecorded_warmups(step, mine, measured, all_kept)
    row = {"step": step, "wall_s": wall, "wall_source": source, "load_s": round(load, 3),
           "other_blocks_s": round(other, 3), "repeated_loads": repeated,
           "unrecorded_warmups": unrecorded, "unrecorded_warmup_s_est": round(unrecorded_s, 3),
           "timestamps_in_blocks": any("started" in b or "finished" in b for b in mine)}
    if wall is not None:
        row["overhead_s"] = round(wall - load, 3)
        row["overhead_pct"] = round((wall - load) / wall * 100, 1) if wall > 0 else None
        adjusted = wall - load - unrecorded_s
        row["overhead_adjusted_s"] = round(adjusted, 3)
        row["overhead_adjusted_pct"] = round(adjusted / wall * 100, 1) if wall > 0 else None
    return row


def _run_total(steps: list[dict]) -> dict:
    """The sums over the steps whose wall time is known."""
    with_wall = [s for s in steps if s["wall_s"] is not None]
    total = {"wall_s": round(sum(s["wall_s"] for s in with_wall), 3),
             "load_s": round(sum(s["load_s"] for s in with_wall), 3),
             "unrecorded_warmup_s_est": round(sum(s["unrecorded_warmup_s_est"] for s in with_wall), 3)}
    total["overhead_s"] = round(total["wall_s"] - total["load_s"], 3)
    total["overhead_adjusted_s"] = round(total["overhead_s"] - total["unrecorded_warmup_s_est"], 3)
    return total


def bench_overhead(runs_dir: Path | None = None) -> dict:
    """Per live run and step: wall, load, other commands, overhead = wall − load."""
    runs_dir = Path(runs_dir) if runs_dir else ROOT / "runs"
    runs = []
    for run_dir, record in _live_records(runs_dir):
        blocks = record.get("blocks") or []
        timings = record.get("step_timings") or {}
        measured = record.get("measurements") or []
        # runs recorded since every repetition's blocks are kept need no estimate of warm-ups
        all_kept = any(b.get("block") == "warm-up" and (b.get("repetition") or 1) > 1 for b in blocks)
        steps = [_step_overhead(run_dir, step, blocks, timings,
                                frozenset(m.get("variant") for m in measured if m.get("step") == step), all_kept)
                 for step in _step_order(blocks, timings)]
        runs.append({"run_id": record.get("run_id", run_dir.name), "profile": record.get("profile"),
                     "started": record.get("started"), "finished": record.get("finished"),
                     "steps": steps, "total_with_wall": _run_total(steps)})
    return {"runs": runs}


# --- the results: machine, JSON file and table (the table: tunepath.bench_report) -----------

def _bench_path(runs_dir: Path | None) -> list[dict]:
    """Benchmark 4: the recorded path runs (:mod:`tunepath.bench_path`, given the registry)."""
    from tunepath.bench_path import bench_path
    from tunepath.steps import REGISTRY

    return bench_path(runs_dir or ROOT / "runs", REGISTRY)


def _bench_stats(trials: int, markdown_path: str | None) -> dict:
    """Benchmark 5: the seeded simulation of the stopping rule and the tests."""
    from tunepath.bench_stats import markdown, run, targets

    result = run(trials)
    table = markdown(result)
    if markdown_path:
        Path(markdown_path).write_text(table + "\n", encoding="utf-8")
    return {**result, "missed": targets(result), "markdown": table}


def _machine() -> dict:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu part")):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "arch": platform.machine(), "cpu": model,
            "python": platform.python_version(), "system": f"{platform.system()} {platform.release()}"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tunepath.bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"build {','.join(QUICK_STEPS)} only, without Hugo, and parse for 2 s per mode")
    p.add_argument("--json", default=str(ROOT / "build" / "bench.json"), help="where to write the results")
    p.add_argument("--steps", default=None, help="comma-separated steps to build (default: all, or the quick set)")
    p.add_argument("--no-hugo", action="store_true",
                   help="builds stop after data and charts (implied by --quick and --steps)")
    p.add_argument("--parse-seconds", type=float, default=None, help="parse time per mode (default 5, quick 2; at least 2)")
    p.add_argument("--runs-dir", default=None, help="recorded runs (default: runs/ of the project)")
    p.add_argument("--fixtures", default=str(FIXTURES), help="the shared fixtures (wrk/, wrk2/)")
    p.add_argument("--only", default="build,parse,overhead,path",
                   help="comma-separated: build, parse, overhead, path, stats (stats is left out by default: "
                        "about 15 minutes at 10,000 trials on two CPUs)")
    p.add_argument("--stats-trials", type=int, default=10000, help="simulated trials per case (default 10000)")
    p.add_argument("--stats-md", default=None, help="also write the statistics table (Markdown) here")
    p.add_argument("--keep", action="store_true", help="keep the temporary site directory")
    p.add_argument("--rounds", type=int, default=1,
                   help="cold build, warm build and trivial notebooks this many times; medians (default 1)")
    p.add_argument("--jobs", type=int, default=None,
                   help="notebooks a build executes at once (default: the build's own, one more than the CPUs)")
    return p


def main(argv: list[str] | None = None) -> int:
    from tunepath import __version__

    p = _parser()
    args = p.parse_args(argv)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = only - {"build", "parse", "overhead", "path", "stats"}
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    steps = args.steps.split(",") if args.steps else (QUICK_STEPS if args.quick else None)
    seconds = max(2.0, args.parse_seconds if args.parse_seconds is not None else (2.0 if args.quick else 5.0))
    runs_dir = Path(args.runs_dir).resolve() if args.runs_dir else None

    result = {"version": __version__, "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
              "machine": _machine(), "quick": args.quick}
    failed = False
    if "build" in only:
        _say(f"[{_clock()}] benchmark 1/5: replay build, cold then warm")
        hugo = not (args.no_hugo or args.quick or args.steps)   # Hugo needs every step's data
        result["build"] = bench_builds(steps, hugo=hugo, runs_dir=runs_dir, keep=args.keep,
                                       rounds=max(1, args.rounds), jobs=args.jobs)
        b = result["build"]
        failed |= any(r is None or r["exit_status"] != 0 for r in (b["cold"], b["warm"], b["no_cache"]))
    if "parse" in only:
        _say(f"[{_clock()}] benchmark 2/5: parse throughput")
        result["parse"] = bench_parse(seconds, Path(args.fixtures), runs_dir)
        failed |= "error" in result["parse"]
    if "overhead" in only:
        _say(f"[{_clock()}] benchmark 3/5: orchestration overhead of recorded live runs")
        result["overhead"] = bench_overhead(runs_dir)
    if "path" in only:
        _say(f"[{_clock()}] benchmark 4/5: recorded path runs (wall time, precision, key comparison)")
        result["path"] = _bench_path(runs_dir)
    if "stats" in only:
        _say(f"[{_clock()}] benchmark 5/5: statistics, seeded simulation ({args.stats_trials} trials per case)")
        result["stats"] = _bench_stats(max(100, args.stats_trials), args.stats_md)
        failed |= bool(result["stats"]["missed"])
    result["total_s"] = round(time.monotonic() - _T0, 1)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)
    _say("")
    _say(render(result))
    if "stats" in result:
        _say("\nStatistics (docs/statistics.md)\n" + result["stats"]["markdown"])
    _say(f"\n(benchmarks took {result['total_s']:.0f} s; results in {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
