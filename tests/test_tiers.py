"""The tier plugin (tests/tiers.py), run on small test files in a pytest of their own: a test must
carry exactly one tier marker, and a fast or docs test that starts a part of a higher tier fails,
whether it starts it itself or a child process does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT
from tiers import part_of

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(("argv", "part"), [
    (["/usr/sbin/sshd", "-D", "-f", "x"], "sshd"),
    (["java", "-jar", "ApacheJMeter.jar"], "a JVM (Tomcat, JMeter)"),
    (["timeout", "30", "qemu-system-x86_64", "-m", "1G"], "QEMU or a VM image"),
    (["ip", "netns", "add", "tplab-s"], "a network namespace (the lab)"),
    (["sudo", "-n", "true"], "root through sudo"),
    (["useradd", "-m", "tplab-c1"], "a user account (root)"),
    (["/usr/bin/chromium", "--headless"], "a browser"),
    (["make", "-j2"], "a compiler (the wrk2 build)"),
])
def test_the_parts_a_tier_restricts_are_recognised(argv, part):
    assert part_of(argv).name == part


@pytest.mark.parametrize("argv", [["ip", "-j", "addr"], ["hugo", "--source", "x"], ["python", "-m", "tunepath"],
                                  ["ssh-keygen", "-q"], ["git", "status"], []])
def test_ordinary_commands_are_no_part(argv):
    assert part_of(argv) is None


def inner(tmp_path: Path, body: str, *options: str) -> subprocess.CompletedProcess:
    """Run ``body`` as a test file in a pytest of its own, with the tier plugin, programs named
    ``sshd`` and ``java`` (copies of ``sleep``: the plugin reads the executable's name) and a stub
    script named ``sudo``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sshd", "java"):
        shutil.copy(shutil.which("sleep"), bin_dir / name)
    (bin_dir / "sudo").write_text("#!/bin/sh\necho \"$@\" >> stub.log\n")
    (bin_dir / "sudo").chmod(0o755)
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body).replace("BIN", str(bin_dir)))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  fast: f\n  docs: d\n  system: s\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tiers", "-p", "no:cacheprovider",
                           "--strict-markers", "--tiers-inner", *options, str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_fast_test_that_starts_sshd_fails_and_a_system_one_passes(tmp_path):
    r = inner(tmp_path, """
        import subprocess, pytest

        @pytest.mark.fast
        def test_fast_starts_sshd():
            subprocess.run(["BIN/sshd", "1"], check=True)

        @pytest.mark.system
        def test_system_starts_sshd():
            subprocess.run(["BIN/sshd", "1"], check=True)
    """)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout, r.stdout
    assert "test_fast_starts_sshd is marked 'fast' but started what only the 'system' tier may" in r.stdout
    assert "sshd: BIN/sshd 1".replace("BIN", str(tmp_path / "bin")) in r.stdout


def test_a_stub_script_named_like_a_part_is_no_part(tmp_path):
    r = inner(tmp_path, """
        import os, subprocess, pytest

        @pytest.mark.fast
        def test_fast_runs_a_recording_stub():
            env = dict(os.environ, PATH="BIN")
            subprocess.run(["sudo", "-n", "true"], check=True, env=env)
            subprocess.run(["/bin/sh", "-c", "sudo -n true"], check=True, env=env)
    """)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_part_started_by_a_child_process_is_seen(tmp_path):
    r = inner(tmp_path, """
        import subprocess, pytest

        @pytest.mark.docs
        def test_docs_runs_a_shell_that_starts_java():
            subprocess.run(["sh", "-c", "BIN/java 1; true"], check=True)
    """)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "is marked 'docs' but started what only the 'system' tier may" in r.stdout, r.stdout
    assert "a JVM (Tomcat, JMeter): java (pid" in r.stdout, r.stdout


def test_the_closest_marker_decides_the_tier(tmp_path):
    r = inner(tmp_path, """
        import subprocess, pytest

        pytestmark = pytest.mark.fast

        @pytest.mark.system
        def test_system_in_a_fast_module():
            subprocess.run(["BIN/sshd", "0.5"], check=True)

        def test_fast_by_the_module():
            subprocess.run(["BIN/sshd", "0.5"], check=True)
    """)
    assert "1 failed, 1 passed" in r.stdout, r.stdout + r.stderr
    assert "test_fast_by_the_module is marked 'fast'" in r.stdout


def test_a_tier_runs_with_those_below_it_and_a_test_s_own_marker_counts(tmp_path):
    r = inner(tmp_path, """
        import pytest

        pytestmark = pytest.mark.fast

        def test_fast():
            pass

        @pytest.mark.docs
        def test_docs():
            pass

        @pytest.mark.system
        def test_system():
            pass
    """, "--tier=docs", "-vv")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "test_fast PASSED" in r.stdout and "test_docs PASSED" in r.stdout
    assert "test_system" not in r.stdout and "2 passed, 1 deselected" in r.stdout


def test_a_test_without_a_tier_or_with_two_is_refused_before_anything_runs(tmp_path):
    r = inner(tmp_path, """
        import pytest

        def test_none():
            pass

        @pytest.mark.fast
        @pytest.mark.system
        def test_two():
            pass
    """)
    assert r.returncode == 4, r.stdout + r.stderr         # usage error: nothing ran
    assert "test_inner.py::test_none: no tier marker" in r.stderr
    assert "test_inner.py::test_two: fast, system" in r.stderr


def test_a_finished_stub_is_no_part_though_its_name_stays(tmp_path):
    """A stub that has exited but is not yet reaped keeps its name (comm) and loses its executable:
    it is nothing, not the part it is named after."""
    from tiers import _program
    stub = tmp_path / "sudo"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    proc = subprocess.Popen([str(stub)])
    stat_path = Path(f"/proc/{proc.pid}/stat")
    for _ in range(200):                               # until it is a zombie (state Z)
        stat = stat_path.read_text()
        if stat[stat.rindex(")") + 2] == "Z":
            break
        time.sleep(0.01)
    try:
        assert stat[stat.index("(") + 1:stat.rindex(")")] == "sudo"
        assert _program(f"/proc/{proc.pid}", stat) == ""
    finally:
        proc.wait()
