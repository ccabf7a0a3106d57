"""Apache httpd in front of Tomcat: a private instance with mod_proxy_http or mod_proxy_ajp.

The instance has its own configuration file, PID file and logs under
``~/.tunepath/httpd/`` on the server, listens on loopback only, and is started and
stopped by its PID file; the distribution's own apache2 service is never touched.
The AJP secret is generated per run, written only on the server, and never recorded:
pages and records show the placeholder ``AJP_SECRET_GENERATED_PER_RUN``.
"""

from __future__ import annotations


from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.live.tomcatconf import AJP_PORT

__all__ = ["PROXY_PORT", "HTTPD_DIR", "SECRET_PLACEHOLDER", "httpd_conf", "Httpd"]

PROXY_PORT = 8081
HTTPD_DIR = "~/.tunepath/httpd"
SECRET_PLACEHOLDER = "AJP_SECRET_GENERATED_PER_RUN"
MODULES = "/usr/lib/apache2/modules"


def httpd_conf(mode: str, directory: str, tomcat_port: int = 8080, secret: str = SECRET_PLACEHOLDER,
               listen_port: int = PROXY_PORT, user: str = "www-data") -> str:
    """The whole httpd.conf of the private instance; ``mode`` is "http" or "ajp"."""
    if mode == "http":
        backend, module = f"http://127.0.0.1:{tomcat_port}/examples/", "proxy_http"
        extra = ""
    elif mode == "ajp":
        backend, module = f"ajp://127.0.0.1:{AJP_PORT}/examples/", "proxy_ajp"
        extra = f" secret={secret}"
    else:
        raise TunepathError(f"unknown proxy mode {mode!r}: use http or ajp")
    return "\n".join([
        f"# tunepath: Apache httpd in front of Tomcat, mod_{module}",
        f"ServerRoot {directory}",
        "ServerName 127.0.0.1",
        f"Listen 127.0.0.1:{listen_port}",
        f"PidFile {directory}/httpd.pid",
        f"ErrorLog {directory}/error.log",
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
        self.stop()
        self.host.run(f"mkdir -p {self.dir} && cat > {self.conf} <<'EOF'\n{conf_text}EOF\n"
                      f"apache2 -f {self.conf} -k start", timeout=60,
                      hint=f"see {self.dir}/error.log on the server")
        self.wait_ready()

    def wait_ready(self) -> None:
        url = f"http://127.0.0.1:{PROXY_PORT}/examples/servlets/servlet/HelloWorldExample"
        r = self.host.run(f"for i in $(seq 1 50); do [ \"$(curl -s -o /dev/null -w '%{{http_code}}' {url})\" = 200 ] "
                          "&& exit 0; sleep 0.2; done; exit 1", check=False, timeout=30)
        if r.exited != 0:
            log = self.host.run(f"tail -n 3 {self.dir}/error.log", check=False, timeout=15).stdout.strip()
            raise TunepathError(f"on {self.host.name}: httpd in front of Tomcat does not answer 200 at {url}"
                                f" ({log.splitlines()[-1] if log else 'no error log'})")

    def stop(self) -> None:
        """Stop the instance by its PID file and wait until it is gone."""
        pid = f"{self.dir}/httpd.pid"
        self.host.run(f"if [ -s {pid} ]; then p=$(cat {pid}); kill -TERM $p 2>/dev/null; "
                      f"for i in $(seq 1 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; "
                      f"kill -KILL $p 2>/dev/null; rm -f {pid}; fi", check=False, timeout=30)

    def shred_conf(self) -> None:
        """The configuration holds the AJP secret: remove it once the instance is stopped."""
        self.host.run(f"rm -f {self.conf}", check=False, timeout=15)
