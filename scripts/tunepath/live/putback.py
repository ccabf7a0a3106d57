"""Putting the hosts back after a run, complete, failed or interrupted, and ``tunepath restore``.

What a run started is stopped (commands a dead step left running on the server, load generators,
httpd, Tomcat), ``server.xml`` and ``setenv.sh`` come back from their backups, the server's saved
original state is restored (:mod:`tunepath.live.restore`) and, where the run may reboot
(``allow_reboot``), the server is rebooted until it runs the kernel parameters it had before the
run. A server that drops out meanwhile (sshd restarting, a link down) is tried again for
:data:`RECONNECT_S` seconds.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import replace

from tunepath.errors import TunepathError

__all__ = ["put_back", "restore_host", "restore_server", "patience", "RECONNECT_S", "BOOT_WAIT_S"]

RECONNECT_S = 60        # how long putting the server back keeps trying to reach it
BOOT_WAIT_S = 600       # … where the run may reboot it (``allow_reboot``): it may be booting
# a remote command's wrapper (live/hosts.SSHHost) whose parent is no sshd lost its session: a dead run's
STRAY_COMMANDS = ("for p in $(pgrep -u \"$(id -u)\" -f '^timeout --kill-after=[0-9]+s [0-9]+s bash -c'); do "
                  "case \"$(ps -o comm= -p \"$(ps -o ppid= -p \"$p\" | tr -d ' ')\" 2>/dev/null)\" in sshd*) continue;; "
                  "esac; kill -TERM -- -\"$p\" 2>/dev/null && echo \"$p\"; done")




@contextmanager
def _reach(options, patience: float = RECONNECT_S):
    """``(server, clients)`` of the run's inventory, connected and closed on exit. A host that does
    not answer (sshd restarting, a link down) is tried again for ``patience`` seconds."""
    from contextlib import ExitStack

    from tunepath.live.hosts import HostKeyError, connect_all, load_inventory
    from tunepath.live.session import progress

    inventory = load_inventory(options.hosts_file)
    deadline = time.monotonic() + patience
    while True:
        try:
            server, clients = connect_all(inventory, options.trust_new_hosts)
            break
        except HostKeyError:
            raise
        except TunepathError as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            progress(f"the hosts do not answer ({exc}); trying again for {left:.0f} s")
            time.sleep(min(3.0, left))
    with ExitStack() as stack:
        for host in (server, *clients):
            stack.callback(host.close)
        yield server, clients


def _end_strays(server) -> list[str]:
    """Commands a dead step left running on a remote server, whose SSH session is gone (a Tomcat
    start that would come up after the clean-up, an ``ethtool -L`` landing after the restore)."""
    if server.spec.local:
        return []
    r = server.run(STRAY_COMMANDS, check=False, timeout=30)
    n = len(r.stdout.split())
    return [f"{n} command(s) left running by the run ended"] if n else []


def patience(options) -> float:
    """How long putting the server back waits for it to answer: a run that may reboot it waits
    out a boot (a Ctrl-C during the reboot wait finds it down), any other a restarting sshd."""
    return BOOT_WAIT_S if options.allow_reboot else RECONNECT_S


def put_back(options, run_id: str, failed: bool = True, settled: bool = False) -> list[str]:
    """Stop what the run started (after a failure, first what its dead step left running) and
    restore the server (with ``allow_reboot``, its kernel parameters too: a reboot); if a host drops
    out on the way, reconnect and start over, for up to :func:`patience` seconds. Returns what the
    restore did. ``settled``: the interrupted step's guard put the server back in full, so only
    what its dead step left running and the run's lock remain (a Ctrl-C ends the run in seconds)."""
    from tunepath.live.actions import cleanup
    from tunepath.live.hosts import HostKeyError
    from tunepath.live.session import expand_home, progress
    from tunepath.live.tomcat import Tomcat

    if settled and not options.allow_reboot:
        try:
            return _settle(options, run_id)
        except HostKeyError:
            raise
        except TunepathError as exc:
            progress(f"ending the run on the server failed ({exc}); putting it back in full")
    deadline = time.monotonic() + patience(options)
    while True:
        try:
            with _reach(options, deadline - time.monotonic()) as (server, clients):
                lines = _end_strays(server) if failed else []
                try:
                    cleanup(server, Tomcat(server, expand_home(server, options.tomcat_home),
                                           port=options.http_port), clients, run_id)
                finally:
                    lines += _original_state(server, options, options.apply, options.allow_reboot, run_id, clients)
                return lines
        except HostKeyError:
            raise
        except TunepathError as exc:
            if time.monotonic() >= deadline:
                raise
            progress(f"putting the server back was cut off ({exc}); starting over")
            time.sleep(2)


