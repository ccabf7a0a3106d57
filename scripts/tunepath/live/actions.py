"""The guarded single actions of a live step: run a block, make a host change, verify, clean up.

Each records what it did into the run (ran, skipped with the reason, dry-run) and raises
:class:`~tunepath.live.hosts.CommandFailed` with the host and command when a command fails.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Callable, TypeVar

from tunepath.errors import TunepathError
from tunepath.live.facts import parse_hugepages
from tunepath.live.hosts import CommandFailed, CommandResult, Host, connect
from tunepath.live.hoststate import (GRUB_CHECK, HUGEPAGE_BLOCKS, REBOOT_BLOCKS, Preflight, preflight,
                                    save_original_state)
from tunepath.live.reboot import boot_id, reboot_and_wait, wait_for_reboot
from tunepath.live.restore import release_hugepages as release_pool, restore_hosts
from tunepath.live.held import HeldInterrupts
from tunepath.live.httpd import Httpd
from tunepath.live.session import Session, expand_home, progress, side_file, write_private
from tunepath.live.tomcat import TOMCAT_SHA512, Tomcat, java_binary, java_major as parse_java_major
from tunepath.model.shell import quote

__all__ = ["step_guard", "load_pidfile", "cleanup", "run_block", "disruptive", "verify", "java_major",
           "jvm_warnings", "log_size", "ensure_tomcat", "refused_load", "secret_hidden", "boot_id", "wait_for_reboot",
           "release_hugepages", "large_pages_evidence"]

T = TypeVar("T")
QUICK_STOP_S = 0.5     # after a Ctrl-C, Tomcat's graceful stop this long at most (it keeps nothing the run needs)
GUARD_BUDGET_S = 60    # what a step's guard may take to put the server back, said to a Ctrl-C meanwhile


@contextmanager
def step_guard(session: Session, step: str):
    """Restore what the step changed when it fails or is interrupted."""
    try:
        yield
    except BaseException as exc:
        progress(f"{step}: {type(exc).__name__}: restoring the server")
        done: list[str] = []
        interrupted = isinstance(exc, KeyboardInterrupt)
        held = HeldInterrupts(GUARD_BUDGET_S, f"step {step}")      # JupyterLab's stop button, pressed again
        held.hold()
        try:
            if not answers(session.server):       # down (the reboot wait): each command would wait for it
                cleanup_clients(session.clients, session.run_id)
                raise TunepathError("the server does not answer (rebooting, or lost); the load was stopped")
            cleanup(session.server, session.tomcat, session.clients, session.run_id, quick=interrupted)
            done.append("Tomcat and the load stopped, Tomcat's configuration as before the step")
            if session.options.apply:
                for line in restore_hosts(session.server, session.clients):
                    progress(f"{step}: restored {line}")
                    done.append(line)
            if interrupted:          # the runner need not do it again: it ends the run within seconds
                write_private(side_file(session.recorder.runs_dir, session.run_id, ".put-back.json"),
                              json.dumps({"step": step}))
        except Exception as inner:   # keep the original error; the runner cleans up again
            progress(f"{step}: restoring was incomplete ({inner}); the runner tries again")
            done.append(f"incomplete ({inner}); the end of the run tried again")
        finally:
            held.release(raise_pending=False)      # the step's error (or Ctrl-C) is raised below anyway
        try:                         # noted in the run, as every restore is, on the page of the step
            session.recorder.note_put_back(
                done, f"When {step} {'was interrupted' if isinstance(exc, KeyboardInterrupt) else 'failed'}", [step])
        except Exception as inner:   # never at the cost of the original error
            progress(f"{step}: noting the restore in the run failed ({inner})")
        # the runner ends this kernel with SIGINT when it is interrupted: record it as the runner does
        message = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc) or type(exc).__name__
        session.recorder.fail(step, message, host=getattr(exc, "result", None) and exc.result.host,
                              command=getattr(exc, "result", None) and exc.result.command)
        raise


def _without(exc: Exception, secret: str, placeholder: str) -> Exception | None:
    """A copy of ``exc`` whose message (and failed command's text and output) show ``placeholder``
    instead of ``secret``; None when ``exc`` does not carry the secret."""
    result = getattr(exc, "result", None)
    texts = [str(exc), *((result.command, result.stdout, result.stderr) if isinstance(result, CommandResult) else ())]
    if not any(secret in (t or "") for t in texts):
        return None
    new = type(exc).__new__(type(exc))
    new.__dict__.update(exc.__dict__)
    new.args = tuple(a.replace(secret, placeholder) if isinstance(a, str) else a for a in exc.args)
    if isinstance(result, CommandResult):
        new.result = replace(result, command=result.command.replace(secret, placeholder),
                             stdout=result.stdout.replace(secret, placeholder),
                             stderr=result.stderr.replace(secret, placeholder))
    if secret in str(new):
        new = TunepathError(str(exc).replace(secret, placeholder))
    return new.with_traceback(exc.__traceback__)


def secret_hidden(action: Callable[[], T], secret: Callable[[], str | None], placeholder: str) -> T:
    """Run ``action``; an error it raises never carries the secret (``secret()`` when it fails):
    not in its message, not in a failed command's text or output, not in a chained error. The
    notebook, the run record and the command line only ever see ``placeholder``."""
    try:
        return action()
    except Exception as exc:
        value = secret()
        masked = _without(exc, value, placeholder) if value and value != placeholder else None
        if masked is None:
            raise
    raise masked        # outside the handler: the original error is not chained to it


def load_pidfile(client: Host, run_id: str, index: int = 0) -> str:
    """Where the load generator's process group is kept (one per client: two clients may be
    the same machine)."""
    return f"{expand_home(client, '~')}/.tunepath/load-{run_id}{f'-{index}' if index else ''}.pid"


def answers(host: Host) -> bool:
    """Does ``host`` answer now (at most one connection attempt)?"""
    try:
        return host.run("true", timeout=10, check=False).ok
    except TunepathError:
        return False


def cleanup_clients(clients: list[Host], run_id: str) -> None:
    """The load generators on the clients stopped (each tried)."""
    for i, client in enumerate(clients):
        try:
            client.kill_group(load_pidfile(client, run_id, i))
        except TunepathError:
            pass


def cleanup(server: Host, tomcat: Tomcat, clients: list[Host], run_id: str, quick: bool = False) -> None:
    """Stop load generators and Tomcat, and put the configuration back. Safe to call twice;
    every part is tried even when another fails. ``quick`` (after a Ctrl-C): Tomcat gets
    :data:`QUICK_STOP_S` to stop before it is killed, not its usual 30 s."""
    problems = []
    httpd = Httpd(server, expand_home(server, "~/.tunepath/httpd"))
    stop = (lambda: tomcat.stop(timeout=QUICK_STOP_S)) if quick else tomcat.stop
    for action in [*(lambda c=c, i=i: c.kill_group(load_pidfile(c, run_id, i)) for i, c in enumerate(clients)),
                   httpd.stop, httpd.shred_conf, stop, tomcat.restore_config]:
        try:
            action()
        except TunepathError as exc:
            problems.append(str(exc))
    if problems:
        raise TunepathError("; ".join(problems))


def run_block(session: Session, step: str, block, *, record: bool = True, timeout: float = 600,
               repetition: int = 1):
    host = session.host(block.host)
    result = host.run(block.text, timeout=timeout, check=False, as_written=True)
    if record:
        session.recorder.block(step, block.id, block.host, block.text, "ran", exit_status=result.exited,
                               duration_s=round(result.duration_s, 3),
                               **({"repetition": repetition} if repetition > 1 else {}))
    if not result.ok:
        raise CommandFailed(result, "see the run record for the command's output")
    return result


def disruptive(session: Session, step: str, block, run: bool = True) -> tuple[bool, str]:
    """Run a disruptive block if allowed; returns (changed, reason-if-not). A block that needs a
    reboot stays a dry run without allow_reboot, with every reason it could not run. Checked on the
    hosts it names; ``run=False`` (``Step.measured_changes``): only checked here, the step applies it
    before each of its variant's measurements (``Step.before_start``)."""
    opts = session.options
    reboot = block.id in REBOOT_BLOCKS
    hosts = session.clients if block.host == "client" else [session.server]
    check = next((c for c in (preflight(h, block, session.facts, session.inventory.same_machine) for h in hosts)
                  if not c.ok), Preflight(True))
    held = ("dry-run: disruptive, needs apply (scripts/run --apply)" if not opts.apply else
            "needs a reboot: rerun with allow_reboot" if reboot and not opts.allow_reboot else "")
    if not check.ok and not (reboot and held):
        session.recorder.block(step, block.id, block.host, block.text, "skipped", reason=check.reason)
        return False, check.reason
    if held:
        reason = held + (f"; and {check.reason}" if not check.ok else "")
        session.recorder.block(step, block.id, block.host, block.text, "dry-run", reason=reason)
        progress(f"{step}: dry-run {block.id}:\n{block.text}")
        return False, reason
    save_original_state(session.server, session.facts)
    if not run:               # applied before each of its variant's measurements (Step.before_start)
        return True, ""
    if reboot:
        return _reboot(session, step, block)
    run_block(session, step, block)
    if block.id in HUGEPAGE_BLOCKS:
        return _hugepages_reserved(session, step, block)
    return True, ""


