"""Live mode's session: the options of a live run and the open hosts of one step.

The live layer, in the order a step meets it: :mod:`~tunepath.live.start` opens a run
(host keys checked, lock taken, facts gathered); :mod:`~tunepath.live.execute` runs one
step (the step object says what, this layer says how); :mod:`~tunepath.live.measure`
measures one variant once and :mod:`~tunepath.live.repeat` repeats variants in
interleaved rounds; :mod:`~tunepath.live.actions` holds the guarded single actions
(run a block, a disruptive change, clean up); :mod:`~tunepath.live.runner` executes the
step notebooks of a whole run and rebuilds the site.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from tunepath.evidence.recorder import INPROGRESS, Masker, RunRecorder
from tunepath.live.hosts import Host, Inventory, connect, load_inventory
from tunepath.live.hoststate import check_lock
from tunepath.live.loadgen import LoadTool, detect, get_profile
from tunepath.live.tomcat import TOMCAT_VERSION, Tomcat
from tunepath.model.context import HostContext, parse_cpu_list

__all__ = ["LiveOptions", "Session", "open_session", "live_context", "progress", "expand_home", "masker_for",
           "mask_names_file", "server_address", "context_file", "save_context", "load_context"]


def progress(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", flush=True)


@dataclass
class LiveOptions:
    hosts_file: str | None = None
    profile: str = "quick"
    apply: bool = False
    allow_reboot: bool = False
    trust_new_hosts: bool = False
    mask_hosts: bool = False
    tomcat_home: str = f"~/apache-tomcat-{TOMCAT_VERSION}"
    tomcat_tarball: str | None = None
    tomcat_url: str | None = None
    http_port: int = 8080
    build_wrk2: bool = False       # build wrk2 from source on the client (needs internet; x86_64)
    all_clients: bool = True       # several clients in the inventory: drive the load from all at once
    repetitions: int | None = None        # interleaved repetitions, at least (default: the profile's)
    max_repetitions: int | None = None    # … at most
    ci_target_pct: float | None = None    # stop once every interval is this narrow (% of the median)
    step_budget_s: float | None = None    # … or when a step has used this many seconds
    java_home: str | None = None   # a JDK on the server other than its default `java` (e.g. 21+ for virtual threads)


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


def server_address(inventory: Inventory) -> str:
    """The address the client sends its load to: loopback when the server is this machine or
    shares the client's, else the inventory's server host (the one rule, for every context)."""
    return "127.0.0.1" if inventory.same_machine or inventory.server.local else inventory.server.host


def live_context(server: Host, facts: dict, tool: LoadTool, options: LiveOptions, inventory: Inventory,
                 tomcat_home: str) -> HostContext:
    """The step commands' parameters for these real hosts and this profile: computed when the
    run starts (and recorded) and again, by the same rule, for each step's session."""
    profile, smoke = get_profile(options.profile), get_profile("smoke")
    online = parse_cpu_list(facts.get("cpus_online") or "0")
    n = min(8, len(online))
    nic = facts.get("nic") or {}
    node = nic.get("numa_node")
    numa_cpus = _node_cpus(server, node)[:n] if isinstance(node, int) and node >= 0 else []
    threads = max(1, min(profile.threads, tool.client_cpus))
    scale = threads / profile.threads
    return HostContext(
        tomcat_home=tomcat_home, tomcat_version=TOMCAT_VERSION,
        java_home=options.java_home,
        server_address=server_address(inventory), port=options.http_port,
        total_cpus=facts.get("cpus") or len(online), baseline_cpus=tuple(online[:n]),
        numa_cpus=tuple(numa_cpus or online[:n]), nic=nic.get("name") or "${net}", nic_queues=n,
        load_generator=tool.binary.rsplit("/", 1)[-1], threads=threads,
        connections=max(threads, round(profile.connections * scale)), rate=max(1, round(profile.rate * scale)),
        duration_s=profile.duration_s, smoke_threads=1, smoke_connections=smoke.connections,
        smoke_rate=smoke.rate, smoke_duration_s=smoke.duration_s, warmup_s=profile.warmup_s,
        open_loop=tool.open_loop, latency_flag=True,
        httpd_dir=server.run("echo $HOME", timeout=15).stdout.strip() + "/.tunepath/httpd")


def open_session(run_id: str, runs_dir: Path, options: LiveOptions) -> Session:
    inventory = load_inventory(options.hosts_file)
    with ExitStack() as stack:
        server = stack.enter_context(connect(inventory.server, inventory, options.trust_new_hosts))
        clients = [stack.enter_context(connect(c, inventory, options.trust_new_hosts)) for c in inventory.clients]
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


def context_file(runs_dir: Path, run_id: str) -> Path:
    """The run's host context as computed for the real hosts, kept beside (never inside) the run
    being recorded: the copy in run.json is masked when host names are."""
    return Path(runs_dir) / INPROGRESS / f"{run_id}.context.json"


def save_context(runs_dir: Path, run_id: str, ctx: HostContext, recorder: RunRecorder | None = None) -> None:
    """Record the context once (run.json, masked) and keep it for every step's session."""
    path = context_file(runs_dir, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ctx.to_dict()), encoding="utf-8")
    if recorder is not None:
        recorder.record["context"] = recorder.mask(ctx.to_dict())
        recorder.save()


def load_context(runs_dir: Path, run_id: str) -> HostContext | None:
    """The context the run recorded when it started (None: a session outside a started run)."""
    path = context_file(runs_dir, run_id)
    return HostContext.from_dict(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else None


def expand_home(host: Host, home: str) -> str:
    if home.startswith("~"):
        return host.run("echo $HOME", timeout=15).stdout.strip() + home[1:]
    return home


def mask_names_file(runs_dir: Path, run_id: str) -> Path:
    """Host names to mask, kept beside (never inside) the run being recorded."""
    return Path(runs_dir) / INPROGRESS / f"{run_id}.mask.json"


def masker_for(inventory: Inventory, options: LiveOptions, runs_dir: Path | None = None,
               run_id: str | None = None) -> Masker:
    if not options.mask_hosts:
        return Masker()
    pairs = {}
    if runs_dir and run_id and mask_names_file(runs_dir, run_id).is_file():
        pairs.update(json.loads(mask_names_file(runs_dir, run_id).read_text()))
    for i, spec in enumerate([inventory.server, *inventory.clients]):
        name = "server" if i == 0 else f"client-{i}"
        if not spec.local:
            pairs.setdefault(spec.host, name)
    pairs[platform.node()] = "server" if inventory.server.local else "controller"
    return Masker(pairs)
