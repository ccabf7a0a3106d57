"""Command blocks several steps share: restart Tomcat, drive the load, CPUs, NIC queues, GRUB;
and the verification commands (:data:`VERIFY_COMMANDS`: a name → its command for a context), which a
step names in ``Step.verifications``.

Every block is rendered for a :class:`~tunepath.model.context.HostContext`, so a page
prints the commands a reader types (the path's variables) and a live run executes the
same text for its real hosts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from tunepath.errors import TunepathError
from tunepath.live.hoststate import GRUB_DROP_IN
from tunepath.live.tomcat import java_binary
from tunepath.model.context import HostContext, brace_ranges, cpu_ranges
from tunepath.model.load import LoadSpec, load_spec, warmup_spec
from tunepath.model.plan import Block
from tunepath.model.shell import number, path, quote

__all__ = ["ACCESS_LOG_VALVE", "STOCK_CONNECTOR", "thread_connector", "sweep_connector", "element",
           "access_log_valve_xml", "connector_xml", "start_lines", "restart", "load_blocks", "warm_up", "grub",
           "set_cpus", "offline_all_but", "move_cpus", "set_queues", "VERIFY_COMMANDS", "verify_command",
           "tomcat_path", "java", "nic", "nic_numa_node"]

ACCESS_LOG_VALVE = {
    "className": "org.apache.catalina.valves.AccessLogValve",
    "directory": "logs",
    "prefix": "localhost_access_log",
    "suffix": ".txt",
    "pattern": "%h %l %u %t &quot;%r&quot; %s %b",
}
STOCK_CONNECTOR = {"port": "8080", "protocol": "HTTP/1.1", "connectionTimeout": "20000",
                   "redirectPort": "8443"}


def sweep_connector(threads: int) -> dict[str, str]:
    """A worker pool of ``threads`` threads, keep-alive and connection limits out of the way."""
    n = str(threads)
    return {"minSpareThreads": n, "maxThreads": n, "maxKeepAliveRequests": "500000", "maxConnections": "100000"}


def thread_connector(ctx: HostContext) -> dict[str, str]:
    """The original's rule: worker threads = online CPUs − 1 (the poller takes one)."""
    return sweep_connector(max(1, len(ctx.baseline_cpus) - 1))


# --- XML shown on the pages -------------------------------------------------------
def element(tag: str, attrs: dict, indent: str = "    ") -> str:
    """``<tag a="1"\n     b="2" />`` with one attribute per line, as Tomcat's own files do."""
    pad = indent + " " * (len(tag) + 2)
    items = list(attrs.items())
    first = f'{indent}<{tag} {items[0][0]}="{items[0][1]}"'
    rest = [f'{pad}{k}="{v}"' for k, v in items[1:]]
    return "\n".join([first, *rest]) + " />"


def access_log_valve_xml() -> str:
    """The element the access-log variant removes from ``conf/server.xml``."""
    return element("Valve", ACCESS_LOG_VALVE, indent="        ")


def connector_xml(attrs: dict | None = None) -> str:
    return element("Connector", {**STOCK_CONNECTOR, **(attrs or {})})


# --- Tomcat and the load ------------------------------------------------------------
def tomcat_path(ctx: HostContext, relative: str) -> str:
    """A file of the context's Tomcat, quoted for a command: ``~/apache-tomcat-11.0.10/bin/startup.sh``."""
    return path(ctx.tomcat_home, relative, what="tomcat_home")


def start_lines(ctx: HostContext) -> str:
    return (f"export CATALINA_PID={tomcat_path(ctx, 'temp/tomcat.pid')}\n"
            f"{ctx.raise_nofile}\n"
            f"{ctx.pinned('server')}{tomcat_path(ctx, 'bin/startup.sh')}")


def restart(ctx: HostContext) -> Block:
    return Block("restart-tomcat", "server",
                 "Restart Tomcat: wait for the old JVM to exit, raise the open-file limit, start",
                 f"export CATALINA_PID={tomcat_path(ctx, 'temp/tomcat.pid')}\n"
                 f"{tomcat_path(ctx, 'bin/shutdown.sh')} 10 -force >/dev/null 2>&1\n"
                 f"{ctx.raise_nofile}\n"
                 f"{ctx.pinned('server')}{tomcat_path(ctx, 'bin/startup.sh')}")


