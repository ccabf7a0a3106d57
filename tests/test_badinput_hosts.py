"""Bad input for the hosts layer: inventories, known_hosts files, host keys, uploads' modes.

Every hostile inventory ends in one TunepathError line naming the file and the key, never another
exception. known_hosts lines of any kind never crash a connection, against a real OpenSSH server
on loopback: ``--trust-new-hosts`` only appends, after every host connected, and a run that
fails to connect writes nothing.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT
from sshd import SSHD, free_port, keygen, start_sshd
from tunepath.errors import TunepathError
from tunepath.live import inventory as inventory_module
from tunepath.live import knownhosts as knownhosts_module
from tunepath.live.hosts import HostKeyError, LocalHost, connect, connect_all, load_inventory, open_hosts
from tunepath.live.knownhosts import append_lines, read_known_hosts

pytestmark = pytest.mark.fast

ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
# Lines a real ~/.ssh/known_hosts may hold that paramiko cannot use (every one crashed
# paramiko's load_host_keys, or was silently mis-read, before).
HOSTILE_LINES = [
    "# a comment",
    "   # an indented comment",
    "",
    f"@cert-authority *.example.org {ED}",
    f"@cert-authority * ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ",
    "@revoked * ssh-rsa !!!not-base64",
    "this is not a key line",
    "foo bar",
    "host ssh-ed25519 !!!notbase64",
    "host ssh-ed25519 AAAAC3",
    "host ssh-rsa AAAAB3NzaC1yc2EAAAAA",
    "host ssh-rsa AAAAB3NzaC1yc2EAAAAAAAA=",
    "host sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAIA==",
    "host ssh-ed25519-cert-v01@openssh.com AAAA",
    f"|1|zz|yy {ED}",                                  # a hashed name with a broken salt
    f"|1|F1E1KeoE/eEWhi10WpGv4OdiO6Y=|3988QV0VE8wmZL7suNrYQLITLCg= {ED}",
    f"@unknown-marker host {ED}",
    f"other.example,10.0.0.9 {ED} a trailing comment",
    f"other.example\t{ED}",
    "\t",
]


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text, repr(text)
    assert "Traceback" not in text
    return text


# --- inventories ----------------------------------------------------------------------------
OK_SERVER = '[server]\nhost = "a.test"\n'
OK_CLIENT = '[[clients]]\nhost = "b.test"\n'


def toml_value(value) -> str:
    """A TOML literal for a hypothesis value (tomllib only reads TOML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")   # JSON's escapes are TOML's
    if isinstance(value, list):
        return "[" + ", ".join(map(toml_value, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)        # dates and times, written as TOML writes them


scalars = st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=20), st.dates(), st.times().map(lambda t: t.replace(microsecond=0)))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text("abc", min_size=1, max_size=3),
                                                                       inner, max_size=2)), max_leaves=5)
WRONG = {"host": values.filter(lambda v: not isinstance(v, str)),
         "port": values.filter(lambda v: isinstance(v, bool) or not isinstance(v, int) or not 0 < v < 65536),
         "user": values.filter(lambda v: not isinstance(v, str)),
         "key_file": values.filter(lambda v: not isinstance(v, str))}


def write(tmp: Path, text: str | bytes, name: str = "hosts.toml") -> Path:
    path = tmp / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(role=st.sampled_from(["server", "clients"]), key=st.sampled_from(sorted(WRONG)), data=st.data())
def test_any_wrong_type_for_a_host_key_is_one_line_naming_file_and_key(tmp_path, role, key, data):
    value = data.draw(WRONG[key])
    entry = f"{key} = {toml_value(value)}\n"
    host = '' if key == "host" else 'host = "h.test"\n'
    text = (f"[server]\n{host}{entry}{OK_CLIENT}" if role == "server"
            else f"{OK_SERVER}[[clients]]\n{host}{entry}")
    path = write(tmp_path, text)
    with pytest.raises(TunepathError) as caught:
        load_inventory(path)
    message = one_line(caught.value)
    assert str(path) in message and key in message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["known_hosts", "clients", "server"]), value=values)
