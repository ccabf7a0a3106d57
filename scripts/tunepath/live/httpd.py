"""Apache httpd in front of Tomcat: a private instance with mod_proxy_http, mod_proxy_ajp or mod_jk.

The instance has its own configuration file, PID file and logs under ``~/.tunepath/httpd/`` on
the server, and is started and stopped by its PID file; the distribution's own apache2 service is
never touched. It listens where the clients send their load (:func:`listen_address`): on loopback
when they run on the server, on the server's address when they reach it over a network (a lab's
namespaces, separate hosts), and on every address when the pages show the commands for the
reader's ``${tomcat_ip}``. Tomcat's connectors stay behind it on 127.0.0.1, and the AJP connector
(``live/tomcatconf``) is bound to loopback only, whichever way the proxy faces.

The AJP secret (mod_proxy_ajp's ``secret=``, mod_jk's ``worker.<name>.secret``) is generated per
run, written only on the server, and never recorded: pages and records show the placeholder
``AJP_SECRET_GENERATED_PER_RUN``. Live, the files that hold it (``httpd.conf``,
``workers.properties``) are uploaded (never passed on a command line, where ``ps`` would show
them) into files of mode 0600 in a directory of mode 0700, and removed when the instance stops.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tempfile
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.live.tomcatconf import AJP_PORT, ajp_attributes
from tunepath.model.context import HostContext
from tunepath.model.shell import check_text, heredoc, path, port, quote

__all__ = ["PROXY_PORT", "HTTPD_DIR", "SECRET_PLACEHOLDER", "JK_WORKER", "listen_address", "httpd_conf",
           "jk_conf", "workers_properties", "start_command", "Httpd"]

PROXY_PORT = HostContext.proxy_port   # a run on another HTTP port than 8080 has its own (ports_for)
HTTPD_DIR = "~/.tunepath/httpd"
SECRET_PLACEHOLDER = "AJP_SECRET_GENERATED_PER_RUN"
MODULES = "/usr/lib/apache2/modules"
JK_WORKER = "tomcat"                   # mod_jk's name for the AJP worker that reaches Tomcat


def _directive(value: str, what: str) -> str:
    r"""A value of an httpd directive: as it is, or in double quotes (with ``\`` and ``"`` escaped as
    ``\\`` and ``\"``, which httpd reads back) when it holds anything else."""
    check_text(value, what)
    if re.fullmatch(r"[\w@%+=:,./~${}-]+", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def listen_address(server_address: str | None) -> str | None:
    """Where the private httpd listens: ``127.0.0.1`` when the clients reach the server over
    loopback (or no address is known), else None: every address, as Tomcat's own HTTP connector
    does. Never the address itself: a run records its commands with host names masked, and a page
    renders them again from the masked context, so the rule must give one text for both."""
    if not server_address or server_address == "localhost":
        return "127.0.0.1"
    try:
        ip = ipaddress.ip_address(server_address.strip("[]"))
    except ValueError:
        return None
    return "127.0.0.1" if ip.is_loopback else None


def _listen(address: str | None, listen_port: int) -> str:
    number = port(listen_port, "proxy port")
    if address is None:
        return f"Listen {number}"
    host = str(ipaddress.ip_address(address))
    return f"Listen [{host}]:{number}" if ":" in host else f"Listen {host}:{number}"


def _common(module: str, directory: str, listen: str, user: str) -> list[str]:
    """What every variant's httpd.conf holds: the private paths, the modules, the worker pool."""
    pidfile, errorlog = (_directive(f"{directory}/{name}", "httpd_dir") for name in ("httpd.pid", "error.log"))
    root, user = _directive(directory, "httpd_dir"), _directive(user, "httpd user")
    proxy = [f"LoadModule proxy_module {MODULES}/mod_proxy.so"] if module.startswith("proxy_") else []
    return [
        f"# tunepath: Apache httpd in front of Tomcat, mod_{module}",
        f"ServerRoot {root}",
        "ServerName 127.0.0.1",
        listen,
        f"PidFile {pidfile}",
        f"ErrorLog {errorlog}",
        "LogLevel warn",
        f"User {user}",
        f"Group {user}",
        f"LoadModule mpm_event_module {MODULES}/mod_mpm_event.so",
        f"LoadModule authz_core_module {MODULES}/mod_authz_core.so",
        *proxy,
        f"LoadModule {module}_module {MODULES}/mod_{module}.so",
        "KeepAlive On",
        "MaxKeepAliveRequests 0",
        "ServerLimit 4",
        "ThreadsPerChild 64",
        "MaxRequestWorkers 256",
    ]


def httpd_conf(mode: str, directory: str, tomcat_port: int = 8080, secret: str = SECRET_PLACEHOLDER,
               listen_port: int = PROXY_PORT, user: str = "www-data", address: str | None = "127.0.0.1",
               ajp_port: int = AJP_PORT) -> str:
    """The whole httpd.conf of the private instance with mod_proxy; ``mode`` is "http" or "ajp"
    (mod_jk's is :func:`jk_conf`). ``address``: where it listens (:func:`listen_address`)."""
    if mode == "http":
        backend, module = f"http://127.0.0.1:{port(tomcat_port, 'Tomcat port')}/examples/", "proxy_http"
        extra = ""
    elif mode == "ajp":
        backend, module = f"ajp://127.0.0.1:{port(ajp_port, 'AJP port')}/examples/", "proxy_ajp"
        extra = f" secret={ajp_attributes(secret)['secret']}"      # validated: letters, digits, - and _
    else:
        raise TunepathError(f"unknown proxy mode {mode!r}: use http or ajp (mod_jk: jk_conf)")
    return "\n".join([
        *_common(module, directory, _listen(address, listen_port), user),
        f"ProxyPass /examples/ {backend}{extra}",
        f"ProxyPassReverse /examples/ {backend}",
        "",
    ])


def jk_conf(directory: str, listen_port: int = PROXY_PORT, user: str = "www-data",
            address: str | None = "127.0.0.1") -> str:
    """The httpd.conf of the private instance with mod_jk: its workers file, shared memory and log
    in the private directory, ``/examples/*`` mounted on the AJP worker (:func:`workers_properties`)."""
    files = {name: _directive(f"{directory}/{name}", "httpd_dir") for name in ("workers.properties", "jk.shm",
                                                                              "mod_jk.log")}
    return "\n".join([
        *_common("jk", directory, _listen(address, listen_port), user),
        f"JkWorkersFile {files['workers.properties']}",
        f"JkShmFile {files['jk.shm']}",
        f"JkLogFile {files['mod_jk.log']}",
        "JkLogLevel warn",
        f"JkMount /examples/* {JK_WORKER}",
        "",
    ])


def workers_properties(secret: str = SECRET_PLACEHOLDER, ajp_port: int = AJP_PORT) -> str:
    """mod_jk's workers: one AJP/1.3 worker to Tomcat's AJP connector on loopback, with the secret."""
    secret = ajp_attributes(secret)["secret"]                       # validated: letters, digits, - and _
    return "\n".join([
        "# tunepath: mod_jk's worker, Tomcat's AJP connector on loopback (it requires the secret)",
        f"worker.list={JK_WORKER}",
        f"worker.{JK_WORKER}.type=ajp13",
        f"worker.{JK_WORKER}.host=127.0.0.1",
        f"worker.{JK_WORKER}.port={port(ajp_port, 'AJP port')}",
        f"worker.{JK_WORKER}.secret={secret}",
        "",
    ])


def start_command(directory: str, conf_text: str, workers_text: str | None = None) -> str:
    """What a reader runs: write the configuration (and mod_jk's workers), start the instance."""
    conf = path(directory, "httpd.conf", what="httpd_dir")
    workers = ("\n" + heredoc(path(directory, "workers.properties", what="httpd_dir"), workers_text)
               if workers_text is not None else "")
    return (f"mkdir -p {quote(directory, 'httpd_dir')} && {heredoc(conf, conf_text)}{workers}\n"
            f"apache2 -f {conf} -k start")


class Httpd:
    """The private httpd instance on the server; ``address``: where it listens (:func:`listen_address`:
    None is every address), which is where :meth:`wait_ready` asks it."""

    def __init__(self, host: Host, directory: str, address: str | None = "127.0.0.1", listen_port: int = PROXY_PORT):
        self.host = host
        self.dir = directory
        self.address = address
        self.listen_port = listen_port

    @property
    def conf(self) -> str:
        return f"{self.dir}/httpd.conf"

    @property
    def workers(self) -> str:
        return f"{self.dir}/workers.properties"

    def available(self, mode: str = "http") -> str | None:
        """None if httpd and the module ``mode`` needs ("http", "ajp" or "jk") are there, else the reason."""
        module = {"jk": "mod_jk.so"}.get(mode, f"mod_proxy_{mode}.so")
        r = self.host.run(f"command -v apache2 && ls {MODULES}/{module}", check=False, timeout=15)
        if r.exited == 0:
            return None
        if mode == "jk" and self.host.run("command -v apache2", check=False, timeout=15).exited == 0:
            return "mod_jk is not installed on the server (Debian: libapache2-mod-jk)"
        return "Apache httpd is not installed on the server (Debian: apache2)"

    def start(self, conf_text: str, workers_text: str | None = None) -> None:
        """Write the configuration (see :meth:`write_conf`), start the instance, wait until it answers."""
        self.stop()
        self.write_conf(conf_text, workers_text)
        self.host.run(f"apache2 -f {path(self.conf, what='httpd_dir')} -k start", timeout=60,
                      hint=f"see {self.dir}/error.log on the server")
        self.wait_ready()

    def write_conf(self, conf_text: str, workers_text: str | None = None) -> None:
        """Upload the configuration (and mod_jk's workers): they may hold the AJP secret, so they never
        go on a command line, and each is created 0600 (the directory 0700) before its first byte is
        written."""
        self._upload(self.conf, conf_text)
        if workers_text is not None:
            self._upload(self.workers, workers_text)

    def _upload(self, target: str, text: str) -> None:
        directory, remote = quote(self.dir, "httpd_dir"), path(target, what="httpd_dir")
        fd, name = tempfile.mkstemp(suffix=".conf")          # 0600 on this machine too
        local = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            self.host.run(f"umask 077 && mkdir -p {directory} && chmod 700 {directory} && rm -f {remote} "
                          f"&& : > {remote}", timeout=30)
            self.host.put(local, target)
            self.host.run(f"chmod 600 {remote}", timeout=15)
        finally:
            local.unlink(missing_ok=True)

    def wait_ready(self) -> None:
        host = self.address or "127.0.0.1"
        url = f"http://{f'[{host}]' if ':' in host else host}:{self.listen_port}/examples/servlets/servlet/HelloWorldExample"
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
        """The configuration and mod_jk's workers hold the AJP secret: remove them once the instance
        is stopped."""
        self.host.run(f"rm -f {path(self.conf, what='httpd_dir')} {path(self.workers, what='httpd_dir')}",
                      check=False, timeout=15)
