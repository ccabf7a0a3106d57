"""Execution cache of the replay build: run a step's notebook only when its inputs changed.

A step's notebook is a function of four things, and the cache key is a SHA-256 over
exactly those:

* **notebook** – the bytes of ``notebooks/NN-STEP.ipynb``;
* **parameters** – the Papermill parameters (JSON with sorted keys: the selected run
  ids, mode, …), with the runs and site directories relative to the site directory
  (:func:`tunepath.publish.build.step_parameters`): the key survives moving the checkout;
* **runs** – the raw inputs: every file under the runs directory (relative path and
  content hash), except ``.inprogress/`` (a run being recorded) and the temporary
  ``.RUN.*`` directories :meth:`tunepath.evidence.store.RunStore.write` renames into place;
* **package** – ``tunepath.__version__`` plus a hash of every file of the package
  (its modules and templates; ``__pycache__`` left out).

The runs and the package are hashed once per build (:class:`BuildInputs`), not once
per step. After a step executes, a manifest ``SITE/build/cache/STEP.json`` records the
key, its four parts and the SHA-256 of every output the notebook produced (the executed
notebook and its HTML, the step's Hugo data, the step's charts). A later build skips the
step only when the key matches *and* every recorded output is still there with the
recorded bytes; otherwise it says why it runs the notebook again.

Manifests are written atomically, and only after the notebook and its HTML were
produced: a failed execution leaves no manifest claiming success (the build removes
the step's manifest before executing it). The build does all this in its staging
directory, on a copy of the published outputs and manifests, and publishes manifests
and outputs together (:mod:`tunepath.publish.build`): a failed build changes neither.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["CACHE_VERSION", "OUTPUT_DIRS", "StepKey", "BuildInputs", "Verdict", "sha256_file", "tree_digest",
           "check_package", "runs_digest", "package_digest", "parameters_digest", "manifest_path", "read_manifest",
           "write_manifest", "drop_manifest", "check", "snapshot_outputs", "changed_since", "step_outputs",
           "record", "UNCHANGED", "runs_check_key", "runs_checked", "record_runs_checked"]

CACHE_VERSION = 1
# where a step's notebook writes (relative to the site directory)
OUTPUT_DIRS = ("data", "static/charts", "static/notebooks")
COMPONENTS = ("notebook", "parameters", "runs", "package")
UNCHANGED = "unchanged (code, parameters, runs, package) — not re-executed"


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _files(root: Path, skip_dir) -> list[Path]:
    """Every regular file under ``root`` (sorted, deterministic), pruning directories
    for which ``skip_dir(relative_parts)`` is true."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).parts
        dirnames[:] = sorted(d for d in dirnames if not skip_dir(rel_dir + (d,)))
        out.extend(Path(dirpath) / f for f in sorted(filenames))
    return out


def _tree_digest(root: Path, files: list[Path], prefix: str = "") -> str:
    """Paths and contents. A symlink counts by where it points, not by what it reaches (a run's
    files must stay inside it, and a link to ``/dev/zero`` would never finish hashing); a FIFO
    or device counts by its name only."""
    h = hashlib.sha256(prefix.encode())
    for path in files:
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            h.update(f"{rel}\0-> {os.readlink(path)}\n".encode())
        elif path.is_file():
            h.update(f"{rel}\0{sha256_file(path)}\n".encode())
        else:
            h.update(f"{rel}\0not a regular file\n".encode())
    return h.hexdigest()


def tree_digest(root: Path) -> str:
    """Hash of every file under ``root`` (relative paths and contents); of nothing if it is absent."""
    root = Path(root)
    return _tree_digest(root, _files(root, lambda parts: False) if root.is_dir() else [])


def _runs_skip(parts: tuple[str, ...]) -> bool:
    # .inprogress/ (a run being recorded) and RunStore.write's temporary .RUN.xxxx/ dirs:
    # neither is a recorded run yet
    return len(parts) == 1 and parts[0].startswith(".")


