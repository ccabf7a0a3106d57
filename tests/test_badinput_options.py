"""Bad options of `tunepath run`, `tunepath restore` and `scripts/run`: one line, exit 2, nothing done.

Each bad option is refused before anything connects, takes a lock, installs or writes: the
runs directory stays absent, the home directory (where the server's lock would be) stays
empty, and no host object is ever created (creating one fails the test loudly).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath.versions import TOMCAT_VERSION
from tunepath.cli import main

pytestmark = pytest.mark.fast

TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"

BAD_RUN = {
    "ci-target zero": (["--ci-target", "0"], "--ci-target 0"),
    "ci-target negative": (["--ci-target", "-5"], "--ci-target -5"),
    "ci-target not a number": (["--ci-target", "nan"], "--ci-target nan"),
    "ci-target infinite": (["--ci-target", "inf"], "--ci-target inf"),
    "ci-target over 100": (["--ci-target", "250"], "at most 100"),
    "ci-target text": (["--ci-target", "five"], "--ci-target: invalid float"),
    "step-budget zero": (["--step-budget", "0"], "--step-budget 0"),
    "step-budget negative": (["--step-budget", "-1"], "--step-budget -1"),
    "http-port zero": (["--http-port", "0"], "--http-port 0"),
    "http-port too high": (["--http-port", "65536"], "--http-port 65536"),
    "http-port text": (["--http-port", "http"], "--http-port: invalid int"),
    "repetitions zero": (["--repetitions", "0"], "--repetitions: 0 must be 1 or more"),
    "repetitions above the maximum": (["--repetitions", "5", "--max-repetitions", "3"],
                                      "--max-repetitions 3 is below --repetitions 5"),
    "maximum below the profile's minimum": (["--max-repetitions", "2"], "quick profile's minimum of 4"),
    "unknown profile": (["--profile", "turbo"], "unknown profile 'turbo'"),
    "unknown step": (["--steps", "baseline,turbo"], "unknown step 'turbo'"),
    "steps that measure nothing": (["--steps", "summary"], "measures nothing"),
    "two analysis steps": (["--steps", "compare,summary"], "choose among the live steps: setup, baseline"),
    "empty steps": (["--steps", ","], "--steps is empty"),
    "reboot without apply": (["--allow-reboot"], "--allow-reboot only makes sense with --apply"),
    "tarball missing": (["--tomcat-tarball", "/nonexistent/tomcat.tar.gz"], "no such file"),
    "tarball is a directory": (["--tomcat-tarball", "/tmp"], "is a directory"),
    "tomcat url not http": (["--tomcat-url", "ftp://example.org/tomcat.tar.gz"], "http:// or https://"),
    "wrk2 source missing": (["--wrk2-source", "/nonexistent/wrk2.tar.gz"], "no such file or directory"),
    "wrk2 source not http": (["--wrk2-source", "ftp://example.org/wrk2.tar.gz"], "http(s) URL"),
    "wrk2 source no tree": (["--wrk2-source", "/tmp"], "no wrk2 source tree"),
    "java home relative": (["--java-home", "jdk-21"], "--java-home jdk-21: give an absolute path"),
    "java home is the binary": (["--java-home", "/usr/lib/jvm/jdk/bin/java"], "not its bin directory"),
    "java home without java": (["--java-home", "/nonexistent/jdk"], "no runnable bin/java"),
    "java home with a newline": (["--java-home", "/opt/jdk\nrm -rf ~"], "control character"),
    "tomcat home relative": (["--tomcat-home", "apache-tomcat"], "--tomcat-home apache-tomcat"),
    "inventory missing": (["--hosts", "/nonexistent/hosts.toml"], "no such file"),
    "inventory is a directory": (["--hosts", "/tmp"], "is a directory"),
    "runs dir is a file": (["--runs-dir", str(ROOT / "README.md")], "--runs-dir"),
}

BAD_RESTORE = {
    "http-port zero": (["--http-port", "0"], "--http-port 0"),
    "tomcat home relative": (["--tomcat-home", "tc"], "--tomcat-home tc"),
    "java home is the binary": (["--java-home", "/opt/jdk/bin/java"], "not its bin directory"),
    "inventory missing": (["--hosts", "/nonexistent/hosts.toml"], "no such file"),
}


@pytest.fixture
def nothing_may_connect(monkeypatch, tmp_path):
    """A home directory of its own, and host objects that fail the test if anything connects."""
    # every module that binds these names at import is imported before the patch, so that it
    # binds the real ones (a module first imported during the patch kept the stub for good), and
    # its own binding is patched too, and put back after the test with the rest
    from tunepath.live import actions, hosts, start

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))

    def refuse(*_a, **_k):
        raise AssertionError("a bad option reached a host")

    monkeypatch.setattr(hosts.LocalHost, "__init__", refuse)
    monkeypatch.setattr(hosts.SSHHost, "__init__", refuse)
    for module in (hosts, start, actions):
        for name in ("open_hosts", "connect"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    return home


def _run_main(argv: list[str]) -> int:
    """``tunepath`` in this process: its exit status (argparse's refusals exit from inside)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _one_line(capsys, code: int, expected: str) -> None:
    out, err = capsys.readouterr()
    lines = err.strip("\n").split("\n")
    assert code == 2, err
    assert len(lines) == 1 and expected in lines[0], err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("case", BAD_RUN, ids=str)
def test_bad_run_option_is_one_line_and_touches_nothing(case, capsys, nothing_may_connect, tmp_path):
    argv, expected = BAD_RUN[case]
    runs = tmp_path / "runs"
    before = sorted(p.name for p in ROOT.iterdir())
    code = _run_main(["run", "--runs-dir", str(runs), "--site-dir", str(tmp_path / "site"), *argv])
    _one_line(capsys, code, expected)
    assert not runs.exists() and not (tmp_path / "site").exists()
    assert list(nothing_may_connect.iterdir()) == []          # no ~/.tunepath, no lock
    assert sorted(p.name for p in ROOT.iterdir()) == before


def test_a_run_into_a_site_dir_holding_foreign_files_is_refused_before_it_connects(capsys, nothing_may_connect,
                                                                                    tmp_path):
    """Refused at once, not after an hour of measuring when the final build would replace them."""
    site = tmp_path / "site"
    (site / "content").mkdir(parents=True)
    (site / "content" / "mine.md").write_text("my own page\n")
    code = _run_main(["run", "--steps", "baseline", "--runs-dir", str(tmp_path / "runs"), "--site-dir", str(site)])
    _one_line(capsys, code, "holds files no tunepath build wrote (content/mine.md)")
    assert (site / "content" / "mine.md").read_text() == "my own page\n" and not (tmp_path / "runs").exists()
    assert list(nothing_may_connect.iterdir()) == []


@pytest.mark.parametrize("case", BAD_RESTORE, ids=str)
def test_bad_restore_option_is_one_line_and_touches_nothing(case, capsys, nothing_may_connect):
    argv, expected = BAD_RESTORE[case]
    _one_line(capsys, _run_main(["restore", *argv]), expected)
    assert list(nothing_may_connect.iterdir()) == []


def test_check_options_accepts_good_options_and_connects_to_nothing(capsys, nothing_may_connect, tmp_path):
    code = _run_main(["run", "--check-options", "--steps", "baseline,summary", "--profile", "smoke",
                      "--ci-target", "2.5", "--step-budget", "60", "--repetitions", "2", "--max-repetitions", "4",
                      "--http-port", "18080", "--runs-dir", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert code == 0 and err == "" and "steps baseline; profile smoke" in out
    assert not (tmp_path / "runs").exists()


def test_live_options_check_is_the_one_place(tmp_path):
    """API callers (run_path, restore_host) get the same checks as the command line."""
    from tunepath.errors import TunepathError
    from tunepath.live.putback import restore_host
    from tunepath.live.runner import check_run, run_path
    from tunepath.live.session import LiveOptions

    for options, message in ((LiveOptions(http_port=True), "--http-port True"),
                             (LiveOptions(ci_target_pct=0.0), "--ci-target 0"),
                             (LiveOptions(step_budget_s=float("nan")), "--step-budget nan"),
                             (LiveOptions(repetitions=4, max_repetitions=2), "below --repetitions 4")):
        with pytest.raises(TunepathError, match=message):
            check_run(options)
        with pytest.raises(TunepathError, match=message):
            run_path(options, steps=["baseline"], runs_dir=tmp_path / "runs", build=False)
    with pytest.raises(TunepathError, match="--http-port 0"):
        restore_host(LiveOptions(http_port=0))
    assert not (tmp_path / "runs").exists()


# --- scripts/run: the options are checked before apt-get, Maven or pip -----------------------
@pytest.fixture
def stubbed_installers(tmp_path):
    """PATH stubs for every installer scripts/run could reach: each leaves a mark and fails."""
    if not (ROOT / ".venv" / "bin" / "tunepath").exists():
        pytest.skip("needs the project's .venv (scripts/bootstrap)")
    stamp = ROOT / ".venv" / ".tunepath-installed"
    lock_sum = hashlib.sha256(b"".join((ROOT / f).read_bytes() for f in
                                       ("requirements.lock", "requirements-nodeps.lock", "pyproject.toml")))
    if not stamp.is_file() or stamp.read_text().strip() != lock_sum.hexdigest():
        pytest.skip(".venv is not up to date with requirements.lock/pyproject.toml (run scripts/bootstrap)")
    bin_dir, marks = tmp_path / "bin", tmp_path / "marks"
    bin_dir.mkdir()
    marks.mkdir()
    for tool in ("apt-get", "apt", "mvn", "sudo", "dpkg"):
        stub = bin_dir / tool
        stub.write_text(f"#!/bin/sh\ntouch {marks}/{tool}\necho 'stub {tool} must not run' >&2\nexit 97\n")
        stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PIP_NO_INDEX="1", HOME=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return env, marks, tmp_path / "home"


@pytest.mark.parametrize("argv, expected", [
    (["--ci-target", "0"], "--ci-target 0"),
    (["--steps", "summary"], "measures nothing"),
    (["--http-port", "99999"], "--http-port 99999"),
    (["--profile", "nope"], "unknown profile"),
], ids=["ci-target", "steps", "http-port", "profile"])
def test_scripts_run_checks_options_before_installing(stubbed_installers, argv, expected):
    env, marks, home = stubbed_installers
    r = subprocess.run([str(ROOT / "scripts" / "run"), *argv], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and expected in lines[0], r.stderr
    assert list(marks.iterdir()) == [], "an installer ran before the options were checked"
    assert list(home.iterdir()) == []


def test_scripts_run_help_installs_nothing(stubbed_installers):
    env, marks, _ = stubbed_installers
    r = subprocess.run([str(ROOT / "scripts" / "run"), "--help"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and "--check-options" in r.stdout and "--ci-target" in r.stdout, r.stderr
    assert list(marks.iterdir()) == []


def test_the_patch_leaves_no_stub_behind(nothing_may_connect):
    """Issue 30: a module imported while the hosts were patched kept the stub after the test."""
    from tunepath.live import actions, hosts, start

    assert start.open_hosts is hosts.open_hosts and actions.connect is hosts.connect   # patched alike


def test_after_a_patched_test_the_real_functions_are_back():
    from tunepath.live import actions, hosts, start

    for function in (hosts.open_hosts, hosts.connect, start.open_hosts, actions.connect):
        assert function.__module__ == "tunepath.live.hosts" and function.__name__ in ("open_hosts", "connect")


@pytest.mark.parametrize("argv", [["--hosts", "a" * 5000], ["--tomcat-tarball", "a" * 5000],
                                  ["--hosts", "~nosuchuser-tunepath/hosts.toml"], ["--hosts", "INVENTORY"]])
def test_a_path_that_cannot_be_is_one_short_line_and_exit_2(capsys, nothing_may_connect, tmp_path, argv):
    """Issue 34, item 6: a 5,000-character path (ENAMETOOLONG) and ~user with no such user (RuntimeError
    from expanduser), on the command line or as an inventory's key_file, were tracebacks."""
    inventory = tmp_path / "hosts.toml"
    inventory.write_text('[server]\nhost = "127.0.0.1"\nkey_file = "~nosuchuser-tunepath/id"\n'
                         '[[clients]]\nhost = "local"\n')
    argv = [str(inventory) if a == "INVENTORY" else a for a in argv]
    code = _run_main(["run", "--check-options", *argv, "--runs-dir", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.startswith("tunepath: ") and err.count("\n") == 1, err
    assert len(err) < 700