def test_any_value_for_a_top_level_key_is_accepted_or_one_line(tmp_path, key, value):
    """Strings for known_hosts may be fine paths; everything else is refused, in one line."""
    parts = {"server": OK_SERVER, "clients": OK_CLIENT, "known_hosts": ""}
    parts[key] = ""
    text = f"{key} = {toml_value(value)}\n" + parts["server"] + parts["clients"]
    path = write(tmp_path, text)
    try:
        inv = load_inventory(path)
    except TunepathError as exc:
        message = one_line(exc)
        assert str(path) in message
        if not (key == "known_hosts" and isinstance(value, str)):
            assert key.rstrip("s") in message or "[[clients]]" in message or "[server]" in message
        return
    assert key == "known_hosts" and isinstance(value, str) and value     # nothing else may pass
    assert inv.known_hosts == Path(value).expanduser()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(host=st.text(max_size=300), user=st.text(max_size=80))
def test_any_host_or_user_string_is_safe_or_refused(tmp_path, host, user):
    """A host or user that passes can never break a known_hosts line or a message."""
    path = write(tmp_path, f"[server]\nhost = {toml_value(host)}\nuser = {toml_value(user)}\n{OK_CLIENT}")
    try:
        spec = load_inventory(path).server
    except TunepathError as exc:
        assert str(path) in one_line(exc)
        return
    for text in (spec.host, spec.user):
        assert text and not any(c.isspace() or ord(c) < 32 or c == "\x7f" for c in text)
        assert not text.startswith("-")
    assert "@" not in spec.host and len(spec.host) <= 253


@pytest.mark.parametrize("text, message", [
    (f'[server]\nhost = "a"\nport = true\n{OK_CLIENT}', r"\[server\] port must be a whole number .* not a boolean"),
    (f'[server]\nhost = "a"\nport = 22.0\n{OK_CLIENT}', "port must be .* not a decimal number"),
    (f'[server]\nhost = "a"\nport = "22"\n{OK_CLIENT}', "port must be .* not a string"),
    (f'[server]\nhost = "a"\nuser = 5\n{OK_CLIENT}', r"\[server\] user must be a string, not a number"),
    (f'[server]\nhost = "a"\nuser = ""\n{OK_CLIENT}', "user must be a non-empty string"),
    (f'{OK_SERVER}[[clients]]\nhost = 5\n', r"\[client\] host must be a string, not a number"),
    (f'[server]\nhost = "a b"\n{OK_CLIENT}', "host must be a DNS name or an IP address"),
    (f'[server]\nhost = "a\\n* {ED}"\n{OK_CLIENT}', "host must be a non-empty string without control"),
    (f'[server]\nhost = "root@a:2222"\n{OK_CLIENT}', "no user@ or :port"),
    (f'[server]\nhost = "-oProxyCommand=x"\n{OK_CLIENT}', "host must be a DNS name"),
    (f'[server]\nhost = "{"a" * 300}"\n{OK_CLIENT}', "at most 253 characters"),
    (f'[server]\nhost = "a"\nkey_file = 5\n{OK_CLIENT}', "key_file must be a string, not a number"),
    (f'[server]\nhost = "a"\nkey_file = "x\\u0000y"\n{OK_CLIENT}', "key_file must be a non-empty string"),
    (f'[server]\nhost = "a"\nkey_file = "{"k" * 300}"\n{OK_CLIENT}', "key_file k+: File name too long"),
    (f'known_hosts = 5\n{OK_SERVER}{OK_CLIENT}', "known_hosts must be a string, not a number"),
    (f'known_hosts = "{"k" * 300}"\n{OK_SERVER}{OK_CLIENT}', "known_hosts k+: File name too long"),
    (f'clients = 5\n{OK_SERVER}', r"at least one \[\[clients\]\] table .* found a number"),
    (f'clients = [1, 2]\n{OK_SERVER}', "found an array holding a number"),
    (f'{OK_SERVER}[clients]\nhost = "b"\n', r"\[\[clients\]\] table \(double brackets\) .* found a table"),
    (f'server = 5\n{OK_CLIENT}', r"\[server\] must be a table .* not a number"),
    (f'[[server]]\nhost = "a"\n{OK_CLIENT}', r"\[server\] must be a table .* not an array"),
    (f'{OK_SERVER}[[clients]]\nhost = "b"\npassword = "x"\n', "'password' is not accepted"),
    (b'[server]\nhost = "\xff\xfe"\n' + OK_CLIENT.encode(), r"not UTF-8 \(line 2\)"),
    (b'# caf\xe9\n' + OK_SERVER.encode() + OK_CLIENT.encode(), r"not UTF-8 \(line 1\)"),
])
def test_hostile_inventories_are_one_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(TunepathError, match=message) as caught:
        load_inventory(path)
    assert str(path) in one_line(caught.value)


