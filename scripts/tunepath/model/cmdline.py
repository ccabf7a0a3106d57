"""A kernel command line as the pages show it: only the parameters this path sets or reads.

A server's ``/proc/cmdline`` also carries its boot image, root device, console and, on some
virtual machines, the arguments handed to init (after ``--``). None of that concerns Tomcat's
tuning, and some of it describes the machine that ran the path. The pages show the parameters
of :data:`RELEVANT` and :data:`RELEVANT_PREFIXES` and say how many others the line held; the
full line stays in the run record (``run.json``) and in a collapsed block on the page.

    c = KernelCmdline.parse("BOOT_IMAGE=/vmlinuz ro iommu.strict=1 -- --init-flag")
    c.relevant            # ('iommu.strict=1',)
    c.other_count         # 2 (BOOT_IMAGE=…, ro)
    c.init_args           # ('--init-flag',)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KernelCmdline", "RELEVANT", "RELEVANT_PREFIXES", "is_relevant", "cmdline_diff", "reduce_cmdline"]

# parameter names (before any "=") the path sets, or that change what its measurements mean
RELEVANT = frozenset({
    "iommu", "intel_iommu", "amd_iommu", "iommu.strict", "iommu.passthrough",
    "isolcpus", "nohz", "nohz_full", "rcu_nocbs", "irqaffinity", "maxcpus", "nr_cpus",
    "hugepages", "hugepagesz", "default_hugepagesz", "transparent_hugepage",
    "numa", "numa_balancing",
})
RELEVANT_PREFIXES = ("iommu.", "nohz", "hugepage", "numa", "arm-smmu", "arm_smmu")

# a parameter: name[=value], where a double-quoted value may hold spaces
_TOKEN = re.compile(r'(?:[^\s"]|"[^"]*")+')


def is_relevant(param: str) -> bool:
    """Whether a kernel parameter (``name`` or ``name=value``) is one the path cares about."""
    name = param.split("=", 1)[0].strip('"').lower()
    return name in RELEVANT or name.startswith(RELEVANT_PREFIXES)


@dataclass(frozen=True)
class KernelCmdline:
    """One ``/proc/cmdline``, split into kernel parameters and the arguments after ``--`` (init's)."""

    full: str
    params: tuple[str, ...]
    init_args: tuple[str, ...]

    @classmethod
    def parse(cls, line: str) -> "KernelCmdline":
        tokens = _TOKEN.findall(line or "")
        if "--" in tokens:
            cut = tokens.index("--")
            return cls(line.strip(), tuple(tokens[:cut]), tuple(tokens[cut + 1:]))
        return cls(line.strip(), tuple(tokens), ())

    @property
    def relevant(self) -> tuple[str, ...]:
        return tuple(p for p in self.params if is_relevant(p))

    @property
    def other_count(self) -> int:
        """Kernel parameters left out (init's arguments not counted)."""
        return len(self.params) - len(self.relevant)

    @property
    def shown(self) -> str:
        """The relevant parameters, space-separated ("" when the line has none)."""
        return " ".join(self.relevant)

    def left_out(self) -> str:
        """What the shown form leaves out, in words ("" when nothing)."""
        parts = []
        if self.other_count:
            parts.append(f"{self.other_count} other kernel parameter{'s' if self.other_count != 1 else ''} "
                         "(boot image, root device, console …)")
        if self.init_args:
            parts.append(f"{len(self.init_args)} argument{'s' if len(self.init_args) != 1 else ''} "
                         "passed on to init (after --)")
        return " and ".join(parts)

    def to_data(self) -> dict:
        return {"full": self.full, "shown": self.shown, "relevant": list(self.relevant),
                "other_count": self.other_count, "init_count": len(self.init_args),
                "left_out": self.left_out()}


def cmdline_diff(before: KernelCmdline | None, after: KernelCmdline) -> dict:
    """The kernel parameters ``after`` adds to and removes from ``before`` (every parameter, not
    only the relevant ones: a change the path did not make is worth seeing)."""
    if before is None:
        return {"added": [], "removed": [], "known": False}
    old, new = set(before.params), set(after.params)
    return {"added": [p for p in after.params if p not in old],
            "removed": [p for p in before.params if p not in new], "known": True}


def reduce_cmdline(line: str | None) -> str | None:
    """A command line as a table cell shows it: its relevant parameters and how many others it
    held (for the comparison's facts). None stays None."""
    if line is None:
        return None
    c = KernelCmdline.parse(line)
    others = c.other_count + len(c.init_args)
    tail = f"{others} other parameter{'s' if others != 1 else ''} not shown" if others else ""
    if not c.relevant:
        return f"none of the path's parameters ({tail})" if tail else "empty"
    return f"{c.shown} ({tail})" if tail else c.shown