def warm_up(ctx: HostContext, spec: LoadSpec | None = None, block_id: str = "warm-up") -> list[Block]:
    """The JIT warm-up before each measurement (none when the context has no warm-up), against the
    URL and with the headers of ``spec`` (the step's load: :meth:`Step.load`) where given."""
    if not ctx.warmup_s:
        return []
    warm = warmup_spec(ctx)
    if spec is not None:
        warm = warm.with_(url=spec.url, headers=spec.headers)
    if ctx.steady_state:
        title = (f"Warm up in {ctx.warmup_window_s} s windows until {ctx.steady_windows} in a row serve within "
                 f"±{ctx.steady_pct} % of their median"
                 + (f" and the JIT compiles for at most {ctx.jit_quiet_pct} % of the last" if ctx.jit_quiet_pct else "")
                 + f", for at most {ctx.warmup_s} s (not measured)")
        return [Block(block_id, "client", title, warm.command())]
    return [Block(block_id, "client", f"Warm up the JIT for {ctx.warmup_s} s (not measured)", warm.command())]


def load_blocks(ctx: HostContext, spec: LoadSpec | None = None) -> list[Block]:
    """The warm-up (if any) and the measured load (``spec``: the step's, :meth:`Step.load`)."""
    if not ctx.open_loop:
        title = "Drive the servlet as fast as it answers (closed loop: Debian's wrk has no -R)"
    elif ctx.settles:
        title = (f"Drive the servlet at a constant offered rate: wrk2 calibrates in its first {ctx.load_warmup_s} s "
                 f"(-W, not counted), then counts {ctx.duration_s} s")
    else:
        title = "Drive the servlet at a constant offered rate"
    return warm_up(ctx, spec) + [Block("load", "client", title, (spec or load_spec(ctx)).command())]


# --- host changes ---------------------------------------------------------------------
def grub(block_id: str, title: str, cmdline: str) -> Block:
    """Append the IOMMU parameters through a drop-in file: existing parameters stay, and
    removing the file (then update-grub) undoes the change."""
    return Block(block_id, "server", title,
                 f"echo 'GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {cmdline}\"' | sudo tee {GRUB_DROP_IN}\n"
                 "sudo update-grub && sudo reboot",
                 disruptive=True)


def set_cpus(cpus: Iterable[int], online: bool) -> str:
    """The loop that sets CPUs online or offline ("" for no CPUs)."""
    cpus = [int(number(c, "CPU number")) for c in cpus]     # brace ranges stay unquoted: numbers only
    if not cpus:
        return ""
    return (f"for no in {brace_ranges(cpus)}; do sudo bash -c "
            f"\"echo {1 if online else 0} > /sys/devices/system/cpu/cpu${{no}}/online\"; done")


def offline_all_but(ctx: HostContext, keep: tuple[int, ...]) -> str:
    """Take every CPU offline but ``keep`` and the load generator's pinned CPUs (a client that shares
    the server's kernel keeps its own CPUs)."""
    others = [c for c in range(ctx.total_cpus) if c not in set(keep) | set(ctx.client_pin_cpus)]
    return set_cpus(others, online=False)


def _cpus(cpus: Iterable[int]) -> str:
    """``CPU 1``, ``CPUs 96-103``."""
    cpus = list(cpus)
    return f"CPU{'s' if len(cpus) > 1 else ''} {cpu_ranges(cpus)}"


def move_cpus(ctx: HostContext) -> Block:
    """Bring the NIC node's CPUs online and take every other CPU offline, except those that cannot
    go offline (then Tomcat is pinned to the node's CPUs: ``HostContext.on_numa_node``)."""
    stuck = ctx.stuck_cpus
    title = f"Bring {_cpus(ctx.numa_cpus)} online and take every other CPU offline"
    if stuck:
        title += (f" but {_cpus(stuck)}, which cannot go offline on this host (Tomcat is pinned to "
                  f"{_cpus(ctx.numa_cpus)} instead)")
    others = offline_all_but(replace(ctx, client_pin_cpus=ctx.client_pin_cpus + stuck), ctx.numa_cpus)
    return Block("move-cpus", "server", title,
                 "\n".join(filter(None, (set_cpus(ctx.numa_cpus, online=True), others))), disruptive=True)