def test_inventory_paths_that_are_no_file(tmp_path, monkeypatch):
    cases = {tmp_path: "is a directory", tmp_path / ("n" * 300): "File name too long",
             tmp_path / "missing.toml": "not found", Path("/dev/zero"): "larger than 1 MB"}
    for path, message in cases.items():
        with pytest.raises(TunepathError, match=message) as caught:
            load_inventory(path)
        assert str(path)[:50] in one_line(caught.value)
    readable = write(tmp_path, OK_SERVER + OK_CLIENT)

    def denied(*args, **kwargs):       # tests run as root, where chmod 000 does not deny
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(inventory_module, "open", denied, raising=False)
    with pytest.raises(TunepathError, match="cannot read it .Permission denied") as caught:
        load_inventory(readable)
    one_line(caught.value)


def test_known_hosts_that_is_a_directory_is_refused_when_loading(tmp_path):
    path = write(tmp_path, f'known_hosts = "{tmp_path}"\n{OK_SERVER}{OK_CLIENT}')
    with pytest.raises(TunepathError, match="known_hosts .* is not a file"):
        load_inventory(path)


def test_a_bom_and_ipv6_are_fine(tmp_path):
    inv = load_inventory(write(tmp_path, b'\xef\xbb\xbf[server]\nhost = "::1"\nport = 2222\n' + OK_CLIENT.encode()))
    assert inv.server.host == "::1" and inv.server.port == 2222 and inv.clients[0].host == "b.test"


def test_cli_refuses_a_hostile_inventory_in_one_line_and_writes_nothing(tmp_path):
    runs = tmp_path / "runs"
    for text in (f'[server]\nhost = "a"\nport = true\n{OK_CLIENT}', b"[server]\nhost = \"\xff\"\n"):
        path = write(tmp_path, text)
        done = subprocess.run([sys.executable, "-m", "tunepath.cli", "run", "--hosts", str(path), "--runs-dir",
                               str(runs), "--no-build", "--steps", "baseline"], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")}, timeout=120)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tunepath: ") and str(path) in lines[0], done.stderr
        assert not runs.exists()


# --- known_hosts, read --------------------------------------------------------------------------
def test_reading_hostile_known_hosts_never_raises_and_warns_once(tmp_path, capsys):
    path = write(tmp_path, "\n".join(HOSTILE_LINES).encode() + b"\nhost \xff\xfe ssh-ed25519 AAAA\r\n",
                 "known_hosts")
    known = read_known_hosts(path)
    names = {name for name, _ in known.keys}
    assert {"other.example", "10.0.0.9"} <= names
    assert not any(name == "|1|zz|yy" for name in names)           # unusable hashed name dropped
    assert "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl" not in known.revoked
    assert "!!!not-base64" in known.revoked
    garbage = [i + 1 for i, line in enumerate(HOSTILE_LINES)
               if line in ("this is not a key line", "foo bar", "host ssh-ed25519 !!!notbase64",
                           "host ssh-ed25519 AAAAC3", "host ssh-rsa AAAAB3NzaC1yc2EAAAAA",
                           "host ssh-rsa AAAAB3NzaC1yc2EAAAAAAAA=", f"|1|zz|yy {ED}",
                           f"@unknown-marker host {ED}")]
    assert set(garbage) <= set(known.ignored)
    assert len(HOSTILE_LINES) + 1 in known.ignored                   # the non-UTF-8 line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tunepath: warning: ") and str(path) in err[0]


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "is a directory"),
    (lambda p: None, None),                                           # missing: nothing known, no error
])
def test_known_hosts_paths(tmp_path, make, message):
    path = tmp_path / "known_hosts"
    make(path)
    if message:
        with pytest.raises(TunepathError, match=message) as caught:
            read_known_hosts(path)
        one_line(caught.value)
    else:
        assert read_known_hosts(path).keys == ()


def test_unreadable_known_hosts_is_one_line(tmp_path, monkeypatch):
    path = write(tmp_path, ED, "known_hosts")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(knownhosts_module, "open", denied, raising=False)
    with pytest.raises(TunepathError, match="cannot read it .Permission denied") as caught:
        read_known_hosts(path)
    one_line(caught.value)


