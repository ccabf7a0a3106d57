"""Benchmarks of the pipeline itself (not of Tomcat): ``python -m harness.bench`` (``scripts/bench``).

1. **Replay build**, cold and warm: ``tunepath build`` into a fresh temporary site
   directory (no cache: every notebook executes, then Hugo), then the same command
   into the same directory again with nothing changed (the execution cache should skip
   every notebook). Wall seconds of each command, and how many notebooks it executed;
   then Papermill executing as many trivial notebooks (``x = 1``) one after the other,
   and the cold build's ratio to that (:mod:`harness.bench.build`). ``--rounds N``
   repeats all three and gives the medians.
2. **Parse throughput** (:mod:`harness.bench.throughput`): every report file of the shared
   wrk/wrk2 fixtures and of ``runs/*/raw/`` parsed over and over for a fixed time, with
   :func:`tunepath.parse.reports.parse_report_file` (read + recognise + parse) and with
   :func:`tunepath.parse.reports.parse_report` on text already in memory (parse only):
   reports per second and MB per second. Files that are not reports (commands, stderr,
   the fixtures of failures) are counted and left out.
3. **Orchestration overhead of live steps** (:mod:`harness.bench.overhead`), from the recorded
   live runs: per step, wall time minus the time spent generating load (the ``load``,
   ``load-VARIANT``, ``warm-up`` and ``smoke-test`` blocks). Wall time is
   ``step_timings[STEP].wall_s`` of the run record; a run recorded before that field existed
   falls back to the Papermill duration of the step's executed notebook kept in the run (an
   estimate, marked as such), or else reports "not recorded".
4. **Recorded path runs** (:mod:`harness.bench.path`): per complete live run, its wall
   time, measurements and those left out, the median relative half-width of its
   configurations' intervals, and the baseline's key comparison (stock against the
   thread-count variant), read from the runs through the frames the pages use; where each
   measurement's time went (phases, wall time per counted second) and how many of the pages'
   comparisons reach a 95 % verdict.
5. **Statistics** (:mod:`harness.bench.stats`): a seeded simulation of the stopping rule and
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
The results are printed as a table (:mod:`harness.bench.report`) and written as JSON
(default ``build/bench.json``); :mod:`harness.bench.run` holds the options and the order.
"""

from __future__ import annotations

import time

__all__ = ["say", "clock", "elapsed"]

_T0 = time.monotonic()


def say(message: str) -> None:
    """One progress line of a benchmark, at once."""
    print(message, flush=True)


def clock() -> str:
    """Seconds since the benchmarks started, for the progress lines."""
    return f"{time.monotonic() - _T0:6.1f} s"


def elapsed() -> float:
    return time.monotonic() - _T0
