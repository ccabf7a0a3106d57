"""Measure one variant once: configure, restart, warm up, drive the load, record.

:func:`measure` configures Tomcat for the variant (from the step's server.xml/setenv
backup), restarts it with the step's restart block, waits until it answers, warms it up,
samples CPU on every host, drives the load from every client at once, samples again and
records the raw output, CPU per mode, Tomcat's and the clients' CPU time, the JVM's own
warnings and the open-file limit. The step object decides what is step-specific: the
configuration, the host settings it starts under (``Step.before_start``), the load tool,
whether all clients drive the load, and what must run beside Tomcat (``Step.before_load``)."""

from __future__ import annotations

import datetime as dt
import re
import resource
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from tunepath.analysis.steady import WarmUp
from tunepath.errors import TunepathError
from tunepath.live.actions import boot_id, jvm_warnings, load_pidfile, refused_load, run_block
from tunepath.live.hoststate import local_boot_id
from tunepath.live.facts import MODES, CpuSample, cpu_sample, cpu_utilisation
from tunepath.live.hosts import CommandFailed, Host
from tunepath.live.jvmfacts import read_counters
from tunepath.live.probe import choose_rate
from tunepath.live.session import Session, progress
from tunepath.live.warmup import warm_up
from tunepath.model.context import HostContext, cpu_ranges
from tunepath.model.shell import quote
from tunepath.parse.reports import parse_report

NOT_SAMPLED = "not sampled: /proc/stat gave no reading before or after the load"

__all__ = ["measure", "drive", "load_clients", "restart_for", "last_report"]


@dataclass
class Started:
    """What restarting Tomcat for a measurement found out."""

    waited_s: float = 0.0
    jvm_warnings: tuple[str, ...] = ()
    warmup: WarmUp | None = None       # the warm-up's windows (None: a fixed warm-up, or none)


def drive(session: Session, load_text: str, duration: int, clients: list[Host]) -> list:
    """Run the load command on every client at once (a thread per client, as Fabric's
    ThreadingGroup does); returns each client's result, in order."""
    def one(i: int, client: Host):
        pidfile = load_pidfile(client, session.run_id, i)
        if client.name not in session.client_dirs:        # once per step's session
            client.run("mkdir -p ~/.tunepath", timeout=15)
            session.client_dirs.add(client.name)
        try:
            return client.run(load_text, timeout=duration + 90, check=False, pidfile=pidfile, as_written=True,
                              child_times=True)
        finally:
            client.run(f"rm -f {quote(pidfile, 'pid file')}", check=False, timeout=15)

    if len(clients) == 1:
        return [one(0, clients[0])]
    pool = ThreadPoolExecutor(max_workers=len(clients))
    try:
        futures = [pool.submit(one, i, c) for i, c in enumerate(clients)]
        return [f.result() for f in futures]
    finally:   # a Ctrl-C, or one client's failure, does not wait out the others' load: the step's guard ends it
        pool.shutdown(wait=False, cancel_futures=True)


def load_clients(session: Session, step, variant: str) -> list[Host]:
    """Every inventory client drives the load at once where the step allows it (JMeter, ab and the rate sweep: one)."""
    if len(session.clients) > 1 and session.options.all_clients and step.multi_client(variant):
        return list(session.clients)
    return [session.client]


READY_S = 120                  # how long Tomcat may take to start and answer
READY_S_EMULATED = 600


def _restart(session: Session, step, variant: str, config, blocks: dict, tag: str, repetition: int) -> Started:
    rec, tomcat = session.recorder, session.tomcat
    step.before_start(session, variant, repetition)
    progress(f"{tag}: configuring Tomcat ({config.describe()})")
    tomcat.configure(config)
    restart_block = blocks.get("restart-tomcat") or blocks.get("start-tomcat")
    # an emulated server (the lab's QEMU VM, software emulation) starts a JVM tens of times slower
    limit = READY_S_EMULATED if session.inventory.emulated else READY_S
    run_block(session, step.name, restart_block, timeout=limit, repetition=repetition)
    waited = tomcat.wait_ready(limit)
    found, nofile = jvm_warnings(session, tomcat.log_offset)
    for w in found:
        rec.warn(f"{step.name}/{variant}: the JVM said: {w}")
    if nofile is not None and nofile < session.ctx.nofile:
        rec.warn(f"Tomcat ran with an open-file limit of {nofile} (hard limit below {session.ctx.nofile}); "
                 f"`ulimit -n {session.ctx.nofile} && startup.sh` would have started nothing here")
    progress(f"{tag}: Tomcat ready after {waited:.1f} s")
    session.nofile = nofile
    return Started(waited, tuple(found))


