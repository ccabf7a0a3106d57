"""The lab: a server and two clients as network namespaces on this one machine.

``tunepath lab up`` builds, as root, four network namespaces: a switch (``<prefix>-net``, a bridge
``br0`` at 10.213.7.254/24) and three hosts, ``<prefix>-srv`` (10.213.7.1), ``<prefix>-c1``
(10.213.7.11) and ``<prefix>-c2`` (10.213.7.12). Each host has a real veth NIC ``eth0`` with 4 RX
and 4 TX queues (``ethtool -L eth0 rx N tx N`` changes them), its own OpenSSH server with its own
host key, and its own ordinary user (``<prefix>-srv`` …; only the server's has passwordless sudo).
The controller reaches each sshd only through a socat forward on 127.0.0.1, which enters the switch
namespace per connection, so SSH crosses the bridge and the host's link like load traffic does.
``up`` writes ``<dir>/hosts.toml`` and ``<dir>/known_hosts`` for ``tunepath run --hosts``, and
``<dir>/state.json``, from which ``down`` removes exactly what ``up`` created.

What it is not: separate machines. The namespaces share this machine's CPUs, memory, kernel,
filesystem and ``/etc/passwd``; a veth has no wire and no per-queue interrupts; offlining a CPU or
reserving huge pages from the "server" changes the whole machine. It is a faithful stand-in for
SSH, sudo, NIC queue counts and link failures, not for a network or for separate hardware.

API (the fault harness uses it)::

    lab = Lab(Path("lab"), "tplab")
    lab.up(); lab.status(); lab.hosts_file; lab.netns("server")
    lab.kill_sshd("server"); lab.restart_sshd("server"); lab.set_link("server", False)
    lab.down()
"""

from __future__ import annotations

from tunepath.lab.control import Lab
from tunepath.lab.state import DEFAULT_PREFIX, ROLE_NAMES, LabState
from tunepath.lab.status import PartStatus

__all__ = ["Lab", "LabState", "PartStatus", "DEFAULT_PREFIX", "ROLE_NAMES"]