def _reboot(session: Session, step: str, block) -> tuple[bool, str]:
    """The reboot ends the SSH session: run the GRUB part, reboot, reconnect, verify."""
    grub, _, _ = block.text.partition("\nsudo update-grub")
    old_boot = boot_id(session.server)
    session.server.run(grub, timeout=60, as_written=True)
    session.server.run("sudo update-grub", timeout=300, as_written=True)
    wanted = block.text.split('$GRUB_CMDLINE_LINUX ')[1].split('"')[0].split()
    check = session.server.run(GRUB_CHECK.format(param=quote(wanted[0], "kernel parameter")), timeout=120,
                               check=False, as_written=True)
    if check.exited != 0:      # never reboot into a grub.cfg that does not parse or lacks the change
        raise TunepathError(f"on {session.server.name}: after update-grub, /boot/grub/grub.cfg does not parse or lacks "
                            f"{wanted[0]}; not rebooting. Look at `sudo update-grub` and "
                            f"`sudo grub-script-check /boot/grub/grub.cfg` there, then `tunepath restore`")
    session.server, cmdline = reboot_and_wait(session.server, lambda: connect(session.inventory.server,
                                                                               session.inventory), wanted, old_boot)
    session.tomcat.host = session.server
    for i, spec in enumerate(session.inventory.clients):     # a client on the server lost its session too
        session.clients[i].close()
        session.clients[i] = connect(spec, session.inventory)
    session.recorder.block(step, block.id, block.host, block.text, "ran", kernel_cmdline=cmdline)
    return True, ""