def runs_digest(runs_dir: Path) -> str:
    """Hash of the raw inputs: every file under ``runs_dir`` with its relative path. A run's
    directory that is a symbolic link to one elsewhere is read through it, as the run store reads
    it: its files count, so that editing them there is seen."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return hashlib.sha256(b"no runs directory").hexdigest()
    files = _files(runs_dir, _runs_skip)
    for entry in sorted(runs_dir.iterdir()):
        if entry.is_symlink() and entry.is_dir() and not _runs_skip((entry.name,)):
            files += _files(entry, lambda parts: False)
    return _tree_digest(runs_dir, files)


def check_package(project: Path) -> None:
    """The package this build runs is the project's own ``scripts/tunepath``, where the project has one.
    Another (an editable install left pointing at an older copy, a PYTHONPATH to another checkout) would
    draw this project's pages with other code, and cache them under its package's hash."""
    own, running = project / "scripts" / "tunepath", Path(__file__).resolve().parents[1]
    if own.is_dir() and own.resolve() != running:
        raise TunepathError(f"the tunepath package imported here is {running}, not this project's {own}: the "
                            "build would run other code. Build with the project's scripts/build, or point the "
                            f"environment at it (`.venv/bin/python -m pip install --no-deps -e {project}`)")


def package_digest(package_dir: Path | None = None, version: str | None = None) -> str:
    """Hash of the tunepath package: its version and every file (modules, templates)."""
    if package_dir is None or version is None:
        from tunepath import __version__

        package_dir = package_dir or Path(__file__).resolve().parents[1]
        version = version or __version__
    package_dir = Path(package_dir)
    files = [p for p in _files(package_dir, lambda parts: parts[-1] == "__pycache__")
             if p.suffix not in (".pyc", ".pyo") and not p.name.endswith(".tmp")]
    return _tree_digest(package_dir, files, prefix=f"tunepath {version}\n")


def parameters_digest(parameters: dict) -> str:
    text = json.dumps(parameters, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class StepKey:
    """The four parts of a step's cache key (each a SHA-256) and the key over them."""

    notebook: str
    parameters: str
    runs: str
    package: str

    @property
    def key(self) -> str:
        text = "".join(f"{name}:{getattr(self, name)}\n" for name in COMPONENTS)
        return hashlib.sha256(f"tunepath-cache-{CACHE_VERSION}\n{text}".encode()).hexdigest()

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in COMPONENTS}


@dataclass
class BuildInputs:
    """What every step of one build shares, hashed once: the runs and the package."""

    runs: str
    package: str
    hashing_s: float = 0.0

    @classmethod
    def collect(cls, runs_dir: Path) -> "BuildInputs":
        import time

        t0 = time.monotonic()
        runs, package = runs_digest(runs_dir), package_digest()
        return cls(runs, package, time.monotonic() - t0)

    def key_for(self, notebook: Path, parameters: dict) -> StepKey:
        return StepKey(sha256_file(notebook), parameters_digest(parameters), self.runs, self.package)


# --- the runs' validation ------------------------------------------------------------------

RUNS_CHECKED = "runs-checked.json"    # in build/cache/: the runs found valid by the last build


