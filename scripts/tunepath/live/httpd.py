"""Apache httpd in front of Tomcat: a private instance with mod_proxy_http or mod_proxy_ajp.

The instance has its own configuration file, PID file and logs under
``~/.tunepath/httpd/`` on the server, listens on loopback only, and is started and
stopped by its PID file; the distribution's own apache2 service is never touched.
The AJP secret is generated per run, written only on the server, and never recorded:
pages and records show the placeholder ``AJP_SECRET_GENERATED_PER_RUN``. Live, the
configuration is uploaded (never passed on a command line, where ``ps`` would show it) into
a file of mode 0600 in a directory of mode 0700, and removed when the instance stops.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.live.tomcatconf import AJP_PORT, ajp_attributes
from tunepath.model.shell import check_text, heredoc, path, port, quote

__all__ = ["PROXY_PORT", "HTTPD_DIR", "SECRET_PLACEHOLDER", "httpd_conf", "start_command", "Httpd"]

PROXY_PORT = 8081
HTTPD_DIR = "~/.tunepath/httpd"
SECRET_PLACEHOLDER = "AJP_SECRET_GENERATED_PER_RUN"
MODULES = "/usr/lib/apache2/modules"


def _directive(value: str, what: str) -> str:
    r"""A value of an httpd directive: as it is, or in double quotes (with ``\`` and ``"`` escaped as
    ``\\`` and ``\"``, which httpd reads back) when it holds anything else."""
    check_text(value, what)
    if re.fullmatch(r"[\w@%+=:,./~${}-]+", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def httpd_conf(mode: str, directory: str, tomcat_port: int = 8080, secret: str = SECRET_PLACEHOLDER,
               listen_port: int = PROXY_PORT, user: str = "www-data") -> str:
    """The whole httpd.conf of the private instance; ``mode`` is "http" or "ajp"."""
    if mode == "http":
        backend, module = f"http://127.0.0.1:{port(tomcat_port, 'Tomcat port')}/examples/", "proxy_http"
        extra = ""
    elif mode == "ajp":
        backend, module = f"ajp://127.0.0.1:{AJP_PORT}/examples/", "proxy_ajp"
        extra = f" secret={ajp_attributes(secret)['secret']}"      # validated: letters, digits, - and _
    else:
        raise TunepathError(f"unknown proxy mode {mode!r}: use http or ajp")
    pidfile, errorlog = (_directive(f"{directory}/{name}", "httpd_dir") for name in ("httpd.pid", "error.log"))
    directory, user = _directive(directory, "httpd_dir"), _directive(user, "httpd user")
    listen_port = port(listen_port, "proxy port")
    return "\n".join([
        f"# tunepath: Apache httpd in front of Tomcat, mod_{module}",
        f"ServerRoot {directory}",
        "ServerName 127.0.0.1",
        f"Listen 127.0.0.1:{listen_port}",
        f"PidFile {pidfile}",
        f"ErrorLog {errorlog}",
        "LogLevel warn",
        f"User {user}",
        f"Group {user}",
        f"LoadModule mpm_event_module {MODULES}/mod_mpm_event.so",
        f"LoadModule authz_core_module {MODULES}/mod_authz_core.so",
        f"LoadModule proxy_module {MODULES}/mod_proxy.so",
        f"LoadModule {module}_module {MODULES}/mod_{module}.so",
        "KeepAlive On",
        "MaxKeepAliveRequests 0",
        "ServerLimit 4",
        "ThreadsPerChild 64",
        "MaxRequestWorkers 256",
        f"ProxyPass /examples/ {backend}{extra}",
        f"ProxyPassReverse /examples/ {backend}",
        "",
    ])


def start_command(directory: str, conf_text: str) -> str:
    """What a reader runs: write the configuration, start the instance from it."""
    conf = path(directory, "httpd.conf", what="httpd_dir")
    return (f"mkdir -p {quote(directory, 'httpd_dir')} && {heredoc(conf, conf_text)}\n"
            f"apache2 -f {conf} -k start")


class Httpd:
    """The private httpd instance on the server."""

    def __init__(self, host: Host, directory: str):
        self.host = host
        self.dir = directory

    @property
    def conf(self) -> str:
        return f"{self.dir}/httpd.conf"

    def available(self) -> str | None:
        """None if httpd and the proxy modules are there, else the reason."""
        r = self.host.run(f"command -v apache2 && ls {MODULES}/mod_proxy_ajp.so {MODULES}/mod_proxy_http.so",
                          check=False, timeout=15)
        return None if r.exited == 0 else "Apache httpd is not installed on the server (Debian: apache2)"

    def start(self, conf_text: str) -> None:
        """Write the configuration (see :meth:`write_conf`), start the instance, wait until it answers."""
        self.stop()
        self.write_conf(conf_text)
        self.host.run(f"apache2 -f {path(self.conf, what='httpd_dir')} -k start", timeout=60,
                      hint=f"see {self.dir}/error.log on the server")
        self.wait_ready()

    def write_conf(self, conf_text: str) -> None:
        """Upload the configuration: it may hold the AJP secret, so it never goes on a command line,
        and it is created 0600 (the directory 0700) before its first byte is written."""
        directory, conf = quote(self.dir, "httpd_dir"), path(self.conf, what="httpd_dir")
        fd, name = tempfile.mkstemp(suffix=".conf")          # 0600 on this machine too
        local = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(conf_text)
            self.host.run(f"umask 077 && mkdir -p {directory} && chmod 700 {directory} && rm -f {conf} "
                          f"&& : > {conf}", timeout=30)
            self.host.put(local, self.conf)
            self.host.run(f"chmod 600 {conf}", timeout=15)
        finally:
            local.unlink(missing_ok=True)

    def wait_ready(self) -> None:
        url = f"http://127.0.0.1:{PROXY_PORT}/examples/servlets/servlet/HelloWorldExample"
        probe = f"curl -s -o /dev/null -w '%{{http_code}}' {quote(url)}"
        r = self.host.run(f"for i in $(seq 1 50); do [ \"$({probe})\" = 200 ] "
                          "&& exit 0; sleep 0.2; done; exit 1", check=False, timeout=30)
        if r.exited != 0:
            log = self.host.run(f"tail -n 3 {path(self.dir, 'error.log')}", check=False, timeout=15).stdout.strip()
            raise TunepathError(f"on {self.host.name}: httpd in front of Tomcat does not answer 200 at {url}"
                                f" ({log.splitlines()[-1] if log else 'no error log'})")

    def stop(self) -> None:
        """Stop the instance by its PID file and wait until it is gone."""
        pid = path(self.dir, "httpd.pid", what="httpd_dir")
        self.host.run(f"if [ -s {pid} ]; then p=$(cat {pid}); case $p in ''|*[!0-9]*) p=;; esac; "
                      f"if [ -n \"$p\" ]; then kill -TERM $p 2>/dev/null; "
                      f"for i in $(seq 1 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; "
                      f"kill -KILL $p 2>/dev/null; fi; rm -f {pid}; fi", check=False, timeout=30)

    def shred_conf(self) -> None:
        """The configuration holds the AJP secret: remove it once the instance is stopped."""
        self.host.run(f"rm -f {path(self.conf, what='httpd_dir')}", check=False, timeout=15)
