"""A run's command blocks as a page shows them: the reader's command, and the command as run.

Each block of a step is rendered twice from the step's template (``Step.plan``): for the reader
(:func:`tunepath.model.reader.path_context`: the path's variables where a host has its own
value, and the path's CPUs and load, never a run's own choice) and for the run's recorded context. The second is what the run executed; where the run
recorded a block whose text differs (the step's command changed since), the recorded text is
shown instead and the block says so (``as_recorded``). The run's values of the variables
(:func:`tunepath.model.reader.bindings`) go with them. Shapes: ``docs/data-schema.md``.
"""

from __future__ import annotations

from tunepath.evidence.store import Run
from tunepath.model.reader import bindings, path_context, used

__all__ = ["commands_entry", "bindings_entry", "reader_verification_commands"]


def _recorded(run: Run, step: str) -> dict[str, dict]:
    """block id → the last record of it in the run (a block that ran in several repetitions)."""
    return {b["block"]: b for b in run.record.get("blocks", [])
            if b.get("step") == step and isinstance(b.get("text"), str)}


def _executed(run: Run, step: str) -> set[str]:
    """The commands the run recorded as measured or verified in ``step`` (a load block's text is its
    measurement's command, the capacity probe's its verification's)."""
    entries = [*run.record.get("measurements", []), *run.record.get("verification", [])]
    return {e["command"] for e in entries if e.get("step") == step and isinstance(e.get("command"), str)}


def commands_entry(run: Run, definition) -> dict:
    """block id → the block for a reader (``text``, ``title``), ``as_run`` (the text run on the
    run's server, or planned for it where the run recorded none: ``recorded``; a block whose planned
    text the run recorded as a measurement's or a verification's command counts as run), the
    variables the reader's text uses, and what became of it (``outcome``, ``reason``)."""
    recorded, executed = _recorded(run, definition.name), _executed(run, definition.name)
    planned = {b.id: b for b in definition.plan(run.context)}
    out = {}
    for b in definition.plan(path_context(run.context)):
        entry = b.to_dict()
        mine = planned.get(b.id)
        if mine is None and b.id not in recorded:
            # a block the reader's host needs and this run's did not (a lab that keeps every CPU)
            entry.update(as_run="", recorded=False, as_recorded=False, variables=used(b.text + "\n" + b.title),
                         outcome="skipped", reason="this run's host did not need it")
            out[b.id] = entry
            continue
        rec = recorded.get(b.id) or ({"outcome": "ran"} if mine.text in executed else {})
        as_run = rec.get("text", mine.text if mine else "")
        entry.update(as_run=as_run, recorded=bool(rec), as_recorded=mine is not None and as_run != mine.text,
                     variables=used(b.text + "\n" + b.title))
        if rec.get("outcome"):
            entry["outcome"] = rec["outcome"]
        if rec.get("reason"):
            entry["reason"] = rec["reason"]
        if rec.get("kernel_cmdline"):       # /proc/cmdline read after its reboot
            entry["kernel_cmdline"] = rec["kernel_cmdline"]
        out[b.id] = entry
    return out


def bindings_entry(run: Run) -> list[dict]:
    """The values ``run`` gave the path's variables (``model.reader.Binding``)."""
    return [b.to_data() for b in bindings(run.context, set(run.record.get("context") or {}))]


def reader_verification_commands(run: Run, definition) -> dict[str, str]:
    """The step's verification commands for a reader (what the page shows where the run recorded none)."""
    return definition.verify_commands(path_context(run.context))
