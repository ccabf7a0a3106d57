"""Test tiers: every test belongs to exactly one tier by its marker, and a test that starts a part
of a higher tier fails.

A test's tier is its closest tier marker: its own (``@pytest.mark.system``), else its class's, else
its module's ``pytestmark``. A test with none, or with two at one level, stops the run before any
test starts.

Tiers (``scripts/test --fast``, ``--docs``, no option; pytest's ``--tier=fast|docs|system`` runs
a tier and those below it):

- ``fast``: pure Python and small Hugo sites. No root, no Tomcat or JVM, no sshd, no lab or VM,
  no browser, no compiler, no full replay build (the ``built_site`` fixture).
- ``docs``: what the docs workflow runs beside the fast tier: the replay build, the built site's
  tests, headless Chromium (axe included) and the link check. Still no root, Tomcat, sshd, lab, VM
  or compiler: it passes on GitHub's hosted runner as its own user.
- ``system``: everything else, as root: real sshd, Tomcat, JMeter, the namespace lab, QEMU, wrk2
  builds.

Enforcement, for the ``fast`` and ``docs`` tiers: an audit hook sees every process this pytest
process starts (``subprocess``, ``os.exec*``, ``os.posix_spawn``, ``os.system``), and a thread
watches this process's descendants in ``/proc`` by their executables (a part started by a child,
such as the Tomcat of a ``tunepath run`` subprocess). A program that is a script is never a part
by its name (tests run recording stubs named ``sudo`` or ``java``). A part the test's tier does not allow fails the test at teardown,
naming the part, the command and the marker it needs. Processes that were already running when the
test began (a session fixture of another tier) are not the test's.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TIERS = ("fast", "docs", "system")
RANK = {tier: n for n, tier in enumerate(TIERS)}


@dataclass(frozen=True)
class Part:
    """A kind of thing a test may start, and the lowest tier allowed to start it."""
    name: str
    tier: str
    programs: frozenset[str]        # executable basenames, and their /proc comm (cut to 15 characters)


PARTS = (
    Part("sshd", "system", frozenset({"sshd"})),
    Part("a JVM (Tomcat, JMeter)", "system", frozenset({"java", "jsvc"})),
    Part("QEMU or a VM image", "system", frozenset({"qemu-system-x86_64", "qemu-system-aarch64", "qemu-system-x86",
                                                   "qemu-system-aar", "qemu-aarch64", "qemu-img", "mmdebstrap"})),
    Part("a network namespace (the lab)", "system", frozenset({"unshare", "nsenter"})),
    Part("root through sudo", "system", frozenset({"sudo"})),
    Part("a user account (root)", "system", frozenset({"useradd", "userdel", "usermod", "groupadd", "visudo"})),
    Part("a compiler (the wrk2 build)", "system", frozenset({"make", "cc", "gcc", "cc1", "aarch64-linux-gnu-gcc",
                                                            "aarch64-linux-g"})),
    Part("a browser", "docs", frozenset({"chromium", "chrome", "google-chrome", "chrome-headless-shell",
                                         "headless_shell", "node", "node-MainThread"})),
)
# A command line, not a program: `ip netns …` makes a namespace; plain `ip addr` does not.
NETNS = Part("a network namespace (the lab)", "system", frozenset())
FULL_BUILD_FIXTURE = "built_site"
FULL_BUILD = Part("the full replay build (the built_site fixture)", "docs", frozenset())


def part_of(argv: list[str]) -> Part | None:
    """The part a command line starts, if it is one a tier restricts."""
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program in ("env", "timeout", "nice", "setsid", "stdbuf", "taskset", "flock") and len(argv) > 1:
        rest = [a for a in argv[1:] if not a.startswith("-") and "=" not in a and not a.isdigit()]
        return part_of(rest) if rest else None
    if program == "ip" and "netns" in argv[1:]:
        return NETNS
    for part in PARTS:
        if program in part.programs:
            return part
    return None


def tier_of(item: pytest.Item) -> list[str]:
    """The test's tier marker: the closest one (the test's own, then its class's, then its module's
    ``pytestmark``), so that a module's default can be overridden for one test. Two at one level, or
    none at any, is a mistake: the list then holds those two, or nothing."""
    for node in reversed(item.listchain()):
        tiers = sorted({m.name for m in node.own_markers if m.name in RANK}, key=RANK.get)
        if tiers:
            return tiers
    return []


@dataclass
class Watch:
    """What the running test started that its tier does not allow."""
    tier: str
    before: set[int]
    found: dict[str, str] = field(default_factory=dict)     # part name -> the command that started it
    lock: threading.Lock = field(default_factory=threading.Lock)

    def see(self, part: Part | None, command: str) -> None:
        if part is not None and RANK[part.tier] > RANK[self.tier]:
            with self.lock:
                self.found.setdefault(part.name, command)

    def look_below(self, how: str) -> None:
        """Every process below this one that the test started: its program (``ip``'s whole
        command line, since only ``ip netns`` is a part)."""
        for pid, program in descendants().items():
            if pid not in self.before:
                argv = _cmdline(pid) if program == "ip" else [program]
                self.see(part_of(argv), f"{' '.join(argv)} (pid {pid}, {how})")


_watch: Watch | None = None
WATCH = pytest.StashKey[Watch]()
REPORTED = pytest.StashKey[bool]()


def _argv(value) -> list[str]:
    if isinstance(value, (str, bytes, os.PathLike)):
        text = os.fsdecode(value)
        try:
            return shlex.split(text)
        except ValueError:
            return text.split()
    try:
        return [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in value]
    except TypeError:
        return []


def _is_script(program: str, env) -> bool:
    """A program that is a script (``#!``): a test's recording stub named ``sudo`` or ``java`` is no
    part. A real part that is a script (``jmeter``, Debian's ``chromium`` wrapper) starts its binary,
    which the scan of the descendants sees by its executable."""
    path = env.get("PATH") if isinstance(env, dict) else None
    found = shutil.which(program, path=path) if os.sep not in program else program
    try:
        with open(found or program, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def _audit(event: str, args: tuple) -> None:
    watch = _watch
    if watch is None:
        return
    env = None
    if event == "subprocess.Popen":
        argv, env = _argv(args[1]), args[3]
        if args[0]:
            argv = [os.fsdecode(args[0])] + argv[1:] if argv else [os.fsdecode(args[0])]
    elif event in ("os.exec", "os.posix_spawn"):
        argv, env = _argv(args[1]), args[2]
    elif event == "os.system":
        argv = _argv(args[0])
    else:
        return
    part = part_of(argv)
    if part is not None and not _is_script(argv[0], env if env is not None else os.environ):
        watch.see(part, " ".join(argv)[:300])


def _program(proc: str, stat: str) -> str:
    """The process's executable (a stub script runs as its shell, a JVM as java); its comm where the
    executable may not be read (another user's process, such as a real sudo); nothing for a process
    that has no executable any more (a zombie: its comm may be a stub's name)."""
    try:
        return os.path.basename(os.readlink(f"{proc}/exe")).removesuffix(" (deleted)")
    except PermissionError:
        return stat[stat.index("(") + 1:stat.rindex(")")]
    except OSError:
        return ""


def _children() -> dict[int, list[tuple[int, str]]]:
    kids: dict[int, list[tuple[int, str]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append((int(entry.name), _program(entry.path, stat)))
    return kids


INNER = "--tiers-inner"       # a pytest of its own inside a test (tests/test_tiers.py): it watches its own


def _cmdline(pid: int) -> list[str]:
    try:
        return [os.fsdecode(a) for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def _inner(pid: int) -> bool:
    return INNER in _cmdline(pid)


def descendants() -> dict[int, str]:
    """pid → program of every process below this one, but for those below an inner pytest."""
    kids, out, todo = _children(), {}, [os.getpid()]
    while todo:
        for pid, program in kids.get(todo.pop(), []):
            if program.startswith("python") and _inner(pid):
                continue
            out[pid] = program
            todo.append(pid)
    return out


def _scan(stop: threading.Event) -> None:
    while not stop.wait(0.25):
        watch = _watch
        if watch is not None:
            watch.look_below("started by a child process")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier", choices=TIERS, default="system",
                     help="run the tests of this tier and those below it (fast < docs < system; default: all). "
                          "Write it with '=' (--tier=fast): a separate value is taken for a path before this option is known. "
                          "Use it, not -m: -m also matches a module's marker that a test overrides")
    parser.addoption(INNER, action="store_true",
                     help="this pytest runs inside another's test: the outer one leaves its processes to it")


def pytest_configure(config: pytest.Config) -> None:
    if not sys.platform.startswith("linux"):
        return
    sys.addaudithook(_audit)
    stop = threading.Event()
    thread = threading.Thread(target=_scan, args=(stop,), name="tier-watch", daemon=True)
    thread.start()
    config.add_cleanup(stop.set)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tiers = {item: tier_of(item) for item in items}
    wrong = [f"  {item.nodeid}: {', '.join(found) or 'no tier marker'}" for item, found in tiers.items() if len(found) != 1]
    if wrong:
        raise pytest.UsageError(
            "every test carries exactly one tier marker (pytestmark = pytest.mark.fast, docs or system; "
            "see tests/tiers.py):\n" + "\n".join(wrong[:40]) + ("\n  …" if len(wrong) > 40 else ""))
    highest = RANK[config.getoption("--tier")]
    keep = [item for item in items if RANK[tiers[item][0]] <= highest]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if RANK[tiers[item][0]] > highest])
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    global _watch
    tier = tier_of(item)[0]
    if tier == "system":
        yield
        return
    watch = Watch(tier, set(descendants()))
    if FULL_BUILD_FIXTURE in getattr(item, "fixturenames", ()):
        watch.see(FULL_BUILD, f"the test uses the {FULL_BUILD_FIXTURE} fixture")
    item.stash[WATCH] = watch
    _watch = watch
    try:
        yield
    finally:
        _watch = None



@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    watch = item.stash.get(WATCH, None)
    if call.when not in ("call", "teardown") or watch is None or item.stash.get(REPORTED, False):
        return
    watch.look_below("still running after the test")
    if watch.found and report.passed:
        item.stash[REPORTED] = True
        lines = [f"{name}: {command}" for name, command in sorted(watch.found.items())]
        need = max((part.tier for part in (*PARTS, NETNS, FULL_BUILD) if part.name in watch.found), key=RANK.get)
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} is marked '{watch.tier}' but started what only the '{need}' tier may:\n  "
                           + "\n  ".join(lines)
                           + f"\nMark it pytest.mark.{need} (or move it to a file of that tier), or stop starting it.")