def _hugepages_reserved(session: Session, step: str, block) -> tuple[bool, str]:
    """The kernel reserves what it can find: fewer pages than asked (fragmented memory) and the
    variant would measure without large pages. Say so, release them, and skip it instead."""
    asked = int(re.search(r"vm\.nr_hugepages=(\d+)", block.text).group(1))
    got = parse_hugepages(session.server.run("cat /proc/meminfo", check=False, timeout=15).stdout).total or 0
    if got >= asked:
        return True, ""
    reason = (f"the kernel of {session.server.name} reserved only {got} of the {asked} huge pages asked for "
              f"(`{block.text}`; memory too fragmented): not measured without them")
    session.recorder.warn(f"{step}: {reason}")
    release_hugepages(session, step)
    return False, reason


def release_hugepages(session: Session, step: str) -> None:
    """The huge page pool back to the size the host had before the run (a run with apply only)."""
    if not session.options.apply:
        return
    change = release_pool(session.server)
    if change:
        session.recorder.block(step, "release-hugepages", "server", f"sudo {change[1]}", "ran")
        progress(f"{step}: {change[0]} on {session.server.name}")


def large_pages_evidence(session: Session, step: str, block, repetition: int) -> None:
    """While Tomcat still runs after a large-pages measurement: the JVM's own words on its page
    sizes and the kernel's huge pages in use, recorded as verification output (one per repetition)."""
    r = session.server.run(block.text, check=False, timeout=30, as_written=True)
    name = block.id + (f"-r{repetition}" if repetition > 1 else "")
    session.recorder.verification(step, name, "server", block.text, r.stdout or r.stderr or "(no output)")
    pages = parse_hugepages(r.stdout)
    enabled = re.search(r"Large Page Support: Enabled|Large page support enabled", r.stdout)
    if not enabled or not pages.in_use:
        session.recorder.warn(f"{step}/large-pages repetition {repetition}: the JVM on {session.server.name} did "
                              f"not report large pages in use (`{block.text.splitlines()[1]}`: "
                              f"{'enabled' if enabled else 'not enabled'}; HugePages_Total {pages.total}, "
                              f"HugePages_Free {pages.free})")


