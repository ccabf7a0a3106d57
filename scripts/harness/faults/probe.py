"""What the fault harness does as root on this machine, for either target: drive the controller
(``tunepath run`` as a subprocess), hold the apply lock, put this machine's CPUs and huge pages
back; and read, repair and break the namespace lab's server (:class:`Probe`, :func:`inject`).

The server's state is read from outside the lab's SSH on purpose: a fault that cuts SSH must not
also blind the check. Queue counts come from ``ip netns exec <server namespace> ethtool -l eth0``;
the files, the lock and the processes from the server user's home and ``/proc``; online CPUs and
huge pages from this machine (the lab's hosts share its kernel). The VM guest's counterparts are
in :mod:`harness.faults.guest`.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.faults.state import ServerState
from tunepath.live.tomcatconf import TLS_DIR
from tunepath.steps.kernel_net import CLIENT_NAMES, SERVER_NAMES
from tunepath.model.context import parse_cpu_list
from tunepath.versions import TOMCAT_VERSION

__all__ = ["Probe", "Controller", "MachineState", "inject", "machine_state", "put_machine_back", "apply_lock", "say"]

APPLY_LOCK = Path("/tmp/tunepath-apply.lock")


def say(message: str) -> None:
    """One progress line of a fault harness, with the time."""
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", flush=True)


@contextmanager
def apply_lock():
    """Hold ``flock /tmp/tunepath-apply.lock`` (machine-wide changes are serialised through it)."""
    fd = os.open(APPLY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for {APPLY_LOCK} (another user of CPU hotplug or huge pages holds it)")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


CPU_ONLINE = Path("/sys/devices/system/cpu/online")
HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")
SAVED_SYSCTLS = ".tunepath/original-sysctls.json"     # tunepath.live.sysctls.SAVED, under each lab user's home
FILES = (("server_xml", "conf/server.xml"), ("setenv_sh", "bin/setenv.sh"),
         ("context_xml", "webapps/examples/META-INF/context.xml"))
LOAD_TOOLS = {"wrk", "wrk2", "ab", "siege", "java"}     # JMeter is a java process


def _processes(uid: int) -> list[tuple[int, str, bytes]]:
    """(pid, comm, cmdline) of every process of ``uid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            out.append((int(entry.name), (entry / "comm").read_text().strip(), (entry / "cmdline").read_bytes()))
        except OSError:
            continue
    return out


def _sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return "absent"


def _cpus_online() -> str:
    return CPU_ONLINE.read_text().strip()


def _set_cpus(want: str) -> list[str]:
    """CPUs online exactly as ``want`` says (CPU 0 is never touched)."""
    want_set, now = set(parse_cpu_list(want)), set(parse_cpu_list(_cpus_online()))
    done = []
    for cpu, value in [(c, "1") for c in sorted(want_set - now)] + [(c, "0") for c in sorted(now - want_set - {0})]:
        Path(f"/sys/devices/system/cpu/cpu{cpu}/online").write_text(value)
        done.append(f"CPU {cpu} {'online' if value == '1' else 'offline'}")
    return done


@dataclass(frozen=True)
class MachineState:
    """This machine's online CPUs and huge pages (CPU hotplug and huge pages are machine-wide)."""

    cpus_online: str
    hugepages: int


def machine_state() -> MachineState:
    return MachineState(_cpus_online(), int(HUGEPAGES.read_text()))


def put_machine_back(state: MachineState) -> list[str]:
    """This machine's online CPUs and huge pages as :func:`machine_state` found them."""
    done = _set_cpus(state.cpus_online)
    if int(HUGEPAGES.read_text()) != state.hugepages:
        HUGEPAGES.write_text(str(state.hugepages))
        done.append(f"vm.nr_hugepages {state.hugepages} again (now {HUGEPAGES.read_text().strip()})")
    return done


