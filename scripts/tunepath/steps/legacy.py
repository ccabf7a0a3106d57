"""The learning path's steps: what each changes, its variants, and its exact commands.

This module is the single source of the commands: the notebooks execute (and, in
replay mode, record) :func:`plan`, and the pages print the very same blocks from
the exported data, so page and notebook cannot drift apart.

Commands are rendered for a :class:`HostContext`: the server's Tomcat directory,
CPU count and ranges, NIC name and the client's load parameters. A recorded run
stores its context, so a page shows the commands as they were run on that host.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Iterable

from tunepath.errors import TunepathError
from tunepath.live.tomcatconf import TomcatConfig, setenv_command

__all__ = [
    "HostContext", "Block", "Variant", "Step", "STEPS", "STEP_NAMES", "MEASURED_SEQUENCE",
    "get_step", "plan", "cpu_ranges", "brace_ranges", "access_log_valve_xml", "connector_xml",
    "variant_config", "thread_connector", "verify_command", "parse_cpu_list", "step_variants",
    "sweep_value", "sweep_connector", "SWEEP_STEPS", "ANALYSIS_STEPS",
]

BENCH_PATH = "/examples/servlets/servlet/HelloWorldExample"

ACCESS_LOG_VALVE = {
    "className": "org.apache.catalina.valves.AccessLogValve",
    "directory": "logs",
    "prefix": "localhost_access_log",
    "suffix": ".txt",
    "pattern": "%h %l %u %t &quot;%r&quot; %s %b",
}
STOCK_CONNECTOR = {"port": "8080", "protocol": "HTTP/1.1", "connectionTimeout": "20000",
                   "redirectPort": "8443"}


def thread_connector(ctx: "HostContext") -> dict[str, str]:
    """The original's rule: worker threads = online CPUs − 1 (the poller takes one), plus
    keep-alive and connection limits raised out of the benchmark's way."""
    n = str(max(1, len(ctx.baseline_cpus) - 1))
    return {"minSpareThreads": n, "maxThreads": n, "maxKeepAliveRequests": "500000", "maxConnections": "100000"}


@dataclass(frozen=True)
class HostContext:
    """Everything a step's commands depend on, for one server/client pair."""

    tomcat_home: str = "~/apache-tomcat-11.0.10"
    tomcat_version: str = "11.0.10"
    java_package: str = "openjdk-21-jdk"
    server_address: str = "${tomcat_ip}"
    port: int = 8080
    path: str = BENCH_PATH
    total_cpus: int = 192
    baseline_cpus: tuple[int, ...] = tuple(range(0, 8))
    numa_cpus: tuple[int, ...] = tuple(range(96, 104))
    nic: str = "${net}"
    nic_queues: int = 8
    nofile: int = 65535
    load_generator: str = "wrk"   # the binary's name: wrk2 installs itself as `wrk`
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

    @classmethod
    def from_dict(cls, data: dict) -> "HostContext":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise TunepathError(f"unknown host context key(s): {', '.join(sorted(unknown))}")
        values = dict(data)
        for key in ("baseline_cpus", "numa_cpus"):
            if key in values:
                values[key] = tuple(parse_cpu_list(values[key]))
        for key in ("sweep_threads", "sweep_rates"):
            if key in values:
                values[key] = tuple(int(v) for v in values[key])
        return cls(**values)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["baseline_cpus"] = cpu_ranges(self.baseline_cpus)
        out["numa_cpus"] = cpu_ranges(self.numa_cpus)
        return out

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

    def sweep_command(self, rate: int, duration_s: int | None = None, latency: bool = True) -> str:
        """wrk2 at one offered rate, printing corrected and uncorrected (-U) percentiles."""
        d = self.duration_s if duration_s is None else duration_s
        extra = " -U --latency" if latency else ""
        return f"{self.load_generator} -t{self.threads} -c{self.connections} -d{d} -R{rate}{extra} {self.url}"

    @property
    def url(self) -> str:
        return f"http://{self.server_address}:{self.port}{self.path}"

    @property
    def raise_nofile(self) -> str:
        """Raise the open-file limit as far as the hard limit allows (never start nothing)."""
        return f'ulimit -n {self.nofile} 2>/dev/null || ulimit -n "$(ulimit -Hn)"'

    def load_command(self, smoke: bool = False, duration_s: int | None = None) -> str:
        if smoke:
            c, t, r, d = self.smoke_connections, self.smoke_threads, self.smoke_rate, self.smoke_duration_s
        else:
            c, t, r, d = self.connections, self.threads, self.rate, self.duration_s
        d = d if duration_s is None else duration_s
        rate = f" -R{r}" if self.open_loop else ""
        latency = " --latency" if self.latency_flag else ""
        return f"{self.raise_nofile}\n{self.load_generator} -c{c} -t{t}{rate} -d{d}{latency} {self.url}"


