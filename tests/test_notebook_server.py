"""``scripts/notebook`` starts a real JupyterLab from the project's environment: on 127.0.0.1
only, refusing requests without its token, serving the step notebooks with the project's
kernel (the environment's python3, which imports tunepath) as the default. The server is
stopped by its process group when the test ends, whatever happened."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT

pytestmark = pytest.mark.docs

TOKEN = "tunepath-test-" + os.urandom(8).hex()
URL = re.compile(r"http://127\.0\.0\.1:(\d+)/lab")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("jupyter-home")
    log = home / "server.log"
    env = {**os.environ, "JUPYTER_TOKEN": TOKEN, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_DATA_DIR": str(home / "data"), "JUPYTER_RUNTIME_DIR": str(home / "runtime")}
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(ROOT / "scripts" / "notebook"), "--no-browser", "--ServerApp.port=0"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        port = None
        deadline = time.monotonic() + 180
        while port is None and time.monotonic() < deadline:
            assert proc.poll() is None, f"scripts/notebook exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            found = URL.search(log.read_text(errors="replace"))
            port = int(found.group(1)) if found else None
            time.sleep(0.5)
        assert port, f"JupyterLab printed no URL in 180 s:\n{log.read_text()[-3000:]}"
        yield f"http://127.0.0.1:{port}", log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _get(url: str, token: str | None = TOKEN):
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_it_listens_on_loopback_and_wants_its_token(server):
    base, log = server
    assert _get(f"{base}/api/status")["started"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(f"{base}/api/contents", token=None)
    assert refused.value.code == 403
    assert TOKEN not in log.read_text(errors="replace"), "the token was printed in the server's log"


def test_it_opens_the_step_notebooks(server):
    base, _ = server
    listed = {item["name"] for item in _get(f"{base}/api/contents")["content"]}
    on_disk = {p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")}
    assert on_disk and on_disk <= listed


def test_its_default_kernel_is_python3_of_the_projects_environment(server):
    base, _ = server
    specs = _get(f"{base}/api/kernelspecs")
    assert specs["default"] == "python3"
    # the server runs from .venv, so ipykernel's spec ("python" = the server's own interpreter) is .venv's
    assert specs["kernelspecs"]["python3"]["spec"]["argv"][:3] == ["python", "-m", "ipykernel_launcher"]


def test_it_does_not_autosave_outputs_into_the_generated_notebooks(server):
    """The notebooks are `tunepath notebooks`' output: a Run All must not write its outputs back
    into the tracked files unless the user saves."""
    base, _ = server
    plugin = _get(f"{base}/lab/api/settings/@jupyterlab/docmanager-extension:plugin")
    # overrides.json changes the schema's default, which applies unless the user set their own
    assert plugin["schema"]["properties"]["autosave"]["default"] is False
    assert "autosave" not in plugin["settings"]
