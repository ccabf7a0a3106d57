"""What is said of a recorded run after it was recorded: one top-level entry of its ``run.json``.

Two things are: ``superseded_by`` (a newer run replaces it on the pages:
:mod:`tunepath.evidence.supersede`) and ``matrix`` (the version matrix it was a cell of:
:mod:`tunepath.live.matrix`). :func:`amend` writes that one entry atomically; nothing else in the
record changes, and the run is valid before and after (the schema checks the entry).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tunepath.evidence.store import RunError, RunStore

__all__ = ["amend"]


def amend(store: RunStore, run_id: str, key: str, value) -> Path:
    """Set ``key`` to ``value`` in run ``run_id``'s run.json; returns the rewritten file. A failed
    write (a full disk) leaves the record as it was and no temporary file."""
    store.load(run_id)                               # valid before it is touched
    path = store.root / run_id / "run.json"
    before = path.read_bytes()
    record = json.loads(before)
    record[key] = value
    tmp = path.with_name("run.json.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RunError(f"run {run_id!r}: writing {path} failed ({exc.strerror or exc}); it is unchanged") from None
    try:
        store.load(run_id)                           # and still valid after
    except RunError:
        path.write_bytes(before)                     # an entry the schema refuses is not kept
        raise
    return path