def test_append_creates_private_file_and_keeps_every_byte(tmp_path):
    path = tmp_path / "new-dir" / "known_hosts"
    append_lines(path, ["a.test ssh-ed25519 AAAA"])
    assert path.read_bytes() == b"a.test ssh-ed25519 AAAA\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_bytes(b"# no final newline\r\n@cert-authority * " + ED.encode())
    before = path.read_bytes()
    append_lines(path, ["[b.test]:2222 ssh-ed25519 BBBB"])
    assert path.read_bytes() == before + b"\n[b.test]:2222 ssh-ed25519 BBBB\n"
    with pytest.raises(TunepathError, match="malformed"):
        append_lines(path, ["evil\n* ssh-ed25519 AAAA"])


# --- known_hosts against a real sshd ----------------------------------------------------------
@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not SSHD.exists():
        pytest.skip("needs OpenSSH's sshd (scripts/bootstrap --system installs it)")
    server = start_sshd(tmp_path_factory.mktemp("sshd-badinput"))
    yield server
    server.stop()


def inventory_for(sshd, tmp_path, known: Path, client_port: int | None = None) -> Path:
    """Server and client on the test sshd; ``client_port``: the client elsewhere (a closed port)."""
    path = sshd.inventory(known, tmp_path / "hosts.toml")
    if client_port:
        text = path.read_text()
        head, _, client = text.partition("[[clients]]")
        path.write_text(head + "[[clients]]" + client.replace(f"port = {sshd.port}", f"port = {client_port}"))
    return path


def host_line(sshd) -> str:
    return sshd.known_hosts_line().strip()


def hashed(name: str, sshd) -> str:
    from paramiko import HostKeys
    return f"{HostKeys.hash_host(name)} {' '.join(host_line(sshd).split()[1:])}"


def hostile_prefix() -> bytes:
    return ("\n".join(HOSTILE_LINES) + "\n").encode() + b"host \xff ssh-ed25519 AAAA\n# last line, no newline"


@pytest.mark.system
@pytest.mark.parametrize("form", ["plain", "hashed"])
def test_hostile_known_hosts_still_connects_and_is_not_touched(sshd, tmp_path, form):
    line = host_line(sshd) if form == "plain" else hashed(f"[127.0.0.1]:{sshd.port}", sshd)
    known = write(tmp_path, hostile_prefix() + f"\n{line}\n".encode() + b"@revoked * ssh-rsa AAAA\n", "known_hosts")
    before = known.read_bytes()
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))
    for trust in (False, True):
        with open_hosts(inventory, trust) as (server, clients):
            assert server.run("echo ok").stdout.strip() == "ok" and clients[0].run("true").ok
        assert known.read_bytes() == before               # nothing new: nothing appended, nothing rewritten


@pytest.mark.system
def test_unknown_host_is_refused_without_trust_and_nothing_is_written(sshd, tmp_path):
    known = write(tmp_path, hostile_prefix(), "known_hosts")
    before = known.read_bytes()
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))
    with pytest.raises(HostKeyError, match=r"host key unknown .*SHA256:.* Nothing was run.*--trust-new-hosts") as caught:
        connect_all(inventory)
    one_line(caught.value)
    assert known.read_bytes() == before


@pytest.mark.system
def test_trust_appends_exactly_one_line_after_all_hosts_connected(sshd, tmp_path):
    known = write(tmp_path, hostile_prefix(), "known_hosts")
    before = known.read_bytes()
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))      # server and client: the same sshd
    with open_hosts(inventory, trust_new_hosts=True) as (server, _):
        assert server.run("echo ok").stdout.strip() == "ok"
    assert known.read_bytes() == before + b"\n" + host_line(sshd).encode() + b"\n"
    with open_hosts(inventory) as (server, _):                            # now known, without the option
        assert server.run("true").ok


@pytest.mark.system
def test_trust_creates_a_missing_file_0600(sshd, tmp_path):
    known = tmp_path / "ssh" / "known_hosts"
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))
    with open_hosts(inventory, trust_new_hosts=True):
        pass
    assert known.read_text() == host_line(sshd) + "\n"
    assert stat.S_IMODE(known.stat().st_mode) == 0o600 and stat.S_IMODE(known.parent.stat().st_mode) == 0o700


@pytest.mark.system
@pytest.mark.parametrize("exists", [True, False])
def test_a_failing_second_host_appends_nothing(sshd, tmp_path, exists):
    known = tmp_path / "known_hosts"
    if exists:
        known.write_bytes(hostile_prefix())
    before = known.read_bytes() if exists else None
    inventory = load_inventory(inventory_for(sshd, tmp_path, known, client_port=free_port()))
    with pytest.raises(TunepathError, match="cannot connect") as caught:
        with open_hosts(inventory, trust_new_hosts=True):
            pass
    one_line(caught.value)
    assert (known.read_bytes() if exists else known.exists()) == (before if exists else False)