@dataclass(frozen=True)
class Block:
    """One command block: what a reader copies and what the notebook runs."""

    id: str
    host: str          # "server" or "client"
    title: str
    text: str
    lang: str = "bash"
    disruptive: bool = False
    variant: str | None = None   # a block that belongs to one variant (applied with its configuration)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Variant:
    """A measured configuration of a step."""

    name: str
    label: str
    description: str
    smoke: bool = False        # measured with the smoke-test load instead of the full one
    requires_java: int = 17    # the lowest Java major version the variant can run on


@dataclass(frozen=True)
class Step:
    number: int
    name: str
    title: str
    page: str                  # the content file name, without .md
    variants: tuple[Variant, ...] = ()
    verifications: tuple[str, ...] = ()

    @property
    def notebook(self) -> str:
        return f"{self.number:02d}-{self.name}.ipynb"


STEPS: tuple[Step, ...] = (
    Step(1, "setup", "Set up Tomcat, the JDK and wrk2", "1-setup",
         (Variant("smoke", "Smoke test", "stock Tomcat at the smoke-test load", smoke=True),),
         ("tomcat-version",)),
    Step(2, "baseline", "Baseline: stock, access log off, thread count", "2-baseline",
         (Variant("stock", "Stock configuration", "Tomcat as shipped"),
          Variant("access-log-off", "Access log off", "AccessLogValve removed from server.xml"),
          Variant("threads", "7 threads, keep-alive and connection limits raised",
                  "maxThreads = minSpareThreads = 7, maxKeepAliveRequests 500000, maxConnections 100000")),
         ("dmesg-iommu", "lscpu")),
    Step(3, "nic-queues", "Match NIC queues to online CPUs", "3-nic-queues",
         (Variant("queues-8", "8 NIC queues", "ethtool -L combined 8"),),
         ("ethtool-l",)),
    Step(4, "numa", "Run Tomcat on the NIC's NUMA node", "4-numa",
         (Variant("numa-local", "CPUs on the NIC's NUMA node", "the online CPUs moved to the NIC's node"),),
         ("numactl-h", "nic-numa-node", "lscpu")),
    Step(5, "iommu", "IOMMU passthrough", "5-iommu",
         (Variant("iommu-passthrough", "IOMMU passthrough", "iommu.strict=0 iommu.passthrough=1"),),
         ("dmesg-iommu",)),
    Step(6, "connectors", "Connectors: NIO, NIO2 and virtual threads", "6-connectors",
         (Variant("nio", "NIO", "Http11NioProtocol with its platform-thread pool"),
          Variant("nio2", "NIO2", "Http11Nio2Protocol with its platform-thread pool"),
          Variant("nio-virtual", "NIO, virtual threads", "Http11NioProtocol with useVirtualThreads=\"true\"",
                  requires_java=21)),
         ("java-version",)),
    Step(7, "jvm", "JVM: heap size, garbage collector, large pages", "7-jvm",
         (Variant("heap-256m", "Heap 256 MB", "-Xms256m -Xmx256m"),
          Variant("heap-512m", "Heap 512 MB", "-Xms512m -Xmx512m"),
          Variant("heap-1g", "Heap 1 GB", "-Xms1g -Xmx1g"),
          Variant("heap-2g", "Heap 2 GB", "-Xms2g -Xmx2g"),
          Variant("parallel-gc", "Parallel GC, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseParallelGC"),
          Variant("large-pages", "Large pages, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseLargePages"),
          Variant("thp", "Transparent huge pages, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseTransparentHugePages")),
         ("java-version",)),
    Step(8, "load-generators", "Load generators: wrk2, wrk, ab and JMeter", "8-load-generators",
         (Variant("wrk2", "wrk2 (open loop, constant rate)", "wrk2 at a constant offered rate, latency corrected"),
          Variant("wrk", "wrk (closed loop)", "Debian's wrk: each connection sends when the last answer arrived"),
          Variant("ab", "ab (ApacheBench, keep-alive)", "ApacheBench from apache2-utils, one thread, keep-alive"),
          Variant("jmeter", "JMeter (non-GUI)", "Apache JMeter in non-GUI mode, one thread group")),
         ("load-generator-versions",)),
    Step(9, "proxy", "A proxy in front: Apache httpd with mod_proxy_http and mod_proxy_ajp", "9-proxy",
         (Variant("direct", "Tomcat direct", "the client talks to Tomcat's HTTP connector"),
          Variant("http", "httpd + mod_proxy_http", "Apache httpd forwards HTTP to Tomcat's HTTP connector"),
          Variant("ajp", "httpd + mod_proxy_ajp", "Apache httpd forwards AJP to Tomcat's AJP connector (with a secret)")),
         ()),
    Step(10, "thread-sweep", "Thread-count sweep: the best maxThreads for this host", "10-thread-sweep"),
    Step(11, "rate-sweep", "Rate sweep: capacity at a latency objective", "11-rate-sweep"),
    Step(12, "compare", "Compare two runs", "12-compare"),
    Step(13, "summary", "Summary", "13-summary"),
)
SWEEP_STEPS = ("thread-sweep", "rate-sweep")    # their variants come from the host context
ANALYSIS_STEPS = ("compare", "summary")        # no commands: they read recorded runs