def verify(session: Session, step) -> None:
    """Run the step's verification commands and record their output (or why there is none)."""
    for name, cmd in step.verify_commands(session.ctx).items():
        role = "client" if name in step.client_verifications else "server"
        r = session.host(role).run(cmd, check=False, timeout=60, as_written=True)
        if r.exited == 0 and r.stdout.strip():
            session.recorder.verification(step.name, name, role, cmd, r.stdout)
        else:
            session.recorder.block(step.name, f"verify-{name}", role, cmd, "skipped",
                                   reason=(r.stderr.strip().splitlines() or ["no output"])[-1])




def java_major(session: Session) -> int | None:
    java = java_binary(session.ctx.java_home)
    return parse_java_major(session.server.run(f"{java} -version 2>&1", check=False, timeout=30).stdout)


def jvm_warnings(session: Session, offset: int) -> tuple[list[str], int | None]:
    """The JVM's own warnings in catalina.out since ``offset`` (e.g. large pages unavailable), and the
    running JVM's open-file limit (None where unreadable): one round trip after Tomcat answered."""
    log, pidfile = session.tomcat.file("logs/catalina.out"), session.tomcat.file("temp/tomcat.pid")
    r = session.server.run(f"grep 'Max open files' /proc/$(cat {pidfile} 2>/dev/null)/limits 2>/dev/null "
                           f"| awk '{{print $4}}'; echo '--'; tail -c +{int(offset) + 1} {log} 2>/dev/null "
                           "| grep -E 'VM warning|\\[warning\\]' | grep -v 'Command line argument' | head -5",
                           check=False, timeout=15)
    limit, _, rest = r.stdout.partition("--")
    return [ln.strip() for ln in rest.splitlines() if ln.strip()], int(limit) if limit.strip().isdigit() else None


def refused_load(session: Session, tag: str, reports, url: str) -> None:
    """A measurement whose responses were mostly errors measured an error page, not the servlet: the
    step fails (its output is recorded), and nothing of it is published."""
    bad = [r for r in reports if r.errors]
    if bad:
        raise TunepathError(
            f"{tag}: {bad[0].non_2xx_3xx:,} of {bad[0].requests:,} responses were HTTP errors (4xx/5xx) on "
            f"{session.server.name}: the load did not reach the servlet. From a client, `curl -s -o /dev/null -w "
            f"'%{{http_code}}' {url}` shows the status (403: the examples webapp admits local clients only; the "
            "setup step opens it)")


def ensure_tomcat(session: Session, step: str) -> None:
    """A step run without the setup step still needs Tomcat: install it, or say how; and its examples
    webapp open to remote clients, as the setup step leaves it (else every response is a 403)."""
    if not session.tomcat.installed_version():
        _install_tomcat(session, step)
    if not session.inventory.same_machine and session.tomcat.open_examples():
        session.recorder.block(step, "open-examples", "server", "(the setup step's open-examples block)", "ran",
                               how="the examples webapp admitted local clients only: opened before the step")


def _install_tomcat(session: Session, step: str) -> None:
    opts = session.options
    if not (opts.tomcat_tarball or opts.tomcat_url):
        raise TunepathError(f"on {session.server.name}: Tomcat is not installed at {session.tomcat.home}: run "
                            "the setup step first, or give --tomcat-tarball / --tomcat-url")
    version = install_tomcat(session)
    session.recorder.block(step, "install-tomcat", "server", "(the setup step's install-tomcat block)", "ran",
                           how="Tomcat was missing: installed before the step", version=version)


def install_tomcat(session: Session) -> str:
    """Install the run's Tomcat release (``--tomcat-version``) from its tarball or URL, its SHA-512
    checked against the pin; record its version among the server's facts. Returns the version."""
    opts = session.options
    tarball = Path(opts.tomcat_tarball).expanduser() if opts.tomcat_tarball else None
    progress(f"installing Tomcat {opts.tomcat_version} into {session.tomcat.home}")
    version = session.tomcat.install(tarball, opts.tomcat_url, TOMCAT_SHA512[opts.tomcat_version])
    hosts = session.recorder.record["hosts"]["server"]
    hosts["facts"]["tomcat_version"] = version
    hosts["facts_missing"].pop("tomcat_version", None)
    session.recorder.save()
    return version
