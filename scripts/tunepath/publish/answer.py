"""The answer a step page opens with: what to change, what it did on each kind of host, when not to.

:func:`step_answer` builds it from the step's own words (``Step.change``, ``Step.avoid``,
``Step.answer_variants``) and the verdicts its runs already carry
(:mod:`tunepath.analysis.verdicts`). Nothing is typed in: every figure comes from a verdict.

Each kind of host gets one :class:`HostAnswer`:

- a published reference run: its single measurement, said so (never a verdict);
- per kind of real host (its CPU model and count), its newest live run, a version matrix's cell
  only where no other run of that kind has the step: each answering comparison's 95 % verdict in words;
- an emulated server: that it checked the commands, and no figure (it measures the emulator).

A host that skipped the step says why. The summary's "what to change" table reads the same
records (:func:`tunepath.publish.hugo_data.change_table`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from tunepath.analysis.pairing import host_kind
from tunepath.analysis.verdicts import WORDS, Verdict, host_words
from tunepath.publish import formatting as fmt

__all__ = ["Answer", "HostAnswer", "RunFacts", "step_answer", "verdict_words", "verdict_short", "verdict_class"]


@dataclass(frozen=True)
class HostAnswer:
    """What the step did on one host: the host and how it was measured (``who``, both), one line
    per answering comparison, or why there is none (``skipped``, or ``note`` for an emulated server)."""

    run_id: str
    kind: str                     # reference | live | emulated
    host: str                     # the host alone, as the summary's table names it: "the lab (vm: AMD EPYC, 2 CPUs)"
    how: str                      # "live run of 2026-12-02", "published reference run (…)", "emulated server (QEMU)"
    lines: tuple[tuple[str, str, str], ...] = ()     # (verdict class, words, the same in a few words)
    note: str = ""
    arm: bool = False             # the server is an Arm one (not emulated): what an export to Arm's repository shows

    @property
    def who(self) -> str:
        return f"{self.host}, {self.how}"

    @property
    def brief(self) -> str:
        """All of it in one short line, for the summary's table: a reference run's every comparison;
        a live run's real differences, then how many showed none or got no verdict."""
        if self.note:
            return self.note
        if self.kind == "reference":
            return "; ".join(short for _, _, short in self.lines)
        real = [short for c, _, short in self.lines if c == "significant"]
        none = sum(1 for c, _, _ in self.lines if c == "not-significant")
        undecided = sum(1 for c, _, _ in self.lines if c == "none")
        rest = [f"{n} {'other ' if real else ''}comparison{'s' if n != 1 else ''}: no difference shown at 95 %"
                for n in (none,) if n]
        rest += [f"{n} {'other ' if real or none else ''}comparison{'s' if n != 1 else ''} without a verdict"
                 for n in (undecided,) if n]
        return "; ".join(real + rest)

    def to_data(self) -> dict:
        d = asdict(self)
        d["lines"] = [{"verdict": c, "text": t, "short": s} for c, t, s in self.lines]
        d["brief"], d["who"] = self.brief, self.who
        return d


@dataclass(frozen=True)
class Answer:
    change: str
    avoid: str
    hosts: tuple[HostAnswer, ...] = field(default_factory=tuple)

    def to_data(self) -> dict:
        return {"change": self.change, "avoid": self.avoid, "hosts": [h.to_data() for h in self.hosts]}


def verdict_class(v: Verdict) -> str:
    """``significant``, ``not-significant`` or ``none`` (no verdict)."""
    if v.significant is None:
        return "none"
    return "significant" if v.significant else "not-significant"


def verdict_words(v: Verdict) -> str:
    """One comparison for a reader: the change, then the 95 % verdict in words.

    "NIO2 against NIO: −17.10 % server CPU per request; the 95 % interval (−40.00 % to +3.00 %)
    includes no change, so no difference is shown at 95 %"."""
    said = f"{v.change} against {v.against}: "
    said += f"{fmt.percent_change(v.change_pct)} {WORDS[v.figure]}" if v.change_pct is not None else WORDS[v.figure]
    if v.why == "reference":
        return f"{said}, one measurement each, so no verdict"
    if v.significant is None:
        return f"{said}; no verdict: {v.reason}"
    interval = f"{fmt.percent_change(v.low_pct)} to {fmt.percent_change(v.high_pct)}"
    level = fmt.level(v.level)
    if v.significant:
        return f"{said}, a real difference at 95 % ({level} interval {interval})"
    return f"{said}; its {level} interval ({interval}) includes no change, so no difference is shown at 95 %"


_SHORT = {"requests_per_sec": "requests/s", "server_cpu_us_per_req": "CPU/request"}


def verdict_short(v: Verdict) -> str:
    """The same in a few words, for the summary's table: "NIO2: −17.10 % CPU/request, no difference
    shown at 95 %"."""
    said = f"{v.change}: " + (f"{fmt.percent_change(v.change_pct)} {_SHORT[v.figure]}" if v.change_pct is not None
                               else _SHORT[v.figure])
    if v.why == "reference":
        return f"{said}, one run"
    if v.significant is None:
        return f"{said}, no verdict"
    return f"{said}, {'a real difference' if v.significant else 'no difference shown'} at 95 %"