def set_queues(ctx: HostContext) -> Block:
    """``ethtool -L``: combined channels (most NICs), or as many receive as transmit queues (a veth
    and other NICs that report separate RX and TX channels: they refuse ``combined``)."""
    n = number(ctx.nic_queues, "nic_queues")
    if ctx.nic_channels == "rx-tx":
        return Block("set-queues", "server", f"Set {n} receive and {n} transmit queue{'' if n == '1' else 's'} on "
                     f"{ctx.nic}",
                     f"sudo ethtool -L {nic(ctx)} rx {n} tx {n}", disruptive=True)
    return Block("set-queues", "server", f"Set {n} combined queues on {ctx.nic}",
                 f"sudo ethtool -L {nic(ctx)} combined {n}", disruptive=True)


# --- verification commands -------------------------------------------------------------
def java(ctx: HostContext) -> str:
    """The context's ``java``: its JDK's (``java_home``), else the one on the PATH."""
    return java_binary(ctx.java_home)


def nic(ctx: HostContext) -> str:
    """The context's network interface, quoted (an interface name holds no ``/``)."""
    if "/" in str(ctx.nic):
        raise TunepathError(f"nic {ctx.nic!r} is not an interface name (it holds a '/')")
    return quote(ctx.nic, "nic")


def nic_numa_node(ctx: HostContext) -> str:
    """The command that prints the NUMA node of the context's NIC: its PCI device's ``numa_node``,
    or, for a virtio NIC (whose ``device`` is a virtio device), its PCI parent's."""
    nic(ctx)
    return (f"cat {path('/sys/class/net', ctx.nic, 'device/numa_node', what='nic')} 2>/dev/null || "
            f"cat {path('/sys/class/net', ctx.nic, 'device/../numa_node', what='nic')}")


def version_sh(ctx: HostContext) -> str:
    """Tomcat's ``version.sh``, with the JDK the measurements use (``JAVA_HOME``) where the context
    has one: without it, the script reports the PATH's java, not the one Tomcat runs on."""
    java_home = f"JAVA_HOME={quote(ctx.java_home, 'java_home')} " if ctx.java_home else ""
    return java_home + tomcat_path(ctx, "bin/version.sh")


# the flags of -XX:+PrintFlagsFinal a page shows: the JIT's, and the CPU features the JVM detects
# (UseLSE, UseSVE … on aarch64; UseAVX … on x86): a flag this JVM or CPU lacks prints no line
JVM_FLAGS = ("TieredCompilation|ReservedCodeCacheSize|InitialCodeCacheSize|SegmentedCodeCache|UseCompressedOops|"
             "UseCompactObjectHeaders|UseLSE|UseSVE|UseSIMDForMemoryOps|UseBlockZeroing|UseAES|UseAESIntrinsics|"
             "UseSHA|UseCRC32Intrinsics|UseFMA|UseAVX|UseSSE|UseVectorizedMismatchIntrinsic")

VERIFY_COMMANDS = {
    "tomcat-version": lambda ctx: version_sh(ctx),
    "dmesg-iommu": lambda ctx: "sudo dmesg | grep iommu",
    "lscpu": lambda ctx: "lscpu",
    "ethtool-l": lambda ctx: f"ethtool -l {nic(ctx)}",
    "numactl-h": lambda ctx: "numactl -H",
    "nic-numa-node": lambda ctx: nic_numa_node(ctx),
    "java-version": lambda ctx: f"{java(ctx)} -version 2>&1",
    "jvm-flags": lambda ctx: f"{java(ctx)} -XX:+PrintFlagsFinal -version 2>/dev/null | grep -wE '{JVM_FLAGS}'",
    "hugepages": lambda ctx: "grep -i huge /proc/meminfo",
    "thp": lambda ctx: "cat /sys/kernel/mm/transparent_hugepage/enabled",
    "load-generator-versions": lambda ctx: f"{quote(ctx.wrk2, 'wrk2')} -v 2>&1 | head -1; wrk -v 2>&1 | head -1; "
                                           "ab -V | head -1; jmeter -j /dev/null --version 2>&1 | tail -1",
}


def verify_command(name: str, ctx: HostContext | None = None) -> str:
    try:
        return VERIFY_COMMANDS[name](ctx or HostContext())
    except KeyError:
        raise TunepathError(f"unknown verification {name!r}") from None
