"""The seed systems that had no working row: siege and JMeter 5.6.3 (load-generators step), mod_jk
(proxy step). What the pages print (a reader's commands, never a secret), where the proxy listens,
how mod_jk's files are written, and, live, siege and JMeter run and parsed on this machine."""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import unavailable

from tunepath.evidence.recorder import Masker
from tunepath.live.hosts import LocalHost
from tunepath.live.httpd import SECRET_PLACEHOLDER, Httpd, jk_conf, listen_address, workers_properties
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.parse.reports import parse_report
from tunepath.steps import plan, variant_config
from tunepath.steps.load_generators import JMETER_PLAN_XML, STEP as LOADGEN, jmeter_too_old, siege_rc

pytestmark = pytest.mark.fast

SECRET = "s3cr3t-AJP-value_0123456789abc"        # a stand-in for the per-run secret
URL = "http://${tomcat_ip}:8080/examples/servlets/servlet/HelloWorldExample"


def blocks(step: str, ctx: HostContext | None = None) -> dict:
    return {b.id: b for b in plan(step, ctx)}


# --- the load-generators page --------------------------------------------------------------------
def test_the_page_shows_the_siege_and_jmeter_commands_a_reader_types():
    b = blocks("load-generators")
    assert b["load-siege"].text.splitlines()[-1] == f"siege -R ~/.tunepath/siegerc -b -c 1280 -t 60S {URL} 2>&1"
    jmeter = b["load-jmeter"].text.splitlines()
    assert jmeter[1].startswith("jmeter -n -t ~/.tunepath/jmeter-plan.jmx -Jthreads=1280 -Jduration=60 "
                                "-Jhost=${tomcat_ip} -Jport=8080 -Jpath=/examples/servlets/servlet/HelloWorldExample ")
    assert "-e -o ~/.tunepath/jmeter-report" in jmeter[1] and "statistic_window=-1" in jmeter[1]
    assert jmeter[2] == "cat ~/.tunepath/jmeter-report/statistics.json"
    every = "\n".join(x.text for x in b.values()) + LOADGEN.verify_commands(HostContext())["load-generator-versions"]
    assert not re.search(r"/opt/tunepath|/root|/work/|\.cache", every)       # nothing of this machine
    assert {b[k].variant for k in ("siegerc", "load-siege")} == {"siege"}
    assert variant_config("load-generators", "siege") == TomcatConfig(access_log=False)


def test_siege_reads_only_the_step_s_settings():
    rc = dict(line.split(" = ") for line in siege_rc(HostContext(connections=64)).splitlines()
              if not line.startswith("#"))
    assert rc["connection"] == "keep-alive" and rc["protocol"] == "HTTP/1.1" and rc["parser"] == "false"
    assert rc["limit"] == "255" and rc["json_output"] == "false" and int(rc["failures"]) >= 100000
    assert "limit = 1280" in siege_rc(HostContext(connections=1280))        # no 10 s pause, no cap


def test_the_jmeter_plan_is_a_5_6_plan_driven_by_properties():
    root = ET.fromstring(JMETER_PLAN_XML)
    assert root.get("jmeter") == "5.6.3"
    props = {p.get("name"): p.text for p in root.iter() if p.get("name")}
    assert props["ThreadGroup.num_threads"] == "${__P(threads,8)}" and props["ThreadGroup.duration"] == "${__P(duration,15)}"
    assert props["HTTPSampler.domain"] == "${__P(host,127.0.0.1)}" and props["HTTPSampler.use_keepalive"] == "true"


def test_an_old_jmeter_is_skipped_with_the_reason():
    def client(out):
        return SimpleNamespace(run=lambda *a, **k: SimpleNamespace(stdout=out, exited=0))
    assert "2.13" in jmeter_too_old(client("Version 2.13 r1665067\nCopyright (c) 1998-2015\n"))[0]
    banner = "/_/   \\_\\_| /_/   \\_\\____|_| |_|_____|  \\___/|_| 5.6.3\n\nCopyright (c) 1999-2024\n"
    assert jmeter_too_old(client(banner)) == []


# --- the proxy page: mod_jk, and where httpd listens -----------------------------------------------
def test_the_jk_variant_writes_httpd_conf_and_workers_with_a_placeholder():
    b = blocks("proxy", HostContext(httpd_dir="/srv/httpd"))
    jk = b["httpd-jk"].text
    assert "LoadModule jk_module /usr/lib/apache2/modules/mod_jk.so" in jk and "mod_proxy" not in jk
    for line in ("JkWorkersFile /srv/httpd/workers.properties", "JkShmFile /srv/httpd/jk.shm",
                 "JkLogFile /srv/httpd/mod_jk.log", "JkMount /examples/* tomcat", "worker.tomcat.type=ajp13",
                 "worker.tomcat.host=127.0.0.1", "worker.tomcat.port=8009",
                 f"worker.tomcat.secret={SECRET_PLACEHOLDER}"):
        assert line in jk, line
    assert jk.endswith("apache2 -f /srv/httpd/httpd.conf -k start")
    assert variant_config("proxy", "jk") == variant_config("proxy", "ajp")      # the same AJP connector
    assert b["load-jk"].text.endswith(":8081/examples/servlets/servlet/HelloWorldExample")


