"""The lines of a verification output a page shows first; the whole output goes one click away.

A rule per kind of output, chosen by the command that printed it:

- ``lscpu``: the architecture, CPU model, CPU counts, online and offline lists, threads, cores,
  sockets and NUMA nodes (not the flags, caches or vulnerability lists);
- ``dmesg | grep iommu``: every line but the per-device "Adding to iommu group" ones, with each
  kernel command line reduced to the parameters the path cares about (``model.cmdline``);
- ``numactl -H``: the nodes, their CPUs and sizes and the distances (not the free memory);
- anything else: the first :data:`GENERIC_LINES` lines when it is longer than :data:`SHORT`.

    e = excerpt("lscpu", output)
    e.text, e.trimmed, e.kept      # the lines to show, whether any were left out, what they are
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tunepath.model.cmdline import KernelCmdline

__all__ = ["Excerpt", "excerpt", "SHORT", "GENERIC_LINES", "LSCPU_KEYS"]

SHORT = 14              # an output of at most this many lines is shown whole (generic rule)
GENERIC_LINES = 10      # … else its first lines

LSCPU_KEYS = ("Architecture", "CPU(s)", "On-line CPU(s) list", "Off-line CPU(s) list", "Model name",
              "Thread(s) per core", "Core(s) per socket", "Socket(s)", "NUMA node(s)")
_LSCPU_NODE = re.compile(r"NUMA node\d+ CPU\(s\)")
_CMDLINE = re.compile(r"^(?P<head>.*?(?:Kernel command line|Command line):\s*)(?P<line>.*)$")


@dataclass(frozen=True)
class Excerpt:
    """``text``: what the page shows first; ``full``: the output as recorded; ``kept``: which lines
    ``text`` holds, in words (for the note under it)."""

    text: str
    full: str
    kept: str

    @property
    def trimmed(self) -> bool:
        return self.text != self.full.rstrip("\n")

    @property
    def shortened(self) -> bool:
        """Some line shown is a shortened form of one recorded (… marks the cut: a kernel command line)."""
        full = set(self.full.splitlines())
        return any(ln not in full and "…" in ln for ln in self.text.splitlines())

    @property
    def total_lines(self) -> int:
        return len(self.full.rstrip("\n").splitlines())

    @property
    def shown_lines(self) -> int:
        return len(self.text.splitlines())

    def to_data(self) -> dict:
        return {"excerpt": self.text, "full": self.full, "trimmed": self.trimmed, "shortened": self.shortened, "kept": self.kept,
                "total_lines": self.total_lines, "shown_lines": self.shown_lines}


def _lscpu(lines: list[str]) -> tuple[list[str], str]:
    pairs = []
    for ln in lines:
        key, sep, value = ln.strip().partition(":")
        if sep and (key in LSCPU_KEYS or _LSCPU_NODE.fullmatch(key)):
            pairs.append((key, value.strip()))
    width = max((len(k) for k, _ in pairs), default=0) + 2
    return ([f"{k + ':':<{width}}{v}".rstrip() for k, v in pairs],
            "the architecture, CPU model, CPU counts, online and offline CPUs, threads, cores, sockets and NUMA nodes")


def _cmdline_line(ln: str) -> str:
    m = _CMDLINE.match(ln)
    if not m:
        return ln
    shown = KernelCmdline.parse(m["line"]).shown
    return f"{m['head']}… {shown}".rstrip() if shown else f"{m['head']}…"


def _dmesg_iommu(lines: list[str]) -> tuple[list[str], str]:
    kept = [_cmdline_line(ln) for ln in lines if "Adding to iommu group" not in ln]
    return kept, ("the IOMMU's default domain and invalidation policy, and the kernel command line's "
                  "IOMMU parameters, where … marks what is left out")


def _numactl(lines: list[str]) -> tuple[list[str], str]:
    return ([ln for ln in lines if not re.match(r"\s*node \d+ free:", ln)],
            "the nodes, their CPUs and memory and the distances between them")


def _generic(lines: list[str]) -> tuple[list[str], str]:
    if len(lines) <= SHORT:
        return lines, "every line"
    return lines[:GENERIC_LINES], f"the first {GENERIC_LINES} lines"


Rule = Callable[[list[str]], tuple[list[str], str]]
# (command pattern, rule, applies to short outputs too): a short lscpu or numactl is shown whole,
# a kernel command line in dmesg is always reduced
RULES: tuple[tuple[re.Pattern, Rule, bool], ...] = (
    (re.compile(r"^\s*lscpu\s*$"), _lscpu, False),
    (re.compile(r"\bdmesg\b.*\|\s*grep\b.*\biommu\b"), _dmesg_iommu, True),
    (re.compile(r"^\s*numactl\s+(-H|--hardware)\s*$"), _numactl, False),
)


def excerpt(command: str, output: str) -> Excerpt:
    """The lines of ``output`` (printed by ``command``) worth reading first."""
    lines = output.rstrip("\n").splitlines()
    rule = next((fn for pattern, fn, short in RULES
                 if pattern.search(command or "") and (short or len(lines) > SHORT)), _generic)
    kept, what = rule(lines)
    if not kept:                                  # the rule found nothing it knows: show the start
        kept, what = _generic(lines)
    return Excerpt(text="\n".join(kept), full=output, kept=what)