def _no_summary(session: Session, step, variant: str, load, result, tag: str) -> None:
    """JMeter ran but measured nothing: its output is evidence, not a measurement."""
    out = result.stdout + result.stderr
    why = (re.search(r"^(Error in NonGUIDriver.*|.*Exception.*)$", out, re.M)
           or re.search(r"(.+)", out.strip() or "no output"))
    session.recorder.verification(step.name, "jmeter-attempt", "client", load.text, out)
    session.recorder.skipped(step.name, variant, f"JMeter ran but produced no summary: {why.group(1).strip()}")
    progress(f"{tag}: skipped (JMeter produced no summary)")
    session.tomcat.stop()


def run_config(session: Session, step, variant: str):
    """The step's Tomcat configuration for ``variant``, on this run's ports: its HTTP port, and its
    shutdown and AJP ports where they are not Tomcat's own (:func:`tunepath.model.context.ports_for`)."""
    ctx, config = session.ctx, step.tomcat_config(variant, session.ctx)
    if session.options.http_port != 8080:
        config = replace(config, connector={**config.connector, "port": str(session.options.http_port)})
    own = ctx.shutdown_port != HostContext.shutdown_port        # else server.xml keeps Tomcat's own
    return replace(config, ajp_port=ctx.ajp_port, shutdown_port=ctx.shutdown_port if own else None)


def restart_for(session: Session, step, variant: str) -> None:
    """Configure Tomcat for ``variant`` and (re)start it, without measuring (the rate sweep probes
    and then measures every rate against this one JVM)."""
    config = run_config(session, step, variant)
    _restart(session, step, variant, config, {b.id: b for b in step.plan(session.ctx)}, f"{step.name}/{variant}", 1)


def last_report(session: Session, step, variant: str, repetition: int = 1):
    """The parsed report of a measurement this session recorded (the first client's)."""
    rec = session.recorder
    entry = next(m for m in reversed(rec.record["measurements"])
                 if (m["step"], m["variant"], m.get("repetition", 1)) == (step.name, variant, repetition))
    return parse_report((rec.dir / entry["stdout"]).read_text(encoding="utf-8"), entry["tool"])


@dataclass
class Phases:
    """Where one measurement's wall time went (seconds): what the run records as ``phases``, with
    the counted load as the entry's ``counted_s``. ``restart_s`` configures and starts Tomcat until it
    answers; ``stop_s`` is this JVM's own stop (SIGTERM until the process is gone: Tomcat's shutdown,
    not the controller's); ``warmup_s`` is a separate warm-up run, or the measurement's own wrk2
    warming up (-W); ``calibration_s`` wrk2's calibration outside any warm-up (stock wrk2 without -W:
    never counted); orchestration is the rest."""

    t0: float
    restart_s: float = 0.0
    warmup_s: float = 0.0
    probe_s: float = 0.0
    calibration_s: float = 0.0
    counted_s: float = 0.0
    stop_s: float = 0.0

    def to_dict(self, now: float) -> dict:
        wall = now - self.t0
        spent = self.restart_s + self.stop_s + self.warmup_s + self.probe_s + self.calibration_s + self.counted_s
        parts = {k: getattr(self, k) for k in ("restart_s", "stop_s", "warmup_s", "probe_s", "calibration_s")}
        return {k: round(v, 3) for k, v in {"wall_s": wall, **parts, "orchestration_s": max(0.0, wall - spent)}.items()}


_WARM = re.compile(r"\s-W\s*(\d+)\b")


