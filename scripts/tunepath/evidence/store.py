"""Recorded runs: the raw evidence everything on the site is derived from.

A run lives in ``runs/<run_id>/``: ``run.json`` (provenance: kind, status, date, source, hosts and
their facts, the host context its commands were rendered for, and an index of measurements,
verification outputs and skipped variants) beside ``raw/`` and ``verify/``, the load generators' and
checks' outputs exactly as printed. Runs are written atomically (a temporary directory renamed into
place) and never overwritten. Readers validate what they load: strict JSON (UTF-8, no ``NaN``, no key
twice) matching ``run.schema.json``, then what a schema cannot express (a null fact needs a reason,
the run id names the directory, step names come from the registry, a configuration is measured once
per repetition, every file a run names is the run's own, at most 16 MiB: inside its directory,
symlinks resolved, of one hard link). Whatever is wrong, the error is one line naming file and field,
e.g. ``runs/x/run.json: measurements[3].repetition: '2' is not of type 'integer'``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.model.context import HostContext
from tunepath.model.run import HostRecord, LiveFigures, RunInfo, Skipped

__all__ = ["Run", "Measurement", "Verification", "RunStore", "FACT_KEYS", "RunError", "SCHEMA_FILE", "read_record", "validate"]

FACT_KEYS = ("cpu_model", "cpus", "cpus_online", "numa_nodes", "kernel", "kernel_cmdline", "iommu",
             "nic", "os", "java_version", "tomcat_version", "load_generator", "nofile_limit")
KINDS = ("reference", "live")
STATUSES = ("complete", "failed", "partial")
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
SCHEMA_FILE = Path(__file__).with_name("run.schema.json")
MAX_RECORD_BYTES = 64 << 20      # the largest recorded run.json is well under 1 MB
MAX_FILE_BYTES = 16 << 20        # a raw output or verification file, as `tunepath parse` caps reports
FIX = "fix or restore the file from git"


class RunError(TunepathError):
    """A recorded run that cannot be read or does not validate."""


@dataclass(frozen=True)
class Measurement:
    step: str
    variant: str
    stdout: Path                 # the raw report: the run's directory / its recorded relative path
    command: str
    tool: str | None
    host: str                    # the server's name
    client: str
    source: str = ""
    cpus_online: str | None = None
    exit_status: int | None = None
    stderr: Path | None = None
    repetition: int = 1          # interleaved repetitions of one configuration: 1, 2, …
    parts: tuple[tuple[str, Path], ...] = ()   # several clients at once: (client, raw report) each
    live: LiveFigures = field(default_factory=LiveFigures)   # what a live run sampled around it


@dataclass(frozen=True)
class Verification:
    step: str
    name: str
    host: str                    # "server" or "client"
    command: str
    output: Path
    source: str = ""


@dataclass
class Run:
    """A recorded run: provenance (``info``), host context, measurements, verifications; ``record``: its run.json."""

    run_id: str
    path: Path
    record: dict
    context: HostContext
    info: RunInfo
    measurements: list[Measurement] = field(default_factory=list)
    verifications: list[Verification] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def server(self) -> HostRecord:
        return self.info.server

    @property
    def client(self) -> HostRecord:
        return self.info.client

    @property
    def same_machine(self) -> bool:
        return self.info.same_machine

    @property
    def emulated(self) -> bool:
        """The server was emulated (the lab's QEMU VM): shown apart, never ranked or paired by default."""
        return self.info.emulated

    @property
    def skipped(self) -> tuple[Skipped, ...]:
        return self.info.skipped

    def verification_text(self, step: str, name: str) -> str | None:
        """The recorded output of the check ``name`` of ``step`` (None: not recorded, or unreadable)."""
        found = next((v.output for v in self.verifications if v.step == step and v.name == name), None)
        try:
            return found.read_text(encoding="utf-8", errors="replace") if found else None
        except OSError:
            return None

    def steps(self) -> list[str]:
        """The steps this run recorded anything of, in the order it recorded them."""
        seen = [x.step for x in (*self.measurements, *self.verifications, *self.skipped)]
        return list(dict.fromkeys(seen))

    def measurement(self, step: str, variant: str, repetition: int = 1) -> Measurement | None:
        return next((m for m in self.measurements
                     if m.step == step and m.variant == variant and m.repetition == repetition), None)


class RunStore:
    """The ``runs/`` directory."""

    def __init__(self, root: Path, steps: tuple[str, ...] | None = None):
        """``steps``: the step names a run may record (the registry's); None accepts any."""
        self.root, self.steps = Path(root), (tuple(steps) if steps is not None else None)

    def run_ids(self) -> list[str]:
        """The recorded runs; a run's directory that lost its run.json is an error, not a run fewer."""
        if not self.root.is_dir():
            return []
        ids = []
        for p in sorted(self.root.iterdir()):
            if (p / "run.json").is_file():
                ids.append(p.name)
            elif not p.name.startswith(".") and any((p / d).is_dir() for d in ("raw", "verify")):
                raise RunError(f"{shown(p)}: a run's directory (raw/, verify/) without its run.json: restore "
                               "run.json from git, or remove the directory")
        return ids

    def load(self, run_id: str) -> Run:
        if not isinstance(run_id, str) or not RUN_ID.match(run_id):
            raise RunError(f"bad run id {run_id!r}: a run id is the name of a directory in {shown(self.root)} "
                           "(lower-case letters, digits, '.', '_' and '-')")
        path = self.root / run_id
        meta = path / "run.json"
        if not meta.is_file():
            known = ", ".join(self.run_ids()) or "none"
            raise RunError(f"no recorded run {run_id!r} in {self.root} (recorded runs: {known})")
        return validate(run_id, path, read_record(meta), self.steps)

    def load_all(self, run_ids: list[str] | None = None) -> list[Run]:
        return [self.load(r) for r in (run_ids if run_ids is not None else self.run_ids())]

    def write(self, record: dict, files: dict[str, bytes]) -> Run:
        """Record a new run atomically: ``files`` maps relative paths to their bytes."""
        run_id = record.get("run_id", "") if isinstance(record, dict) else ""
        if not isinstance(run_id, str) or not RUN_ID.match(run_id):
            raise RunError(f"bad run id {run_id!r}: use lower-case letters, digits, '.', '_' and '-'")
        final = self.root / run_id
        if final.exists():
            raise RunError(f"run {run_id!r} already exists in {self.root}; runs are never overwritten")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{run_id}.", dir=self.root))
        try:
            for rel, data in files.items():
                target = tmp / rel
                if not target.resolve().is_relative_to(tmp.resolve()):
                    raise RunError(f"file {rel!r} would land outside the run directory")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            (tmp / "run.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
            validate(run_id, tmp, read_record(tmp / "run.json"), self.steps)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.load(run_id)


# --- reading run.json strictly -------------------------------------------------------------

def shown(path: Path) -> str:
    """A path as messages show it: relative to the current directory when it lies inside it."""
    full = Path(os.path.abspath(path))
    return str(full.relative_to(Path.cwd())) if full.is_relative_to(Path.cwd()) else str(full)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _refuse_duplicates(pairs: list) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def read_record(meta: Path):
    """The JSON of a ``run.json``, read strictly: UTF-8, standard JSON (no NaN or Infinity),
    no key twice in one object (JSON would silently keep the last)."""
    where = shown(meta)
    try:
        size = meta.stat().st_size
        if size > MAX_RECORD_BYTES:
            raise RunError(f"{where}: {size >> 20} MB, more than the {MAX_RECORD_BYTES >> 20} MB a run "
                           f"record may have ({FIX})")
        text = meta.read_bytes().decode("utf-8")
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_refuse_duplicates)
    except OSError as exc:
        raise RunError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RunError(f"{where}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                       f"{FIX}") from None
    except json.JSONDecodeError as exc:
        raise RunError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}); {FIX}") from None
    except ValueError as exc:
        raise RunError(f"{where}: not valid JSON ({exc}); {FIX}") from None
    except RecursionError:
        raise RunError(f"{where}: not valid JSON (nested too deeply); {FIX}") from None


