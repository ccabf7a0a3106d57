"""The load generator on a client: which tool, which profile, the exact command.

wrk2 (open loop: a constant offered rate, latency corrected for coordinated omission) is
used where the client has it; otherwise Debian's wrk (closed loop: each connection sends
its next request when the previous answer arrives, so the server sets the pace and the
latencies omit queueing that a real open workload would see). Every measurement records
which tool produced it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host

__all__ = ["Profile", "PROFILES", "LoadTool", "detect", "get_profile"]


@dataclass(frozen=True)
class Profile:
    name: str
    warmup_s: int          # JIT warm-up before the measurement (Tomcat needs 15–20 s to settle)
    duration_s: int        # the measured run
    threads: int           # wanted; capped at the client's CPUs
    connections: int       # wanted; scaled with the threads actually used
    rate: int              # offered rate for wrk2 (req/s); wrk ignores it
    description: str
    repetitions: int = 1          # at least this many interleaved repetitions per configuration
    max_repetitions: int = 1      # … and at most this many
    ci_target_pct: float = 5.0    # stop once every interval's half-width is within this % of its median
    step_budget_s: float | None = None   # … or when a step's time budget is spent


PROFILES = {
    "smoke": Profile("smoke", 2, 3, 1, 8, 2000,
                     "seconds per variant, for tests: proves the machinery, measures nothing"),
    "quick": Profile("quick", 10, 10, 2, 64, 20000,
                     "the default: 10 s runs, 3 to 5 interleaved repetitions per configuration",
                     repetitions=3, max_repetitions=5, ci_target_pct=5.0, step_budget_s=900),
    "full": Profile("full", 30, 60, 128, 1280, 500000,
                    "the original's 60 s runs at -c1280 -t128 -R500000, scaled to the client's CPUs; "
                    "3 to 10 interleaved repetitions",
                    repetitions=3, max_repetitions=10, ci_target_pct=5.0, step_budget_s=3600),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise TunepathError(f"unknown profile {name!r}: use one of {', '.join(PROFILES)}") from None


@dataclass(frozen=True)
class LoadTool:
    name: str              # "wrk2" or "wrk"
    binary: str            # what to run
    version: str | None
    client_cpus: int

    @property
    def open_loop(self) -> bool:
        return self.name == "wrk2"


def detect(host: Host) -> LoadTool:
    """Find wrk2 (as ``wrk2``, or a ``wrk`` whose usage lists ``--rate``), else Debian's wrk."""
    r = host.run("for b in wrk2 wrk; do p=$(command -v $b) && { echo \"bin=$p\"; $p -v 2>&1 | head -1; "
                 "$p 2>&1 | grep -q -- '--rate' && echo rate=yes; }; done; echo cpus=$(nproc)",
                 check=False, timeout=30)
    out = r.stdout
    cpus = int(re.search(r"cpus=(\d+)", out).group(1)) if re.search(r"cpus=(\d+)", out) else 1
    blocks = re.split(r"(?m)^bin=", out)[1:]
    found = []
    for b in blocks:
        path = b.splitlines()[0].strip()
        version = next((ln.split(" Copyright")[0].strip() for ln in b.splitlines()[1:2] if ln.startswith("wrk")),
                       None)
        found.append((path, version, "rate=yes" in b))
    for path, version, rate in found:
        if rate:
            return LoadTool("wrk2", path, version, cpus)
    for path, version, _ in found:
        return LoadTool("wrk", path, version, cpus)
    raise TunepathError(f"on {host.name}: neither wrk2 nor wrk is installed: build wrk2 (setup step) or "
                        "install Debian's wrk (apt-get install wrk)")