def test_no_secret_in_any_rendered_text_once_masked():
    ctx = HostContext(httpd_dir="/srv/httpd", ajp_secret=SECRET, server_address="10.213.7.1")
    masker = Masker()
    masker.add(SECRET, SECRET_PLACEHOLDER)
    for step in ("proxy", "load-generators"):
        for block in plan(step, ctx):
            assert SECRET not in masker(block.text)
    assert SECRET in blocks("proxy", ctx)["httpd-jk"].text           # the run's own commands carry it …
    assert SECRET not in blocks("proxy")["httpd-jk"].text            # … the pages never do


@pytest.mark.parametrize("address, listen", [
    ("127.0.0.1", "Listen 127.0.0.1:8081"), ("127.0.1.1", "Listen 127.0.0.1:8081"), ("::1", "Listen 127.0.0.1:8081"),
    ("localhost", "Listen 127.0.0.1:8081"), ("10.213.7.1", "Listen 8081"),
    ("fd00::7", "Listen 8081"), ("${tomcat_ip}", "Listen 8081"), ("tomcat.example.net", "Listen 8081"),
])
def test_httpd_listens_where_the_clients_send_their_load(address, listen):
    ctx = HostContext(httpd_dir="/srv/httpd", server_address=address)
    for mode in ("http", "ajp", "jk"):
        text = blocks("proxy", ctx)[f"httpd-{mode}"].text
        assert re.findall(r"^Listen .*$", text, re.M) == [listen]
    ajp = blocks("proxy", ctx)["httpd-ajp"].text
    assert "ajp://127.0.0.1:8009/examples/" in ajp                          # the back end stays on loopback
    assert 'address="127.0.0.1"' in blocks("proxy", ctx)["ajp-connector"].text


def test_mod_jk_files_are_uploaded_0600_never_on_a_command_line(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "local-tmp"))
    (tmp_path / "local-tmp").mkdir()
    lines = []

    class Watched(LocalHost):
        def _run(self, command, timeout, display, pidfile=None):
            lines.append(command)
            return super()._run(command, timeout, display, pidfile)

    httpd = Httpd(Watched(), str(tmp_path / ".tunepath/httpd"), listen_address("10.213.7.1"))
    httpd.write_conf(jk_conf(httpd.dir, address=httpd.address), workers_properties(SECRET))
    for name in ("httpd.conf", "workers.properties"):
        f = Path(httpd.dir) / name
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(httpd.dir).stat().st_mode) == 0o700
    assert SECRET in Path(httpd.workers).read_text() and not any(SECRET in line for line in lines)
    assert not list((tmp_path / "local-tmp").iterdir())
    httpd.shred_conf()
    assert not Path(httpd.conf).exists() and not Path(httpd.workers).exists()


def test_a_missing_mod_jk_is_a_skip_reason():
    answers = {"command -v apache2 && ls /usr/lib/apache2/modules/mod_jk.so": 2, "command -v apache2": 0}
    host = SimpleNamespace(run=lambda cmd, **k: SimpleNamespace(exited=answers[cmd], stdout=""))
    assert "libapache2-mod-jk" in Httpd(host, "/srv/httpd").available("jk")


# --- live: siege and JMeter 5.6.3 on this machine ------------------------------------------------------
def _need(*tools: str) -> None:
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        msg = f"needs {', '.join(missing)} (scripts/bootstrap --load-tools installs them)"
        unavailable(msg)


@pytest.fixture()
def http_server(tmp_path):
    """``python3 -m http.server`` (HTTP/1.1, keep-alive) on a free loopback port; stopped by its PID."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_text("<html><body>hello</body></html>\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--protocol",
                             "HTTP/1.1", "-d", str(tmp_path / "www")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _run_variant(variant: str, port: int, home: Path) -> str:
    """The step's own files and load command for ``variant``, run with HOME in a temporary directory."""
    ctx = HostContext(server_address="127.0.0.1", port=port, path="/index.html", connections=4, threads=1,
                      duration_s=3)
    b = {x.id: x for x in LOADGEN.plan(ctx)}
    (home / ".tunepath").mkdir(exist_ok=True)
    files = {"siege": ("siegerc", "siegerc"), "jmeter": ("jmeter-plan", "jmeter-plan.jmx")}
    block, name = files[variant]
    (home / ".tunepath" / name).write_text(b[block].text + "\n")
    env = {**os.environ, "HOME": str(home)}
    proc = subprocess.run(["bash", "-c", b[f"load-{variant}"].text], cwd=home, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.system
def test_siege_runs_and_parses(http_server, tmp_path):
    _need("siege")
    report = parse_report(_run_variant("siege", http_server, tmp_path))
    assert report.tool == "siege" and report.connections == 4 and report.requests > 0
    assert 2.0 <= report.duration_s <= 3.05                   # siege's -t 3S: until the start of second 3
    assert report.requests_per_sec == pytest.approx(report.requests / report.duration_s, rel=0.01)
    assert report.latency_ms.avg > 0 and report.requests_per_sec_trusted


@pytest.mark.system
def test_jmeter_5_6_runs_headless_and_parses(http_server, tmp_path):
    _need("jmeter", "java")
    out = _run_variant("jmeter", http_server, tmp_path)
    report = parse_report(out)
    assert report.tool == "jmeter" and report.requests > 0 and report.socket_errors["read"] == 0
    assert report.requests_per_sec == pytest.approx(report.requests / report.duration_s, rel=0.2)
    assert report.percentiles_ms["99"] is not None and report.percentiles_ms["50"] <= report.percentiles_ms["99"]
    assert report.requests_per_sec_trusted and report.problems == []
    assert (tmp_path / ".tunepath" / "jmeter-report" / "statistics.json").is_file()