# --- the schema ----------------------------------------------------------------------------

@functools.cache
def _validator():
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _field(path) -> str:
    """``['measurements', 3, 'repetition']`` → ``measurements[3].repetition``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"


def _short(value) -> str:
    if isinstance(value, dict):
        return "an object" if value else "{}"
    if isinstance(value, list):
        return "a list" if value else "[]"
    text = json.dumps(value, ensure_ascii=False) if value is None or isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _types(error) -> list[str]:
    return [error.validator_value] if isinstance(error.validator_value, str) else list(error.validator_value)


def _pick(error):
    """The error to report: in an ``anyOf``, the branch whose type the value has (its own
    error), else the anyOf itself (the value has none of the types)."""
    while error.validator in ("anyOf", "oneOf") and error.context:
        beyond_type = [e for e in error.context if e.validator != "type" or e.relative_path]
        if not beyond_type:
            break
        error = max(beyond_type, key=lambda e: len(e.relative_path))
    return error


def _problem(error) -> str:
    value, kind = error.instance, error.validator
    if kind in ("anyOf", "oneOf"):
        types = [t for e in error.context if e.validator == "type" for t in _types(e)]
        return f"{_short(value)} is not of type {' or '.join(repr(t) for t in dict.fromkeys(types))}"
    if kind == "type":
        return f"{_short(value)} is not of type {' or '.join(repr(t) for t in _types(error))}"
    if kind == "enum":
        return f"{_short(value)} is not one of {', '.join(_short(v) for v in error.validator_value)}"
    if kind in ("pattern", "not"):
        return f"{_short(value)} is not {error.schema.get('description', 'in the expected form')}"
    if kind == "additionalProperties":
        known = error.schema.get("properties", {})
        unknown = ", ".join(repr(k) for k in value if k not in known)
        return f"unknown key {unknown}; the known keys are {', '.join(known)}"
    return error.message if len(error.message) <= 160 else error.message[:157] + "…"


def _check_schema(record, where: str) -> None:
    from jsonschema.exceptions import relevance

    error = max(_validator().iter_errors(record), key=relevance, default=None)
    if error is not None:
        error = _pick(error)
        raise RunError(f"{where}: {_field(error.absolute_path)}: {_problem(error)} ({FIX})")


# --- what the schema cannot say --------------------------------------------------------------

def _check_facts(record: dict, where: str) -> None:
    for role in ("server", "client"):
        host = record["hosts"][role]
        for key in FACT_KEYS:
            if host["facts"][key] is None and not host["facts_missing"].get(key, "").strip():
                raise RunError(f"{where}: hosts.{role}.facts.{key} is null without a reason in "
                               f"hosts.{role}.facts_missing.{key} ({FIX})")


def _check_steps(record: dict, where: str, steps: tuple[str, ...] | None) -> None:
    """Every step a run names is one of ``steps``; each configuration measured once per repetition."""
    named = [(f"{key}[{i}].step", entry["step"]) for key in ("measurements", "verification", "skipped")
             for i, entry in enumerate(record.get(key, []))]
    named += [(f"repetitions.{step}", step) for step in record.get("repetitions", {})]
    for at, step in named if steps is not None else ():
        if step not in steps:
            raise RunError(f"{where}: {at}: unknown step {step!r}; the steps are: {', '.join(steps)}")
    seen: dict[tuple, int] = {}
    for i, m in enumerate(record.get("measurements", [])):
        key = (m["step"], m["variant"], m.get("repetition", 1))
        if key in seen:
            raise RunError(f"{where}: measurements[{i}]: step {key[0]!r}, variant {key[1]!r}, repetition {key[2]} "
                           f"is recorded twice (also measurements[{seen[key]}]) ({FIX})")
        seen[key] = i


def _inside(run: Run, rel: str, at: str, where: str, what: str = "raw output") -> Path:
    """``run.path / rel`` once it is known to be a regular file inside the run's directory."""
    if Path(rel).is_absolute() or ".." in Path(rel).parts:
        raise RunError(f"{where}: {at}: {_short(rel)} leaves the run's directory: files of a run are named "
                       f"relative to it, e.g. raw/…, verify/… ({FIX})")
    path = run.path / rel
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):     # missing, a symlink loop, a NUL byte
        raise RunError(f"{where}: {at}: {what} {_short(rel)} is missing from {shown(run.path)} ({FIX})") from None
    if not real.is_relative_to(run.path.resolve()):
        raise RunError(f"{where}: {at}: {_short(rel)} is a symlink that leaves the run's directory ({FIX})")
    if not real.is_file():
        raise RunError(f"{where}: {at}: {_short(rel)} is not a regular file ({FIX})")
    if (st := real.stat()).st_nlink > 1:     # its other names may lie outside the run: not the run's own
        raise RunError(f"{where}: {at}: {_short(rel)} is a hard link ({st.st_nlink} names for one file, maybe one "
                       "outside the run): copy the file into the run instead of linking it (or restore it from git)")
    if st.st_size > MAX_FILE_BYTES:          # pages and notebooks read it whole: a huge one would exhaust memory
        raise RunError(f"{where}: {at}: {_short(rel)} holds {st.st_size >> 20} MiB, more than the "
                       f"{MAX_FILE_BYTES >> 20} MiB a run's file may ({FIX})")
    return path