NIO = "org.apache.coyote.http11.Http11NioProtocol"
NIO2 = "org.apache.coyote.http11.Http11Nio2Protocol"
# Steps that compare variants with each other rather than continuing the tuning sequence.
# Each keeps the access log off (the baseline showed it costs throughput) and changes one thing.
COMPARISON_CONFIGS: dict[tuple[str, str], TomcatConfig] = {
    ("connectors", "nio"): TomcatConfig(access_log=False, connector={"protocol": NIO}),
    ("connectors", "nio2"): TomcatConfig(access_log=False, connector={"protocol": NIO2}),
    ("connectors", "nio-virtual"): TomcatConfig(access_log=False,
                                                connector={"protocol": NIO, "useVirtualThreads": "true"}),
    ("jvm", "heap-256m"): TomcatConfig(access_log=False, jvm_options=("-Xms256m", "-Xmx256m")),
    ("jvm", "heap-512m"): TomcatConfig(access_log=False, jvm_options=("-Xms512m", "-Xmx512m")),
    ("jvm", "heap-1g"): TomcatConfig(access_log=False, jvm_options=("-Xms1g", "-Xmx1g")),
    ("jvm", "heap-2g"): TomcatConfig(access_log=False, jvm_options=("-Xms2g", "-Xmx2g")),
    ("jvm", "parallel-gc"): TomcatConfig(access_log=False, jvm_options=("-Xms1g", "-Xmx1g", "-XX:+UseParallelGC")),
    ("jvm", "large-pages"): TomcatConfig(access_log=False, jvm_options=("-Xms1g", "-Xmx1g", "-XX:+UseLargePages")),
    ("jvm", "thp"): TomcatConfig(access_log=False,
                                 jvm_options=("-Xms1g", "-Xmx1g", "-XX:+UseTransparentHugePages")),
    **{("load-generators", v): TomcatConfig(access_log=False) for v in ("wrk2", "wrk", "ab", "jmeter")},
    ("proxy", "direct"): TomcatConfig(access_log=False),
    ("proxy", "http"): TomcatConfig(access_log=False),
}
LOAD_TOOLS = {"wrk2": "wrk2", "wrk": "wrk", "ab": "ab", "jmeter": "jmeter"}   # variant → binary
JMETER_PLAN = "~/.tunepath/jmeter-plan.jmx"
JMETER_PLAN_XML = (Path(__file__).parent / "templates" / "jmeter-plan.jmx").read_text(encoding="utf-8").rstrip("\n")
STEP_NAMES = tuple(s.name for s in STEPS)

# The measurements that form one host's tuning sequence, in order. The smoke test
# uses a different load and is not part of it.
MEASURED_SEQUENCE: tuple[tuple[str, str], ...] = (
    ("baseline", "stock"), ("baseline", "access-log-off"), ("baseline", "threads"),
    ("nic-queues", "queues-8"), ("numa", "numa-local"), ("iommu", "iommu-passthrough"),
)


