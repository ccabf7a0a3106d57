"""Live mode's session: the options of a live run and the open hosts of one step.

The live layer, in the order a step meets it: :mod:`~tunepath.live.start` opens a run
(host keys checked, lock taken, facts gathered); :mod:`~tunepath.live.execute` runs one
step (the step object says what, this layer says how); :mod:`~tunepath.live.measure`
measures one variant once and :mod:`~tunepath.live.repeat` repeats variants in
interleaved rounds; :mod:`~tunepath.live.actions` holds the guarded single actions;
:mod:`~tunepath.live.runner` executes the step notebooks of a whole run and rebuilds the site.

A run being recorded keeps a few side files beside it, in ``runs/.inprogress/`` (ignored by
git, each readable by its owner only, 0600): ``<id>.options.json`` (the run's options and
its controlling process: the step notebooks get only the run id, never these paths and
URLs), ``<id>.mask.json`` (the real host names and home directories that the record masks),
``<id>.context.json`` (the unmasked host context) and the kernels' stderr. They are removed
on every exit path; those of a run killed outright (``kill -9``) are removed by the next
``tunepath run`` (:func:`clear_stale_side_files`).
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import platform
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tunepath.errors import TunepathError
from tunepath.evidence.recorder import INPROGRESS, Masker, RunRecorder, path_roles
from tunepath.live.hosts import Host, Inventory, connect_all, load_inventory
from tunepath.live.hoststate import check_lock
from tunepath.live.option_checks import check_dir, check_number, check_readable, check_versions
from tunepath.terminal import safe
from tunepath.live.loadgen import LoadTool, detect, duration_for, get_profile
from tunepath.live.placement import baseline_cpus
from tunepath.live.tomcat import Tomcat
from tunepath.live.wrk2 import Wrk2Source
from tunepath.versions import WRK2_REPO
from tunepath.model.context import HostContext, cpu_ranges, parse_cpu_list, ports_for, tls_port_for
from tunepath.project import project_dir
from tunepath.settings import DEFAULTS

__all__ = ["LiveOptions", "validate", "Session", "open_session", "live_context", "progress", "expand_home",
           "masker_for", "mask_names_file", "server_address", "context_file", "save_context",
           "load_context", "load_options", "side_file", "write_private", "SIDE_FILES"]

SIDE_FILES = (".options.json", ".mask.json", ".context.json", ".kernel-stderr.log",   # <run id><suffix>
              ".put-back.json")      # an interrupted step's guard put the server back in full (live/actions)


PROGRESS_ENV = "TUNEPATH_PROGRESS"      # what a progress line names first: a matrix's cell (live/matrix.py)


def progress(message: str) -> None:
    """A progress line: the time, the matrix cell where a matrix runs (its step kernels inherit the
    variable), the message (recorded strings in it quoted)."""
    cell = os.environ.get(PROGRESS_ENV)
    print(f"[{dt.datetime.now():%H:%M:%S}] {safe(f'{cell}: ' if cell else '')}{safe(message)}", flush=True)


@dataclass
class LiveOptions:
    """A live run's settings. Their names, defaults and meanings are :mod:`tunepath.settings`'s
    (which ``tunepath run``'s options and the notebooks' parameters are generated from)."""
    hosts_file: str | None = DEFAULTS["hosts_file"]
    profile: str = DEFAULTS["profile"]
    apply: bool = DEFAULTS["apply"]
    allow_reboot: bool = DEFAULTS["allow_reboot"]
    trust_new_hosts: bool = DEFAULTS["trust_new_hosts"]
    mask_hosts: bool = DEFAULTS["mask_hosts"]
    tomcat_version: str = DEFAULTS["tomcat_version"]
    tomcat_home: str = DEFAULTS["tomcat_home"]           # None (the default) follows tomcat_version
    tomcat_tarball: str | None = DEFAULTS["tomcat_tarball"]
    tomcat_url: str | None = DEFAULTS["tomcat_url"]
    http_port: int = DEFAULTS["http_port"]
    java_home: str | None = DEFAULTS["java_home"]
    java: int | None = DEFAULTS["java"]
    build_wrk2: bool = DEFAULTS["build_wrk2"]
    wrk2_source: str | None = DEFAULTS["wrk2_source"]
    all_clients: bool = DEFAULTS["all_clients"]
    repetitions: int | None = DEFAULTS["repetitions"]
    max_repetitions: int | None = DEFAULTS["max_repetitions"]
    ci_target_pct: float | None = DEFAULTS["ci_target_pct"]
    step_budget_s: float | None = DEFAULTS["step_budget_s"]
    pin: bool = DEFAULTS["pin"]

    def __post_init__(self) -> None:
        if self.tomcat_home is None:
            self.tomcat_home = f"~/apache-tomcat-{self.tomcat_version}"

    def check(self) -> None:
        """Every value in range and of the right shape, before anything connects, locks or installs."""
        profile = get_profile(self.profile)
        check_versions(self)
        if isinstance(self.http_port, bool) or not isinstance(self.http_port, int) or not 0 < self.http_port < 65536:
            raise TunepathError(f"--http-port {self.http_port}: Tomcat's HTTP port must be a number from 1 to 65535")
        for flag, value in (("--repetitions", self.repetitions), ("--max-repetitions", self.max_repetitions)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise TunepathError(f"{flag} {value}: must be a whole number, 1 or more")
        low = self.repetitions or profile.repetitions
        if self.max_repetitions is not None and low > self.max_repetitions:
            given = f"--repetitions {low}" if self.repetitions else f"the {profile.name} profile's minimum of {low}"
            raise TunepathError(f"--max-repetitions {self.max_repetitions} is below {given}: the maximum must be "
                                "at least the minimum (give both, e.g. --repetitions 2 --max-repetitions 4)")
        check_number("--ci-target", self.ci_target_pct, "a percentage above 0 and at most 100 (how narrow each "
                      "95 % interval must be, as a % of its median; default 5)", 100)
        check_number("--step-budget", self.step_budget_s, "a number of seconds above 0")
        if self.allow_reboot and not self.apply:
            raise TunepathError("--allow-reboot only makes sense with --apply (without it nothing disruptive runs)")
        check_dir("--tomcat-home", self.tomcat_home, writes=True)
        if self.java_home is not None:
            check_dir("--java-home", self.java_home)
            if self.java_home.rstrip("/").endswith(("/bin/java", "/bin")):
                raise TunepathError(f"--java-home {self.java_home}: give the JDK's directory (the one that holds "
                                    "bin/java), not its bin directory or java binary")
        if self.tomcat_tarball is not None:
            check_readable("--tomcat-tarball", self.tomcat_tarball)
        if self.wrk2_source is not None:
            Wrk2Source.parse(self.wrk2_source)
        if self.tomcat_url is not None:
            url = urlsplit(self.tomcat_url)
            if url.scheme not in ("http", "https") or not url.netloc or any(c.isspace() for c in self.tomcat_url):
                raise TunepathError("--tomcat-url: must be an http:// or https:// URL of the Tomcat tarball")

    @property
    def wrk2(self) -> Wrk2Source | None:
        """Where to build wrk2 from, when the run builds it (--wrk2-source, or --build-wrk2)."""
        if self.wrk2_source is None and not self.build_wrk2:
            return None
        return Wrk2Source.parse(self.wrk2_source)


def validate(options: LiveOptions) -> Inventory:
    """Check ``options`` and load the inventory they name: everything that can be checked on this
    machine, before anything connects, takes a lock, installs or writes. Returns the inventory."""
    options.check()
    inventory = load_inventory(options.hosts_file)
    if options.java_home and inventory.server.local and not options.java_home.startswith("~"):
        java = Path(options.java_home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise TunepathError(f"--java-home {options.java_home}: no runnable bin/java there on this machine "
                                "(the server); give the directory of a JDK")
    return inventory


@dataclass
class Session:
    """The open hosts of one step's execution."""

    run_id: str
    options: LiveOptions
    inventory: Inventory
    server: Host
    clients: list[Host]
    recorder: RunRecorder
    tool: LoadTool
    tomcat: Tomcat
    ctx: HostContext
    facts: dict = field(default_factory=dict)
    repeating: bool = False
    nofile: int | None = None          # the running JVM's open-file limit, read when it started
    client_dirs: set = field(default_factory=set)   # clients whose ~/.tunepath this session made

    @property
    def client(self) -> Host:
        return self.clients[0]

    def host(self, role: str) -> Host:
        return self.server if role == "server" else self.client

    def close(self) -> None:
        for h in [self.server, *self.clients]:
            h.close()