@dataclass(frozen=True)
class RunFacts:
    """What the answer reads of one run of the step: its verdicts, why variants were skipped, and
    whether it measured anything."""

    run: object
    verdicts: tuple[Verdict, ...]
    skipped: tuple[tuple[str, str], ...]     # (variant, reason as a reader reads it)
    measured: bool
    checks: tuple[str, ...] = ()             # an emulated server's pass mark per command block (publish/checks.py)

    @classmethod
    def from_block(cls, run, block: dict) -> "RunFacts":
        """From a run's part of the step data (hugo_data.run_block)."""
        return cls(run, tuple(Verdict(**v) for v in block.get("verdicts") or []),
                   tuple((s.get("variant", ""), s.get("reason", "")) for s in block.get("skipped") or []),
                   bool(block.get("measurements")), tuple(c["mark"] for c in block.get("checks") or []))


def _first_reason(reason: str) -> str:
    """A skip reason's first clause, without the block it names ("move-cpus: the host has 1 NUMA
    node: …" → "the host has 1 NUMA node: …"); its whole text stays in the run's evidence."""
    first = reason.split(";")[0].strip()
    return re.sub(r"^[a-z0-9]+(?:-[a-z0-9]+)+: ", "", first)


def _checked(marks: tuple[str, ...]) -> str:
    """An emulated server's function check in a few words: "its 6 command blocks passed"."""
    passed, failed = marks.count("pass"), marks.count("fail")
    if not marks:
        return "the commands ran"
    if passed == len(marks):
        return f"its {passed} command block{'s' if passed != 1 else ''} passed" if passed > 1 else "its command block passed"
    said = f"{passed} of {len(marks)} command blocks passed"
    return said + (f", {failed} failed" if failed else "")


def _host(facts: RunFacts, variants: tuple[str, ...]) -> HostAnswer | None:
    run = facts.run
    kind = "emulated" if run.emulated else run.kind
    arm = run.server.arm and not run.emulated
    host = run.server.name
    if kind == "reference":
        how = "published reference run (a single measurement per configuration)"
    elif kind == "emulated":
        how = "emulated server (QEMU)"
    else:
        kind_of = host_kind(run)
        server = f"{host}: {kind_of}" if kind_of is not None else host
        host = f"the lab ({server})" if host_words(run) == "the lab" else server
        how = f"live run of {run.info.date or run.run_id}" + (
            f" (a version matrix's cell: {run.info.matrix.words})" if run.info.matrix is not None else "")
    skipped = [reason for variant, reason in facts.skipped if not variants or variant in variants]
    if not facts.measured and skipped:
        return HostAnswer(run.run_id, kind, host, how, note=f"skipped, {_first_reason(skipped[0])}", arm=arm)
    if kind == "emulated":
        return HostAnswer(run.run_id, kind, host, how, note=f"{_checked(facts.checks)}; an emulator's speed says nothing "
                                                      "about a server, so no figure")
    lines = tuple((verdict_class(v), verdict_words(v), verdict_short(v)) for v in facts.verdicts if not variants or v.variant in variants)
    if not lines:
        return None
    return HostAnswer(run.run_id, kind, host, how, lines, arm=arm)


def step_answer(step, runs: list[RunFacts]) -> Answer | None:
    """The answer box of ``step`` (None where the step has no ``change``): every reference run, one
    live run per kind of real host and the newest emulated one (``runs`` in the page's order).
    A host kind's run is its newest one that is not a version matrix's cell (a matrix follows
    versions on the history page; the step's answer is the path's own run), else its newest cell."""
    if not step.change:
        return None
    groups: dict[tuple, list[RunFacts]] = {}
    for facts in runs:
        groups.setdefault(_answer_key(facts.run), []).append(facts)
    hosts: list[HostAnswer] = []
    for members in groups.values():
        for facts in sorted(members, key=lambda f: _preference(f.run), reverse=True):
            host = _host(facts, step.answer_variants)
            if host is not None:
                hosts.append(host)
                break
    if all(h.kind == "emulated" for h in hosts):     # nothing compared on a real host: no "what it did"
        hosts = []
    return Answer(step.change, step.avoid, tuple(hosts))


def _answer_key(run) -> tuple:
    """Which answer line a run may give: its own (a reference run), its host kind's (a live run),
    or the emulated servers' one."""
    if run.emulated:
        return ("emulated",)
    if run.kind == "reference":
        return ("reference", run.run_id)
    kind = host_kind(run)
    return ("live", kind.key if kind is not None else run.server.name)


def _preference(run) -> tuple:
    """Larger is preferred: not a version matrix's cell, then the newest."""
    return run.info.matrix is None, run.info.date or "", run.run_id
