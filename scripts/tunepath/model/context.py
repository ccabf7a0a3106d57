"""The host context: everything a step's commands depend on, for one server/client pair.

A recorded run stores its context (``run.json`` → ``context``), so a page shows the commands
as they were run on that host; the defaults are the original path's AWS c8g hosts, written
with the path's variables (``${tomcat_ip}``, ``${net}``) where the original had them.

``fixed_cpus`` are the CPUs with no sysfs ``online`` file (CPU 0 on x86): the NUMA and IOMMU steps'
move leaves them online, and :meth:`HostContext.on_numa_node` pins Tomcat to the NIC node's CPUs
with ``taskset`` instead.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Iterable

from tunepath.errors import TunepathError
from tunepath.model.shell import number, port
from tunepath.versions import TOMCAT_VERSION, WRK2_REPO

__all__ = ["HostContext", "BENCH_PATH", "NIC_CHANNELS", "parse_cpu_list", "ports_for", "tls_port_for", "cpu_ranges", "brace_ranges", "cpu_runs",
           "is_loopback"]

BENCH_PATH = "/examples/servlets/servlet/HelloWorldExample"
MAX_CPUS = 65536   # far above Linux's NR_CPUS (8192): a larger number is a typo, not a machine
NIC_CHANNELS = ("combined", "rx-tx")
SPARE_PORTS = (31999, 32000)   # above the derived ports (ports_for): for an HTTP port among its own
CPU_FIELDS = ("baseline_cpus", "numa_cpus", "server_pin_cpus", "client_pin_cpus", "fixed_cpus")


def _check_type(key: str, value, default) -> None:
    """A context value has its field's type (that of its default): a bool is no number, a
    number no string, counts are not negative, a port is a port."""
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
    if isinstance(default, bool):
        ok, wanted = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, wanted = whole(value) and (key != "port" or 1 <= value <= 65535), \
            "a port from 1 to 65535" if key == "port" else "a whole number from 0"
    elif isinstance(default, tuple):
        ok = (isinstance(value, (list, tuple)) and all(whole(v) for v in value)) or \
            (isinstance(value, str) and key.endswith("_cpus"))
        wanted = "a CPU list such as '0-7,96'" if key.endswith("_cpus") else "a list of whole numbers"
    else:
        ok, wanted = isinstance(value, str) or (value is None and default is None), "a string"
    if ok and key == "nic_channels" and value not in NIC_CHANNELS:
        ok, wanted = False, "combined or rx-tx"
    if ok and key == "hugepage_kb" and value < 4:
        ok, wanted = False, "a huge page size in kB (2048 on most hosts)"
    if not ok:
        raise TunepathError(f"host context {key}: {value!r} is not {wanted}")


@dataclass(frozen=True)
class HostContext:
    """Everything a step's commands depend on, for one server/client pair."""

    tomcat_home: str = f"~/apache-tomcat-{TOMCAT_VERSION}"
    tomcat_version: str = TOMCAT_VERSION
    java_package: str = "openjdk-21-jdk"
    server_address: str = "${tomcat_ip}"
    port: int | str = 8080        # Tomcat's HTTP port (a reader's context: ${tomcat_port})
    shutdown_port: int = 8005     # Tomcat's shutdown port (<Server port>), the AJP connector's and the
    ajp_port: int = 8009          # proxy step's private httpd's: Tomcat's conventional ones where the
    proxy_port: int = 8081        # HTTP port is 8080, else a run's own (:func:`ports_for`)
    tls_port: int = 8443          # the TLS step's HTTPS connector: Tomcat's 8443, else :func:`tls_port_for`
    path: str = BENCH_PATH
    total_cpus: int = 192
    baseline_cpus: tuple[int, ...] = tuple(range(0, 8))
    numa_cpus: tuple[int, ...] = tuple(range(96, 104))
    nic: str = "${net}"
    nic_queues: int = 8
    nic_channels: str = "combined"   # how `ethtool -L` sets the count: "combined", or "rx-tx" (veth and others)
    hugepage_kb: int = 2048       # the kernel's huge page size (Hugepagesize in /proc/meminfo)
    nofile: int = 65535
    load_generator: str = "wrk"   # the binary as written: the original installed wrk2 as `wrk`; live runs
                                  # write `~/.tunepath/bin/wrk2` (tunepath's build) or Debian's `wrk`
    wrk2_source: str = WRK2_REPO  # where the set-up step builds wrk2 from (a URL, or a tarball's name)
    uncorrected: bool = False     # wrk2 -U: print the uncorrected latency beside the corrected
    rate_probed: int = 0          # the capacity probe's req/s the offered rate came from (0: no probe)
    probe_with: str = "wrk"       # the capacity probe's closed-loop tool ("": wrk2 at an unreachable rate)
    threads: int = 128
    connections: int = 1280
    rate: int = 500000
    duration_s: int = 60
    smoke_threads: int = 16
    smoke_connections: int = 32
    smoke_rate: int = 50000
    smoke_duration_s: int = 60
    warmup_s: int = 0             # a warm-up run before each measurement (the original had none)
    open_loop: bool = True        # wrk2 (-R rate); False for Debian's wrk, which has no -R
    latency_flag: bool = False    # add --latency (percentiles); the original did not
    java_home: str | None = None  # a JDK other than the server's default `java` (set in bin/setenv.sh)
    ajp_secret: str = "AJP_SECRET_GENERATED_PER_RUN"   # live runs use a random one, never recorded
    httpd_dir: str = "~/.tunepath/httpd"
    sweep_threads: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 200)   # maxThreads values of the thread sweep
    sweep_rates: tuple[int, ...] = ()   # offered rates of the rate sweep; () derives them from `rate`
    sweep_warmup_rate: int = 0          # the rate sweep's warm-up rate; 0: a tenth of `rate`
    shared_kernel: bool = False   # server and clients run on one kernel (one machine, or its namespaces)
    server_pin_cpus: tuple[int, ...] = ()   # Tomcat's CPUs (taskset) where server and client share a kernel
    client_pin_cpus: tuple[int, ...] = ()   # … and the load generator's; () runs unpinned
    fixed_cpus: tuple[int, ...] = ()   # CPUs that cannot go offline (no sysfs ``online`` file: CPU 0 on x86)
    load_warmup_s: int = 0        # wrk2 -W: seconds the measurement's wrk2 offers the rate before its counted
                                  # -d window, where it calibrates (0: none; stock wrk2 calibrates inside -d)
    warmup_window_s: int = 0      # steady-state warm-up: windows this long (0: one warm-up run of warmup_s)
    steady_windows: int = 3       # … until this many windows in a row agree
    steady_pct: int = 5           # … within ± this % of their median; warmup_s is then the cap
    jit_quiet_pct: int = 0        # … and the JIT compiled for at most this % of the last window (0: not tested)
    loopback: bool = False        # the clients reach Tomcat over loopback, whatever server_address says: a
                                  # reader's context (model.reader) of such a run, whose address is
                                  # ${tomcat_ip}; recorded only when true (a live context tells it from
                                  # server_address)

    def __post_init__(self):
        for key in ("nic_channels", "hugepage_kb"):
            _check_type(key, getattr(self, key), getattr(type(self), key))

    @classmethod
    def from_dict(cls, data: dict) -> "HostContext":
        if not isinstance(data, dict):
            raise TunepathError(f"a host context is an object of settings, not {type(data).__name__}")
        known = {f.name: f.default for f in fields(cls)}
        unknown = set(data) - set(known)
        if unknown:
            raise TunepathError(f"unknown host context key(s): {', '.join(sorted(unknown))}")
        for key, value in data.items():
            _check_type(key, value, known[key])
        if "ajp_secret" in data and not re.fullmatch(r"[A-Za-z0-9_-]{16,}", data["ajp_secret"]):
            # the proxy step's AJP connector refuses any other secret (live/tomcatconf.ajp_attributes)
            raise TunepathError("ajp_secret must be at least 16 letters, digits, '-' or '_'")
        values = dict(data)
        for key in CPU_FIELDS:
            if key in values:
                values[key] = tuple(parse_cpu_list(values[key]))
        for key in ("sweep_threads", "sweep_rates"):
            if key in values:
                values[key] = tuple(int(v) for v in values[key])
        return cls(**values)

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in CPU_FIELDS:
            out[key] = cpu_ranges(getattr(self, key))
        if not self.loopback:
            del out["loopback"]
        return out

    @property
    def on_loopback(self) -> bool:
        """The clients send their load over loopback (the server is their machine)."""
        return self.loopback or is_loopback(self.server_address)

    def pinned(self, role: str) -> str:
        """``taskset -c 1 `` before a command of ``role`` ("server": Tomcat; "client": the load
        generator) when the run pins them to disjoint CPUs, else nothing."""
        cpus = self.server_pin_cpus if role == "server" else self.client_pin_cpus
        return f"taskset -c {cpu_ranges(cpus)} " if cpus else ""

    @property
    def stuck_cpus(self) -> tuple[int, ...]:
        """CPUs the NUMA move cannot take offline: fixed CPUs outside the NIC's node (and not the
        load generator's). Where there are any, Tomcat is pinned to ``numa_cpus`` instead."""
        return tuple(c for c in self.fixed_cpus if c not in self.numa_cpus and c not in self.client_pin_cpus)

    def on_numa_node(self) -> "HostContext":
        """The context Tomcat starts in once the CPUs moved to the NIC's node: pinned to those CPUs
        with ``taskset`` where a CPU that cannot go offline stays online beside them."""
        return replace(self, server_pin_cpus=self.numa_cpus) if self.stuck_cpus else self

    @property
    def steady_state(self) -> bool:
        """Warm up in short windows until the throughput is steady (else one fixed warm-up run)."""
        return bool(self.warmup_window_s and self.warmup_s)

    @property
    def settles(self) -> bool:
        """The measurement's wrk2 offers the rate for ``load_warmup_s`` (``-W``) before it counts: it
        calibrates there, on a JVM the warm-up has already warmed, instead of inside the counted run."""
        return bool(self.load_warmup_s) and self.open_loop

    @property
    def rates(self) -> tuple[int, ...]:
        """The rate sweep's offered rates: given, or 10 % … 120 % of the profile's rate."""
        if self.sweep_rates:
            return tuple(sorted(self.sweep_rates))
        return tuple(sorted({max(1, round(self.rate * f / 100)) for f in (10, 20, 30, 40, 50, 60, 70, 80, 90,
                                                                          100, 120)}))

    @property
    def warmup_rate(self) -> int:
        return self.sweep_warmup_rate or max(1, round(self.rate / 10))

    @property
    def wrk2(self) -> str:
        """wrk2 as the commands write it: the load generator of an open-loop run (whatever its name:
        the original installed wrk2 as ``wrk``; a reader's is ``$WRK2``), else ``wrk2``."""
        return self.load_generator if self.open_loop else "wrk2"

    @property
    def url(self) -> str:
        return f"http://{self.server_address}:{port(self.port, 'host context port')}{self.path}"

    @property
    def https_url(self) -> str:
        """The benchmark URL on the HTTPS connector (the TLS step's)."""
        return f"https://{self.server_address}:{port(self.tls_port, 'host context TLS port')}{self.path}"

    @property
    def raise_nofile(self) -> str:
        """Raise the open-file limit as far as the hard limit allows (never start nothing)."""
        return f'ulimit -n {number(self.nofile, "host context nofile")} 2>/dev/null || ulimit -n "$(ulimit -Hn)"'