def _node_cpus(server: Host, node: int) -> list[int]:
    r = server.run(f"cat /sys/devices/system/node/node{node}/cpulist 2>/dev/null", check=False, timeout=15)
    return parse_cpu_list(r.stdout.strip()) if r.stdout.strip() else []


FIXED_CPUS = 'for c in /sys/devices/system/cpu/cpu[0-9]*; do [ -e "$c/online" ] || echo "${c##*/cpu}"; done'


def _fixed_cpus(server: Host) -> tuple[int, ...]:
    """CPUs that cannot go offline: no sysfs ``online`` file (CPU 0 on x86 and on some Arm hosts)."""
    r = server.run(FIXED_CPUS, check=False, timeout=15)
    return tuple(sorted(int(c) for c in r.stdout.split() if c.isdigit())) if r.exited == 0 else ()


def server_address(inventory: Inventory) -> str:
    """The address the client sends its load to: loopback when the server is this machine or
    shares the client's, else the inventory's server host (the one rule, for every context)."""
    return "127.0.0.1" if inventory.same_machine or inventory.server.local else inventory.server.load_address


def live_context(server: Host, facts: dict, tool: LoadTool, options: LiveOptions, inventory: Inventory,
                 tomcat_home: str) -> HostContext:
    """The step commands' parameters for these real hosts and this profile: computed when the
    run starts (and recorded) and again, by the same rule, for each step's session."""
    profile, smoke = get_profile(options.profile), get_profile("smoke")
    online = parse_cpu_list(facts.get("cpus_online") or "0")
    keep = baseline_cpus(inventory, online, server.name)
    n = len(keep)
    nic = facts.get("nic") or {}
    node = nic.get("numa_node")
    numa_cpus = _node_cpus(server, node)[:n] if isinstance(node, int) and node >= 0 else []
    threads = max(1, min(profile.threads, tool.client_cpus))
    scale = threads / profile.threads
    connections = max(threads, round(profile.connections * scale))
    source = options.wrk2
    shutdown_port, ajp_port, proxy_port = ports_for(options.http_port)
    return HostContext(
        tomcat_home=tomcat_home, tomcat_version=options.tomcat_version,
        java_home=options.java_home,
        server_address=server_address(inventory), port=options.http_port,
        shutdown_port=shutdown_port, ajp_port=ajp_port, proxy_port=proxy_port,
        tls_port=tls_port_for(options.http_port),
        total_cpus=facts.get("cpus") or len(online), baseline_cpus=tuple(keep),
        numa_cpus=tuple(numa_cpus or keep), fixed_cpus=_fixed_cpus(server), nic=nic.get("name") or "${net}", nic_queues=n,
        nic_channels=nic.get("channels") or "combined",
        hugepage_kb=(facts.get("hugepages") or {}).get("size_kb") or 2048,
        load_generator=tool.binary, threads=threads, connections=connections,
        rate=max(1, round(profile.rate * scale)), wrk2_source=source.shown if source else WRK2_REPO,
        uncorrected=tool.open_loop, duration_s=duration_for(profile, tool, threads, connections),
        probe_with=tool.closed_loop or "", smoke_threads=1, smoke_connections=smoke.connections,
        smoke_rate=smoke.rate, smoke_duration_s=smoke.duration_s, warmup_s=profile.warmup_s,
        open_loop=tool.open_loop, latency_flag=True, warmup_window_s=profile.warmup_window_s,
        steady_pct=profile.steady_pct, jit_quiet_pct=profile.jit_quiet_pct,
        load_warmup_s=profile.settle_s if tool.warmup else 0,
        **({"sweep_threads": profile.sweep_threads} if profile.sweep_threads else {}),
        httpd_dir=server.run("echo $HOME", timeout=15).stdout.strip() + "/.tunepath/httpd")


