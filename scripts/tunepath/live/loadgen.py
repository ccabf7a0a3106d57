"""The load generator on a client: which tool, which profile, the exact command.

wrk2 (open loop: a constant offered rate, latency corrected for coordinated omission) is
used where the client has it; otherwise Debian's wrk (closed loop: each connection sends
its next request when the previous answer arrives, so the server sets the pace and the
latencies omit queueing that a real open workload would see). Every measurement records
which tool produced it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.live.wrk2 import BINARY

__all__ = ["Profile", "PROFILES", "LoadTool", "detect", "get_profile", "calibration_s", "duration_for"]


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
    warmup_window_s: int = 0      # steady state: warm up in windows this long (warmup_s is then the cap) …
    steady_pct: int = 10          # … until 3 windows in a row serve within ± this % of their median
    jit_quiet_pct: int = 0        # … and Tomcat's JIT compiled for at most this % of the last one (0: not tested)
    settle_s: int = 0             # wrk2 -W: it calibrates in this many seconds at the rate before -d counts
    fixed_rounds: bool = False    # the rounds its comparisons need to be tested, fixed in advance: no look at the data
    sweep_threads: tuple[int, ...] = ()   # the thread sweep's counts (() the path's: 1, 2, 4 … 200)
    rate_sweep_budget_s: float | None = None   # the rate sweep's own budget (None: step_budget_s)


PROFILES = {
    "smoke": Profile("smoke", 2, 3, 1, 8, 2000,
                     "seconds per variant, for tests: proves the machinery, measures nothing"),
    "quick": Profile("quick", 45, 15, 2, 64, 20000,
                     "the default: a steady-state warm-up (3 s closed-loop windows until the "
                     "throughput is steady and the JIT compiles for at most 10 % of a window; at most 45 s), then wrk2 "
                     "calibrates in 3 s at the offered rate (-W) and counts 15 s; the interleaved rounds every "
                     "comparison needs for a 95 % verdict (4; 5 for the thread sweep's 4 counts, Holm over their "
                     "6 pairs)",
                     # the budget fits the fixed rounds of the widest step (the JVM's 7 variants × 4 rounds
                     # at about 55 s a measurement on the lab) and re-measured disturbed repetitions: a
                     # budget cut short of the fixed rounds leaves every comparison of that step untested
                     repetitions=4, max_repetitions=6, ci_target_pct=5.0, step_budget_s=2400, warmup_window_s=3,
                     settle_s=3, jit_quiet_pct=10,
                     fixed_rounds=True, sweep_threads=(2, 8, 32, 200), rate_sweep_budget_s=240),
    "full": Profile("full", 90, 60, 128, 1280, 500000,
                    "the original's 60 s runs at -c1280 -t128 -R500000, scaled to the client's CPUs, after a "
                    "steady-state warm-up (5 s windows until the throughput is steady and the JIT compiles for at "
                    "most 10 % of a window; at most 90 s); 3 to 10 interleaved repetitions",
                    repetitions=3, max_repetitions=10, ci_target_pct=5.0, step_budget_s=3600, warmup_window_s=5,
                    steady_pct=5, jit_quiet_pct=10),
}


def calibration_s(threads: int, connections: int) -> float:
    """How long wrk2's threads calibrate before they record latency: 10 s plus 5 ms per
    connection of the thread (``CALIBRATE_DELAY_MS + connections * 5`` in wrk2's wrk.c).
    A shorter run prints no ``Thread calibration`` line and its latency covers the whole run."""
    per_thread = -(-connections // max(1, threads))
    return 10.0 + 0.005 * per_thread


def duration_for(profile: Profile, tool: LoadTool, threads: int, connections: int) -> int:
    """A measurement's -d: the profile's duration, plus wrk2's calibration for an open-loop tool.
    wrk2 records latency only once each thread has calibrated (10 s + 5 ms per connection of the
    thread: :func:`calibration_s`), so its runs last that much longer, and
    the profile's duration is what is measured. The smoke profile proves the machinery only."""
    if not tool.open_loop or profile.name == "smoke" or (profile.settle_s and tool.warmup):
        return profile.duration_s          # -W: wrk2 calibrates before -d, which is what counts
    return profile.duration_s + math.ceil(calibration_s(threads, connections))


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise TunepathError(f"unknown profile {name!r}: use one of {', '.join(PROFILES)}") from None


@dataclass(frozen=True)
class LoadTool:
    name: str              # "wrk2" or "wrk"
    binary: str            # what to run, as the commands write it (``~/.tunepath/bin/wrk2``, ``wrk``)
    version: str | None
    client_cpus: int
    closed_loop: str | None = None   # Debian's wrk (no --rate) where the client has it, else None
    why: str = ""                    # why this tool measures (wrk: why not wrk2)
    warmup: bool = False             # wrk2 takes -W (the project's patch): it warms up before it counts

    @property
    def open_loop(self) -> bool:
        return self.name == "wrk2"


# each candidate: `bin=<as written>`, its version line, `rate=yes` when its usage lists --rate
_PROBE = (f"for b in '{BINARY}' wrk2 wrk; do case $b in '~/'*) p=$HOME/${{b#'~/'}}; "
          "[ -x \"$p\" ] || continue;; *) p=$(command -v $b) || continue;; esac; echo \"bin=$b\"; "
          "$p -v 2>&1 | head -1; $p 2>&1 | grep -q -- '--rate' && echo rate=yes; "
          "$p 2>&1 | grep -q -- '--warmup' && echo warmup=yes; done; echo cpus=$(nproc)")

def detect(host: Host) -> LoadTool:
    """wrk2 (the path's ``~/.tunepath/bin/wrk2``, a ``wrk2`` on PATH, or a ``wrk`` whose usage
    lists ``--rate``: the original path installed wrk2 as ``wrk``), else Debian's wrk."""
    out = host.run(_PROBE, check=False, timeout=30).stdout
    m = re.search(r"cpus=(\d+)", out)
    cpus = int(m.group(1)) if m else 1
    found = []
    for b in re.split(r"(?m)^bin=", out)[1:]:
        lines = b.splitlines()
        version = next((ln.split(" Copyright")[0].strip() for ln in lines[1:2] if ln.startswith("wrk")), None)
        found.append((lines[0].strip(), version, "rate=yes" in b, "warmup=yes" in b))
    closed = next((p for p, _, rate, _ in found if p == "wrk" and not rate), None)
    for path, version, rate, warm in found:
        if rate:
            return LoadTool("wrk2", path, version, cpus, closed, warmup=warm)
    if closed:
        version = next(v for p, v, _, _ in found if p == closed)
        return LoadTool("wrk", closed, version, cpus, closed,
                        why="wrk2 is absent on the client (--wrk2-source or --build-wrk2 builds it)")
    raise TunepathError(f"on {host.name}: neither wrk2 nor wrk is installed: build wrk2 (--wrk2-source FILE|URL, "
                        "or --build-wrk2 for upstream's) or install Debian's wrk (apt-get install wrk)")