def variant_config(step: str, variant: str, ctx: "HostContext | None" = None) -> TomcatConfig:
    """The Tomcat configuration a variant measures. Steps are cumulative: from the thread
    variant on, every later step keeps the tuned server.xml."""
    ctx = ctx or HostContext()
    key = (step, variant)
    if key in (("setup", "smoke"), ("baseline", "stock")):
        config = TomcatConfig()
    elif key == ("baseline", "access-log-off"):
        config = TomcatConfig(access_log=False)
    elif key in MEASURED_SEQUENCE:
        config = TomcatConfig(access_log=False, connector=thread_connector(ctx))
    elif key in COMPARISON_CONFIGS:
        config = COMPARISON_CONFIGS[key]
    elif key == ("proxy", "ajp"):
        config = TomcatConfig(access_log=False, ajp_secret=ctx.ajp_secret)
    elif step == "thread-sweep" and sweep_value(variant):
        config = TomcatConfig(access_log=False, connector=sweep_connector(sweep_value(variant)))
    elif step == "rate-sweep" and sweep_value(variant):
        config = TomcatConfig()       # stock Tomcat, as in the recorded reference sweep
    else:
        raise TunepathError(f"step {step!r} has no variant {variant!r}")
    return replace(config, java_home=ctx.java_home) if ctx.java_home else config


def step_variants(step: str, ctx: "HostContext | None" = None) -> tuple[Variant, ...]:
    """A step's measured variants; the sweeps' follow the host context (threads, rates)."""
    ctx = ctx or HostContext()
    if step == "thread-sweep":
        return tuple(Variant(f"threads-{n}", f"maxThreads {n}", f"maxThreads = minSpareThreads = {n}")
                     for n in ctx.sweep_threads)
    if step == "rate-sweep":
        return tuple(Variant(f"rate-{r}", f"{r:,} req/s offered", f"wrk2 at a constant {r:,} req/s")
                     for r in ctx.rates)
    return get_step(step).variants


def sweep_value(variant: str) -> int | None:
    """The number a sweep variant stands for: threads-16 → 16, rate-5000 → 5000."""
    head, _, tail = variant.rpartition("-")
    return int(tail) if head in ("threads", "rate") and tail.isdigit() else None


def sweep_connector(threads: int) -> dict[str, str]:
    n = str(threads)
    return {"minSpareThreads": n, "maxThreads": n, "maxKeepAliveRequests": "500000", "maxConnections": "100000"}


def get_step(name: str) -> Step:
    for step in STEPS:
        if step.name == name:
            return step
    raise TunepathError(f"unknown step {name!r}; the steps are: {', '.join(STEP_NAMES)}")


