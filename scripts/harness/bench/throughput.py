"""Benchmark 2 of ``python -m harness.bench``: parse throughput.

Every report file of the shared wrk/wrk2 fixtures (``tests/data/shared/fixtures/wrk``, ``wrk2``) and of
``runs/*/raw/`` parsed over and over for a fixed time, from disk
(:func:`tunepath.parse.reports.parse_report_file`) and from text in memory
(:func:`tunepath.parse.reports.parse_report`): reports and MB per second. Files that are not
reports are counted and left out.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness import ROOT
from harness.bench import clock, say

__all__ = ["FIXTURES", "report_files", "bench_parse"]

FIXTURES = ROOT / "tests" / "data" / "shared" / "fixtures"   # the copies of the shared fixtures


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
            say(f"  [parse {label} {now - t0:4.1f} s] {count} reports")
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
    say(f"[{clock()}] parse: {len(reports)} reports ({sum(sizes.values()) / 1024:.0f} KiB), "
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


