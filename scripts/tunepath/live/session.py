"""Live mode: run a step's plan on real hosts and record it.

:func:`run_step` is what a notebook calls in ``mode="live"``. It opens the hosts of the
inventory, checks that this run holds the server's lock, renders the step's plan
(:func:`tunepath.steps.legacy.plan`) for the real hosts, and executes the blocks in order:

- shell blocks run as written, on their host (``server`` or ``client``);
- the XML blocks are the server.xml the variant configures (applied from the backup);
- disruptive blocks run only with ``apply`` and a passing preflight; otherwise they are
  recorded as dry-run or skipped, with the reason, and so is the variant that needed them;
- each measured variant: configure, restart Tomcat, wait for readiness, warm up, sample
  CPU on every host, measure, sample again; raw stdout, stderr and exit status recorded.

A failure or interrupt inside a step restores what the step changed: CPUs, NIC queues,
server.xml, and Tomcat is stopped.
"""

from __future__ import annotations

import datetime as dt
import platform
import re
import tempfile
import time
import json
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.facts import cpu_sample, cpu_utilisation, gather_facts
from tunepath.live.hosts import Host, Inventory, connect, load_inventory, open_hosts
from tunepath.live.hoststate import (REBOOT_BLOCKS, boot_id, check_lock, preflight, restore, save_original_state,
                        wait_for_reboot)
from tunepath.live.loadgen import LoadTool, detect, get_profile
from tunepath.evidence.recorder import Masker, RunRecorder
from tunepath.steps.legacy import (ANALYSIS_STEPS, JMETER_PLAN, LOAD_TOOLS, HostContext, get_step, parse_cpu_list, plan,
                    step_variants, variant_config, verify_command)
from tunepath.live.tomcat import TOMCAT_SHA512, TOMCAT_VERSION, Tomcat

__all__ = ["LiveOptions", "Session", "run_step", "live_context", "progress"]

DISRUPTIVE_NEEDS = {
    "baseline": {"stock": ["iommu-strict", "offline-cpus"]},
    "nic-queues": {"queues-8": ["set-queues"]},
    "numa": {"numa-local": ["move-cpus"]},
    "iommu": {"iommu-passthrough": ["iommu-passthrough", "move-cpus", "set-queues"]},
}
# blocks whose failure to run does not invalidate the measurement (the baseline still
# measures on a host whose IOMMU or CPU count cannot be aligned: the page says so)
OPTIONAL = {("baseline", "iommu-strict"), ("baseline", "offline-cpus")}
CLIENT_VERIFICATIONS = {"load-generator-versions"}     # checked on the client, not the server


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


