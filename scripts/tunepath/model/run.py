"""Typed records of a recorded run: its hosts, notes, skipped variants, repetitions, and what a
live run sampled around each measurement.

``run.json`` stays plain JSON (the evidence, as recorded); :mod:`tunepath.evidence.store`
validates it against ``evidence/run.schema.json`` and only then builds these records, once:
each ``from_data`` relies on the types and required keys the schema checked, and every layer
above reads the records, not the JSON's string keys. Each record has a ``to_data()`` where a
page needs it back as JSON.
"""

from __future__ import annotations

import re

from dataclasses import asdict, dataclass, field

__all__ = ["HostRecord", "Note", "Skipped", "Repetitions", "ClientPart", "LiveFigures", "MatrixCell", "RunInfo"]


# CPU model names of Arm cores, as lscpu reports them or a reference run describes them
ARM_CPU = re.compile(r"\b(arm|neoverse|cortex|graviton|ampere|altra|grace|kunpeng|a64fx|aarch64)\b", re.I)

@dataclass(frozen=True)
class HostRecord:
    """One host of a run (the server, or the first client) with its facts."""

    role: str                         # "server" or "client"
    name: str
    description: str = ""
    facts: dict = field(default_factory=dict)            # FACT_KEYS → value or None
    facts_missing: dict = field(default_factory=dict)    # FACT_KEYS → why the value is None

    @classmethod
    def from_data(cls, role: str, data: dict) -> "HostRecord":
        return cls(role, data["name"], data.get("description", ""), dict(data.get("facts") or {}),
                   dict(data.get("facts_missing") or {}))

    @property
    def cpus(self) -> int | None:
        value = self.facts.get("cpus")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def arm(self) -> bool:
        """Its CPU model is an Arm core (lscpu's model name: Neoverse-N1, Cortex-A72, "Arm
        Neoverse-V2 (AWS Graviton4)", "NVIDIA Grace, Arm Neoverse-V2" …); unknown is not Arm."""
        model = self.facts.get("cpu_model")
        return isinstance(model, str) and bool(ARM_CPU.search(model))


@dataclass(frozen=True)
class Note:
    """A note on a run, for every step or only for ``steps``."""

    text: str
    steps: tuple[str, ...] | None = None

    @classmethod
    def from_data(cls, data) -> "Note":
        if isinstance(data, str):
            return cls(data)
        return cls(data["text"], tuple(data["steps"]) if "steps" in data else None)

    def concerns(self, step: str | None, sequence_steps=frozenset()) -> bool:
        """Whether the note belongs on ``step``'s page (None: the summary, which shows the
        tuning sequence's steps)."""
        if self.steps is None:
            return True
        return step in self.steps if step else any(s in self.steps for s in sequence_steps)


@dataclass(frozen=True)
class Skipped:
    """A variant a run did not measure, with the reason and the commands it would have needed."""

    step: str
    variant: str
    reason: str
    commands: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: dict) -> "Skipped":
        return cls(data["step"], data["variant"], data["reason"], tuple(data.get("commands") or ()))

    def to_data(self) -> dict:
        out = {"step": self.step, "variant": self.variant, "reason": self.reason}
        if self.commands:
            out["commands"] = list(self.commands)
        return out

    def reader_reason(self) -> str:
        """The reason as a page shows it after the variant's name: without the name again in front
        (older runs named the block that did not run, which is often named like its variant)."""
        named = f"{self.variant}: "
        return self.reason[len(named):] if self.reason.startswith(named) else self.reason


@dataclass(frozen=True)
class Repetitions:
    """How a step's interleaved rounds went: how many, why they stopped, under which rule."""

    rounds: int
    reason: str
    rule: dict
    order: tuple[str, ...] = ()
    variants: tuple[tuple[str, "Precision"], ...] = ()    # what each variant ended with, in order

    @classmethod
    def from_data(cls, data: dict) -> "Repetitions":
        return cls(int(data["rounds"]), data.get("reason", ""), dict(data.get("rule") or {}),
                   tuple(data.get("order") or ()),
                   tuple((v, Precision.from_data(p)) for v, p in (data.get("variants") or {}).items()))

    def to_data(self) -> dict:
        out = {"rounds": self.rounds, "reason": self.reason, "rule": dict(self.rule), "order": list(self.order)}
        if self.variants:
            out["variants"] = {v: p.to_data() for v, p in self.variants}
        return out

    def precision(self, variant: str) -> "Precision | None":
        return dict(self.variants).get(variant)


@dataclass(frozen=True)
class Precision:
    """How precise one variant's figure ended up: values counted, dropped (and why), the interval's
    half-width and level, the CV, and the median time to steady state."""

    n: int
    dropped: int = 0
    dropped_why: tuple[str, ...] = ()
    halfwidth_pct: float | None = None
    level: float | None = None
    cv_pct: float | None = None
    steady_state_s: float | None = None
    figure: str = "requests_per_sec"     # the figure measured: or server_cpu_us_per_req (wrk2, a constant rate)

    @classmethod
    def from_data(cls, data: dict) -> "Precision":
        return cls(int(data.get("n") or 0), int(data.get("dropped") or 0), tuple(data.get("dropped_why") or ()),
                   data.get("halfwidth_pct"), data.get("level"), data.get("cv_pct"), data.get("steady_state_s"),
                   data.get("figure") or "requests_per_sec")

    def to_data(self) -> dict:
        return {"figure": self.figure, "n": self.n, "dropped": self.dropped, "dropped_why": list(self.dropped_why),
                "halfwidth_pct": self.halfwidth_pct, "level": self.level, "cv_pct": self.cv_pct,
                "steady_state_s": self.steady_state_s}


