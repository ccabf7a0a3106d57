"""What the lab asks of this machine: root, a few programs, and processes it can recognise.

Every command runs from an argument list (no shell), under a timeout; a failure is one
:class:`~tunepath.errors.TunepathError` line naming the command and what to do. A process the lab
started is only ever signalled after its ``/proc/<pid>/cmdline`` shows that it is still that
process (pids are reused), and a zombie counts as gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["Tool", "TOOLS", "require_root", "require_tools", "tool", "run", "process_matches",
           "process_alive", "comm", "stop_process", "kill_pids"]

COMMAND_TIMEOUT = 30          # seconds, for one lab command (useradd, ip, ssh-keygen …)


@dataclass(frozen=True)
class Tool:
    program: str              # the name looked up on PATH (or an absolute path)
    package: str              # the Debian package that has it


TOOLS = (Tool("ip", "iproute2"), Tool("socat", "socat"), Tool("/usr/sbin/sshd", "openssh-server"),
         Tool("ssh-keygen", "openssh-client"), Tool("sudo", "sudo"), Tool("visudo", "sudo"),
         Tool("ethtool", "ethtool"), Tool("sysctl", "procps"), Tool("useradd", "passwd"),
         Tool("userdel", "passwd"))


def tool(program: str) -> str:
    """The absolute path of ``program``; its Debian package in the error when it is missing."""
    found = program if program.startswith("/") and os.access(program, os.X_OK) else shutil.which(program)
    if not found:
        package = next((t.package for t in TOOLS if t.program == program), program)
        raise TunepathError(f"lab: {program} is missing: run scripts/bootstrap --lab "
                            f"(or apt-get install {package})")
    return found


def require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise TunepathError(f"tunepath lab {action} needs root (it manages network namespaces, users and a "
                            f"sudoers file): run it as root, e.g. sudo .venv/bin/tunepath lab {action}")


def require_tools() -> None:
    missing = [t for t in TOOLS if not (shutil.which(t.program) or
                                         (t.program.startswith("/") and os.access(t.program, os.X_OK)))]
    if missing:
        packages = " ".join(dict.fromkeys(t.package for t in missing))
        raise TunepathError(f"lab: missing {', '.join(Path(t.program).name for t in missing)}: run "
                            f"scripts/bootstrap --lab, or apt-get install {packages}")


def run(argv: list[str], what: str, hint: str = "", check: bool = True,
        timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
    """Run ``argv``; a failure (or a timeout) is one line naming ``what``, the command and ``hint``."""
    shown = " ".join(argv)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TunepathError(f"lab: {what}: `{shown}` did not finish within {timeout:g} s. {hint}".rstrip())
    except OSError as exc:
        raise TunepathError(f"lab: {what}: `{shown}` could not start ({exc.strerror or exc}). {hint}".rstrip())
    if check and done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
        raise TunepathError(f"lab: {what}: `{shown}` exited with status {done.returncode}"
                            + (f": {tail}" if tail else "") + (f". {hint}" if hint else ""))
    return done


def _proc(pid: int, name: str) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return None


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, dead but not yet reaped, is not running)."""
    stat = _proc(pid, "stat")
    if stat is None:
        return False
    state = stat[stat.rfind(b")") + 2:][:1]
    return state not in (b"Z", b"X", b"")


def comm(pid: int) -> str:
    text = _proc(pid, "comm")
    return text.decode(errors="replace").strip() if text else ""


def process_matches(pid: int | None, mark: str) -> bool:
    """``pid`` is running and its command line holds ``mark`` (a config path, a port): our process."""
    if not pid or pid <= 0 or not process_alive(pid):
        return False
    cmdline = _proc(pid, "cmdline")
    return cmdline is not None and mark.encode() in cmdline.replace(b"\0", b" ")


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    left = [p for p in pids if process_alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if process_alive(p)]
    return left


def kill_pids(pids: list[int], grace: float = 3.0) -> list[int]:
    """TERM, then KILL after ``grace`` seconds; the pids still running afterwards (normally none)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    left = _wait_gone(pids, grace)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return _wait_gone(left, grace)


def stop_process(pid: int | None, mark: str, group: bool = False) -> bool:
    """Stop the process ``pid`` if it is still the one whose command line holds ``mark``; with
    ``group``, its whole process group (a socat and the connections it forked). True if it was ours."""
    if not process_matches(pid, mark):
        return False
    members = [pid]
    if group and _pgid(pid) == pid:
        members = [p for p in map(int, filter(str.isdigit, os.listdir("/proc"))) if _pgid(p) == pid]
    kill_pids(members)
    return True


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