@pytest.mark.system
def test_a_revoked_key_is_refused_even_when_trusted_or_listed(sshd, tmp_path):
    kind, key = host_line(sshd).split()[1:]
    for extra in ("", host_line(sshd) + "\n"):          # revoked alone, and revoked although listed
        known = write(tmp_path, f"{extra}@revoked * {kind} {key}\n".encode(), "known_hosts")
        before = known.read_bytes()
        inventory = load_inventory(inventory_for(sshd, tmp_path, known))
        for trust in (False, True):
            with pytest.raises(HostKeyError, match=r"marked @revoked in .* \(line \d\)\. Nothing was run") as caught:
                connect_all(inventory, trust)
            one_line(caught.value)
            assert known.read_bytes() == before


@pytest.mark.system
def test_a_changed_key_is_refused_even_when_trusted(sshd, tmp_path):
    other = keygen(tmp_path / "other")
    known = write(tmp_path, sshd.known_hosts_line(Path(f"{other}.pub")), "known_hosts")
    before = known.read_bytes()
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))
    with pytest.raises(HostKeyError, match="host key differs") as caught:
        connect_all(inventory, trust_new_hosts=True)
    one_line(caught.value)
    assert known.read_bytes() == before


@pytest.mark.system
def test_a_single_host_trusted_on_its_own_is_saved(sshd, tmp_path):
    known = tmp_path / "known_hosts"
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))
    with connect(inventory.server, inventory, trust_new_hosts=True) as host:
        assert host.run("true").ok
    assert known.read_text() == host_line(sshd) + "\n"


# --- uploads keep their mode ----------------------------------------------------------------------
def test_local_put_keeps_the_mode_and_is_never_wider(tmp_path):
    host = LocalHost()
    for mode in (0o600, 0o755, 0o640):
        source = write(tmp_path, f"secret {mode:o}", f"src-{mode:o}")
        source.chmod(mode)
        target = tmp_path / "out" / f"t-{mode:o}"
        target.parent.mkdir(exist_ok=True)
        target.write_text("old, wider")
        target.chmod(0o666)
        host.put(source, str(target))
        assert target.read_text() == f"secret {mode:o}" and stat.S_IMODE(target.stat().st_mode) == mode
    back = tmp_path / "back"
    host.get(str(tmp_path / "src-600"), back)
    assert stat.S_IMODE(back.stat().st_mode) == 0o600
    with pytest.raises(TunepathError, match="copying .* failed") as caught:
        host.put(tmp_path / "missing", str(tmp_path / "x"))
    one_line(caught.value)


@pytest.mark.system
def test_ssh_put_keeps_the_mode(sshd, tmp_path):
    known = write(tmp_path, sshd.known_hosts_line(), "known_hosts")
    inventory = load_inventory(inventory_for(sshd, tmp_path, known))
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    with connect(inventory.server, inventory) as host:
        for mode in (0o600, 0o644):
            source = write(tmp_path, "AJP secret" if mode == 0o600 else "public", f"s-{mode:o}")
            source.chmod(mode)
            target = remote_dir / f"server.xml-{mode:o}"
            target.write_text("an older, world-readable copy")
            target.chmod(0o644)
            host.put(source, str(target))
            assert target.read_bytes() == source.read_bytes() and stat.S_IMODE(target.stat().st_mode) == mode


@pytest.mark.parametrize("host", ["fe80::1%eth0;id", "fe80::1%eth0 x", "fe80::1%a/b", "fe80::1%" + "e" * 16,
                                  "fe80::1%$(id)"])
def test_an_ipv6_zone_must_be_an_interface_name(tmp_path, host):
    """Issue 34, item 8: Python's ip_address takes any text after '%'."""
    path = write(tmp_path, f"[server]\nhost = {json.dumps(host)}\n{OK_CLIENT}")
    with pytest.raises(TunepathError) as caught:
        load_inventory(path)
    assert "host" in one_line(caught.value)


def test_an_ipv6_address_with_an_interface_zone_is_accepted(tmp_path):
    path = write(tmp_path, f'[server]\nhost = "fe80::1%eth0"\n{OK_CLIENT}')
    assert load_inventory(path).server.host == "fe80::1%eth0"
