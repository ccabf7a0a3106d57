"""Recorded runs: the raw evidence everything on the site is derived from.

A run lives in ``runs/<run_id>/``::

    run.json            provenance: kind, status, date, source, hosts and their facts,
                        the host context the commands were rendered for, and an index
                        of measurements, verification outputs and skipped variants
    raw/<file>          load-generator stdout exactly as printed (stderr and exit status
                        beside it where recorded)
    verify/<file>       verification output exactly as printed

Runs are written atomically (a temporary directory renamed into place) and never
overwritten; readers validate what they load and say which file is wrong.
"""

from __future__ import annotations

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

__all__ = ["Run", "Measurement", "Verification", "RunStore", "FACT_KEYS", "RunError"]

FACT_KEYS = ("cpu_model", "cpus", "cpus_online", "numa_nodes", "kernel", "kernel_cmdline", "iommu",
             "nic", "os", "java_version", "tomcat_version", "load_generator", "nofile_limit")
KINDS = ("reference", "live")
STATUSES = ("complete", "failed", "partial")
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")


class RunError(TunepathError):
    pass


@dataclass(frozen=True)
class Measurement:
    step: str
    variant: str
    stdout: Path                 # absolute path of the raw report
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
    """A recorded run: its provenance (``info``), host context, measurements and verifications.
    ``record`` keeps the validated ``run.json`` as recorded."""

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
    def skipped(self) -> tuple[Skipped, ...]:
        return self.info.skipped

    def steps(self) -> list[str]:
        """The steps this run recorded anything of, in the order it recorded them."""
        seen = [m.step for m in self.measurements] + [v.step for v in self.verifications]
        seen += [s.step for s in self.skipped]
        return list(dict.fromkeys(seen))

    def measurement(self, step: str, variant: str, repetition: int = 1) -> Measurement | None:
        for m in self.measurements:
            if m.step == step and m.variant == variant and m.repetition == repetition:
                return m
        return None