def runs_check_key(runs_dir: Path, run_ids: list[str] | None, inputs: BuildInputs) -> str:
    """What validating the runs depends on: every file under the runs directory (the runs
    digest), every directory there (a run's directory that lost its run.json is an error),
    the selection, and the package (the validator, its schema, the registry's steps)."""
    runs_dir = Path(runs_dir)
    dirs = []
    for dirpath, dirnames, _ in os.walk(runs_dir):
        rel = Path(dirpath).relative_to(runs_dir).parts
        dirnames[:] = sorted(d for d in dirnames if not _runs_skip(rel + (d,)))
        dirs.extend("/".join(rel + (d,)) for d in dirnames)
    text = json.dumps({"runs": inputs.runs, "package": inputs.package, "dirs": dirs,
                       "selection": list(run_ids) if run_ids else None}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def runs_checked(site_dir: Path, key: str) -> int | None:
    """How many runs the last successful build into ``site_dir`` found valid, if it checked
    exactly these (``key``); else None."""
    try:
        data = json.loads((Path(site_dir) / "build" / "cache" / RUNS_CHECKED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("key") == key and isinstance(data.get("count"), int):
        return data["count"]
    return None


def record_runs_checked(site_dir: Path, key: str, count: int) -> None:
    """Record (atomically) that the runs of ``key`` were found valid: ``count`` runs. A record
    that says so already is left as it is (a warm build changes no file)."""
    path = Path(site_dir) / "build" / "cache" / RUNS_CHECKED
    text = json.dumps({"key": key, "count": count}) + "\n"
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --- manifests ---------------------------------------------------------------------------

def manifest_path(site_dir: Path, step: str) -> Path:
    return Path(site_dir) / "build" / "cache" / f"{step}.json"


def read_manifest(site_dir: Path, step: str) -> dict | None:
    """The step's manifest, or None when there is none or it is unreadable."""
    path = manifest_path(site_dir, step)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"unreadable": True}
    if not isinstance(data, dict) or data.get("cache_version") != CACHE_VERSION:
        return {"unreadable": True}
    return data


def write_manifest(site_dir: Path, step: str, manifest: dict) -> Path:
    """Write atomically: a temporary file in the same directory, fsync, rename."""
    path = manifest_path(site_dir, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{step}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def drop_manifest(site_dir: Path, step: str) -> None:
    manifest_path(site_dir, step).unlink(missing_ok=True)


@dataclass
class Verdict:
    fresh: bool
    reasons: list[str] = field(default_factory=list)

    def why(self) -> str:
        return ", ".join(self.reasons)


def check(site_dir: Path, step: str, key: StepKey) -> Verdict:
    """Whether ``step`` may be skipped: same key, every recorded output intact."""
    manifest = read_manifest(site_dir, step)
    if manifest is None:
        return Verdict(False, ["no cache"])
    if manifest.get("unreadable"):
        return Verdict(False, ["cache manifest unreadable"])
    reasons = []
    if manifest.get("key") != key.key:
        before = manifest.get("components") or {}
        reasons = [f"{name} changed" for name in COMPONENTS if before.get(name) != getattr(key, name)]
        reasons = reasons or ["cache key changed"]
    outputs = manifest.get("outputs") or {}
    if not outputs:
        reasons.append("no outputs recorded")
    site_dir = Path(site_dir)
    for rel, digest in sorted(outputs.items()):
        path = site_dir / rel
        if not path.is_file():
            reasons.append(f"output missing: {rel}")
        elif not reasons and sha256_file(path) != digest:   # hash only while it still matters
            reasons.append(f"output changed: {rel}")
    return Verdict(not reasons, reasons)


# --- outputs -----------------------------------------------------------------------------

def snapshot_outputs(site_dir: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file where notebooks write, to see what an execution touched."""
    site_dir = Path(site_dir)
    snap = {}
    for sub in OUTPUT_DIRS:
        root = site_dir / sub
        if not root.is_dir():
            continue
        for path in _files(root, lambda parts: False):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            snap[path.relative_to(site_dir).as_posix()] = (st.st_size, st.st_mtime_ns)
    return snap


def changed_since(site_dir: Path, before: dict[str, tuple[int, int]]) -> set[str]:
    """Files where notebooks write that are new or changed since the snapshot ``before``."""
    return {rel for rel, stat in snapshot_outputs(site_dir).items()
            if before.get(rel) != stat and not rel.endswith(".tmp")}


def _chart_refs(document) -> set[str]:
    """Chart paths (relative to static/) referenced anywhere in a Hugo data document."""
    found: set[str] = set()
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and item.startswith("charts/") and item.endswith(".svg"):
            found.add(item)
    return found


def step_outputs(site_dir: Path, data_file: str, notebook_name: str,
                 before: dict[str, tuple[int, int]] | None = None) -> list[str]:
    """The files a step's execution produced, relative to the site directory.

    By name: the executed notebook and its HTML (static/notebooks/), the step's data
    file, and every chart that data file references (static/charts/STEP-*-RUN.svg).
    Plus anything under data/, static/charts/ or static/notebooks/ that is new or
    changed since ``before`` (a snapshot taken just before the execution).
    """
    site_dir = Path(site_dir)
    stem = notebook_name.removesuffix(".ipynb")
    named = {f"static/notebooks/{notebook_name}", f"static/notebooks/{stem}.html", data_file}
    data_path = site_dir / data_file
    if data_path.is_file():
        try:
            named |= {f"static/{ref}" for ref in _chart_refs(json.loads(data_path.read_text(encoding="utf-8")))}
        except ValueError:
            pass
    if before is not None:
        named |= changed_since(site_dir, before)
    return sorted(rel for rel in named if (site_dir / rel).is_file())


def record(site_dir: Path, step: str, key: StepKey, outputs: list[str], parameters: dict,
           duration_s: float) -> Path:
    """Write the manifest of a step that has just executed successfully."""
    from tunepath import __version__

    site_dir = Path(site_dir)
    manifest = {
        "cache_version": CACHE_VERSION,
        "step": step,
        "key": key.key,
        "components": key.to_dict(),
        "package_version": __version__,
        "parameters": parameters,
        "outputs": {rel: sha256_file(site_dir / rel) for rel in outputs},
        "executed": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(duration_s, 3),
    }
    return write_manifest(site_dir, step, manifest)