@dataclass(frozen=True)
class ClientPart:
    """One client's share of a measurement that several clients drove at once."""

    client: str
    client_cpu_s: float | None = None
    exit_status: int | None = None


@dataclass(frozen=True)
class LiveFigures:
    """What a live run sampled around one measurement (empty for the published reference runs)."""

    cpu_utilisation: dict = field(default_factory=dict)  # host → {mode: %} or a note (same machine)
    window_s: float | None = None
    tomcat_cpu_s: float | None = None
    client_cpu_s: float | None = None
    jvm_warnings: tuple[str, ...] = ()
    nofile: int | None = None
    ready_after_s: float | None = None
    parts: tuple[ClientPart, ...] = ()
    warmup: dict | None = None        # the steady-state warm-up (tunepath.analysis.steady.WarmUp.to_dict)
    placement: dict | None = None     # shared_kernel, server_cpus, client_cpus (taskset; "" unpinned)
    jvm: dict | None = None           # GC/JIT counters: "start" and "during" (parse.hsperf), or "missing"
    controller_cpu_s: float | None = None   # the controller's CPU time, where it shares the server's kernel
    counted_s: float | None = None    # the seconds of load whose requests make the figures
    phases: dict | None = None        # where its wall time went (tunepath.live.measure.Phases.to_dict)

    @classmethod
    def from_data(cls, data: dict) -> "LiveFigures":
        parts = tuple(ClientPart(p.get("client", ""), p.get("client_cpu_s"), p.get("exit_status"))
                      for p in data.get("parts") or ())
        return cls(dict(data.get("cpu_utilisation") or {}), data.get("window_s"), data.get("tomcat_cpu_s"),
                   data.get("client_cpu_s"), tuple(data.get("jvm_warnings") or ()), data.get("nofile"),
                   data.get("ready_after_s"), parts, data.get("warmup"), data.get("placement"), data.get("jvm"),
                   data.get("controller_cpu_s"), data.get("counted_s"), data.get("phases"))

    def to_data(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Cell:
    """One combination of a version matrix's axes: the Tomcat and Java releases it sets (an axis the
    matrix does not vary is None)."""

    tomcat: str | None = None
    java: int | None = None

    def axes(self) -> tuple[tuple[str, str | int], ...]:
        """The axes this cell sets, in the matrix's order: (("tomcat", "11.0.10"), ("java", 17))."""
        return tuple((axis, value) for axis, value in (("tomcat", self.tomcat), ("java", self.java)) if value is not None)

    @property
    def label(self) -> str:
        """As the command line gives it: "tomcat=11.0.10 java=17"."""
        return " ".join(f"{axis}={value}" for axis, value in self.axes())

    @property
    def words(self) -> str:
        """As readers read it: "Tomcat 11.0.10, Java 17"."""
        return ", ".join(f"{axis.capitalize()} {value}" for axis, value in self.axes())


@dataclass(frozen=True)
class MatrixCell:
    """The version matrix a run was a cell of (``tunepath run --matrix``, which writes it into the
    recorded run: :mod:`tunepath.live.matrix`): the matrix's id, this cell's place in it and the
    versions the cell set."""

    matrix: str                    # "matrix-<when it started, UTC>": the cells of one matrix share it
    index: int                     # 1-based
    cells: int
    cell: Cell

    @property
    def words(self) -> str:
        return self.cell.words

    @classmethod
    def from_data(cls, data: dict | None) -> "MatrixCell | None":
        if not data:
            return None
        return cls(data["id"], data["index"], data["cells"], Cell(data.get("tomcat"), data.get("java")))

    def to_data(self) -> dict:
        return {"id": self.matrix, "index": self.index, "cells": self.cells} | dict(self.cell.axes())


@dataclass(frozen=True)
class RunInfo:
    """A run's provenance: what it is, where it ran, what it says about itself."""

    run_id: str
    kind: str                      # "reference" or "live"
    status: str                    # "complete", "failed" or "partial"
    label: str
    server: HostRecord
    client: HostRecord
    same_machine: bool = False
    emulated: bool = False         # the server was emulated (a QEMU VM): figures test commands, not performance
    kind_label: str | None = None
    date: str | None = None
    date_note: str = ""
    source: str = ""
    notes: tuple[Note, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    repetitions: dict = field(default_factory=dict)      # step → Repetitions
    superseded_by: str | None = None     # a newer run that replaces this one on the pages
    superseded_why: str = ""
    matrix: MatrixCell | None = None     # the version matrix this run was a cell of

    @classmethod
    def from_data(cls, data: dict) -> "RunInfo":
        hosts = data["hosts"]
        return cls(
            run_id=data["run_id"], kind=data["kind"], status=data["status"],
            label=data.get("label") or data["run_id"],
            server=HostRecord.from_data("server", hosts["server"]), client=HostRecord.from_data("client", hosts["client"]),
            same_machine=bool(data.get("same_machine")), emulated=bool(data.get("emulated")), kind_label=data.get("kind_label"), date=data.get("date"),
            date_note=data.get("date_note", ""), source=data.get("source", ""),
            notes=tuple(Note.from_data(n) for n in data.get("notes") or ()),
            skipped=tuple(Skipped.from_data(s) for s in data.get("skipped") or ()),
            repetitions={step: Repetitions.from_data(r) for step, r in (data.get("repetitions") or {}).items()},
            superseded_by=(data.get("superseded_by") or {}).get("run"),
            superseded_why=(data.get("superseded_by") or {}).get("why", ""),
            matrix=MatrixCell.from_data(data.get("matrix")))