class Probe:
    """The lab server's state, read (and repaired) as root."""

    def __init__(self, lab):
        self.ns = lab.netns("server")
        self.user = pwd.getpwnam(lab.user("server"))
        self.home = Path(self.user.pw_dir)
        self.tomcat_home = self.home / f"apache-tomcat-{TOMCAT_VERSION}"
        self.client_uids = [pwd.getpwnam(lab.user(r)).pw_uid for r in lab.roles() if r != "server"]
        # the kernel step's sysctls, per namespace (they are per network namespace), and where each is saved
        self.namespaces = {r: lab.netns(r) for r in lab.roles()}
        self.homes = [Path(pwd.getpwnam(lab.user(r)).pw_dir) for r in lab.roles()]

    @property
    def lock(self) -> Path:
        return self.home / ".tunepath" / "lock"

    def queues(self) -> str:
        r = subprocess.run(["ip", "netns", "exec", self.ns, "ethtool", "-l", "eth0"], capture_output=True,
                           text=True, timeout=15)
        current = r.stdout.split("Current hardware settings:")[-1]
        values = dict(re.findall(r"^(RX|TX|Combined):\s*(\S+)", current, re.M))
        return " ".join(f"{k.lower()} {v}" for k, v in values.items()) or f"unreadable ({r.stderr.strip()})"

    def state(self) -> ServerState:
        server = _processes(self.user.pw_uid)
        load = [pid for uid in self.client_uids for pid, comm, _ in _processes(uid) if comm in LOAD_TOOLS]
        return ServerState(
            queues=self.queues(), cpus_online=_cpus_online(), hugepages=int(HUGEPAGES.read_text()),
            **{name: _sha(self.tomcat_home / rel) for name, rel in FILES},
            tomcat=tuple(pid for pid, _, cmd in server if b"org.apache.catalina" in cmd),
            httpd=tuple(pid for pid, comm, _ in server if comm in ("apache2", "httpd")),
            load=tuple(load), lock=self.lock.exists(), tls_key=(self.tomcat_home / TLS_DIR).exists(),
            sysctls=self.sysctls(), saved_sysctls=any(h.joinpath(SAVED_SYSCTLS).exists() for h in self.homes))

    def sysctls(self) -> str:
        """Each namespace's values of the kernel step's settings, in one line."""
        parts = []
        for role, ns in self.namespaces.items():
            names = SERVER_NAMES if role == "server" else CLIENT_NAMES
            r = subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", " ; ".join(
                f"echo {n}=$(cat /proc/sys/{n.replace('.', '/')} 2>/dev/null)" for n in names)],
                capture_output=True, text=True, timeout=15)
            parts.append(f"{role} {' '.join(r.stdout.split())}")
        return "; ".join(parts)

    def changed(self, before: ServerState) -> bool:
        """A host change is applied: CPUs, huge pages or queue counts differ from ``before``."""
        return (_cpus_online() != before.cpus_online or int(HUGEPAGES.read_text()) != before.hugepages
                or self.queues() != before.queues or self.sysctls() != before.sysctls)

    def forget_saved_state(self) -> None:
        (self.home / ".tunepath" / "original-state.json").unlink(missing_ok=True)
        for home in self.homes:
            home.joinpath(SAVED_SYSCTLS).unlink(missing_ok=True)

    def repair(self, before: ServerState) -> list[str]:
        """Put the server back as root, whatever tunepath left: what had to be done, one line each."""
        now, done = self.state(), []
        for pid in now.tomcat + now.httpd + now.load:
            try:
                os.kill(pid, signal.SIGKILL)
                done.append(f"killed pid {pid}")
            except ProcessLookupError:
                pass
        done += _set_cpus(before.cpus_online)
        if now.hugepages != before.hugepages:
            HUGEPAGES.write_text(str(before.hugepages))
            done.append(f"vm.nr_hugepages {before.hugepages}")
        if now.queues != before.queues:
            args = [w for k, v in zip(*[iter(before.queues.split())] * 2) if v.isdigit() for w in (k, v)]
            subprocess.run(["ip", "netns", "exec", self.ns, "ethtool", "-L", "eth0", *args], timeout=15,
                           capture_output=True)
            done.append(f"eth0 {before.queues}")
        for name, rel in FILES:
            done += self._repair_file(self.tomcat_home / rel, getattr(before, name))
        if self.lock.exists():
            shutil.rmtree(self.lock)
            done.append("lock removed")
        if now.sysctls != before.sysctls:
            done += self._repair_sysctls(before.sysctls)
        if (self.tomcat_home / TLS_DIR).exists() and not before.tls_key:
            shutil.rmtree(self.tomcat_home / TLS_DIR)
            done.append(f"{TLS_DIR} removed")
        self.forget_saved_state()
        return done

    def _repair_sysctls(self, want: str) -> list[str]:
        done = []
        for part in want.split("; "):
            role, _, values = part.partition(" ")
            for name, value in (v.split("=", 1) for v in values.split() if v.partition("=")[2].isdigit()):
                subprocess.run(["ip", "netns", "exec", self.namespaces[role], "sysctl", "-q", "-w", f"{name}={value}"],
                               capture_output=True, timeout=15)
                done.append(f"{role}: {name}={value}")
        return done

    def _repair_file(self, path: Path, want: str) -> list[str]:
        if _sha(path) == want:
            return []
        if want == "absent":
            path.unlink()
            return [f"{path.name} removed"]
        backup = path.with_name(path.name + ".tunepath-orig")
        if _sha(backup) != want:
            return [f"{path.name}: no backup with the original bytes; left as it is"]
        shutil.copy2(backup, path)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return [f"{path.name} copied from its backup"]