class RunStore:
    """The ``runs/`` directory."""

    def __init__(self, root: Path, steps: tuple[str, ...] | None = None):
        """``steps``: the step names a run may record (the registry's); None accepts any."""
        self.root = Path(root)
        self.steps = tuple(steps) if steps is not None else None

    def run_ids(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "run.json").is_file())

    def load(self, run_id: str) -> Run:
        path = self.root / run_id
        meta = path / "run.json"
        if not meta.is_file():
            known = ", ".join(self.run_ids()) or "none"
            raise RunError(f"no recorded run {run_id!r} in {self.root} (recorded runs: {known})")
        try:
            record = json.loads(meta.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RunError(f"{meta}: not valid JSON ({exc.msg} at line {exc.lineno}); "
                           "fix or restore the file from git") from None
        return _validate(run_id, path, record, self.steps)

    def load_all(self, run_ids: list[str] | None = None) -> list[Run]:
        return [self.load(r) for r in (run_ids if run_ids is not None else self.run_ids())]

    def write(self, record: dict, files: dict[str, bytes]) -> Run:
        """Record a new run atomically: ``files`` maps relative paths to their bytes."""
        run_id = record.get("run_id", "")
        if not RUN_ID.match(run_id):
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
            _validate(run_id, tmp, record, self.steps)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return self.load(run_id)


def _step(name, where: str, steps: tuple[str, ...] | None) -> str:
    if not isinstance(name, str) or not name:
        raise RunError(f"{where}: step must be a step's name, not {name!r}")
    if steps is not None and name not in steps:
        raise RunError(f"{where}: unknown step {name!r}; the steps are: {', '.join(steps)}")
    return name


def _need(record: dict, key: str, where: str):
    if key not in record:
        raise RunError(f"{where}: missing key {key!r}")
    return record[key]


def _validate(run_id: str, path: Path, record: dict, steps: tuple[str, ...] | None = None) -> Run:
    """The run of ``record`` (its ``run.json``), every part checked; a RunError names what is wrong."""
    where = str(path / "run.json")
    _check_header(run_id, record, where)
    try:
        context = HostContext.from_dict(record.get("context", {}))
    except TypeError as exc:
        raise RunError(f"{where}: bad context: {exc}") from None
    for i, s in enumerate(record.get("skipped", [])):
        for key in ("step", "variant", "reason"):
            _need(s, key, f"{where} skipped[{i}]")
    run = Run(run_id, path, record, context, RunInfo.from_data(record))
    run.measurements.extend(_measurements(run, record, where, steps))
    run.verifications.extend(_verifications(path, record, where, steps))
    return run


def _check_header(run_id: str, record: dict, where: str) -> None:
    if record.get("run_id") != run_id:
        raise RunError(f"{where}: run_id {record.get('run_id')!r} does not match its directory {run_id!r}")
    if _need(record, "kind", where) not in KINDS:
        raise RunError(f"{where}: kind must be one of {', '.join(KINDS)}")
    if _need(record, "status", where) not in STATUSES:
        raise RunError(f"{where}: status must be one of {', '.join(STATUSES)}")
    hosts = _need(record, "hosts", where)
    for role in ("server", "client"):
        host = _need(hosts, role, f"{where} hosts")
        _need(host, "name", f"{where} hosts.{role}")
        facts = _need(host, "facts", f"{where} hosts.{role}")
        missing = _need(host, "facts_missing", f"{where} hosts.{role}")
        for key in FACT_KEYS:
            if key not in facts:
                raise RunError(f"{where}: hosts.{role}.facts lacks {key!r} (use null and give the reason "
                               "in facts_missing)")
            if facts[key] is None and not missing.get(key):
                raise RunError(f"{where}: hosts.{role}.facts.{key} is null without a reason in facts_missing")


def _measurements(run: Run, record: dict, where: str, steps: tuple[str, ...] | None) -> list[Measurement]:
    out = []
    for i, m in enumerate(record.get("measurements", [])):
        w = f"{where} measurements[{i}]"
        step = _step(_need(m, "step", w), w, steps)
        stdout = run.path / _need(m, "stdout", w)
        if not stdout.is_file():
            raise RunError(f"{w}: raw output {stdout} is missing")
        repetition = m.get("repetition", 1)
        if not isinstance(repetition, int) or repetition < 1:
            raise RunError(f"{w}: repetition must be a whole number from 1, not {repetition!r}")
        parts = []
        for j, part in enumerate(m.get("parts", [])):
            raw = run.path / _need(part, "stdout", f"{w} parts[{j}]")
            if not raw.is_file():
                raise RunError(f"{w} parts[{j}]: raw output {raw} is missing")
            parts.append((_need(part, "client", f"{w} parts[{j}]"), raw))
        out.append(Measurement(
            step=step, variant=_need(m, "variant", w), stdout=stdout, command=_need(m, "command", w),
            tool=m.get("tool"), host=run.server.name, client=run.client.name, source=m.get("source", ""),
            cpus_online=m.get("cpus_online"), exit_status=m.get("exit_status"),
            stderr=run.path / m["stderr"] if m.get("stderr") else None,
            repetition=repetition, parts=tuple(parts), live=LiveFigures.from_data(m)))
    return out


def _verifications(path: Path, record: dict, where: str, steps: tuple[str, ...] | None) -> list[Verification]:
    out = []
    for i, v in enumerate(record.get("verification", [])):
        w = f"{where} verification[{i}]"
        output = path / _need(v, "output", w)
        if not output.is_file():
            raise RunError(f"{w}: output file {output} is missing")
        out.append(Verification(
            step=_step(_need(v, "step", w), w, steps), name=_need(v, "name", w), host=_need(v, "host", w),
            command=_need(v, "command", w), output=output, source=v.get("source", "")))
    return out
