"""Charts not drawn again: what each chart was last drawn from, by SHA-256.

The charts are deterministic SVGs (:mod:`tunepath.publish.charts`): the same input gives
the same bytes. The replay build names a directory (the environment variable :data:`ENV`,
``SITE/build/cache/charts/`` of its staging directory) where each chart's record,
``NAME.json``, holds the SHA-256 of the chart's inputs and of the SVG they gave. A chart
whose inputs hash the same and whose SVG is still there with the recorded bytes is not
drawn again. The inputs' hash covers the data the chart reads (every field of every row,
not only those drawn), the code that draws (this package's chart, chart layout, caption and formatting modules)
and the versions of matplotlib (with its fonts and FreeType), numpy and Python; an input of
a type it cannot write down faithfully means no record, and the chart is drawn. The record
outlives ``--no-cache`` (the same inputs give the same bytes); deleting the directory
draws every chart again. Without the variable (a notebook run by hand, a live run) every
chart is drawn, and nothing is recorded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path, PurePath

__all__ = ["ENV", "memo_dir", "key", "unchanged", "remember", "canonical"]

ENV = "TUNEPATH_CHART_MEMO"
_CODE: list[str] = []          # the drawing code's version, computed once per process


class _Opaque(Exception):
    """An input whose value cannot be written down faithfully."""


def memo_dir() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def canonical(value) -> str:
    """A text that differs whenever ``value`` differs (types included: 1, 1.0 and True differ)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{canonical(k)}={canonical(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "set{" + ",".join(sorted(canonical(v) for v in value)) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ",".join(f"{f.name}={canonical(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if isinstance(value, PurePath):
        return f"path:{value.as_posix()}"
    if type(value).__module__ == "numpy" and hasattr(value, "item"):      # a numpy scalar
        return f"numpy.{type(value).__name__}:{value!r}"
    if _is_missing(value):
        return f"missing:{type(value).__name__}"
    raise _Opaque(type(value).__qualname__)


def _is_missing(value) -> bool:
    """pandas' NA and NaT (their repr carries no address, but is not worth trusting in general)."""
    return type(value).__name__ in ("NAType", "NaTType") and type(value).__module__.startswith("pandas")


def _code_version() -> str:
    if not _CODE:
        from importlib.metadata import PackageNotFoundError, version

        h = hashlib.sha256()
        here = Path(__file__).resolve().parent
        for name in ("charts.py", "chartbase.py", "chartlayout.py", "chartwords.py", "sweepcharts.py",
                     "formatting.py", "chartmemo.py"):
            h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
        for package in ("matplotlib", "numpy"):      # matplotlib bundles its fonts and FreeType
            try:
                h.update(f"{package} {version(package)}\n".encode())
            except PackageNotFoundError:
                h.update(f"{package} unknown\n".encode())
        h.update(f"python {sys.version}\n".encode())
        _CODE.append(h.hexdigest())
    return _CODE[0]


def key(inputs) -> str | None:
    """The SHA-256 of a chart's inputs, or None: no memo asked for, or inputs that cannot be
    written down faithfully (the chart is then drawn)."""
    if memo_dir() is None:
        return None
    try:
        text = canonical(inputs)
    except _Opaque:
        return None
    return hashlib.sha256(f"{_code_version()}\n{text}".encode()).hexdigest()


def _record_path(rel: str) -> Path:
    return memo_dir() / f"{Path(rel).stem}.json"


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def unchanged(static_dir: Path, rel: str, inputs_key: str | None) -> bool:
    """Whether ``static_dir/rel`` is the chart these inputs draw (so it need not be drawn)."""
    if inputs_key is None:
        return False
    try:
        record = json.loads(_record_path(rel).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(record, dict) or record.get("inputs") != inputs_key:
        return False
    return record.get("svg") is not None and _sha256(Path(static_dir) / rel) == record["svg"]


def remember(static_dir: Path, rel: str, inputs_key: str | None, svg: bytes) -> None:
    """Record what ``rel`` was drawn from (written atomically; nothing without a key)."""
    if inputs_key is None:
        return
    path = _record_path(rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"inputs": inputs_key, "svg": hashlib.sha256(svg).hexdigest(),
                               "chart": rel}, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
