"""The load a measurement drives: :class:`LoadSpec`, one record the step owns.

A step returns its load from a hook (:meth:`tunepath.steps.base.Step.load`, by default
:func:`tunepath.steps.commands.load_spec` of the host context); the capacity probe, the
warm-up and the measurement all render their commands from it, so a step that changes the
load (another tool, headers, a path) does so in its own module. :meth:`LoadSpec.command` is
the only place a wrk/wrk2 command line is written: every value goes through
:mod:`tunepath.model.shell`.

``warmup_s`` is the project's wrk2 option ``-W``: the load is offered for that many seconds
before the counted ``-d`` window, each thread calibrates at its end, and everything wrk2
reports (requests, bytes, errors, latency) covers the counted window only. A closed-loop
tool (``rate`` None) has no such option.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tunepath.model.shell import number, quote

if TYPE_CHECKING:
    from tunepath.model.context import HostContext

__all__ = ["LoadSpec", "load_spec", "warmup_spec", "PROBE"]

PROBE = "capacity-probe"     # the capacity probe's block, and the verification its load report is recorded as


@dataclass(frozen=True)
class LoadSpec:
    """One load: which tool, against which URL, how hard and for how long."""

    tool: str                         # the binary as written: ``~/.tunepath/bin/wrk2``, ``$WRK2``, ``wrk``
    url: str
    connections: int
    threads: int
    duration_s: int                   # the counted window (-d)
    rate: int | None = None           # wrk2's constant offered rate (-R); None: closed loop
    warmup_s: int = 0                 # wrk2 -W: offered before the counted window, never counted
    headers: tuple[str, ...] = ()     # extra request headers (-H)
    latency: bool = True              # --latency: the percentile spectrum
    uncorrected: bool = False         # wrk2 -U: the uncorrected spectrum too
    pin: str = ""                     # ``taskset -c 1 `` where the run pins the load generator
    nofile: str = ""                  # the line that raises the open-file limit first

    @property
    def open_loop(self) -> bool:
        return self.rate is not None

    @property
    def counted_s(self) -> int:
        """The seconds whose requests make the figures."""
        return self.duration_s

    @property
    def seconds(self) -> int:
        """How long the command runs: the warm-up and the counted window."""
        return self.warmup_s + self.duration_s

    def with_(self, **changes) -> "LoadSpec":
        return replace(self, **changes)

    def closed(self, tool: str) -> "LoadSpec":
        """The same connections and threads, closed loop with ``tool`` (the capacity probe)."""
        return replace(self, tool=tool, rate=None, warmup_s=0, uncorrected=False, latency=False)

    def command(self) -> str:
        c, t, d = (number(v, k) for k, v in (("connections", self.connections), ("threads", self.threads),
                                               ("duration", self.duration_s)))
        rate = f" -R{number(self.rate, 'rate')}" if self.rate is not None else ""
        warm = f" -W{number(self.warmup_s, 'warm-up')}" if self.warmup_s and self.rate is not None else ""
        flags = (" -U" if self.rate is not None and self.uncorrected else "") + (" --latency" if self.latency else "")
        headers = "".join(f" -H {quote(h, 'header')}" for h in self.headers)
        line = (f"{self.pin}{quote(self.tool, 'load generator')} -c{c} -t{t}{rate}{warm} -d{d}{flags}{headers} "
                f"{quote(self.url, 'URL')}")
        return f"{self.nofile}\n{line}" if self.nofile else line


def load_spec(ctx: "HostContext", smoke: bool = False, duration_s: int | None = None,
              warmup_s: int | None = None) -> LoadSpec:
    """The path's load for ``ctx``: its load generator, connections, threads, offered rate (open
    loop), counted duration and, where the measurement's wrk2 warms up itself, its ``-W``
    (``warmup_s`` overrides it: 0 for a warm-up run)."""
    if smoke:
        c, t, r, d = ctx.smoke_connections, ctx.smoke_threads, ctx.smoke_rate, ctx.smoke_duration_s
    else:
        c, t, r, d = ctx.connections, ctx.threads, ctx.rate, ctx.duration_s
    warm = (ctx.load_warmup_s if ctx.settles and not smoke else 0) if warmup_s is None else warmup_s
    return LoadSpec(tool=ctx.load_generator, url=ctx.url, connections=c, threads=t,
                    duration_s=d if duration_s is None else duration_s, rate=r if ctx.open_loop else None,
                    warmup_s=warm if ctx.open_loop else 0, latency=ctx.latency_flag,
                    uncorrected=ctx.open_loop and ctx.uncorrected, pin=ctx.pinned("client"), nofile=ctx.raise_nofile)


def warmup_spec(ctx: "HostContext") -> LoadSpec:
    """One warm-up run (or window): the closed-loop tool (Debian's wrk, as fast as Tomcat answers)
    for a steady-state window where the client has it, else the load itself, uncounted."""
    if ctx.steady_state:
        spec = load_spec(ctx, duration_s=ctx.warmup_window_s, warmup_s=0)
        return spec.closed(ctx.probe_with) if ctx.probe_with else spec
    return load_spec(ctx, duration_s=ctx.warmup_s, warmup_s=0)
