"""The options and the order of ``python -m harness.bench`` (``scripts/bench``); see :mod:`harness.bench`.

Runs the benchmarks ``--only`` names (default build, parse, overhead, path), writes every
result as JSON (default ``build/bench.json``) and prints the table of :mod:`harness.bench.report`.
Exits 1 when a build failed, no report file was found, or a statistics target was missed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

from harness import ROOT
from harness.bench import clock, elapsed, say
from harness.bench.build import bench_builds
from harness.bench.overhead import bench_overhead
from harness.bench.report import render
from harness.bench.throughput import FIXTURES, bench_parse

__all__ = ["BENCHMARKS", "QUICK_STEPS", "main"]

QUICK_STEPS = ["baseline", "jvm"]
BENCHMARKS = ("build", "parse", "overhead", "path", "stats")


def bench_recorded_paths(runs_dir: Path | None) -> list[dict]:
    """Benchmark 4: the recorded path runs (:mod:`harness.bench.path`, given the registry)."""
    from harness.bench.path import bench_path
    from tunepath.steps import REGISTRY

    return bench_path(runs_dir or ROOT / "runs", REGISTRY)


def bench_statistics(trials: int, markdown_path: str | None) -> dict:
    """Benchmark 5: the seeded simulation of the stopping rule and the tests."""
    from harness.bench.stats import markdown, run, targets

    result = run(trials)
    table = markdown(result)
    if markdown_path:
        Path(markdown_path).write_text(table + "\n", encoding="utf-8")
    return {**result, "missed": targets(result), "markdown": table}


def machine() -> dict:
    """This machine as the table's first line names it: CPUs, architecture, model, Python, kernel."""
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/bench", description="Benchmarks of the pipeline itself (not of Tomcat)")
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


def run_benchmarks(args: argparse.Namespace, only: set[str], result: dict) -> bool:
    """Each benchmark of ``only`` in turn, its result into ``result``; whether one failed."""
    steps = args.steps.split(",") if args.steps else (QUICK_STEPS if args.quick else None)
    seconds = max(2.0, args.parse_seconds if args.parse_seconds is not None else (2.0 if args.quick else 5.0))
    runs_dir = Path(args.runs_dir).resolve() if args.runs_dir else None
    failed = False
    if "build" in only:
        say(f"[{clock()}] benchmark 1/5: replay build, cold then warm")
        hugo = not (args.no_hugo or args.quick or args.steps)   # Hugo needs every step's data
        result["build"] = b = bench_builds(steps, hugo=hugo, runs_dir=runs_dir, keep=args.keep,
                                           rounds=max(1, args.rounds), jobs=args.jobs)
        failed |= any(r is None or r["exit_status"] != 0 for r in (b["cold"], b["warm"], b["no_cache"]))
    if "parse" in only:
        say(f"[{clock()}] benchmark 2/5: parse throughput")
        result["parse"] = bench_parse(seconds, Path(args.fixtures), runs_dir)
        failed |= "error" in result["parse"]
    if "overhead" in only:
        say(f"[{clock()}] benchmark 3/5: orchestration overhead of recorded live runs")
        result["overhead"] = bench_overhead(runs_dir)
    if "path" in only:
        say(f"[{clock()}] benchmark 4/5: recorded path runs (wall time, precision, key comparison, phases, verdicts)")
        result["path"] = bench_recorded_paths(runs_dir)
    if "stats" in only:
        say(f"[{clock()}] benchmark 5/5: statistics, seeded simulation ({args.stats_trials} trials per case)")
        result["stats"] = bench_statistics(max(100, args.stats_trials), args.stats_md)
        failed |= bool(result["stats"]["missed"])
    return failed


def write_json(result: dict, out: Path) -> None:
    """The results, written whole or not at all."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    from tunepath import __version__

    p = parser()
    args = p.parse_args(argv)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    unknown = only - set(BENCHMARKS)
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    result = {"version": __version__, "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
              "machine": machine(), "quick": args.quick}
    failed = run_benchmarks(args, only, result)
    result["total_s"] = round(elapsed(), 1)
    out = Path(args.json)
    write_json(result, out)
    say("")
    say(render(result))
    if "stats" in result:
        say("\nStatistics (docs/statistics.md)\n" + result["stats"]["markdown"])
    say(f"\n(benchmarks took {result['total_s']:.0f} s; results in {out})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