def validate(run_id: str, path: Path, record, steps: tuple[str, ...] | None = None) -> Run:
    """The run of ``record`` (the JSON of its ``run.json``), every part checked; a RunError
    names the file and the field. First the schema (types, required fields), then what it
    cannot say; only then are the typed records built."""
    where = shown(Path(path) / "run.json")
    _check_schema(record, where)
    if record["run_id"] != run_id:
        raise RunError(f"{where}: run_id: {record['run_id']!r} does not match its directory {run_id!r} ({FIX})")
    _check_facts(record, where)
    _check_steps(record, where, steps)
    try:
        context = HostContext.from_dict(record["context"])
    except TunepathError as exc:
        raise RunError(f"{where}: context: {exc} ({FIX})") from None
    run = Run(run_id, Path(path), record, context, RunInfo.from_data(record))
    run.measurements.extend(_measurements(run, where))
    run.verifications.extend(_verifications(run, where))
    return run


def _measurements(run: Run, where: str) -> list[Measurement]:
    out = []
    for i, m in enumerate(run.record.get("measurements", [])):
        at = f"measurements[{i}]"
        parts = tuple((part["client"], _inside(run, part["stdout"], f"{at}.parts[{j}].stdout", where))
                      for j, part in enumerate(m.get("parts", [])))
        for j, part in enumerate(m.get("parts", [])):
            if "stderr" in part:
                _inside(run, part["stderr"], f"{at}.parts[{j}].stderr", where)
        out.append(Measurement(
            step=m["step"], variant=m["variant"], stdout=_inside(run, m["stdout"], f"{at}.stdout", where),
            command=m["command"], tool=m.get("tool"), host=run.server.name, client=run.client.name,
            source=m.get("source", ""), cpus_online=m.get("cpus_online"), exit_status=m.get("exit_status"),
            stderr=_inside(run, m["stderr"], f"{at}.stderr", where) if "stderr" in m else None,
            repetition=m.get("repetition", 1), parts=parts, live=LiveFigures.from_data(m)))
    return out


def _verifications(run: Run, where: str) -> list[Verification]:
    return [Verification(step=v["step"], name=v["name"], host=v["host"], command=v["command"],
                         output=_inside(run, v["output"], f"verification[{i}].output", where, "output file"),
                         source=v.get("source", ""))
            for i, v in enumerate(run.record.get("verification", []))]