def live_context(server: Host, facts: dict, tool: LoadTool, options: LiveOptions,
                 same_machine: bool, server_address: str, tomcat_home: str | None = None) -> HostContext:
    """The step commands' parameters for these real hosts and this profile."""
    profile, smoke = get_profile(options.profile), get_profile("smoke")
    online = parse_cpu_list(facts.get("cpus_online") or "0")
    n = min(8, len(online))
    nic = facts.get("nic") or {}
    node = nic.get("numa_node")
    numa_cpus = _node_cpus(server, node)[:n] if isinstance(node, int) and node >= 0 else []
    threads = max(1, min(profile.threads, tool.client_cpus))
    scale = threads / profile.threads
    return HostContext(
        tomcat_home=tomcat_home or options.tomcat_home, tomcat_version=TOMCAT_VERSION,
        java_home=options.java_home,
        server_address=server_address, port=options.http_port,
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
    address = "127.0.0.1" if inventory.same_machine or inventory.server.local else inventory.server.host
    home = _expand_home(server, options.tomcat_home)
    ctx = live_context(server, facts, tool, options, inventory.same_machine, address, home)
    tomcat = Tomcat(server, home, port=options.http_port)
    return Session(run_id, options, inventory, server, clients, recorder, tool, tomcat, ctx, facts)


def _expand_home(host: Host, home: str) -> str:
    if home.startswith("~"):
        return host.run("echo $HOME", timeout=15).stdout.strip() + home[1:]
    return home


def _mask_names_file(runs_dir: Path, run_id: str) -> Path:
    """Host names to mask, kept beside (never inside) the run being recorded."""
    from tunepath.evidence.recorder import INPROGRESS

    return Path(runs_dir) / INPROGRESS / f"{run_id}.mask.json"


def masker_for(inventory: Inventory, options: LiveOptions, runs_dir: Path | None = None,
               run_id: str | None = None) -> Masker:
    if not options.mask_hosts:
        return Masker()
    pairs = {}
    if runs_dir and run_id and _mask_names_file(runs_dir, run_id).is_file():
        pairs.update(json.loads(_mask_names_file(runs_dir, run_id).read_text()))
    for i, spec in enumerate([inventory.server, *inventory.clients]):
        name = "server" if i == 0 else f"client-{i}"
        if not spec.local:
            pairs.setdefault(spec.host, name)
    pairs[platform.node()] = "server" if inventory.server.local else "controller"
    return Masker(pairs)


# --- recording a new run --------------------------------------------------------------
def start_run(runs_dir: Path, options: LiveOptions, steps: list[str]) -> tuple[RunRecorder, Inventory]:
    """Connect (checking host keys), take the lock, gather facts, and open the run record.

    Nothing is written before the hosts answered with the keys on record and the lock is
    held; if opening the record fails after that, the lock is released again."""
    from tunepath.live.hoststate import acquire_lock, release_lock
    from tunepath.evidence.recorder import new_run_id

    inventory = load_inventory(options.hosts_file)
    same = inventory.same_machine
    with open_hosts(inventory, options.trust_new_hosts) as (server, clients):
        name = server.run("hostname -s 2>/dev/null || hostname", timeout=15).stdout.strip() or "server"
        client_name = clients[0].run("hostname -s 2>/dev/null || hostname", timeout=15).stdout.strip()
        tool = detect(clients[0])
        tomcat = Tomcat(server, _expand_home(server, options.tomcat_home), port=options.http_port)
        facts, missing = gather_facts(server, tomcat.installed_version(), None, "server")
        if options.java_home:
            java = server.run(f"{options.java_home}/bin/java -version 2>&1 | head -1", check=False, timeout=30)
            if not java.ok or "version" not in java.stdout:
                raise TunepathError(f"on {server.name}: no java in --java-home {options.java_home}")
            facts["java_version"] = java.stdout.strip() + f" (JAVA_HOME={options.java_home})"
            missing.pop("java_version", None)
        cfacts, cmissing = gather_facts(clients[0], None, {"name": tool.name, "version": tool.version}, "client")
        server_name = "server" if options.mask_hosts else name
        run_id = new_run_id(server_name)
        acquire_lock(server, run_id)
        try:
            runs_dir.mkdir(parents=True, exist_ok=True)
            if options.mask_hosts:
                names = {name: "server"}
                if not same:
                    names.setdefault(client_name, "client-1")
                _mask_names_file(runs_dir, run_id).parent.mkdir(parents=True, exist_ok=True)
                _mask_names_file(runs_dir, run_id).write_text(json.dumps(names))
            record = {
                "run_id": run_id, "kind": "live", "status": "partial",
                "label": f"{server_name}, live run ({options.profile} profile)"
                         + (", server and client on one machine" if same else ""),
                "date": dt.date.today().isoformat(), "date_note": "",
                "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "source": f"tunepath live run: steps {', '.join(steps)}; profile {options.profile}; "
                          f"apply={options.apply}",
                "same_machine": same, "profile": options.profile, "apply": options.apply,
                "hosts": {
                    "server": {"name": server_name, "description": _describe(facts, same), "facts": facts,
                               "facts_missing": missing},
                    "client": {"name": "server" if same else ("client-1" if options.mask_hosts else client_name),
                               "description": f"{tool.name} ({tool.version or 'version unknown'}) on "
                                              f"{cfacts.get('cpus')} CPUs" + (" — the same machine" if same else ""),
                               "facts": cfacts, "facts_missing": cmissing},
                },
                "notes": _notes(tool, same),
                "context": live_context(server, facts, tool, options, same,
                                        "127.0.0.1" if same else inventory.server.host, tomcat.home).to_dict(),
            }
            recorder = RunRecorder(runs_dir, record, masker_for(inventory, options, runs_dir, run_id))
        except BaseException:
            release_lock(server, run_id)
            _mask_names_file(runs_dir, run_id).unlink(missing_ok=True)
            raise
        return recorder, inventory


def _describe(facts: dict, same: bool) -> str:
    parts = [facts.get("cpu_model") or "CPU model unknown", f"{facts.get('cpus')} CPUs",
             f"kernel {facts.get('kernel')}", facts.get("os") or ""]
    text = ", ".join(p for p in parts if p)
    return text + ("; server and client on one machine over loopback — not a benchmark host" if same else "")


def _notes(tool: LoadTool, same: bool) -> list:
    notes = []
    if same:
        notes.append({"text": "Server and client ran on one machine over loopback: they compete for the same "
                              "CPUs, and no NIC is involved. These figures show that the path works, not what "
                              "a server can do."})
    if not tool.open_loop:
        notes.append({"text": "Measured with Debian's wrk because wrk2 is absent on the client: wrk is closed "
                              "loop (no constant offered rate, no coordinated-omission correction), so its "
                              "latencies understate what an open workload would see."})
    return notes


# --- executing a step ---------------------------------------------------------------------
@contextmanager
def step_guard(session: Session, step: str):
    """Restore what the step changed when it fails or is interrupted."""
    try:
        yield
    except BaseException as exc:
        progress(f"{step}: {type(exc).__name__}: restoring the server")
        try:
            cleanup(session.server, session.tomcat, session.clients, session.run_id)
            if session.options.apply:
                for line in restore(session.server):
                    progress(f"{step}: restored {line}")
        except Exception as inner:   # keep the original error; the runner cleans up again
            progress(f"{step}: restoring was incomplete ({inner}); the runner tries again")
        message = str(exc) or type(exc).__name__
        session.recorder.fail(step, message, host=getattr(exc, "result", None) and exc.result.host,
                              command=getattr(exc, "result", None) and exc.result.command)
        raise


def load_pidfile(client: Host, run_id: str, index: int = 0) -> str:
    """Where the load generator's process group is kept (one per client: two clients may be
    the same machine)."""
    return f"{_expand_home(client, '~')}/.tunepath/load-{run_id}{f'-{index}' if index else ''}.pid"


def cleanup(server: Host, tomcat: Tomcat, clients: list[Host], run_id: str) -> None:
    """Stop load generators and Tomcat, and put the configuration back. Safe to call twice;
    every part is tried even when another fails."""
    from tunepath.live.httpd import Httpd

    problems = []
    httpd = Httpd(server, _expand_home(server, "~/.tunepath/httpd"))
    for action in [*(lambda c=c, i=i: c.kill_group(load_pidfile(c, run_id, i)) for i, c in enumerate(clients)),
                   httpd.stop, httpd.shred_conf, tomcat.stop, tomcat.restore_config]:
        try:
            action()
        except TunepathError as exc:
            problems.append(str(exc))
    if problems:
        raise TunepathError("; ".join(problems))


def _run_block(session: Session, step: str, block, *, record: bool = True, timeout: float = 600,
               repetition: int = 1):
    host = session.host(block.host)
    result = host.run(block.text, timeout=timeout, check=False, as_written=True)
    if record:
        session.recorder.block(step, block.id, block.host, block.text, "ran", exit_status=result.exited,
                               duration_s=round(result.duration_s, 3),
                               **({"repetition": repetition} if repetition > 1 else {}))
    if not result.ok:
        from tunepath.live.hosts import CommandFailed

        raise CommandFailed(result, "see the run record for the command's output")
    return result


def _disruptive(session: Session, step: str, block) -> tuple[bool, str]:
    """Run a disruptive block if allowed; returns (changed, reason-if-not)."""
    opts = session.options
    check = preflight(session.server, block, session.facts, session.inventory.same_machine)
    if not check.ok:
        session.recorder.block(step, block.id, block.host, block.text, "skipped", reason=check.reason)
        return False, check.reason
    if not opts.apply:
        reason = "dry-run: disruptive, needs apply (scripts/run --apply)"
        session.recorder.block(step, block.id, block.host, block.text, "dry-run", reason=reason)
        progress(f"{step}: dry-run {block.id}:\n{block.text}")
        return False, reason
    if block.id in REBOOT_BLOCKS and not opts.allow_reboot:
        reason = "needs a reboot: rerun with allow_reboot"
        session.recorder.block(step, block.id, block.host, block.text, "dry-run", reason=reason)
        return False, reason
    save_original_state(session.server, session.facts)
    if block.id in REBOOT_BLOCKS:
        # the reboot ends the SSH session: run the GRUB part, reboot, reconnect, verify
        grub, _, _ = block.text.partition("\nsudo update-grub")
        old_boot = boot_id(session.server)
        session.server.run(grub, timeout=60, as_written=True)
        session.server.run("sudo update-grub", timeout=300, as_written=True)
        session.server.run("(sleep 2; sudo reboot) >/dev/null 2>&1 &", timeout=30, check=False, as_written=True)
        session.server.close()
        wanted = block.text.split('$GRUB_CMDLINE_LINUX ')[1].split('"')[0].split()
        cmdline = wait_for_reboot(lambda: connect(session.inventory.server, session.inventory), wanted, old_boot)
        session.server = connect(session.inventory.server, session.inventory)
        session.tomcat.host = session.server
        for i, spec in enumerate(session.inventory.clients):     # a client on the server lost its session too
            session.clients[i].close()
            session.clients[i] = connect(spec, session.inventory)
        session.recorder.block(step, block.id, block.host, block.text, "ran", kernel_cmdline=cmdline)
        return True, ""
    _run_block(session, step, block)
    return True, ""


def _verify(session: Session, step: str) -> None:
    for name in get_step(step).verifications:
        cmd = verify_command(name, session.ctx)
        role = "client" if name in CLIENT_VERIFICATIONS else "server"
        r = session.host(role).run(cmd, check=False, timeout=60, as_written=True)
        if r.exited == 0 and r.stdout.strip():
            session.recorder.verification(step, name, role, cmd, r.stdout)
        else:
            session.recorder.block(step, f"verify-{name}", role, cmd, "skipped",
                                   reason=(r.stderr.strip().splitlines() or ["no output"])[-1])


def _drive(session: Session, load_text: str, duration: int, clients: list[Host]) -> list:
    """Run the load command on every client at once (a thread per client, as Fabric's
    ThreadingGroup does); returns each client's result, in order."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int, client: Host):
        pidfile = load_pidfile(client, session.run_id, i)
        client.run("mkdir -p ~/.tunepath", timeout=15)
        try:
            return client.run(load_text, timeout=duration + 90, check=False, pidfile=pidfile, as_written=True,
                              child_times=True)
        finally:
            client.run(f"rm -f {pidfile}", check=False, timeout=15)

    if len(clients) == 1:
        return [one(0, clients[0])]
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        futures = [pool.submit(one, i, c) for i, c in enumerate(clients)]
        return [f.result() for f in futures]


def _load_clients(session: Session, step: str, variant: str) -> list[Host]:
    """Every inventory client drives the load at once when there are several (and the tool
    allows it: JMeter and ab measure from one client; the rate sweep offers each rate from one
    client, so that the offered rate is the one on its command line)."""
    if len(session.clients) > 1 and session.options.all_clients and step != "rate-sweep" and not (
            step == "load-generators" and variant in ("ab", "jmeter")):
        return list(session.clients)
    return [session.client]


def _measure(session: Session, step: str, variant: str, smoke: bool = False, repetition: int = 1,
             restart: bool = True, keep_running: bool = False) -> tuple[bool, float | None]:
    """Configure, restart, warm up and measure one variant once; returns (recorded, requests/s):
    not recorded when the tool measured nothing (JMeter without a summary), requests/s None
    when the recorded report gives none.

    ``restart=False`` measures the Tomcat already running (the rate sweep's later rates);
    ``keep_running`` leaves it running afterwards."""
    from tunepath.parse.reports import parse_report

    rec, tomcat, opts = session.recorder, session.tomcat, session.options
    config = variant_config(step, variant, session.ctx)
    if opts.http_port != 8080:
        config = replace(config, connector={**config.connector, "port": str(opts.http_port)})
    blocks = {b.id: b for b in plan(step, session.ctx)}
    tag = f"{step}/{variant}" + (f" #{repetition}" if repetition > 1 or session.repeating else "")
    jvm_warnings, nofile, waited = [], "", 0.0
    if restart:
        progress(f"{tag}: configuring Tomcat ({config.describe()})")
        tomcat.configure(config)
        restart_block = blocks.get("restart-tomcat") or blocks.get("start-tomcat")
        log_offset = _log_size(session)
        _run_block(session, step, restart_block, timeout=120, repetition=repetition)
        waited = tomcat.wait_ready(120)
        jvm_warnings = _jvm_warnings(session, log_offset)
        for w in jvm_warnings:
            rec.warn(f"{step}/{variant}: the JVM said: {w}")
        progress(f"{tag}: Tomcat ready after {waited:.1f} s")
    nofile = session.server.run(f"grep 'Max open files' /proc/{tomcat.pid()}/limits | awk '{{print $4}}'",
                                check=False, timeout=15).stdout.strip()
    if nofile.isdigit() and int(nofile) < session.ctx.nofile:
        rec.warn(f"Tomcat ran with an open-file limit of {nofile} (hard limit below {session.ctx.nofile}); "
                 f"`ulimit -n {session.ctx.nofile} && startup.sh` would have started nothing here")
    httpd = None
    if step == "proxy" and variant != "direct":
        from tunepath.live.httpd import Httpd

        httpd = Httpd(session.server, session.ctx.httpd_dir)
        httpd.stop()
        _run_block(session, step, blocks[f"httpd-{variant}"], timeout=60, repetition=repetition)
        httpd.wait_ready()
        progress(f"{tag}: httpd answers on port 8081")
    if "warm-up" in blocks and not smoke and restart:
        progress(f"{tag}: warm-up {session.ctx.warmup_s} s")
        _run_block(session, step, blocks["warm-up"], timeout=session.ctx.warmup_s + 60, repetition=repetition)
    load = blocks["smoke-test"] if smoke else blocks.get(f"load-{variant}") or blocks["load"]
    tool_name = variant if step == "load-generators" else session.tool.name
    if step == "load-generators" and variant == "jmeter":
        plan_file = Path(tempfile.mkstemp(suffix=".jmx")[1])
        try:
            plan_file.write_text(blocks["jmeter-plan"].text + "\n", encoding="utf-8")
            session.client.run("mkdir -p ~/.tunepath", timeout=15)
            session.client.put(plan_file, JMETER_PLAN)
        finally:
            plan_file.unlink(missing_ok=True)
    duration = session.ctx.smoke_duration_s if smoke else session.ctx.duration_s
    clients = _load_clients(session, step, variant)
    progress(f"{tag}: measuring for {duration} s with {tool_name}"
             + (f" on {len(clients)} clients at once" if len(clients) > 1 else ""))
    hosts = [session.server] + ([] if session.inventory.same_machine else session.clients)
    before = [cpu_sample(h) for h in hosts]
    cpu0 = tomcat.cpu_seconds()
    t0 = time.monotonic()
    results = _drive(session, load.text, duration, clients)
    cpu1 = tomcat.cpu_seconds()
    after = [cpu_sample(h) for h in hosts]
    window = time.monotonic() - t0
    online = session.server.run("cat /sys/devices/system/cpu/online", check=False, timeout=15).stdout.strip()
    if httpd:
        httpd.stop()
        httpd.shred_conf()
    util = {("server" if i == 0 else f"client-{i}"): cpu_utilisation(b, a)
            for i, (b, a) in enumerate(zip(before, after))}
    if session.inventory.same_machine:
        util["client"] = "same machine as the server"
    result = results[0]
    rec.block(step, load.id, "client", load.text, "ran", exit_status=result.exited,
              duration_s=round(result.duration_s, 3), **({"repetition": repetition} if repetition > 1 else {}))
    if tool_name == "jmeter" and "summary =" not in result.stdout:
        # JMeter ran but measured nothing: keep its output as evidence, not as a measurement
        why = (re.search(r"^(Error in NonGUIDriver.*|.*Exception.*)$", result.stdout + result.stderr, re.M)
               or re.search(r"(.+)", (result.stdout + result.stderr).strip() or "no output"))
        rec.verification(step, "jmeter-attempt", "client", load.text, result.stdout + result.stderr)
        rec.skipped(step, variant, f"JMeter ran but produced no summary: {why.group(1).strip()}")
        progress(f"{tag}: skipped (JMeter produced no summary)")
        tomcat.stop()
        return False, None
    parts = None
    if len(clients) > 1:
        parts = [{"client": c.name, "stdout": r.stdout, "stderr": r.stderr, "exit_status": r.exited,
                  "client_cpu_s": r.child_cpu_s} for c, r in zip(clients, results)]
    client_cpu = (sum(r.child_cpu_s or 0 for r in results) if any(r.child_cpu_s is not None for r in results)
                  else None)
    rec.measurement(step, variant, result.stdout, result.stderr, result.exited, load.text, tool_name,
                    repetition=repetition, parts=parts, cpus_online=online or None, config=config.to_dict(),
                    cpu_utilisation=util, window_s=round(window, 3),
                    tomcat_cpu_s=round(cpu1 - cpu0, 3) if cpu0 is not None and cpu1 is not None else None,
                    nofile=int(nofile) if nofile.isdigit() else None, ready_after_s=round(waited, 2),
                    jvm_warnings=jvm_warnings, client_cpu_s=client_cpu,
                    started=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    failed = [r for r in results if not r.ok]
    if failed:
        from tunepath.live.hosts import CommandFailed

        raise CommandFailed(failed[0], "the load generator failed; its output is recorded in the run")
    if not keep_running:
        tomcat.stop()
    try:
        rates = [parse_report(r.stdout, tool_name).requests_per_sec for r in results]
        return True, (sum(rates) if all(isinstance(x, (int, float)) for x in rates) else None)
    except TunepathError as exc:
        rec.warn(f"{step}/{variant} repetition {repetition}: its report gives no rate ({exc}); it is kept as "
                 "evidence and does not count towards the interval")
        return True, None


def _repeat(session: Session, step: str, variants: list[str]) -> None:
    """Measure ``variants`` in interleaved rounds (A B C, A B C …) until every configuration's
    interval is narrow enough, the maximum number of repetitions is reached, or the step's time
    budget is spent."""
    from tunepath.analysis.stats import StoppingRule

    profile, opts = get_profile(session.options.profile), session.options
    given = lambda value, default: default if value is None else value  # noqa: E731  (0 is refused below)
    minimum = given(opts.repetitions, profile.repetitions)
    rule = StoppingRule(min_repetitions=minimum,
                        max_repetitions=max(given(opts.max_repetitions, profile.max_repetitions), minimum),
                        ci_target_pct=given(opts.ci_target_pct, profile.ci_target_pct),
                        time_budget_s=given(opts.step_budget_s, profile.step_budget_s))
    session.repeating = rule.max_repetitions > 1
    samples: dict[str, list[float]] = {v: [] for v in variants}
    started, rounds, reason = time.monotonic(), 0, ""
    while True:
        rounds += 1
        t0 = time.monotonic()
        for i, variant in enumerate(variants):
            if session.repeating:
                progress(f"{step}: round {rounds} of at most {rule.max_repetitions}, variant {i + 1}/{len(variants)}"
                         f" ({variant}); {time.monotonic() - started:.0f} s spent"
                         + (f" of a {rule.time_budget_s:.0f} s budget" if rule.time_budget_s else ""))
            recorded, rps = _measure(session, step, variant, repetition=rounds)
            if not recorded:
                samples.pop(variant, None)      # e.g. JMeter measured nothing: skipped, not repeated
            elif rps is not None:
                samples[variant].append(rps)
        variants = [v for v in variants if v in samples]
        if not variants:
            break
        more, reason = rule.decide(samples, time.monotonic() - started, time.monotonic() - t0)
        if not more:
            break
        progress(f"{step}: another round: {reason}")
    if rounds > 1 or rule.max_repetitions > 1:
        session.recorder.repetitions(step, rounds=rounds, reason=reason, rule={
            "min_repetitions": rule.min_repetitions, "max_repetitions": rule.max_repetitions,
            "ci_target_pct": rule.ci_target_pct, "time_budget_s": rule.time_budget_s},
            order=variants)
        progress(f"{step}: {rounds} round(s): {reason}")


def _rate_sweep(session: Session, variants: list[str]) -> None:
    """One JVM through the whole sweep: restart and warm up once, then each rate, rising."""
    for i, variant in enumerate(variants):
        progress(f"rate-sweep: rate {i + 1}/{len(variants)} ({variant})")
        _measure(session, "rate-sweep", variant, restart=i == 0, keep_running=i < len(variants) - 1)


def run_step(step: str, runs_dir, run_id: str, options: LiveOptions) -> None:
    """Execute ``step`` live and record it into the run being recorded."""
    get_step(step)
    if step in ANALYSIS_STEPS:
        return
    session = open_session(run_id, Path(runs_dir), options)
    rec = session.recorder
    started = time.time()
    try:
        with step_guard(session, step):
            progress(f"{step}: on {session.server.name} (client {session.client.name}, {session.tool.name}, "
                     f"profile {options.profile})")
            if step == "setup":
                _setup(session)
                rec.step_timing(step, started, time.time())
                return
            _ensure_tomcat(session, step)
            if step == "proxy":
                import secrets

                secret = secrets.token_urlsafe(24)
                session.ctx = replace(session.ctx, ajp_secret=secret)
                session.recorder.mask.add(secret, HostContext().ajp_secret)
            blocked: dict[str, str] = {}
            for block in plan(step, session.ctx):
                if block.disruptive:
                    changed, reason = _disruptive(session, step, block)
                    if not changed and (step, block.id) not in OPTIONAL:
                        blocked[block.id] = reason
                elif block.variant:
                    continue            # applied with its variant's configuration
                elif block.id in ("numa-topology", "nic-node", "show-queues", "hugepages", "thp"):
                    check = preflight(session.server, block, session.facts, session.inventory.same_machine)
                    if check.ok:
                        r = _run_block(session, step, block, timeout=60)
                        session.recorder.verification(step, block.id, "server", block.text, r.stdout)
                    else:
                        rec.block(step, block.id, block.host, block.text, "skipped", reason=check.reason)
                elif block.host == "server" and block.lang == "bash" and block.id not in (
                        "restart-tomcat", "start-tomcat"):
                    _run_block(session, step, block)
            _verify(session, step)
            measurable = []
            for variant in step_variants(step, session.ctx):
                needs = DISRUPTIVE_NEEDS.get(step, {}).get(variant.name, [])
                missing = [f"{b}: {blocked[b]}" for b in needs if b in blocked]
                if step == "proxy" and variant.name != "direct":
                    from tunepath.live.httpd import Httpd

                    why = Httpd(session.server, session.ctx.httpd_dir).available()
                    if why:
                        missing.append(why)
                if step == "load-generators":
                    binary = LOAD_TOOLS[variant.name]
                    if session.client.run(f"command -v {binary}", check=False, timeout=15).exited != 0:
                        missing.append(f"{binary} is not installed on the client" + (
                            " (wrk2 is in no package registry: build it with --build-wrk2 on an x86_64 client)"
                            if binary == "wrk2" else ""))
                if step == "rate-sweep" and not session.tool.open_loop:
                    missing.append(f"a rate sweep needs wrk2 (open loop, a constant offered rate); the client has "
                                   f"{session.tool.name}, which is closed loop (build wrk2 with --build-wrk2 on an "
                                   "x86_64 client)")
                java = _java_major(session)
                if variant.requires_java > (java or 0):
                    missing.append(f"needs Java {variant.requires_java} or later; the server runs Java {java} "
                                   "(give a newer JDK with --java-home)")
                if missing:
                    rec.skipped(step, variant.name, "; ".join(missing),
                                commands=[b.text for b in plan(step, session.ctx) if b.id in needs])
                    progress(f"{step}/{variant.name}: skipped ({'; '.join(missing)})")
                    continue
                measurable.append(variant.name)
            if step == "rate-sweep":
                _rate_sweep(session, measurable)
            elif measurable:
                _repeat(session, step, measurable)
            cleanup(session.server, session.tomcat, session.clients, run_id)
            rec.step_timing(step, started, time.time())
    finally:
        session.close()


def _java_major(session: Session) -> int | None:
    from tunepath.live.tomcat import java_major

    java = f"{session.ctx.java_home}/bin/java" if session.ctx.java_home else "java"
    return java_major(session.server.run(f"{java} -version 2>&1", check=False, timeout=30).stdout)


def _jvm_warnings(session: Session, offset: int) -> list[str]:
    """The JVM's own warnings in catalina.out since ``offset`` (e.g. large pages unavailable)."""
    log = f"{session.tomcat.home}/logs/catalina.out"
    r = session.server.run(f"tail -c +{offset + 1} {log} 2>/dev/null | grep -E 'VM warning|\\[warning\\]' "
                           "| grep -v 'Command line argument' | head -5", check=False, timeout=15)
    return [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]


def _log_size(session: Session) -> int:
    r = session.server.run(f"stat -c %s {session.tomcat.home}/logs/catalina.out 2>/dev/null || echo 0",
                           check=False, timeout=15)
    return int(r.stdout.strip() or 0) if r.stdout.strip().isdigit() else 0


def _ensure_tomcat(session: Session, step: str) -> None:
    """A step run without the setup step still needs Tomcat: install it, or say how."""
    if session.tomcat.installed_version():
        return
    opts = session.options
    if not (opts.tomcat_tarball or opts.tomcat_url):
        raise TunepathError(f"on {session.server.name}: Tomcat is not installed at {session.tomcat.home}: run "
                            "the setup step first, or give --tomcat-tarball / --tomcat-url")
    tarball = Path(opts.tomcat_tarball).expanduser() if opts.tomcat_tarball else None
    version = session.tomcat.install(tarball, opts.tomcat_url, TOMCAT_SHA512[TOMCAT_VERSION])
    session.recorder.block(step, "install-tomcat", "server", "(the setup step's install-tomcat block)", "ran",
                           how="Tomcat was missing: installed before the step", version=version)


def _wrk2(session: Session, block) -> None:
    """Build wrk2 on the client when asked to (it needs internet and an x86_64 client)."""
    rec = session.recorder
    if session.tool.open_loop:
        rec.block("setup", block.id, "client", block.text, "skipped", reason="wrk2 is installed")
        return
    arch = session.client.run("uname -m", timeout=15).stdout.strip()
    if not session.options.build_wrk2:
        reason = "wrk2 is absent; Debian's wrk measures instead (pass --build-wrk2 to build wrk2 on the client)"
    elif arch != "x86_64":
        reason = (f"wrk2 does not build on {arch}: its bundled LuaJIT 2.0 lacks arm64 and its option parsing "
                  "keeps getopt's result in a char; use an x86_64 client")
    else:
        progress("setup: building wrk2 on the client")
        _run_block(session, "setup", block, timeout=900)
        session.tool = detect(session.client)
        return
    rec.block("setup", block.id, "client", block.text, "skipped", reason=reason)
    rec.warn(reason)


def _setup(session: Session) -> None:
    rec, tomcat, opts, step = session.recorder, session.tomcat, session.options, "setup"
    blocks = {b.id: b for b in plan(step, session.ctx)}
    java = tomcat.check_java()
    rec.block(step, "install-jdk", "server", blocks["install-jdk"].text, "skipped",
              reason=f"a JDK is present: {java}")
    tarball = Path(opts.tomcat_tarball).expanduser() if opts.tomcat_tarball else None
    progress(f"setup: installing Tomcat {TOMCAT_VERSION} into {tomcat.home}")
    version = tomcat.install(tarball, opts.tomcat_url, TOMCAT_SHA512[TOMCAT_VERSION])
    rec.block(step, "install-tomcat", "server", blocks["install-tomcat"].text, "ran",
              how=("uploaded " + tarball.name + " through Fabric, SHA-512 verified") if tarball
              else "fetched on the server, SHA-512 verified", version=version)
    hosts = rec.record["hosts"]["server"]
    hosts["facts"]["tomcat_version"] = version
    hosts["facts_missing"].pop("tomcat_version", None)
    rec.save()
    if not session.inventory.same_machine:
        tomcat.open_examples()
        rec.block(step, "open-examples", "server", blocks["open-examples"].text, "ran")
    else:
        rec.block(step, "open-examples", "server", blocks["open-examples"].text, "skipped",
                  reason="the client is on the server: the examples webapp already admits it")
    _wrk2(session, blocks["build-wrk2"])
    r = session.server.run(verify_command("tomcat-version", session.ctx), check=False, timeout=60)
    if r.ok:
        rec.verification(step, "tomcat-version", "server", verify_command("tomcat-version", session.ctx), r.stdout)
    _measure(session, step, "smoke", smoke=True)
    cleanup(session.server, session.tomcat, session.clients, session.run_id)
