"""``tunepath run --check-options`` with hostile inventories and options, and ``tunepath restore``
against a server that cannot be reached (127.0.0.1 on a closed port: no other address, ever).

``--check-options`` connects to nothing and writes nothing: every case points ``--runs-dir`` and
``--site-dir`` into its own directory and watches them. Inventories: tables and arrays nested
thousands deep, unknown keys, NUL and newline in values, ports out of range, a CPU list of fifty
million CPUs, files that are no inventory (a FIFO, a directory, /dev/zero). Options: Tomcat homes
that are no Tomcat's own (``/``, ``~``, ``..``, top-level directories), HTTP ports out of range or
equal to a port the run derives from them (``model/context.ports_for``: Tomcat's shutdown port
and the proxy's; 8005 itself is free, as the run then moves Tomcat's shutdown port to 12016),
counts and percentages no run can use. Each must be refused in one line; the valid controls
must pass.
"""

from __future__ import annotations

import socket
from pathlib import Path

from harness.census.case import ACCEPT, REFUSE, Case
from harness.census.cases.inputs import directory, fifo, sparse, writes

__all__ = ["CHECK", "INVENTORIES", "OPTIONS", "closed_port", "cases"]

CHECK = ("run", "--check-options", "--runs-dir", "{tmp}/runs", "--site-dir", "{tmp}/site", "--steps", "baseline")
WITH_HOSTS = (*CHECK, "--hosts", "{tmp}/hosts.toml")
WATCH = ("runs", "site", "home")
SERVER = '[server]\nhost = "127.0.0.1"\n'
CLIENT = '[[clients]]\nhost = "127.0.0.1"\n'
KNOWN = 'known_hosts = "{tmp}/known_hosts"\n'


def inventory(server: str = "", client: str = "", top: str = "") -> str:
    """A valid inventory (server and client on 127.0.0.1), with extra lines in each part."""
    return f"{KNOWN}{top}\n{SERVER}{server}\n{CLIENT}{client}"


# name → (expect, the inventory's text or bytes)
INVENTORIES = {
    "valid": (ACCEPT, inventory()),
    "arrays-3000-deep": (REFUSE, inventory(server="z = " + "[" * 3000 + "]" * 3000 + "\n")),
    "inline-tables-2000-deep": (REFUSE, inventory(server="z = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n")),
    "dotted-table-3000-deep": (REFUSE, inventory() + "[" + ".".join(["a"] * 3000) + "]\nb = 1\n"),
    "unknown-server-key": (REFUSE, inventory(server='colour = "red"\n')),
    "unknown-client-key": (REFUSE, inventory(client='hots = "127.0.0.1"\n')),
    "unknown-top-key": (REFUSE, inventory(top='servers = 2\n')),
    "password": (REFUSE, inventory(server='password = "x"\n')),
    "nul-in-host": (REFUSE, KNOWN + '[server]\nhost = "127.0.0.1\\u0000x"\n' + CLIENT),
    "newline-in-host": (REFUSE, KNOWN + '[server]\nhost = "127.0.0.1\\n* ssh-ed25519 AAAA"\n' + CLIENT),
    "newline-in-user": (REFUSE, inventory(server='user = "a\\nb"\n')),
    "nul-in-key-file": (REFUSE, inventory(server='key_file = "k\\u0000y"\n')),
    "nul-in-known-hosts": (REFUSE, 'known_hosts = "a\\u0000b"\n' + SERVER + CLIENT),
    "nul-in-label": (REFUSE, inventory(top='label = "lab\\u0000x"\n')),
    "newline-in-address": (REFUSE, inventory(server='address = "127.0.0.1\\nx"\n')),
    "port-0": (REFUSE, inventory(server="port = 0\n")),
    "port-70000": (REFUSE, inventory(server="port = 70000\n")),
    "port-minus-1": (REFUSE, inventory(server="port = -1\n")),
    "port-huge": (REFUSE, inventory(client="port = 99999999999999999999\n")),
    "port-float": (REFUSE, inventory(server="port = 22.5\n")),
    "port-bool": (REFUSE, inventory(server="port = true\n")),
    "cpus-50-million": (REFUSE, inventory(server='baseline_cpus = "0-50000000"\n')),
    "cpus-backwards": (REFUSE, inventory(server='baseline_cpus = "7-0"\n')),
    "cpus-empty": (REFUSE, inventory(server='baseline_cpus = ""\n')),
    "cpus-words": (REFUSE, inventory(server='baseline_cpus = "0-7,all"\n')),
    "cpus-negative": (REFUSE, inventory(server='baseline_cpus = "-1"\n')),
    "no-clients": (REFUSE, KNOWN + SERVER),
    "invalid-utf8": (REFUSE, b'[server]\nhost = "\xff\xfe"\n' + CLIENT.encode()),
    "empty": (REFUSE, ""),
}

