"""A step's verification outputs as the pages read them (``verification`` in a run's block of
``data/steps/<step>.json``), and the run's kernel command lines (``kernel_cmdline_before``).

Each verification entry says what happened to the check in that run:

- ``status: "recorded"``: the command, where it ran, what it printed (``full``), the lines a page
  shows first (``excerpt``, ``publish.excerpt``) and, in ``conditions``, every way the state it
  was recorded in differs from the one the step measures: a change of the step that was not
  applied before it (a dry run, or skipped, with the run's reason), or a JVM other than the one
  the measurements ran on;
- ``status: "empty"``: the check's command ran and printed nothing (``reason`` says so);
- ``status: "failed"``: the check's command ran and failed; ``output`` (and ``reason``) hold the
  last line it printed on its error output;
- ``status: "skipped"``: the run did not run the check (a plan block skipped) and recorded why
  (``reason``).

A check a run never tried has no entry; the page says so.
"""

from __future__ import annotations

import re

from tunepath.evidence.store import Run, Verification
from tunepath.model.cmdline import KernelCmdline, cmdline_diff
from tunepath.publish.excerpt import excerpt

__all__ = ["verification_entries", "kernel_cmdline_entry", "source_words", "java_in_output", "java_condition",
           "affects", "AFFECTED_BY"]

_VERIFY = "verify-"
_JAVA_OUT = (re.compile(r"JVM Version:\s*(\S+)"), re.compile(r'version "([^"]+)"'))
_VERSION = re.compile(r"\d+(?:\.\d+)*")


def source_words(source: str) -> str:
    """Where an output comes from, in a reader's words: the reference runs' internal seed numbers
    ("seed 000 (excerpt as published)") become "excerpt as published in the source"."""
    m = re.fullmatch(r"seed[ -]\d+\s*(?:\((.*)\))?", source.strip())
    if not m:
        return source
    return f"{m[1]} in the source" if m[1] else "as published in the source"


def java_in_output(output: str) -> str | None:
    """The JVM version an output names (``version.sh``'s "JVM Version:", ``java -version``)."""
    for pattern in _JAVA_OUT:
        m = pattern.search(output)
        if m:
            return m[1]
    return None


def _numeric(version: str | None) -> str | None:
    m = _VERSION.search(version or "")
    return m[0] if m else None


def java_condition(output: str, measured: str | None) -> dict | None:
    """A condition when ``output`` shows another JVM than ``measured`` (the run's Java fact, the
    one Tomcat ran on, with the ``JAVA_HOME`` it was given), else None."""
    shown = java_in_output(output)
    a, b = _numeric(shown), _numeric(measured)
    if not a or not b or a.startswith(b) or b.startswith(a):
        return None
    home = re.search(r"\((JAVA_HOME=[^)]*)\)", measured or "")
    where = f" ({home[1]})" if home else ""
    return {"kind": "java", "shown": a, "measured": b,
            "text": f"Recorded with another JVM: this output names Java {a}, while Tomcat ran this run's "
                    f"measurements on Java {b}{where}."}


def _step_blocks(run: Run, step: str) -> list[dict]:
    return [b for b in run.record.get("blocks", []) if b.get("step") == step and isinstance(b.get("block"), str)]


# what an output reads → the changes that alter it (by their command text). An output whose
# command matches none of these is taken to depend on every change of its step.
AFFECTED_BY: tuple[tuple[re.Pattern, re.Pattern], ...] = (
    (re.compile(r"\bdmesg\b|/proc/cmdline"), re.compile(r"GRUB_CMDLINE|update-grub")),
    (re.compile(r"\blscpu\b|\bnumactl\b|/sys/devices/system/cpu"), re.compile(r"/sys/devices/system/cpu/.*online")),
    (re.compile(r"\bethtool -l\b"), re.compile(r"\bethtool -L\b")),
    (re.compile(r"(?i)huge|meminfo"), re.compile(r"nr_hugepages")),
)


def affects(change: str, command: str) -> bool:
    """Whether a change (its command text) can alter what ``command`` prints."""
    rules = [c for reads, c in AFFECTED_BY if reads.search(command)]
    return not rules or any(c.search(change) for c in rules)


def _unapplied(blocks: list[dict], name: str, command: str) -> list[dict]:
    """The step's blocks that did not run before the check ``name`` (a probe: up to its own block;
    a verification command: the whole plan, which runs before them) and can alter what it prints.
    The page keeps those its command blocks mark as changes (``disruptive``)."""
    out, seen = [], set()
    for b in blocks:
        if b["block"] == name:
            break
        if b.get("outcome") in ("dry-run", "skipped") and not b["block"].startswith(_VERIFY) \
                and b["block"] not in seen and affects(b.get("text") or "", command):
            seen.add(b["block"])
            out.append({"block": b["block"], "outcome": b["outcome"], "reason": b.get("reason") or ""})
    return out


def _recorded(run: Run, v: Verification, blocks: list[dict]) -> dict:
    output = v.output.read_text(encoding="utf-8", errors="replace")
    java = java_condition(output, run.server.facts.get("java_version")) if v.host == "server" else None
    return {"status": "recorded", "host": v.host, "command": v.command, "output": output,
            "source": source_words(v.source), **excerpt(v.command, output).to_data(),
            "conditions": [java] if java else [], "unapplied": _unapplied(blocks, v.name, v.command)}


_EMPTY = "the command printed nothing"


def _not_recorded(b: dict, ran: bool) -> dict:
    """A check with no recorded output: one that ran (a ``verify-`` block: it printed nothing, or
    failed with what it printed) or one the run skipped, with why."""
    reason = (b.get("reason") or "").strip()
    entry = {"host": b.get("host") or "server", "command": b.get("text") or ""}
    if not ran:
        return {"status": "skipped", **entry, "reason": reason or "no reason recorded"}
    if reason in ("", "no output"):
        return {"status": "empty", **entry, "reason": _EMPTY, "output": ""}
    return {"status": "failed", **entry, "reason": reason, "output": reason}


def verification_entries(run: Run, step: str) -> dict[str, dict]:
    """``run``'s verification checks for ``step``, by name: the recorded outputs, then the checks
    whose command ran and printed nothing or failed (a ``verify-<name>`` block the run marked
    skipped), then those it skipped (a read-only plan block whose id is the check's name), with why."""
    blocks = _step_blocks(run, step)
    out = {v.name: _recorded(run, v, blocks) for v in run.verifications if v.step == step}
    for b in blocks:
        name = b["block"].removeprefix(_VERIFY)
        if b.get("outcome") == "skipped" and name not in out:
            out[name] = _not_recorded(b, ran=b["block"].startswith(_VERIFY))
    return out


def kernel_cmdline_entry(run: Run) -> dict | None:
    """A live run's kernel command lines (None for other runs): the one its server booted with
    before the run changed anything (``full``, ``shown``: the parameters the path cares about,
    ``left_out``) and, in ``after``, the one read after each rebooting block, by block id, with
    the parameters added and removed."""
    if run.kind != "live" or not run.server.facts.get("kernel_cmdline"):
        return None
    before = KernelCmdline.parse(run.server.facts["kernel_cmdline"])
    after = {}
    for b in run.record.get("blocks", []):
        if isinstance(b.get("kernel_cmdline"), str) and b.get("block") not in after:
            line = KernelCmdline.parse(b["kernel_cmdline"])
            after[b["block"]] = {**line.to_data(), **cmdline_diff(before, line), "step": b.get("step")}
    return {**before.to_data(), "after": after}
