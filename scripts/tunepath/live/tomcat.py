"""Apache Tomcat on the server host: install, configure, start, wait, stop.

Everything goes through a :class:`~tunepath.live.hosts.Host`, so the same code drives this
machine and a remote server. Starts raise the open-file limit as far as the host's hard
limit allows (the original's ``ulimit -n 65535 && startup.sh`` starts nothing where the
hard limit is lower) and report the value obtained; readiness is polled on the benchmark
URL, never assumed after a fixed sleep; stops wait for the JVM to exit (``CATALINA_PID``).
Every path enters a command through :func:`tunepath.model.shell.quote`, so a home with a
space or a quote stays one word. A ``server.xml`` written here may hold the AJP secret: it is
created 0600 on both machines before its first byte is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.parse.java import java_major  # re-exported: the run reads the server's
from tunepath.live.tomcatconf import TLS_DIR, TomcatConfig, open_examples_command, render_server_xml, setenv_command
from tunepath.model.shell import path as shell_path, port as shell_port, quote
from tunepath.versions import TOMCAT_SHA512, TOMCAT_VERSION  # pinned there, re-exported here

__all__ = ["Tomcat", "TOMCAT_VERSION", "TOMCAT_SHA512", "java_major", "java_binary", "sha512_of"]

BACKUP_SUFFIX = ".tunepath-orig"


def sha512_of(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha512").hexdigest()


def java_binary(java_home: str | None) -> str:
    """``java`` of the JDK at ``java_home``, quoted for a command; the one on the PATH without one."""
    return shell_path(java_home, "bin/java", what="java_home") if java_home else "java"


class Tomcat:
    """One Tomcat installation (``home``) on ``host``."""

    def __init__(self, host: Host, home: str, port: int = 8080,
                 path: str = "/examples/servlets/servlet/HelloWorldExample"):
        self.host = host
        self.home = home.rstrip("/")
        self.port = port
        self.path = path
        self.log_offset = 0            # catalina.out's size when the last configuration was written
        self._original: str | None = None   # the saved original server.xml, once read

    # -- paths ---------------------------------------------------------------------
    @property
    def pidfile(self) -> str:
        return f"{self.home}/temp/tomcat.pid"

    @property
    def server_xml(self) -> str:
        return f"{self.home}/conf/server.xml"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{shell_port(self.port, 'Tomcat port')}{self.path}"

    def file(self, relative: str) -> str:
        """A file under the Tomcat home, quoted for a command."""
        return shell_path(self.home, relative, what="Tomcat home")

    def _setenv_files(self) -> tuple[str, str, str]:
        """bin/setenv.sh, its backup, and the marker saying there was none; quoted."""
        return tuple(self.file(f"bin/setenv.sh{suffix}") for suffix in ("", BACKUP_SUFFIX, ".tunepath-none"))

    def _env(self) -> str:
        return f"export CATALINA_PID={self.file('temp/tomcat.pid')}; "

    # -- install ---------------------------------------------------------------------
    def installed_version(self) -> str | None:
        version = self.file("bin/version.sh")
        r = self.host.run(f"test -x {version} && {version}", check=False, timeout=60)
        m = re.search(r"Server number:\s*(\S+)", r.stdout)
        return ".".join(m.group(1).split(".")[:3]) if m else None

    def check_java(self) -> str:
        r = self.host.run("java -version 2>&1", check=False, timeout=30)
        major = java_major(r.stdout)
        if major is None:
            raise TunepathError(f"on {self.host.name}: no Java found (`java -version` failed). Tomcat 11 "
                                "needs a JDK 17 or later: install one (e.g. apt-get install openjdk-17-jdk)")
        if major < 17:
            raise TunepathError(f"on {self.host.name}: Java {major} is too old; Tomcat 11 needs 17 or later")
        return r.stdout.strip().splitlines()[0]

    def install(self, tarball: Path | None = None, url: str | None = None, sha512: str | None = None) -> str:
        """Install from a local tarball (uploaded) or a URL fetched on the host; checksum verified.

        Never replaces an existing directory: a home that holds something other than this
        Tomcat version is an error to resolve by hand. ``home`` must be an absolute path.
        """
        have = self.installed_version()
        want = re.search(r"(\d+\.\d+\.\d+)", str(tarball or url or ""))
        if have and (not want or have == want.group(1)):
            return have
        home = quote(self.home, "Tomcat home")
        if self.host.run(f"test -e {home}", check=False, timeout=15).exited == 0:
            raise TunepathError(f"on {self.host.name}: {self.home} exists but holds no Tomcat "
                                f"{want.group(1) if want else ''} (found {have or 'something else'}); "
                                "move it away or choose another --tomcat-home")
        if not sha512:
            raise TunepathError("refusing to install Tomcat without a SHA-512 checksum to verify")
        if not tarball and not url:
            raise TunepathError(f"on {self.host.name}: Tomcat is not installed in {self.home}; give --tomcat-tarball "
                                "FILE (scripts/run passes the one it fetched) or --tomcat-url URL")
        if url and re.match(r"^[a-z]+://[^/]*@", url):
            raise TunepathError("the Tomcat URL carries credentials: they would be recorded; use a plain URL "
                                "or upload a local tarball")
        name = tarball.name if tarball else url.rsplit("/", 1)[-1]
        remote = f"~/.tunepath/cache/{name}"
        qremote = quote(remote, "Tomcat tarball")
        self.host.run("mkdir -p ~/.tunepath/cache", timeout=30)
        if tarball:
            if sha512_of(tarball) != sha512:
                raise TunepathError(f"{tarball}: SHA-512 mismatch: the local tarball is not the pinned "
                                    "release; delete it and fetch it again")
            self.host.put(tarball, remote)
        elif url:
            self.host.run(f"curl -fsSL --retry 2 -o {qremote} {quote(url, 'Tomcat URL')} || wget -qO {qremote} "
                          f"{quote(url, 'Tomcat URL')}", timeout=600,
                          hint="the server could not download Tomcat; upload a local tarball instead")
        else:
            raise TunepathError("Tomcat install needs a tarball or a URL")
        got = self.host.run(f"sha512sum {qremote}", timeout=120).stdout.split()[0]
        if got != sha512:
            self.host.run(f"rm -f {qremote}", check=False)
            raise TunepathError(f"on {self.host.name}: SHA-512 of {remote} is {got[:16]}…, expected "
                                f"{sha512[:16]}…: download corrupted or not the release; nothing installed")
        # unpack beside the target, then move the one top-level directory into place
        self.host.run(f"parent=$(dirname {home}); mkdir -p \"$parent\" && tmp=$(mktemp -d \"$parent/.tunepath-unpack.XXXX\") "
                      f"&& tar xzf {qremote} -C \"$tmp\" && set -- \"$tmp\"/* && [ $# = 1 ] && mv \"$1\" {home} "
                      f"&& rmdir \"$tmp\"", timeout=300, hint="the tarball should hold one apache-tomcat-* directory")
        version = self.installed_version()
        if not version:
            raise TunepathError(f"on {self.host.name}: Tomcat unpacked but {self.home}/bin/version.sh fails")
        return version

    def open_examples(self) -> bool:
        """Let remote clients reach the examples webapp (its valve admits only local ones:
        :func:`~tunepath.live.tomcatconf.open_examples_command`).
        The backup it keeps marks the opening: every :meth:`configure` opens it again, since the
        clean-up after each step (:meth:`restore_config`) puts the original back. True if it was closed."""
        ctx = self.file("webapps/examples/META-INF/context.xml")
        orig = self.file(f"webapps/examples/META-INF/context.xml{BACKUP_SUFFIX}")
        r = self.host.run(f"before=$(cksum < {ctx}); test -f {orig} || cp -p {ctx} {orig}; "
                          + self._reopen_examples() + f"; [ \"$before\" = \"$(cksum < {ctx})\" ] || echo opened",
                          timeout=30)
        return "opened" in r.stdout

    def _reopen_examples(self) -> str:
        """Opens the examples webapp to remote clients if the setup step did (its backup exists)."""
        ctx, orig = (self.file(f"webapps/examples/META-INF/context.xml{s}") for s in ("", BACKUP_SUFFIX))
        return f"{{ [ ! -f {orig} ] || {{ {open_examples_command(ctx)}; }}; }}"

    # -- configuration -------------------------------------------------------------------
    def backup(self) -> None:
        """Save the original server.xml (and an existing bin/setenv.sh) once; every configuration
        is rendered from the saved server.xml."""
        xml, xml_orig = self.file("conf/server.xml"), self.file(f"conf/server.xml{BACKUP_SUFFIX}")
        setenv, setenv_orig, setenv_none = self._setenv_files()
        self.host.run(f"test -f {xml_orig} || cp -p {xml} {xml_orig}; "
                      f"if [ ! -e {setenv_orig} ] && [ ! -e {setenv_none} ]; then "
                      f"if [ -f {setenv} ]; then cp -p {setenv} {setenv_orig}; "
                      f"else touch {setenv_none}; fi; fi", timeout=30)

    def original_server_xml(self) -> str:
        """The saved original server.xml: read once per Tomcat object (a step's session), since every
        configuration is rendered from it and nothing else writes the backup."""
        if self._original is None:
            self.backup()
            self._original = self.host.run(f"cat {self.file(f'conf/server.xml{BACKUP_SUFFIX}')}", timeout=30).stdout
        return self._original

    def configure(self, config: TomcatConfig) -> str:
        """Write server.xml (and setenv.sh) for ``config``, the examples webapp opened to remote
        clients if the setup step opened it; returns the server.xml written.

        The file may hold the AJP secret: it is written 0600 here (``mkstemp``), created empty
        and 0600 on the host before the upload fills it, and moved into place with that mode."""
        text = render_server_xml(self.original_server_xml(), config)
        new, xml = self.file("conf/server.xml.tunepath-new"), self.file("conf/server.xml")
        fd, name = tempfile.mkstemp(suffix=".xml")
        local = Path(name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            self.host.run(f"rm -f {new} && (umask 077 && : > {new})", timeout=30)
            self.host.put(local, f"{self.server_xml}.tunepath-new")
        finally:
            local.unlink(missing_ok=True)
        # one round trip: the file into place, setenv.sh, and catalina.out's size (where the JVM's
        # own warnings of the coming start begin: :attr:`log_offset`)
        r = self.host.run(f"set -e\nchmod 600 {new} && mv {new} {xml} && {self._reopen_examples()}\n"
                          f"{setenv_command(self.home, config)}\n"
                          f"stat -c %s {self.file('logs/catalina.out')} 2>/dev/null || echo 0", timeout=30)
        size = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "0"
        self.log_offset = int(size) if size.isdigit() else 0
        return text

    def restore_config(self) -> bool:
        """Put back the original server.xml, bin/setenv.sh and the examples webapp's context.xml, and
        remove the TLS step's certificate and key; True if anything changed. The backups stay: they
        are the originals for the next run."""
        setenv, setenv_orig, setenv_none = self._setenv_files()
        tls = self.file(TLS_DIR)
        files = f"{self.file('conf/server.xml')} {self.file('webapps/examples/META-INF/context.xml')}"
        orig = f'"$f{BACKUP_SUFFIX}"'
        r = self.host.run(
            f"for f in {files}; do if [ -f {orig} ]; then "
            f"cmp -s {orig} \"$f\" || {{ cp -p {orig} \"$f\" && echo restored; }}; fi; done; "
            f"if [ -f {setenv_orig} ]; then cmp -s {setenv_orig} {setenv} || "
            f"{{ cp -p {setenv_orig} {setenv} && echo restored; }}; "
            f"elif [ -e {setenv_none} ] && [ -e {setenv} ]; then rm -f {setenv} && echo restored; fi; "
            f"if [ -e {tls} ]; then rm -rf {tls} && echo restored; fi",
            timeout=30, check=False)
        return "restored" in r.stdout

    # -- lifecycle ---------------------------------------------------------------------------
    def pid(self) -> int | None:
        pidfile = self.file("temp/tomcat.pid")
        r = self.host.run(f"test -f {pidfile} && pid=$(cat {pidfile}) && kill -0 \"$pid\" 2>/dev/null "
                          f"&& echo \"$pid\"", check=False, timeout=15)
        return int(r.stdout.strip()) if r.stdout.strip().isdigit() else None

    def wait_ready(self, timeout: float = 90) -> float:
        """Poll the benchmark URL until it answers 200; returns the seconds it took."""
        start = time.monotonic()
        pidfile = self.file("temp/tomcat.pid")
        loop = (f"end=$((SECONDS+{int(timeout)})); while [ $SECONDS -lt $end ]; do "
                f"code=$(curl -s -o /dev/null -w '%{{http_code}}' --max-time 2 {quote(self.url, 'URL')}); "
                f"[ \"$code\" = 200 ] && exit 0; "
                f"[ -f {pidfile} ] && ! kill -0 \"$(cat {pidfile})\" 2>/dev/null && exit 3; "
                f"sleep 0.2; done; echo \"$code\"; exit 2")
        r = self.host.run(loop, timeout=timeout + 10, check=False)
        if r.exited == 0:
            return time.monotonic() - start
        code = r.stdout.strip().splitlines()[-1] if r.exited == 2 and r.stdout.strip() else ""
        why = ("the JVM exited" if r.exited == 3 else f"no HTTP 200 within {timeout:g} s"
               + (f"; it answered {code}" if code.isdigit() and code != "000" else ""))
        logs = self.file("logs")
        severe = self.host.run(f"grep -h SEVERE {logs}/catalina.out {logs}/catalina.*.log 2>/dev/null | tail -n 1",
                               check=False).stdout.strip()
        tail = self.host.run(f"tail -n 5 {logs}/catalina.out 2>/dev/null", check=False).stdout.strip()
        said = (f"Its last error (logs/catalina.*.log): {severe}" if severe
                else f"Last line of catalina.out: {tail.splitlines()[-1] if tail else 'none'}")
        raise TunepathError(f"on {self.host.name}: Tomcat did not become ready at {self.url} ({why}). {said}")

    def stop(self, timeout: float = 30) -> None:
        """Stop and wait for the JVM to exit, forcing it after ``timeout`` seconds: one round trip.
        SIGTERM runs the JVM's shutdown hooks, where Catalina stops as it does for shutdown.sh,
        without starting a second JVM to send the shutdown command. A JVM that has exited but is
        not yet reaped (a zombie: some container inits reap late) counts as stopped."""
        pidfile = self.file("temp/tomcat.pid")
        tenths = max(1, round(timeout * 10))
        alive = "case \"$(sed 's/.*) //' /proc/$p/stat 2>/dev/null)\" in ''|Z*) false;; esac"
        r = self.host.run(f"pf={pidfile}; p=$(cat \"$pf\" 2>/dev/null); case $p in ''|*[!0-9]*) rm -f \"$pf\"; exit 0;; esac; "
                          f"kill -TERM \"$p\" 2>/dev/null || {{ rm -f \"$pf\"; exit 0; }}; "
                          f"n=0; while {alive}; do "
                          f"[ $n -eq {tenths} ] && kill -KILL \"$p\" 2>/dev/null; [ $n -ge {tenths + 20} ] && break; "
                          f"n=$((n+1)); sleep 0.1; done; "
                          f"{alive} && exit 3; rm -f \"$pf\"", timeout=timeout + 30, check=False)
        if r.exited == 3:
            raise TunepathError(f"on {self.host.name}: Tomcat would not stop (pid file {self.pidfile})")

    def sample(self, with_online: bool = False) -> tuple[int | None, float | None, list[int], str]:
        """One round trip around a measurement: the JVM's pid and CPU seconds, the host's
        ``/proc/stat`` totals (the ``cpu`` line's numbers) and, ``with_online``, its online CPUs."""
        pidfile = self.file("temp/tomcat.pid")
        r = self.host.run(f"head -1 /proc/stat; echo; p=$(cat {pidfile} 2>/dev/null); "
                          f"if [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null; then echo \"$p\"; cat /proc/$p/stat; "
                          f"getconf CLK_TCK; else echo; echo; echo; fi"
                          + ("; cat /sys/devices/system/cpu/online" if with_online else "; echo"),
                          check=False, timeout=15)
        lines = (r.stdout.splitlines() + [""] * 6)[:6]
        stat = lines[0].split()
        jiffies = [int(v) for v in stat[1:9]] if stat and stat[0] == "cpu" else []
        pid = int(lines[2]) if lines[2].strip().isdigit() else None
        cpu = None
        if pid and ")" in lines[3] and lines[4].strip().isdigit():
            fields = lines[3].rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / int(lines[4])
        return pid, cpu, jiffies, lines[5].strip()