def counted_window(ctx, text: str, tool: str, smoke: bool) -> tuple[float, float, float]:
    """(warm-up inside the command, uncounted calibration, counted seconds) of one load command:
    wrk2 with -W warms up for that long and counts -d; stock wrk2 counts -d less its calibration
    (:func:`~tunepath.live.loadgen.calibration_s`); any other tool counts what it was asked for."""
    from tunepath.analysis.noise import requested_duration
    from tunepath.live.loadgen import calibration_s

    asked = requested_duration(text, tool) or 0.0
    warm = _WARM.search(text) if tool == "wrk2" else None
    if warm:
        return float(warm.group(1)), 0.0, asked
    calibration = calibration_s(ctx.threads, ctx.connections)
    if tool == "wrk2" and not smoke and asked > calibration:     # a shorter run never calibrates: all counts
        return 0.0, calibration, asked - calibration
    return 0.0, 0.0, asked


def measure(session: Session, step, variant: str, smoke: bool = False, repetition: int = 1,
            restart: bool = True, keep_running: bool = False) -> tuple[bool, float | None]:
    """Configure, restart, warm up and measure one variant once; returns (recorded, requests/s):
    not recorded when the tool measured nothing (JMeter without a summary), requests/s None
    when the recorded report gives none.

    ``restart=False`` measures the Tomcat already running (a shared round, the rate sweep's later
    rates); ``keep_running`` leaves it running afterwards."""
    clock = Phases(time.monotonic())
    config = run_config(session, step, variant)
    blocks = {b.id: b for b in step.plan(session.ctx)}
    tag = f"{step.name}/{variant}" + (f" #{repetition}" if repetition > 1 or session.repeating else "")
    started = _restart(session, step, variant, config, blocks, tag, repetition) if restart else Started()
    clock.restart_s = time.monotonic() - clock.t0
    clients = load_clients(session, step, variant)
    nofile = session.nofile                 # read when this JVM started
    undo = step.before_load(session, variant, blocks, repetition)
    t = time.monotonic()
    if (warm := blocks.get(f"warm-up-{variant}") or blocks.get("warm-up")) and not smoke and restart:
        started = replace(started, warmup=warm_up(session, step, warm, tag, repetition))
    clock.warmup_s, t = time.monotonic() - t, time.monotonic()
    cold = restart and warm is None        # the load's own wrk2 warms up: the probe warms first
    if restart and not smoke and choose_rate(session, step, variant, clients, drive, warm_first=cold):
        blocks = {b.id: b for b in step.plan(session.ctx)}      # the commands offer the chosen rate now
    clock.probe_s = time.monotonic() - t
    load = blocks["smoke-test"] if smoke else blocks.get(f"load-{variant}") or blocks["load"]
    tool = step.load_tool(session, variant)
    in_load, clock.calibration_s, clock.counted_s = counted_window(session.ctx, load.text, tool, smoke)
    clock.warmup_s += in_load
    duration = session.ctx.smoke_duration_s if smoke else session.ctx.duration_s
    progress(f"{tag}: measuring for {clock.counted_s:.0f} s with {tool}"
             + (f" after {in_load:.0f} s of warm-up in the same run" if in_load else "")
             + (f" on {len(clients)} clients at once" if len(clients) > 1 else ""))
    window = _load(session, load, duration + int(in_load), clients, undo, in_load)
    session.recorder.block(step.name, load.id, "client", load.text, "ran", exit_status=window.results[0].exited,
                           duration_s=round(window.results[0].duration_s, 3),
                           **({"repetition": repetition} if repetition > 1 else {}))
    if tool == "jmeter" and "summary =" not in window.results[0].stdout:
        _no_summary(session, step, variant, load, window.results[0], tag)
        return False, None
    if not keep_running:
        t = time.monotonic()
        session.tomcat.stop()          # before recording: the stop is part of this measurement's time
        clock.stop_s = time.monotonic() - t
    _record(session, step, variant, load, tool, config, window, started, nofile, repetition, clients,
            blocks.get("restart-tomcat"), clock)
    failed = [r for r in window.results if not r.ok]
    if failed:
        raise CommandFailed(failed[0], "the load generator failed; its output is recorded in the run")
    return True, _rate(session, step, variant, window.results, tool, repetition, calibrated=not smoke)


@dataclass
class Window:
    """One measurement's load results and what was sampled around them."""

    results: list
    utilisation: dict
    window_s: float
    tomcat_cpu_s: float | None
    cpus_online: str
    jvm: dict
    controller_cpu_s: float | None = None    # the controller's CPU time, where it shares the server's kernel
    client_share: float = 1.0    # the counted window's share of the load generator's run (-W: the rest warmed up)


