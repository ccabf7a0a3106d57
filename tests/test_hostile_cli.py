"""Issue 30, review findings 15, 16 and 22: odd input to the command line and the notebooks is one
line for a person, not a traceback, and a Tomcat directory that is not one of its own is refused."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from tunepath.errors import TunepathError
from tunepath.live.session import LiveOptions
from tunepath.pipeline import _site

pytestmark = pytest.mark.fast


def test_parse_with_stdin_closed_says_so_in_one_line():
    done = subprocess.run(["bash", "-c", f'exec "{sys.executable}" -m tunepath.cli parse - <&-'],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "standard input is closed" in done.stderr


@pytest.mark.parametrize("where", ["/proc/x", "/proc/self/status/x"])
def test_a_site_dir_the_notebook_cannot_write_is_one_line(where):
    with pytest.raises(TunepathError, match="cannot write there") as err:
        _site(where)
    assert "\n" not in str(err.value) and where in str(err.value)


def test_a_site_dir_is_made_when_missing(tmp_path):
    assert _site(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()


@pytest.mark.parametrize("home", ["/", "~", "~/", "/usr", "/etc/", "/opt/../etc/tomcat", "~/.."])
def test_a_tomcat_home_that_is_not_tomcats_own_is_refused(home):
    with pytest.raises(TunepathError, match="Tomcat's own directory"):
        LiveOptions(tomcat_home=home).check()


@pytest.mark.parametrize("home", ["~/apache-tomcat-11.0.10", "/opt/tomcat", "/srv/tomcat/11"])
def test_a_tomcat_home_of_its_own_passes(home):
    LiveOptions(tomcat_home=home).check()


def test_lab_status_on_a_fifo_state_file_is_one_line_not_a_hang(tmp_path):
    """Review finding 12: `tunepath lab status --dir D` hung when D/state.json was a FIFO."""
    os.mkfifo(tmp_path / "state.json")
    done = subprocess.run([sys.executable, "-m", "tunepath.cli", "lab", "status", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "{a = " * 2000 + "1" + "}" * 2000])
def test_an_inventory_nested_thousands_deep_is_one_line(tmp_path, value):
    """Review finding 14: such an inventory made `tunepath run --check-options` raise RecursionError."""
    from tunepath.live.inventory import load_inventory

    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[server]\nhost = "127.0.0.1"\nz = {value}\n')
    with pytest.raises(TunepathError, match="nested too deeply"):
        load_inventory(str(hosts))


ESCAPES = "\x1b]0;owned\x07\x1b[2J\r\x9b31m\x7f"


def test_compare_shows_recorded_control_characters_escaped():
    """Issue 34, item 7: a server name holding an OSC title and a clear-screen went to the terminal raw."""
    from tunepath.publish.compare_text import pair_lines

    doc = {"a": {"run_id": "a", "server": f"srv{ESCAPES}"}, "b": {"run_id": "b", "server": "srv"}, "steps": [],
           "facts": [{"label": f"kernel{ESCAPES}", "a": ESCAPES, "b": "6.8", "differs": True}]}
    text = "\n".join(pair_lines(doc))
    assert not any(c in text for c in "\x1b\x07\r\x9b\x7f") and "\\x1b]0;owned\\x07" in text


def test_an_error_line_is_escaped_and_cut_to_a_readable_line(capsys, monkeypatch):
    """Issue 34, items 7 and 11: an error quoting a run field printed its ESC sequences raw, and an
    ENOSPC error quoting a long detail was one line of 15 KB."""
    from tunepath import cli
    from tunepath.live.session import progress

    def fails(args):
        raise TunepathError(f"run {ESCAPES}: writing failed ({'x' * 15_000}); free some space and retry")

    monkeypatch.setattr(cli, "_cmd_compare", fails)
    assert cli.main(["compare", "a", "b"]) == 2
    progress(f"step baseline on {ESCAPES}")
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and len(err) < 700 and err.rstrip().endswith("free some space and retry")
    assert not any(c in err + out for c in "\x1b\x07\r\x9b\x7f") and "\\x1b[2J" in err and "\\x1b[2J" in out