def open_session(run_id: str, runs_dir: Path, options: LiveOptions) -> Session:
    """The hosts of ``run_id``, opened with the options it was started with (its side file: the
    notebook's parameters carry none of them), else with ``options``."""
    options = load_options(runs_dir, run_id) or options
    inventory = load_inventory(options.hosts_file)
    with ExitStack() as stack:
        server, clients = connect_all(inventory, options.trust_new_hosts)   # new keys saved once all connected
        for host in (server, *clients):
            stack.callback(host.close)
        check_lock(server, run_id)
        session = _session(run_id, Path(runs_dir), options, inventory, server, clients)
        stack.pop_all()          # the session owns the connections now
        return session


def _session(run_id, runs_dir, options, inventory, server, clients) -> Session:
    recorder = RunRecorder.resume(runs_dir, run_id, masker=masker_for(inventory, options, runs_dir, run_id))
    tool = detect(clients[0])
    facts = recorder.record["hosts"]["server"]["facts"]
    home = expand_home(server, options.tomcat_home)
    ctx = load_context(runs_dir, run_id) or live_context(server, facts, tool, options, inventory, home)
    tomcat = Tomcat(server, home, port=options.http_port)
    return Session(run_id, options, inventory, server, clients, recorder, tool, tomcat, ctx, facts)


def side_file(runs_dir: Path, run_id: str, suffix: str) -> Path:
    """``runs/.inprogress/<run id><suffix>``: kept beside (never inside) the run being recorded."""
    return Path(runs_dir) / INPROGRESS / f"{run_id}{suffix}"


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read: 0600 from the moment it exists, and whole (renamed
    into place, so another run never reads half of it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)     # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def context_file(runs_dir: Path, run_id: str) -> Path:
    """The run's host context as computed for the real hosts, kept beside (never inside) the run
    being recorded: the copy in run.json is masked (machine paths always, host names on request)."""
    return side_file(runs_dir, run_id, ".context.json")