BOUNDARY_S = 0.1     # the load command starts about this long after it is sent (SSH, exec)


def _load(session: Session, load, duration: int, clients: list[Host], undo, warm_s: float = 0.0) -> Window:
    """Sample CPU on every host, drive the load, sample again; then undo what ran beside Tomcat.
    With a warm-up inside the load (wrk2 -W), the first samples are taken when it ends, while the
    load runs on, so that every figure covers the counted window only."""
    one_kernel = session.inventory.same_machine or session.ctx.shared_kernel   # one /proc/stat for all
    clients_sampled = [] if one_kernel else session.clients

    def sample_before():
        pid, cpu, server, _ = session.tomcat.sample()          # one round trip: pid, its CPU, /proc/stat
        return (pid, cpu, [_cpu(session.server, server)] + [cpu_sample(h) for h in clients_sampled],
                read_counters(session.server, pid) if pid else None, _own_cpu(), time.monotonic())

    if warm_s:
        pool = ThreadPoolExecutor(max_workers=1)
        running = pool.submit(drive, session, load.text, duration, clients)
        try:
            wait([running], timeout=warm_s + BOUNDARY_S)       # returns early only if the load ended
            pid, cpu0, before, jvm0, ctl0, t0 = sample_before()
            results = running.result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    else:
        pid, cpu0, before, jvm0, ctl0, t0 = sample_before()
        results = drive(session, load.text, duration, clients)
    ctl1 = _own_cpu()
    jvm1 = read_counters(session.server, pid) if pid else None
    _, cpu1, server1, online = session.tomcat.sample(with_online=True)
    after = [_cpu(session.server, server1)] + [cpu_sample(h) for h in clients_sampled]
    window = time.monotonic() - t0
    if undo:
        undo()
    # a host whose /proc/stat gave no reading (a busy host's `head` failed) is said so, never null
    util = {("server" if i == 0 else f"client-{i}"): cpu_utilisation(b, a) or NOT_SAMPLED
            for i, (b, a) in enumerate(zip(before, after))}
    if session.inventory.same_machine:
        util["client"] = "same machine as the server"
    elif one_kernel:
        util["clients"] = "the server's kernel: its figures cover every host"
    tomcat_cpu = round(cpu1 - cpu0, 3) if cpu0 is not None and cpu1 is not None else None
    controller = round(ctl1 - ctl0, 3) if controller_here(session) else None
    share = min(1.0, window / (window + warm_s)) if warm_s else 1.0
    return Window(results, util, window, tomcat_cpu, online, jvm_facts(jvm0, jvm1), controller, share)


def _cpu(host: Host, jiffies: list[int]) -> CpuSample:
    """A /proc/stat reading taken with :meth:`Tomcat.sample` (zeros where it gave none)."""
    return CpuSample(host.name, dict(zip(MODES, jiffies or [0] * len(MODES))))


def _own_cpu() -> float:
    """CPU seconds this process (the step's kernel: Fabric's SSH sessions) has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


_HERE: dict[str, bool] = {}


def controller_here(session: Session) -> bool:
    """The run is controlled from the server's own kernel (one machine, or the lab's namespaces): the
    controller's CPU time then shows in the server's CPU figures and is counted as the run's own."""
    name = session.server.name
    if name not in _HERE:
        here = local_boot_id()
        _HERE[name] = bool(here) and boot_id(session.server) == here
    return _HERE[name]


def jvm_facts(before, after) -> dict:
    """The JVM's GC and JIT counters when the load started, and what changed while it ran."""
    if before is None or after is None:
        return {"missing": "Tomcat's pid was not found"}
    if before.counters is None or after.counters is None:
        return {"missing": (before.why_missing if before.counters is None else after.why_missing) or "no counters"}
    try:
        during = after.counters.minus(before.counters)
    except TunepathError as exc:
        return {"missing": f"the counters cannot be compared: {exc}"}
    facts = {"start": before.counters.to_dict(), "during": during.to_dict()}
    threads = {name: round(getattr(after, field) - getattr(before, field), 3)
               for name, field in (("gc_s", "gc_threads_s"), ("vm_thread_s", "vm_thread_s"))
               if getattr(after, field) is not None and getattr(before, field) is not None}
    if threads:     # CPU seconds of the GC's threads and of the VM Thread while the load ran
        facts["threads_during"] = threads
    return facts


