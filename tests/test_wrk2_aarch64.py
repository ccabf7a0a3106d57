"""wrk2 on aarch64: tunepath's patch (``live/wrk2-tunepath.patch``) on the vendored upstream tarball.

The patch applies cleanly to the pristine tree (and is recognised as applied on a patched one);
the native build against the distribution's LuaJIT 2.1 (``make LUAJIT=system``) parses its
options, also when ``char`` is unsigned as on aarch64 (built with ``-funsigned-char``, so blocker 4
shows on x86_64 too), and measures a local server; the cross build for aarch64 against the
private arm64 sysroot of ``scripts/bootstrap --arm64-cross`` is an aarch64 ELF that measures the
same server under ``qemu-aarch64``, and the project's parser reads its report as wrk2's.

One unpacked, patched tree is shared by the module; each build works in a copy of it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import tunepath
from conftest import ROOT, VENDOR, serving, unavailable
from tunepath.parse.record import PERCENTILE_KEYS
from tunepath.parse.reports import parse_report

pytestmark = pytest.mark.system

TARBALL = VENDOR / "wrk2-44a94c1.tar.gz"
PATCH = Path(tunepath.__file__).parent / "live" / "wrk2-tunepath.patch"
SYSROOT = ROOT / ".cache" / "arm64-sysroot"
CROSS_UNAVAILABLE = ROOT / ".cache" / "arm64-cross.unavailable"
QEMU_PREFIX = Path("/usr/aarch64-linux-gnu")       # libc6-arm64-cross: ld-linux-aarch64.so.1, libc
MULTIARCH = "aarch64-linux-gnu"
EM_AARCH64 = 183
RATE = 200                                          # requests/s offered
CROSS_RUN_S = 12   # wrk2 calibrates 10 s + 5 ms per connection into a run: only then its calibration line
JOBS = f"-j{min(os.cpu_count() or 1, 8)}"


def run(cmd, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def missing_commands(*names: str) -> list[str]:
    return [n for n in names if not shutil.which(n)]


def build(tree: Path, *make_args: str) -> Path:
    r = run(["make", JOBS, *make_args], cwd=tree)
    assert r.returncode == 0, f"make {' '.join(make_args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return tree / "wrk"


# --- the local server wrk2 measures ----------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1, one write per response, no Nagle: nothing of the server's own shows in
    the latency (HTTP/1.0's reconnects and Nagle's 40 ms would)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    body = b"tunepath wrk2 aarch64 test\n"

    def do_GET(self):
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(self.body), self.body))

    def log_message(self, *args):
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass                # wrk2 closes its connections mid-request when the run ends


@pytest.fixture(scope="module")
def server_url():
    server = _Server(("127.0.0.1", 0), _Handler)
    with serving(server, "wrk2-test-server") as (_, port):
        yield f"http://127.0.0.1:{port}/"


# --- the patched source --------------------------------------------------------------------
@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    missing = missing_commands("tar", "patch")
    if missing or not TARBALL.is_file():
        unavailable(f"needs {', '.join(missing) or TARBALL} (the vendored wrk2 tarball and tar, patch)")
    top = tmp_path_factory.mktemp("wrk2-pristine")
    r = run(["tar", "xzf", str(TARBALL), "-C", str(top)])
    assert r.returncode == 0, r.stderr
    return top / "wrk2-44a94c1"


@pytest.fixture(scope="module")
def patched(pristine, tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("wrk2-patched") / "wrk2"
    shutil.copytree(pristine, tree, symlinks=True)
    r = run(["patch", "-p1", "-i", str(PATCH)], cwd=tree)
    assert r.returncode == 0, r.stdout + r.stderr
    return tree


def copy_of(tree: Path, tmp_path_factory, name: str) -> Path:
    dest = tmp_path_factory.mktemp(name) / "wrk2"
    shutil.copytree(tree, dest, symlinks=True)
    return dest


def test_the_patch_applies_cleanly_to_the_pristine_tarball(pristine):
    assert PATCH.read_text().startswith("# "), "the patch starts with its comment header"
    r = run(["patch", "-p1", "--dry-run", "-f", "-i", str(PATCH)], cwd=pristine)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "fuzz" not in out and "offset" not in out and "FAILED" not in out, out
    assert sorted(line.split()[-1] for line in r.stdout.splitlines() if line.startswith("checking file")) == \
        ["Makefile", "src/ae.c", "src/hdr_histogram.c", "src/script.c", "src/wrk.c"]


def test_a_patched_tree_is_recognised_so_a_build_does_not_patch_twice(pristine, patched):
    """``patch -R --dry-run`` succeeds only on a patched tree, ``patch -N --dry-run`` only on a pristine one."""
    def dry(tree, flag):
        return run(["patch", "-p1", flag, "--dry-run", "-s", "-f", "-i", str(PATCH)], cwd=tree).returncode

    assert (dry(patched, "-R"), dry(patched, "-N")) == (0, 1)
    assert (dry(pristine, "-R"), dry(pristine, "-N")) == (1, 0)


def test_the_patch_waits_for_due_timers_in_total_milliseconds(patched):
    """Fix 5: a timer due just after a second boundary no longer makes the event loop sleep ~1 s."""
    ae = (patched / "src" / "ae.c").read_text()
    assert "tvp->tv_sec --;" not in ae and "*1000LL" in ae


def test_the_patch_fixes_the_four_blockers(patched):
    makefile = (patched / "Makefile").read_text()
    assert "LUAJIT        ?= bundled" in makefile
    script = (patched / "src" / "script.c").read_text()
    assert "luaL_reg " not in script and "struct luaL_Reg" in script and "#include <sys/time.h>" in script
    assert "x86intrin.h" not in (patched / "src" / "hdr_histogram.c").read_text()
    wrk = (patched / "src" / "wrk.c").read_text()
    assert "char c," not in wrk and "    int c;\n" in wrk


def test_make_keeps_the_bundled_luajit_by_default_and_system_needs_none_of_it(patched):
    if missing_commands("make"):
        unavailable("needs make")
    bundled = run(["make", "-n"], cwd=patched)               # -n: prints, builds nothing
    assert "deps/luajit/src" in bundled.stdout and "BUILDMODE=static" in bundled.stdout
    system = run(["make", "-n", "LUAJIT=system", "LUAJIT_CFLAGS=-I/x/luajit", "LUAJIT_LIBS=-lluajit-x",
                  "LUAJIT_BIN=my-luajit", "EXTRA_CFLAGS=-DTUNEPATH_X", "EXTRA_LDFLAGS=-Wl,--tunepath-y"],
                 cwd=patched)
    assert system.returncode == 0, system.stderr
    assert "deps/luajit" not in system.stdout
    assert "my-luajit -b src/wrk.lua obj/bytecode.c" in system.stdout
    compiles = [line for line in system.stdout.splitlines() if " -c -o obj/" in line]
    assert len(compiles) == 13 and all("-I/x/luajit" in c and "-DTUNEPATH_X" in c for c in compiles)
    link = next(line for line in system.stdout.splitlines() if " -o wrk " in line)
    assert "-Wl,-E" in link and "-Wl,--tunepath-y" in link and "-lluajit-x" in link
    bad = run(["make", "-n", "LUAJIT=other"], cwd=patched)
    assert bad.returncode != 0 and "LUAJIT must be bundled or system" in bad.stderr


# --- the native build (x86_64 here): make LUAJIT=system ------------------------------------------
def native_prerequisites() -> None:
    missing = missing_commands("make", "cc", "luajit", "pkg-config")
    for header, package in (("/usr/include/luajit-2.1/lua.h", "libluajit-5.1-dev"),
                            ("/usr/include/openssl/ssl.h", "libssl-dev"), ("/usr/include/zlib.h", "zlib1g-dev")):
        if not Path(header).is_file():
            missing.append(package)
    if missing:
        unavailable(f"the native build needs {', '.join(missing)} (scripts/bootstrap --arm64-cross installs them)")


@pytest.fixture(scope="module")
def native(patched, tmp_path_factory) -> Path:
    native_prerequisites()
    return build(copy_of(patched, tmp_path_factory, "wrk2-native"), "LUAJIT=system")


@pytest.fixture(scope="module")
def native_unsigned_char(patched, tmp_path_factory) -> Path:
    """Built as on aarch64, where ``char`` is unsigned: blocker 4 shows on x86_64 too."""
    native_prerequisites()
    return build(copy_of(patched, tmp_path_factory, "wrk2-uchar"), "LUAJIT=system", "EXTRA_CFLAGS=-funsigned-char")


def test_the_native_build_prints_its_version_and_its_usage_for_bad_arguments(native):
    version = run([str(native), "-v"], timeout=30)
    assert version.stdout.startswith("wrk 4.0.0 [epoll]")
    for bad in (["-t1", "-c1", "-d1s", "http://127.0.0.1:9/"],            # no -R: wrk2 requires a rate
                ["--no-such-option", "http://127.0.0.1:9/"], []):
        r = run([str(native), *bad], timeout=30)
        assert r.returncode == 1 and "Usage: wrk <options> <url>" in r.stdout, bad


@pytest.mark.parametrize("which", ["native", "native_unsigned_char"])
def test_a_valid_command_line_is_parsed_not_answered_with_the_usage(which, request):
    """A valid command line against a closed port: wrk2 tries to connect. With getopt's result in a
    ``char`` (blocker 4) an unsigned-char build prints the usage instead."""
    wrk = request.getfixturevalue(which)
    r = run([str(wrk), "-t1", "-c1", "-d1s", "-R10", "http://127.0.0.1:9/"], timeout=30)
    assert "Usage: wrk" not in r.stdout + r.stderr
    assert "unable to connect to 127.0.0.1:9" in r.stdout + r.stderr


def check_report(text: str, min_share: float, calibrated: bool) -> None:
    report = parse_report(text)
    assert report.tool == "wrk2", text
    assert (report.threads, report.connections) == (1, 4)
    for table in (report.percentiles_ms, report.uncorrected_percentiles_ms):
        assert table is not None and set(PERCENTILE_KEYS) <= set(table), text
        assert all(table[k] is not None and table[k] > 0 for k in PERCENTILE_KEYS), table
    assert report.uncorrected_histogram is not None and report.uncorrected_histogram.total_count > 0
    if calibrated:
        assert report.calibration and report.calibration[0]["mean_latency_ms"] > 0, text
    assert report.requests_per_sec_trusted and report.non_2xx_3xx == 0
    assert sum(report.socket_errors.values()) == 0, report.socket_errors
    assert min_share * RATE <= report.requests_per_sec <= 1.1 * RATE, text


def test_the_native_build_measures_a_local_server(native, server_url):
    r = run([str(native), "-t1", "-c4", "-d3s", f"-R{RATE}", "-U", "--latency", server_url], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Latency Distribution (HdrHistogram - Recorded Latency)" in r.stdout
    assert "Latency Distribution (HdrHistogram - Uncorrected Latency" in r.stdout
    # 3 s: before wrk2's calibration. Half the offered rate at least, not all of it: upstream's event
    # loop (ae.c) can sleep ~1 s before the first connection starts (a timer already due when a second
    # boundary passed), and the run then offers 2/3 of the rate (seen natively in 1 of 30 runs)
    check_report(r.stdout, min_share=0.5, calibrated=False)


# --- the cross build for aarch64, run under qemu-aarch64 ----------------------------------------
@pytest.fixture(scope="module")
def cross(patched, tmp_path_factory) -> Path:
    if CROSS_UNAVAILABLE.is_file():
        reason = CROSS_UNAVAILABLE.read_text().strip() or "no reason given"
        # bootstrap could not install the toolchain, qemu or the arm64 libraries: a skip with its
        # reason, in CI too (the rule); a part missing without that record fails in CI
        pytest.skip(f"the aarch64 cross build is unavailable here: {reason} "
                    f"(scripts/bootstrap --arm64-cross wrote {CROSS_UNAVAILABLE.relative_to(ROOT)})")
    missing = missing_commands("make", "aarch64-linux-gnu-gcc", "qemu-aarch64", "luajit")
    if not (QEMU_PREFIX / "lib" / "crt1.o").is_file():
        missing.append("libc6-dev-arm64-cross")
    if not (SYSROOT / ".tunepath-stamp").is_file():
        missing.append(f"the arm64 sysroot {SYSROOT.relative_to(ROOT)}")
    if missing:
        unavailable(f"the aarch64 cross build needs {', '.join(missing)} (run scripts/bootstrap --arm64-cross)")
    lib = SYSROOT / "usr" / "lib" / MULTIARCH
    inc = SYSROOT / "usr" / "include"
    return build(copy_of(patched, tmp_path_factory, "wrk2-cross"), "LUAJIT=system", f"CC={MULTIARCH}-gcc",
                 f"LUAJIT_CFLAGS=-I{inc}/luajit-2.1", f"LUAJIT_LIBS=-L{lib} -lluajit-5.1",
                 f"EXTRA_CFLAGS=-I{inc} -I{inc}/{MULTIARCH}", f"EXTRA_LDFLAGS=-L{lib} -Wl,-rpath-link,{lib}")


def qemu(wrk: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, QEMU_LD_PREFIX=str(QEMU_PREFIX),
               LD_LIBRARY_PATH=f"{SYSROOT}/usr/lib/{MULTIARCH}:{SYSROOT}/lib/{MULTIARCH}")
    return run(["qemu-aarch64", "-L", str(QEMU_PREFIX), str(wrk), *args], env=env, timeout=timeout)


def test_the_cross_build_is_an_aarch64_executable(cross):
    header = cross.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[4] == 2 and header[5] == 1     # 64-bit, little-endian
    assert int.from_bytes(header[18:20], "little") == EM_AARCH64


def test_the_aarch64_build_runs_under_qemu_and_parses_its_options(cross):
    assert qemu(cross, "-v", timeout=30).stdout.startswith("wrk 4.0.0 [epoll]")
    r = qemu(cross, "-t1", "-c1", "-d1s", "-R10", "http://127.0.0.1:9/", timeout=30)
    assert "Usage: wrk" not in r.stdout + r.stderr
    assert "unable to connect to 127.0.0.1:9" in r.stdout + r.stderr


def test_the_aarch64_build_measures_a_local_server_under_qemu(cross, server_url):
    r = qemu(cross, "-t1", "-c4", f"-d{CROSS_RUN_S}s", f"-R{RATE}", "-U", "--latency", server_url,
             timeout=CROSS_RUN_S + 60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Thread calibration" in r.stdout
    assert "Latency Distribution (HdrHistogram - Recorded Latency)" in r.stdout
    assert "Latency Distribution (HdrHistogram - Uncorrected Latency" in r.stdout
    # qemu is slow, and under it upstream's ~1 s sleep before the first connection (see above) came in
    # about half of the runs: half the offered rate at least
    check_report(r.stdout, min_share=0.5, calibrated=True)
    report = parse_report(r.stdout)
    print(f"aarch64 under qemu: {report.requests_per_sec} req/s of {RATE}; p50/p99 corrected "
          f"{report.percentiles_ms['50']}/{report.percentiles_ms['99']} ms, uncorrected "
          f"{report.uncorrected_percentiles_ms['50']}/{report.uncorrected_percentiles_ms['99']} ms")