def _settle(options, run_id: str) -> list[str]:
    """After a step's guard put the server back: commands its dead step left running ended, the
    run's lock released; the clients are not contacted (the guard stopped their load)."""
    from tunepath.live.hosts import connect, load_inventory
    from tunepath.live.hoststate import release_lock

    inventory = load_inventory(options.hosts_file)
    server = connect(inventory.server, inventory, options.trust_new_hosts)
    try:
        lines = _end_strays(server)
        release_lock(server, run_id)
        return lines
    finally:
        server.close()


def _original_state(server, options, restore_state: bool, reboot: bool, run_id: str | None,
                    clients=()) -> list[str]:
    """The saved original state back (the clients' sysctls too); with ``reboot``, the kernel's parameters
    too (a reboot, when they differ); then the run's lock released (``run_id``), on the connection that
    is current."""
    from tunepath.live.hosts import connect, load_inventory
    from tunepath.live.hoststate import release_lock
    from tunepath.live.restore import reboot_to_original, restore_hosts

    lines, host = [], server
    try:
        if restore_state:
            lines += restore_hosts(server, clients, forget=not reboot)
        if reboot:
            inventory = load_inventory(options.hosts_file)
            host, more = reboot_to_original(server, lambda: connect(inventory.server, inventory))
            lines += more
    finally:
        if run_id is not None:
            release_lock(host, run_id)
        if host is not server:
            host.close()
    return lines


def _stop_load(clients) -> list[str]:
    """Load generators a run left on the clients (every ``~/.tunepath/load-*.pid``), ended."""
    done = []
    for client in clients:
        r = client.run("for f in ~/.tunepath/load-*.pid; do [ -e \"$f\" ] && echo \"$f\"; done", check=False,
                       timeout=15)
        if sum(client.kill_group(pidfile) for pidfile in r.stdout.split()):
            done.append(f"load generator stopped on {client.name}")
    return done


def restore_host(options, force: bool = False, reboot: bool = False) -> list[str]:
    """``tunepath restore``: commands a dead run left running ended, load generators, httpd and
    Tomcat stopped, server.xml and setenv.sh restored, the saved original state back (``reboot``:
    the kernel's parameters too, by a reboot), the lock removed. Returns what was done."""
    return restore_server(options, force, reboot)[0]


def restore_server(options, force: bool = False, reboot: bool = False) -> tuple[list[str], str | None]:
    """:func:`restore_host`; also returns the id of the run whose lock it removed (None: no lock,
    or one that names no run)."""
    from tunepath.live.hoststate import LOCK_DIR, read_lock
    from tunepath.live.httpd import Httpd
    from tunepath.live.session import expand_home, validate
    from tunepath.live.tomcat import Tomcat

    validate(replace(options, apply=True))      # a restore applies by nature: --allow-reboot is allowed
    with _reach(options, 0) as (server, clients):
        held = read_lock(server)
        if held is not None and not force:
            owner = server.run(f"cat {LOCK_DIR}/owner 2>/dev/null", check=False, timeout=15).stdout.strip()
            raise TunepathError(f"on {server.name}: a run holds the lock ({owner or 'owner unknown'}); restoring "
                                "now would pull the host from under it. If that run died, rerun with --force")
        try:
            done = _end_strays(server) + _stop_load(clients)
            httpd = Httpd(server, expand_home(server, "~/.tunepath/httpd"))
            httpd.stop()
            httpd.shred_conf()
            tomcat = Tomcat(server, expand_home(server, options.tomcat_home), port=options.http_port)
            if tomcat.pid():
                tomcat.stop()
                done.append("Tomcat stopped")
            if tomcat.restore_config():
                done.append("server.xml and setenv.sh restored from their backups")
        finally:
            if held is not None:
                server.run(f"rm -rf {LOCK_DIR}", check=False, timeout=15)
        done += _original_state(server, options, True, reboot, None, clients)
        if held is not None:
            done.append("the lock of the dead run removed")
    run_id = (held or {}).get("run_id")
    return done, run_id if isinstance(run_id, str) else None