def is_loopback(address: str | None) -> bool:
    """``address`` is this machine's own: ``localhost`` or a loopback IP (``127.0.0.1``, ``::1`` …);
    not a host name or a variable such as ``${tomcat_ip}``."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(address or "").strip("[]")).is_loopback
    except ValueError:
        return False


def ports_for(http_port: int) -> tuple[int, int, int]:
    """Tomcat's shutdown port, its AJP port and the proxy's port for a Tomcat on ``http_port``:
    the conventional 8005, 8009 and 8081 beside 8080; otherwise three ports derived from the HTTP
    port, so that two runs on one machine (each on its own HTTP port) do not share one, and every
    session of a run computes the same (no probing: this run's own Tomcat may hold them). Distinct for
    any HTTP ports less than 7,333 apart; all from 10000 to 32000, below the ephemeral ports (32768 up).

    The derived ports fill 10000-31998. Three HTTP ports fall among their own (16999 would be its own
    shutdown port, 27998 its own AJP port, 16998 its own proxy port): the one port that would equal
    the HTTP port is replaced by a spare no HTTP port derives, 31999 for an even HTTP port and 32000
    for an odd one, so neighbors 16998 and 16999 still share none. Every other HTTP port keeps the
    ports it always had (a recorded run's context holds its own)."""
    if http_port == 8080:
        return HostContext.shutdown_port, HostContext.ajp_port, HostContext.proxy_port     # the defaults
    base = 10000 + 3 * (http_port % 7333)       # 10000-31998
    spare = SPARE_PORTS[http_port % 2]
    shutdown, ajp, proxy = (spare if p == http_port else p for p in (base, base + 1, base + 2))
    return shutdown, ajp, proxy


TLS_PORTS = (32001, 32700)     # above ports_for's, below the ephemeral ports


def tls_port_for(http_port: int) -> int:
    """The HTTPS port beside a Tomcat on ``http_port``: Tomcat's 8443 beside 8080, otherwise one of
    :data:`TLS_PORTS` derived from the HTTP port (never the HTTP port itself, nor one of
    :func:`ports_for`'s), so that two runs on one machine on nearby HTTP ports do not share one."""
    if http_port == 8080:
        return HostContext.tls_port
    low, high = TLS_PORTS
    tls = low + http_port % (high - low + 1)
    return tls if tls != http_port else (low if tls == high else tls + 1)


def parse_cpu_list(value) -> list[int]:
    """``"0-7,96"`` or ``[0, 1]`` → a sorted list of CPU numbers."""
    if isinstance(value, (list, tuple)):
        return sorted(int(v) for v in value)
    cpus: set[int] = set()
    for part in str(value).split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise TunepathError(f"bad CPU list {value!r}: expected e.g. '0-7,96-103'") from None
        if last < first:
            raise TunepathError(f"bad CPU list {value!r}: range {part} runs backwards")
        if last >= MAX_CPUS:
            raise TunepathError(f"bad CPU list {value!r}: CPU {last} is beyond any kernel's limit ({MAX_CPUS})")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def cpu_runs(cpus: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cpu in sorted(set(cpus)):
        if out and cpu == out[-1][1] + 1:
            out[-1] = (out[-1][0], cpu)
        else:
            out.append((cpu, cpu))
    return out


def cpu_ranges(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"`` (the kernel's own notation)."""
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in cpu_runs(cpus))


def brace_ranges(cpus: Iterable[int]) -> str:
    """``[0..95, 104..191]`` → ``"{0..95} {104..191}"`` for a bash ``for`` loop."""
    return " ".join(f"{{{a}..{b}}}" if a != b else f"{a}" for a, b in cpu_runs(cpus))
