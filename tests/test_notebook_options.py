"""Issue 30, review finding 8: ``scripts/notebook`` refuses the options that would undo its own
protections (another address, an empty token, XSRF checks off, remote access, any origin),
unless ``--allow-unsafe`` says that is meant. Its own options come first, so a user's would win."""

from __future__ import annotations

import subprocess

import pytest

from conftest import ROOT
from tunepath.jupyter import main, refused


@pytest.mark.fast
@pytest.mark.parametrize("args", [
    ["--ServerApp.token="], ["--IdentityProvider.token="], ["--NotebookApp.token", ""],
    ["--ip=0.0.0.0"], ["--ip", "192.0.2.7"], ["--ServerApp.ip=::"],
    ["--ServerApp.disable_check_xsrf=True"], ["--ServerApp.disable_check_xsrf"],
    ["--ServerApp.allow_remote_access=true"], ["--ServerApp.allow_origin=*"],
])
def test_an_option_that_exposes_the_server_is_refused(args):
    problems = refused(args, {})
    assert len(problems) == 1 and args[0].split("=")[0] in problems[0]


@pytest.mark.fast
@pytest.mark.parametrize("args", [
    [], ["--no-browser"], ["--port", "8899"], ["--port=8899", "--no-browser"], ["--ip=127.0.0.1"],
    ["--ip", "localhost"], ["--ServerApp.token=s3cret"], ["--ServerApp.disable_check_xsrf=False"],
    ["--ServerApp.allow_remote_access=False"], ["--ServerApp.allow_origin=http://127.0.0.1:8888"],
])
def test_ordinary_options_pass(args):
    assert refused(args, {}) == []


@pytest.mark.fast
def test_an_empty_token_in_the_environment_is_refused_and_main_says_what_to_do(capsys):
    assert refused([], {"JUPYTER_TOKEN": " "}) and not refused([], {"JUPYTER_TOKEN": "abc"})
    assert main(["check", "--ip=0.0.0.0", "--no-browser"], {}) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-unsafe" in err and "--ip=0.0.0.0" in err
    assert main(["check", "--no-browser"], {}) == 0


@pytest.mark.docs
def test_scripts_notebook_refuses_before_starting_anything():
    done = subprocess.run([str(ROOT / "scripts/notebook"), "--no-browser", "--ServerApp.token="],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    refusals = [line for line in done.stderr.splitlines() if line.startswith("scripts/notebook: refused")]
    assert len(refusals) == 1 and "Jupyter Server" not in done.stderr      # no server was started
