"""A step's verification outputs as the pages read them (``verification`` in a run's block of
``data/steps/<step>.json``): the command, where it ran, and what it printed."""

from __future__ import annotations

from tunepath.evidence.store import Run

__all__ = ["verification_entries", "kernel_cmdline_entry"]


def verification_entries(run: Run, step: str) -> dict[str, dict]:
    """``run``'s recorded verification outputs for ``step``, by name."""
    out = {}
    for v in run.verifications:
        if v.step == step:
            out[v.name] = {"host": v.host, "command": v.command,
                           "output": v.output.read_text(encoding="utf-8", errors="replace"),
                           "source": v.source}
    return out


def kernel_cmdline_entry(run: Run) -> str | None:
    """The kernel command line the server booted with before a live run (None for other runs)."""
    return run.server.facts.get("kernel_cmdline") if run.kind == "live" else None
