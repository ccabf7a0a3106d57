"""A step's notebook run live on its own, as a performance engineer runs it: Papermill's own command
(``papermill notebooks/02-baseline.ipynb out.ipynb -p mode live …``) against this machine, smoke
profile, real Tomcat and wrk. It must record a complete run of that one step the way ``tunepath
run`` records one (raw outputs, facts, the executed notebook, its status), show the table and the
charts, print the rebuild command, and that command must then show the run on the step's page.
The kernel's stop button (SIGINT to the kernel's process group, as JupyterLab sends it) must put
the host back and record the run as failed."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import LP_PATH, ROOT, unavailable
from sshd import free_port
from tunepath.versions import TOMCAT_VERSION
from tunepath.evidence.store import RunStore
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.system
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"
PAPERMILL = ROOT / ".venv" / "bin" / "papermill"
NOTEBOOK = ROOT / "notebooks" / REGISTRY.get("baseline").notebook


def _need_parts():
    missing = [what for what, ok in (("wrk", shutil.which("wrk") or shutil.which("wrk2")), ("java", shutil.which("java")),
                                     ("Tomcat tarball", TARBALL.exists()), ("papermill", PAPERMILL.exists()))
               if not ok]
    if missing:
        unavailable(f"a live notebook needs {', '.join(missing)} (scripts/bootstrap --system installs them)")


def _papermill(out: Path, runs: Path, home: Path, port: int) -> list[str]:
    """The command README gives, with a Tomcat of the test's own and the smoke profile."""
    return [str(PAPERMILL), str(NOTEBOOK), str(out), "-p", "mode", "live", "-p", "profile", "smoke",
            "-p", "runs_dir", str(runs), "-p", "tomcat_home", str(home), "-p", "tomcat_tarball", str(TARBALL),
            "-p", "http_port", str(port)]


def _outputs(notebook: Path) -> list[dict]:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return [o for cell in nb["cells"] if cell["cell_type"] == "code" for o in cell.get("outputs", [])]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One live run of the baseline notebook by Papermill, into a copy of the project's runs."""
    _need_parts()
    tmp = tmp_path_factory.mktemp("notebook-live")
    runs = tmp / "runs"
    shutil.copytree(ROOT / "runs", runs, ignore=shutil.ignore_patterns(".inprogress"))
    before = {p.name for p in runs.iterdir()}
    out = tmp / "out.ipynb"
    done = subprocess.run(_papermill(out, runs, tmp / "tc" / "apache-tomcat-11.0.10", free_port()), cwd=tmp,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [new] = sorted({p.name for p in runs.iterdir()} - before)
    return runs, new, out


def test_the_notebook_records_a_complete_run_of_its_step(recorded):
    runs, run_id, _ = recorded
    run = RunStore(runs, REGISTRY.names).load(run_id)
    assert run.record["status"] == "complete" and run.kind == "live"
    assert run.steps() == ["baseline"]
    assert {m.variant for m in run.measurements} == {"stock", "access-log-off", "threads"}
    assert all(m.stdout.is_file() and m.exit_status == 0 for m in run.measurements)
    assert run.server.facts                                          # host facts were gathered
    kept = runs / run_id / "notebooks" / NOTEBOOK.name             # the executed step notebook, as tunepath run keeps it
    assert kept.is_file() and not [o for o in _outputs(kept) if o["output_type"] == "error"]
    assert not (runs / ".inprogress" / run_id).exists()
    assert not Path(os.path.expanduser("~/.tunepath/lock")).exists()


def test_the_notebook_shows_progress_the_table_the_charts_and_the_rebuild_command(recorded):
    runs, run_id, out = recorded
    outputs = _outputs(out)
    assert not [o for o in outputs if o["output_type"] == "error"]
    text = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    assert "baseline/stock: measuring for" in text                   # progress while it measured
    tables = ["".join(o["data"]["text/html"]) for o in outputs if "text/html" in o.get("data", {})]
    assert any(run_id in t and "stock" in t and "access-log-off" in t for t in tables)
    assert any("image/svg+xml" in o.get("data", {}) for o in outputs)
    assert f"scripts/build --runs-dir {runs}" in text and f"Recorded run {run_id}" in text


def test_the_rebuild_command_shows_the_run_on_the_steps_page(recorded, tmp_path):
    runs, run_id, _ = recorded
    site = tmp_path / "site"
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "tunepath"), "build", "--runs-dir", str(runs),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = (site / "public" / LP_PATH / "baseline" / "index.html").read_text(encoding="utf-8")
    assert run_id in page


def _kernels(parent: int) -> list[int]:
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            if fields[1] == str(parent) and b"ipykernel" in Path(stat).with_name("cmdline").read_bytes():
                found.append(int(Path(stat).parent.name))
        except (OSError, IndexError):
            continue
    return found


def test_the_kernels_stop_button_puts_the_host_back_and_records_a_failed_run(tmp_path):
    _need_parts()
    runs, home, port = tmp_path / "runs", tmp_path / "tc" / "apache-tomcat-11.0.10", free_port()
    pidfiles = set(glob.glob(os.path.expanduser("~/.tunepath/load-*.pid")))
    log = open(tmp_path / "papermill.log", "wb")
    proc = subprocess.Popen(_papermill(tmp_path / "out.ipynb", runs, home, port), cwd=tmp_path, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not set(glob.glob(os.path.expanduser("~/.tunepath/load-*.pid"))) - pidfiles:   # measuring
            assert proc.poll() is None, (tmp_path / "papermill.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no measurement started within 240 s"
            time.sleep(0.05)
        [kernel] = _kernels(proc.pid)
        os.killpg(os.getpgid(kernel), signal.SIGINT)               # what JupyterLab's stop button does
        assert proc.wait(timeout=180) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    printed = (tmp_path / "papermill.log").read_text(errors="replace")
    assert "StepInterrupted: the hosts were put back and the run is recorded as failed" in printed
    [run_dir] = [p for p in runs.iterdir() if p.name.startswith("live-")]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "failed" and record["error"]["message"] == "interrupted"
    assert (home / "conf" / "server.xml").read_bytes() == (home / "conf" / "server.xml.tunepath-orig").read_bytes()
    assert subprocess.run(["pgrep", "-f", f"catalina.base={home}"], capture_output=True).returncode == 1
    assert subprocess.run(["pgrep", "-f", f"127.0.0.1:{port}/"], capture_output=True).returncode == 1
    assert not Path(os.path.expanduser("~/.tunepath/lock")).exists()
    assert not _kernels(kernel)                                    # the step's own kernel was ended too