# name → (expect, options after CHECK)
OPTIONS = {
    "valid": (ACCEPT, ()),
    "tomcat-home-root": (REFUSE, ("--tomcat-home", "/")),
    "tomcat-home-tilde": (REFUSE, ("--tomcat-home", "~")),
    "tomcat-home-dotdot": (REFUSE, ("--tomcat-home", "..")),
    "tomcat-home-tilde-dotdot": (REFUSE, ("--tomcat-home", "~/..")),
    "tomcat-home-usr": (REFUSE, ("--tomcat-home", "/usr")),
    "tomcat-home-etc": (REFUSE, ("--tomcat-home", "/etc/")),
    "tomcat-home-opt-dotdot-etc": (REFUSE, ("--tomcat-home", "/opt/../etc/tomcat")),
    "tomcat-home-empty": (REFUSE, ("--tomcat-home", "")),
    "tomcat-home-newline": (REFUSE, ("--tomcat-home", "~/tomcat\nrm -rf ~")),
    "http-port-0": (REFUSE, ("--http-port", "0")),
    "http-port-70000": (REFUSE, ("--http-port", "70000")),
    "http-port-minus-1": (REFUSE, ("--http-port", "-1")),
    "http-port-8005": (ACCEPT, ("--http-port", "8005")),       # Tomcat's then: 12016, 12017, 12018
    # ports_for derived these HTTP ports' own port as the shutdown (proxy, AJP) port; now a spare instead
    "http-port-16999-own-shutdown": (ACCEPT, ("--http-port", "16999")),   # then: 32000, 17000, 17001
    "http-port-16998-own-proxy": (ACCEPT, ("--http-port", "16998")),      # then: 16996, 16997, 31999
    "http-port-27998-own-ajp": (ACCEPT, ("--http-port", "27998")),        # then: 27997, 31999, 27999
    "http-port-words": (REFUSE, ("--http-port", "eighty")),
    "java-home-newline": (REFUSE, ("--java-home", "/usr/lib/jvm\nx")),
    "steps-unknown": (REFUSE, ("--steps", "nosuch")),
    "steps-empty": (REFUSE, ("--steps", "")),
    "steps-commas": (REFUSE, ("--steps", ",,")),
    "profile-unknown": (REFUSE, ("--profile", "fastest")),
    "repetitions-0": (REFUSE, ("--repetitions", "0")),
    "repetitions-above-max": (REFUSE, ("--repetitions", "5", "--max-repetitions", "2")),
    "ci-target-nan": (REFUSE, ("--ci-target", "nan")),
    "ci-target-inf": (REFUSE, ("--ci-target", "inf")),
    "ci-target-negative": (REFUSE, ("--ci-target", "-5")),
    "ci-target-zero": (REFUSE, ("--ci-target", "0")),
    "step-budget-nan": (REFUSE, ("--step-budget", "nan")),
    "step-budget-negative": (REFUSE, ("--step-budget", "-1")),
    "tomcat-tarball-missing": (REFUSE, ("--tomcat-tarball", "{tmp}/no-such-tomcat.tar.gz")),
    "runs-dir-a-file": (REFUSE, ("--runs-dir", "{tmp}/afile")),
}