# --- CPU lists ----------------------------------------------------------------
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
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def _runs(cpus: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cpu in sorted(set(cpus)):
        if out and cpu == out[-1][1] + 1:
            out[-1] = (out[-1][0], cpu)
        else:
            out.append((cpu, cpu))
    return out


def cpu_ranges(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"`` (the kernel's own notation)."""
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in _runs(cpus))


def brace_ranges(cpus: Iterable[int]) -> str:
    """``[0..95, 104..191]`` → ``"{0..95} {104..191}"`` for a bash ``for`` loop."""
    return " ".join(f"{{{a}..{b}}}" if a != b else f"{a}" for a, b in _runs(cpus))


def _set_cpus(cpus: Iterable[int], online: bool) -> str:
    return (f"for no in {brace_ranges(cpus)}; do sudo bash -c "
            f"\"echo {1 if online else 0} > /sys/devices/system/cpu/cpu${{no}}/online\"; done")


def _offline_all_but(ctx: HostContext, keep: tuple[int, ...]) -> str:
    others = [c for c in range(ctx.total_cpus) if c not in set(keep)]
    return _set_cpus(others, online=False)


# --- XML shown on the pages -------------------------------------------------------
def _element(tag: str, attrs: dict, indent: str = "    ") -> str:
    pad = indent + " " * (len(tag) + 2)
    items = list(attrs.items())
    first = f'{indent}<{tag} {items[0][0]}="{items[0][1]}"'
    rest = [f'{pad}{k}="{v}"' for k, v in items[1:]]
    return "\n".join([first, *rest]) + " />"


def access_log_valve_xml() -> str:
    """The element the access-log variant removes from ``conf/server.xml``."""
    return _element("Valve", ACCESS_LOG_VALVE, indent="        ")


def connector_xml(attrs: dict | None = None) -> str:
    return _element("Connector", {**STOCK_CONNECTOR, **(attrs or {})})


# --- the plans ----------------------------------------------------------------------
def _start_lines(ctx: HostContext) -> str:
    return (f"export CATALINA_PID={ctx.tomcat_home}/temp/tomcat.pid\n"
            f"{ctx.raise_nofile}\n"
            f"{ctx.tomcat_home}/bin/startup.sh")


def _restart(ctx: HostContext) -> Block:
    return Block("restart-tomcat", "server",
                 "Restart Tomcat: wait for the old JVM to exit, raise the open-file limit, start",
                 f"export CATALINA_PID={ctx.tomcat_home}/temp/tomcat.pid\n"
                 f"{ctx.tomcat_home}/bin/shutdown.sh 10 -force >/dev/null 2>&1\n"
                 f"{ctx.raise_nofile}\n"
                 f"{ctx.tomcat_home}/bin/startup.sh")


def _load(ctx: HostContext) -> list[Block]:
    title = ("Drive the servlet at a constant offered rate" if ctx.open_loop else
             "Drive the servlet as fast as it answers (closed loop: Debian's wrk has no -R)")
    blocks = []
    if ctx.warmup_s:
        blocks.append(Block("warm-up", "client", f"Warm up the JIT for {ctx.warmup_s} s (not measured)",
                            ctx.load_command(duration_s=ctx.warmup_s)))
    return blocks + [Block("load", "client", title, ctx.load_command())]


GRUB_DROP_IN = "/etc/default/grub.d/99-tunepath-iommu.cfg"


def _grub(ctx: HostContext, block_id: str, title: str, cmdline: str) -> Block:
    """Append the IOMMU parameters through a drop-in file: existing parameters stay, and
    removing the file (then update-grub) undoes the change."""
    return Block(block_id, "server", title,
                 f"echo 'GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {cmdline}\"' | sudo tee {GRUB_DROP_IN}\n"
                 "sudo update-grub && sudo reboot",
                 disruptive=True)


def _move_cpus(ctx: HostContext) -> Block:
    return Block("move-cpus", "server",
                 f"Bring CPUs {cpu_ranges(ctx.numa_cpus)} online and take every other CPU offline",
                 _set_cpus(ctx.numa_cpus, online=True) + "\n" + _offline_all_but(ctx, ctx.numa_cpus),
                 disruptive=True)


def _set_queues(ctx: HostContext) -> Block:
    return Block("set-queues", "server", f"Set {ctx.nic_queues} combined queues on {ctx.nic}",
                 f"sudo ethtool -L {ctx.nic} combined {ctx.nic_queues}", disruptive=True)


def plan(step: str, ctx: HostContext | None = None) -> list[Block]:
    """The command blocks of ``step`` for the hosts described by ``ctx``, in order."""
    ctx = ctx or HostContext()
    get_step(step)
    home = ctx.tomcat_home
    v = ctx.tomcat_version
    major = v.split(".")[0]
    if step == "setup":
        tarball = f"apache-tomcat-{v}.tar.gz"
        return [
            Block("install-jdk", "server", "Install a JDK (Tomcat 11 needs Java 17 or later)",
                  f"sudo apt-get update && sudo apt-get install -y {ctx.java_package}"),
            Block("install-tomcat", "server", f"Download Tomcat {v}, check its SHA-512 and unpack it",
                  f"cd ~ && wget https://archive.apache.org/dist/tomcat/tomcat-{major}/v{v}/bin/{tarball}"
                  f" https://archive.apache.org/dist/tomcat/tomcat-{major}/v{v}/bin/{tarball}.sha512\n"
                  f"sha512sum -c {tarball}.sha512\n"
                  f"tar xzf {tarball}"),
            Block("open-examples", "server", "Let remote clients reach the examples webapp",
                  f"sed -i 's/allow=\"[^\"]*\"/allow=\".*\"/' {home}/webapps/examples/META-INF/context.xml"),
            Block("start-tomcat", "server", "Start Tomcat with a higher open-file limit",
                  _start_lines(ctx)),
            Block("build-wrk2", "client", "Build wrk2 from source (x86_64 client)",
                  "sudo apt-get install -y build-essential libssl-dev zlib1g-dev git\n"
                  "git clone https://github.com/giltene/wrk2.git && cd wrk2 && make\n"
                  "sudo cp wrk /usr/local/bin/wrk && sudo cp wrk /usr/local/bin/wrk2"),
            Block("smoke-test", "client", "Smoke test at a modest constant rate", ctx.load_command(smoke=True)),
        ]
    if step == "baseline":
        offline = [] if len(ctx.baseline_cpus) >= ctx.total_cpus else [
            Block("offline-cpus", "server",
                  f"Keep CPUs {cpu_ranges(ctx.baseline_cpus)} online and take every other CPU offline",
                  _offline_all_but(ctx, ctx.baseline_cpus), disruptive=True)]
        return [
            _grub(ctx, "iommu-strict", "Align the IOMMU with stock Ubuntu (strict, translated) and reboot",
                  "iommu.strict=1 iommu.passthrough=0"),
            *offline,
            _restart(ctx),
            *_load(ctx),
            Block("disable-access-log", "server", f"Remove this Valve from {home}/conf/server.xml",
                  access_log_valve_xml(), lang="xml"),
            Block("thread-config", "server", f"The HTTP Connector in {home}/conf/server.xml after the change",
                  connector_xml(thread_connector(ctx)), lang="xml"),
        ]
    if step == "nic-queues":
        return [
            Block("show-queues", "server", f"Show the queue counts of {ctx.nic}", f"ethtool -l {ctx.nic}"),
            _set_queues(ctx),
            _restart(ctx),
            *_load(ctx),
        ]
    if step == "numa":
        return [
            Block("numa-topology", "server", "Show the NUMA nodes, their CPUs and distances", "numactl -H"),
            Block("nic-node", "server", f"Find the NUMA node of {ctx.nic}",
                  f"cat /sys/class/net/{ctx.nic}/device/numa_node"),
            _move_cpus(ctx),
            _restart(ctx),
            *_load(ctx),
        ]
    if step == "iommu":
        return [
            _grub(ctx, "iommu-passthrough", "Switch the IOMMU to passthrough, non-strict, and reboot",
                  "iommu.strict=0 iommu.passthrough=1"),
            _move_cpus(ctx),
            _set_queues(ctx),
            _restart(ctx),
            *_load(ctx),
        ]
    if step == "connectors":
        blocks = []
        for v in get_step(step).variants:
            cfg = variant_config(step, v.name, ctx)
            blocks.append(Block(f"connector-{v.name}", "server",
                                f"{v.label}: the HTTP Connector in {home}/conf/server.xml", connector_xml(cfg.connector),
                                lang="xml", variant=v.name))
        return blocks + [_restart(ctx), *_load(ctx)]
    if step == "jvm":
        blocks = [Block("hugepages", "server", "How many huge pages the kernel has reserved",
                        "grep -i huge /proc/meminfo"),
                  Block("thp", "server", "Whether transparent huge pages are enabled",
                        "cat /sys/kernel/mm/transparent_hugepage/enabled")]
        for v in get_step(step).variants:
            blocks.append(Block(f"setenv-{v.name}", "server", f"{v.label}: JVM options in {home}/bin/setenv.sh",
                                setenv_command(home, variant_config(step, v.name, ctx)), variant=v.name))
        return blocks + [_restart(ctx), *_load(ctx)]
    if step == "load-generators":
        d, c, t = ctx.duration_s, ctx.connections, ctx.threads
        return [
            Block("load-wrk2", "client", "wrk2: a constant offered rate, latency corrected for coordinated omission",
                  f"{ctx.raise_nofile}\nwrk2 -c{c} -t{t} -R{ctx.rate} -d{d} --latency {ctx.url}", variant="wrk2"),
            Block("load-wrk", "client", "wrk: as fast as the server answers (closed loop)",
                  f"{ctx.raise_nofile}\nwrk -c{c} -t{t} -d{d} --latency {ctx.url}", variant="wrk"),
            Block("load-ab", "client", "ab: one thread, keep-alive, for the same time",
                  f"{ctx.raise_nofile}\nab -k -c {c} -t {d} -n 100000000 {ctx.url}", variant="ab"),
            Block("jmeter-plan", "client", f"JMeter: save this test plan as {JMETER_PLAN} on the client",
                  JMETER_PLAN_XML, lang="xml", variant="jmeter"),
            Block("load-jmeter", "client", "JMeter: non-GUI mode, one thread per connection, for the same time",
                  f"{ctx.raise_nofile}\njmeter -n -t {JMETER_PLAN} -Jthreads={c} -Jduration={d} "
                  f"-Jhost={ctx.server_address} -Jport={ctx.port} -Jpath={ctx.path} -j ~/.tunepath/jmeter.log",
                  variant="jmeter"),
            _restart(ctx),
            *_load(ctx)[:-1],       # the warm-up (by wrk); each variant then runs its own tool
        ]
    if step == "proxy":
        from tunepath.live.httpd import PROXY_PORT, httpd_conf
        from tunepath.live.tomcatconf import ajp_attributes

        proxied = ctx.url.replace(f":{ctx.port}/", f":{PROXY_PORT}/")
        blocks = [Block("ajp-connector", "server", f"The AJP Connector added to {home}/conf/server.xml",
                        _element("Connector", ajp_attributes(ctx.ajp_secret)), lang="xml", variant="ajp")]
        for mode in ("http", "ajp"):
            conf = httpd_conf(mode, ctx.httpd_dir, ctx.port, ctx.ajp_secret)
            blocks.append(Block(f"httpd-{mode}", "server", f"Start a private httpd on port {PROXY_PORT} "
                                f"with mod_proxy_{mode}",
                                f"mkdir -p {ctx.httpd_dir} && cat > {ctx.httpd_dir}/httpd.conf <<'EOF'\n{conf}EOF\n"
                                f"apache2 -f {ctx.httpd_dir}/httpd.conf -k start", variant=mode))
        blocks.append(_restart(ctx))
        blocks += _load(ctx)[:-1]
        for v, url in (("direct", ctx.url), ("http", proxied), ("ajp", proxied)):
            rate = f" -R{ctx.rate}" if ctx.open_loop else ""
            latency = " --latency" if ctx.latency_flag else ""
            blocks.append(Block(f"load-{v}", "client", f"Load through {'Tomcat directly' if v == 'direct' else 'httpd'}",
                                f"{ctx.raise_nofile}\n{ctx.load_generator} -c{ctx.connections} -t{ctx.threads}{rate} "
                                f"-d{ctx.duration_s}{latency} {url}", variant=v))
        return blocks
    if step == "thread-sweep":
        blocks = [Block(f"connector-{v.name}", "server", f"{v.label}: the HTTP Connector in {home}/conf/server.xml",
                        connector_xml(sweep_connector(sweep_value(v.name))), lang="xml", variant=v.name)
                  for v in step_variants(step, ctx)]
        return blocks + [_restart(ctx), *_load(ctx)]
    if step == "rate-sweep":
        blocks = [_restart(ctx)]
        if ctx.warmup_s:
            blocks.append(Block("warm-up", "client", f"Warm up the JIT for {ctx.warmup_s} s at "
                                f"{ctx.warmup_rate:,} req/s (not measured)",
                                ctx.sweep_command(ctx.warmup_rate, ctx.warmup_s, latency=False)))
        for v in step_variants(step, ctx):
            blocks.append(Block(f"load-{v.name}", "client", f"Offer {v.label} (the same JVM, rates in rising order)",
                                ctx.sweep_command(sweep_value(v.name)), variant=v.name))
        return blocks
    return []


VERIFY_COMMANDS = {
    "tomcat-version": lambda ctx: f"{ctx.tomcat_home}/bin/version.sh",
    "dmesg-iommu": lambda ctx: "sudo dmesg | grep iommu",
    "lscpu": lambda ctx: "lscpu",
    "ethtool-l": lambda ctx: f"ethtool -l {ctx.nic}",
    "numactl-h": lambda ctx: "numactl -H",
    "nic-numa-node": lambda ctx: f"cat /sys/class/net/{ctx.nic}/device/numa_node",
    "java-version": lambda ctx: f"{ctx.java_home + '/bin/' if ctx.java_home else ''}java -version 2>&1",
    "hugepages": lambda ctx: "grep -i huge /proc/meminfo",
    "thp": lambda ctx: "cat /sys/kernel/mm/transparent_hugepage/enabled",
    "load-generator-versions": lambda ctx: "wrk2 -v 2>&1 | head -1; wrk -v 2>&1 | head -1; ab -V | head -1; "
                                           "jmeter --version 2>&1 | tail -1",
}


def verify_command(name: str, ctx: HostContext | None = None) -> str:
    try:
        return VERIFY_COMMANDS[name](ctx or HostContext())
    except KeyError:
        raise TunepathError(f"unknown verification {name!r}") from None