def _record(session: Session, step, variant: str, load, tool: str, config, window: Window, started: Started,
            nofile: int | None, repetition: int, clients: list[Host], restart_block=None,
            clock: Phases | None = None) -> None:
    results = window.results
    # the load generator's CPU time over the counted window: its whole run's, pro rata where it warmed
    # up first (a constant offered rate spends alike throughout)
    own = [None if r.child_cpu_s is None else round(r.child_cpu_s * window.client_share, 3) for r in results]
    parts = None
    if len(clients) > 1:
        parts = [{"client": c.name, "stdout": r.stdout, "stderr": r.stderr, "exit_status": r.exited,
                  "client_cpu_s": cpu} for c, r, cpu in zip(clients, results, own)]
    client_cpu = round(sum(c or 0 for c in own), 3) if any(c is not None for c in own) else None
    result = results[0]
    session.recorder.measurement(
        step.name, variant, result.stdout, result.stderr, result.exited, load.text, tool,
        repetition=repetition, parts=parts, cpus_online=window.cpus_online or None, config=config.to_dict(),
        cpu_utilisation=window.utilisation, window_s=round(window.window_s, 3), tomcat_cpu_s=window.tomcat_cpu_s,
        nofile=nofile, ready_after_s=round(started.waited_s, 2), jvm_warnings=list(started.jvm_warnings),
        client_cpu_s=client_cpu, started=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        placement=placement(session.ctx, restart_block), jvm=window.jvm,
        **({"controller_cpu_s": window.controller_cpu_s} if window.controller_cpu_s is not None else {}),
        **({"warmup": started.warmup.to_dict()} if started.warmup else {}),
        **({"counted_s": round(clock.counted_s, 3), "phases": clock.to_dict(time.monotonic())} if clock else {}))


def placement(ctx, restart_block=None) -> dict:
    """Where Tomcat and the load generator ran (CPU lists; "" unpinned), whether they shared a kernel
    (a NUMA move's own taskset, where a CPU cannot go offline, pins Tomcat: so it says)."""
    server = ctx.server_pin_cpus
    if restart_block is not None and ctx.stuck_cpus and f"taskset -c {cpu_ranges(ctx.numa_cpus)} " in restart_block.text:
        server = ctx.numa_cpus
    return {"shared_kernel": ctx.shared_kernel, "server_cpus": cpu_ranges(server),
            "client_cpus": cpu_ranges(ctx.client_pin_cpus)}


def _rate(session: Session, step, variant: str, results: list, tool: str, repetition: int,
          calibrated: bool = True) -> float | None:
    """The requests per second all clients achieved, or None (kept as evidence, not counted); a step
    whose load met error responses fails."""
    try:
        reports = [parse_report(r.stdout, tool) for r in results]
    except TunepathError as exc:
        session.recorder.warn(f"{step.name}/{variant} repetition {repetition}: its report gives no rate ({exc}); "
                              "it is kept as evidence and does not count towards the interval")
        return None
    refused_load(session, f"{step.name}/{variant}", reports, step.load(session.ctx).url)
    if calibrated and reports[0].tool == "wrk2" and session.options.profile != "smoke":
        _check_calibration(session, step, variant, reports[0])
    rates = [r.requests_per_sec for r in reports]
    return sum(rates) if all(isinstance(x, (int, float)) for x in rates) else None


def _check_calibration(session: Session, step, variant: str, report) -> None:
    """wrk2 records latency only after calibrating each thread: fewer calibration lines than threads,
    its latencies include the calibration period (and it gives no per-thread rate)."""
    threads = report.threads if isinstance(report.threads, int) else 0
    if len(report.calibration) < threads:
        session.recorder.warn(
            f"{step.name}/{variant}: wrk2 printed {len(report.calibration)} calibration line(s) for {threads} "
            f"thread(s): the run ended before wrk2 calibrated (10 s + 5 ms per connection of a thread), so its "
            "latency includes the calibration period; give a longer duration")