def inventory_cases() -> list[Case]:
    return [Case(f"run/inventory/{name}", "run", WITH_HOSTS, expect, setup=writes("hosts.toml", lambda t=text: t),
                 watch=WATCH, note=f"hosts.toml: {name}") for name, (expect, text) in INVENTORIES.items()]


def hosts_file_cases() -> list[Case]:
    return [
        Case("run/hosts-file/fifo", "run", WITH_HOSTS, REFUSE, setup=fifo("hosts.toml"), watch=WATCH,
             note="hosts.toml is a FIFO nobody writes to"),
        Case("run/hosts-file/directory", "run", WITH_HOSTS, REFUSE, setup=directory("hosts.toml"), watch=WATCH,
             note="hosts.toml is a directory"),
        Case("run/hosts-file/dev-zero", "run", (*CHECK, "--hosts", "/dev/zero"), REFUSE, watch=WATCH,
             note="--hosts /dev/zero"),
        Case("run/hosts-file/missing", "run", WITH_HOSTS, REFUSE, watch=WATCH, note="no hosts.toml"),
        Case("run/hosts-file/sparse-2-mib", "run", WITH_HOSTS, REFUSE, setup=sparse("hosts.toml", 2 << 20),
             watch=WATCH, note="hosts.toml of 2 MiB of NUL bytes"),
    ]


def option_cases() -> list[Case]:
    afile = writes("afile", lambda: "not a directory\n")
    return [Case(f"run/option/{name}", "run", (*CHECK, *options), expect, watch=WATCH,
                 setup=afile if name == "runs-dir-a-file" else None, note=" ".join(options) or "no option")
            for name, (expect, options) in OPTIONS.items()]


class ClosedPort:
    """A port of 127.0.0.1 bound by the census and never listened on: a connection to it is refused
    at once. Held until the case ends (its set-up returns it)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def closed_port(known_hosts: str = "{tmp}/known_hosts"):
    """A set-up: an inventory whose server and client are 127.0.0.1 on a closed port."""
    def setup(tmp: Path) -> ClosedPort:
        port = ClosedPort()
        text = (f'known_hosts = "{known_hosts}"\n[server]\nhost = "127.0.0.1"\nport = {port.port}\n'
                f'[[clients]]\nhost = "127.0.0.1"\nport = {port.port}\n').replace("{tmp}", str(tmp))
        (tmp / "hosts.toml").write_text(text, encoding="utf-8")
        return port
    return setup


def restore_cases() -> list[Case]:
    restore = ("restore", "--hosts", "{tmp}/hosts.toml")
    watch = ("home",)
    return [
        Case("restore/closed-port", "restore", restore, REFUSE, setup=closed_port(), watch=watch,
             note="server and client: 127.0.0.1 on a closed port"),
        Case("restore/closed-port-force", "restore", (*restore, "--force"), REFUSE, setup=closed_port(), watch=watch,
             note="the same with --force"),
        Case("restore/known-hosts-fifo", "restore", restore, REFUSE, watch=watch,
             setup=lambda tmp: (fifo("known_hosts")(tmp), closed_port()(tmp))[1],
             note="a closed port, and known_hosts is a FIFO"),
        Case("restore/tomcat-home-root", "restore", (*restore, "--tomcat-home", "/"), REFUSE, setup=closed_port(),
             watch=watch, note="--tomcat-home / (refused before connecting)"),
        Case("restore/hosts-fifo", "restore", restore, REFUSE, setup=fifo("hosts.toml"), watch=watch,
             note="hosts.toml is a FIFO"),
    ]


def cases() -> list[Case]:
    return inventory_cases() + hosts_file_cases() + option_cases() + restore_cases()