def save_context(runs_dir: Path, run_id: str, ctx: HostContext, recorder: RunRecorder | None = None) -> None:
    """Record the context once (run.json, masked) and keep it for every step's session."""
    write_private(context_file(runs_dir, run_id), json.dumps(ctx.to_dict()))
    if recorder is not None:
        recorder.record["context"] = recorder.mask(ctx.to_dict())
        recorder.save()


def load_context(runs_dir: Path, run_id: str) -> HostContext | None:
    """The context the run recorded when it started (None: a session outside a started run)."""
    path = context_file(runs_dir, run_id)
    return HostContext.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def load_options(runs_dir: Path, run_id: str) -> LiveOptions | None:
    """The options the run was started with (None: a session outside a started run)."""
    path = side_file(runs_dir, run_id, ".options.json")
    return LiveOptions(**json.loads(path.read_text(encoding="utf-8"))["options"]) if path.is_file() else None


def expand_home(host: Host, home: str) -> str:
    if home.startswith("~"):
        return host.run("echo $HOME", timeout=15).stdout.strip() + home[1:]
    return home


def mask_names_file(runs_dir: Path, run_id: str) -> Path:
    """What the record masks, kept beside (never inside) the run being recorded: the real host
    names (with --mask-hosts) and each host's home directory."""
    return side_file(runs_dir, run_id, ".mask.json")


def _mask_inputs(runs_dir: Path | None, run_id: str | None) -> tuple[dict, list]:
    path = mask_names_file(runs_dir, run_id) if runs_dir and run_id else None
    if path is None or not path.is_file():
        return {}, []
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data.get("names") or {}), list(data.get("homes") or [])


def _machine_paths(options: LiveOptions, homes: list[str], runs_dir: Path | None, run_id: str | None) -> dict:
    """This run's machine paths and their roles (:func:`~tunepath.evidence.recorder.path_roles`)."""
    local = lambda p: {str(p), os.path.realpath(p)}            # noqa: E731 - as given and as resolved
    runs = Path(runs_dir).absolute() if runs_dir else None
    run_dirs = [d for rid in ([run_id] if run_id and runs else []) for d in
                [*local(runs / INPROGRESS / rid), *local(runs / rid)]]
    files = {p: role for value, role in ((options.hosts_file, "$TUNEPATH_HOSTS"),
                                         (options.tomcat_tarball, "$TOMCAT_TARBALL"),
                                         (options.wrk2_source, "$WRK2_SOURCE")) if value and "://" not in value
             for p in local(Path(value).expanduser().absolute())}
    if sys.prefix != sys.base_prefix:
        files.update(dict.fromkeys(local(sys.prefix), "$VIRTUAL_ENV"))
    project = str(project_dir())
    roles = path_roles([*homes, *local(os.path.expanduser("~"))], java_home=options.java_home,
                       tomcat_home=options.tomcat_home, run_dirs=run_dirs, files=files, project=project,
                       runs_dir=str(runs) if runs else None)
    roles.update({k: v for k, v in path_roles(project=os.path.realpath(project),
                                              runs_dir=os.path.realpath(runs) if runs else None).items()
                  if k not in roles})
    # the notebooks get the runs directory and the run's own relative to the kernels' directory
    # (notebooks/): outside the project, that form names the machine's directories just as well
    kernels = os.path.join(os.path.realpath(project), "notebooks")
    for path in [os.path.realpath(d) for d in run_dirs] + ([os.path.realpath(runs)] if runs else []):
        rel = os.path.relpath(path, kernels)
        if rel.startswith("../../") and path in roles:
            roles.setdefault(rel, roles[path])
    return roles


def masker_for(inventory: Inventory, options: LiveOptions, runs_dir: Path | None = None,
               run_id: str | None = None) -> Masker:
    """What this run's record masks: machine paths always (as roles, see ``_machine_paths``);
    with ``mask_hosts`` also host names, addresses and user names."""
    names, homes = _mask_inputs(runs_dir, run_id)
    paths = _machine_paths(options, homes, runs_dir, run_id)
    if not options.mask_hosts:
        return Masker(paths=paths)
    pairs = dict(names)
    for i, spec in enumerate([inventory.server, *inventory.clients]):
        name = "server" if i == 0 else f"client-{i}"
        if not spec.local:
            pairs.setdefault(spec.host, name)
            if spec.address:
                pairs.setdefault(spec.address, f"{name}-address")
        user = spec.user or _local_user()           # the SSH user: the inventory's, else ours
        if user and user != "root":                 # root names a role, not a person (and `root=` is in cmdlines)
            pairs.setdefault(user, "user")
    pairs[platform.node()] = "server" if inventory.server.local else "controller"
    return Masker(pairs, paths)


def _local_user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None
