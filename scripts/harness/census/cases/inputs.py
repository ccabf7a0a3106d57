"""Building blocks of the cases' set-ups: the real reports they damage (from ``tests/data/``), and
set-up functions that write a file, make a FIFO, a sparse file, a directory, or copy runs into
the case's directory. A set-up function takes the case's directory; nothing big is made before
the case runs (a 13 MB input is built by its set-up, not when the cases are listed).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from harness import ROOT

__all__ = ["DATA", "SHARED", "REPORTS", "Setup", "report_text", "replaced", "put", "writes", "fifo", "sparse",
           "directory", "all_of", "copy_runs", "edit_json", "last_number", "unchanged"]

DATA = ROOT / "tests" / "data"
SHARED = DATA / "shared" / "fixtures"
# the real reports the parser cases damage, by a short name
REPORTS = {
    "ab": DATA / "ab" / "normal.txt",                        # 2000 requests in 1.036 s
    "ab-404": DATA / "ab" / "not_found.txt",                 # 500 requests, all Non-2xx
    "siege": DATA / "siege" / "c16-t10s.out",
    "siege-json": DATA / "siege" / "c16-t10s-json.out",
    "wrk": SHARED / "wrk" / "latency.txt",
    "wrk-errors": DATA / "wrk" / "killed_server.txt",        # prints a Socket errors line
    "wrk2": SHARED / "wrk2" / "ulatency.txt",                # HdrHistogram, corrected and uncorrected
    "wrk2-calibrated": SHARED / "wrk2" / "plain_15s_calibrated.txt",   # two Thread calibration lines
    "jmeter": DATA / "jmeter" / "dashboard.out",             # the summariser's lines and statistics.json
}
Setup = Callable[[Path], object]


@functools.cache
def report_text(key: str) -> str:
    return REPORTS[key].read_text(encoding="utf-8")


def replaced(key: str, old: str, new: str, last: bool = False) -> str:
    """The report ``key`` with its first (or ``last``) ``old`` replaced by ``new``; ``old`` must be there."""
    text = report_text(key)
    at = text.rfind(old) if last else text.find(old)
    if at < 0:
        raise ValueError(f"{REPORTS[key]} no longer holds {old!r}: update the census's case")
    return text[:at] + new + text[at + len(old):]


def put(tmp: Path, rel: str, data: bytes | str) -> Path:
    path = tmp / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def writes(rel: str, make: Callable[[], bytes | str]) -> Setup:
    """A set-up that writes what ``make()`` returns to ``tmp/rel`` (``{tmp}`` in it: the directory)."""
    def setup(tmp: Path) -> None:
        data = make()
        if isinstance(data, str):
            data = data.replace("{tmp}", str(tmp))
        put(tmp, rel, data)
    return setup


def fifo(rel: str) -> Setup:
    def setup(tmp: Path) -> None:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(tmp / rel)
    return setup


def sparse(rel: str, size: int) -> Setup:
    """A file of ``size`` bytes that takes no disk space (never written)."""
    def setup(tmp: Path) -> None:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(tmp / rel, "wb") as fh:
            fh.truncate(size)
    return setup


def directory(rel: str) -> Setup:
    def setup(tmp: Path) -> None:
        (tmp / rel).mkdir(parents=True, exist_ok=True)
    return setup


def all_of(*setups: Setup) -> Setup:
    """The set-ups one after the other; what they return is kept (a list)."""
    def setup(tmp: Path) -> list:
        return [s(tmp) for s in setups]
    return setup


def copy_runs(rel: str, *run_ids: str) -> Setup:
    """Copies of recorded runs of the checkout into ``tmp/rel``."""
    def setup(tmp: Path) -> None:
        (tmp / rel).mkdir(parents=True, exist_ok=True)
        for run_id in run_ids:
            shutil.copytree(ROOT / "runs" / run_id, tmp / rel / run_id, symlinks=True)
    return setup


def edit_json(rel: str, edit: Callable[[dict], None]) -> Setup:
    """Rewrite the JSON file ``tmp/rel`` after ``edit`` changed its data."""
    def setup(tmp: Path) -> None:
        path = tmp / rel
        data = json.loads(path.read_text(encoding="utf-8"))
        edit(data)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return setup


def last_number(line: str) -> tuple[int, int]:
    """(start, end) of the last number on a line."""
    found = list(re.finditer(r"\d+(?:\.\d+)?", line))
    if not found:
        raise ValueError(f"no number in {line!r}")
    return found[-1].span()


def unchanged(rel: str, content: bytes | str) -> Callable[[Path, str], str | None]:
    """A check: ``tmp/rel`` still exists and holds ``content``."""
    want = content if isinstance(content, bytes) else content.encode("utf-8")

    def check(tmp: Path, stdout: str) -> str | None:
        path = tmp / rel
        if not path.is_file():
            return f"{rel} was removed"
        return None if path.read_bytes() == want else f"{rel} was changed"
    return check