class Controller:
    """``tunepath run`` (or any command) as a subprocess in its own session, its output kept."""

    def __init__(self, argv: list[str], cwd: Path):
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", start_new_session=True)
        self.lines: list[str] = []
        self.times: list[float] = []          # when each line came (time.monotonic())
        self.kernels: set[int] = set()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.strip():
                self.times.append(time.monotonic())
                self.lines.append(line.rstrip())

    def first_after(self, since: float, pattern: re.Pattern) -> float | None:
        """Seconds from ``since`` to the first line after it that matches ``pattern``; None: none did."""
        for at, line in zip(list(self.times), list(self.lines)):
            if at >= since and pattern.search(line):
                return round(at - since, 1)
        return None

    def running(self) -> bool:
        return self.proc.poll() is None

    def last_line(self) -> str:
        return self.lines[-1][:400] if self.lines else ""

    def remember_kernels(self) -> None:
        """The step kernels the controller runs now (they outlive it if it is killed)."""
        for pid, _, cmd in _processes(os.getuid()):
            try:
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == self.proc.pid and b"ipykernel" in cmd:
                self.kernels.add(pid)

    def signal(self, sig: int, group: bool = True) -> None:
        """``sig`` to the controller's process group (a Ctrl-C in its terminal), or to its process alone."""
        try:
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                os.kill(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, limit: float) -> int | None:
        code, _ = self.finish(limit)
        return code

    def finish(self, limit: float, sig: int | None = None) -> tuple[int | None, bool]:
        """(exit status, hung): send ``sig`` if given, wait ``limit`` s, then SIGKILL the group."""
        if sig is not None and self.running():
            self.signal(sig)
            limit = max(limit, 120)
        try:
            code, hung = self.proc.wait(timeout=limit), False
        except subprocess.TimeoutExpired:
            self.remember_kernels()
            self.signal(signal.SIGKILL)
            code, hung = self.proc.wait(), True
        self.reader.join(timeout=5)
        return code, hung

    def end_kernels(self, grace: float = 10.0) -> int:
        """Kernels that outlived the controller: waited for, then killed; how many had to be."""
        deadline = time.monotonic() + grace
        alive = lambda: [p for p in self.kernels if Path(f"/proc/{p}").exists()]     # noqa: E731
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = alive()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(left)


SIGINTS = ("sigint", "sigint-pgrp", "sigint-runner")   # sigint is sigint-pgrp's older name
STOPS = (*SIGINTS, "sigterm-runner")     # a signal that asks the run to stop: its time to exit is measured


# the run's first line once it has given the server up: a step's guard taking over after a command
# failed (the host lost: no answer for live/sshlink.LOST_S), or the clean-up trying to reach it again
NOTICED = re.compile(r": (TunepathError|CommandFailed): restoring the server|lost the host|do not answer|was cut off")


def inject(kind: str, lab, ctl: Controller, outage: float) -> float | None:
    """One fault; returns how long the sshd or the link was down."""
    ctl.remember_kernels()
    if kind in STOPS or kind == "sigkill":
        sent = {"sigkill": signal.SIGKILL, "sigterm-runner": signal.SIGTERM}.get(kind, signal.SIGINT)
        ctl.signal(sent, group=kind not in ("sigint-runner", "sigterm-runner"))
        return None
    if kind == "sshd":
        lab.kill_sshd("server")
        time.sleep(outage)
        lab.restart_sshd("server")
    else:
        lab.set_link("server", False)
        time.sleep(outage)
        lab.set_link("server", True)
    return round(outage, 2)
