"""The lab's network: four network namespaces joined by a bridge, on this one machine.

``<prefix>-net`` is the switch: a bridge ``br0`` (10.213.7.254/24) and a default route of type
``unreachable``, so it routes nothing anywhere. Each host namespace (``<prefix>-srv``, ``-c1``,
``-c2``) has ``lo`` and ``eth0``, one end of a veth pair created with 4 RX and 4 TX queues on both
ends; the other end (named after the role) sits in the switch namespace on ``br0``. The pair is
created inside the two namespaces directly, so no interface, address or route ever appears in the
root namespace, and two labs with different prefixes never share a name.

A veth is a real kernel network device: ``ethtool -l eth0`` shows its channels and
``ethtool -L eth0 rx N tx N`` changes them (``combined`` is refused). It is not a hardware NIC:
there is no wire, no interrupt per queue, and every namespace shares the same CPUs and kernel.

Every function here is idempotent: it creates what is missing and leaves what is there.
"""

from __future__ import annotations

from tunepath.lab.state import PREFIX_LENGTH, SWITCH, SWITCH_ADDRESS, Role
from tunepath.lab.system import run, tool

__all__ = ["QUEUES", "LAB_NETWORK", "namespace", "switch_namespace", "namespaces", "add_namespace",
           "ensure_switch", "ensure_host", "delete_namespace", "set_link", "namespace_pids",
           "link_summary", "default_route", "root_lab_addresses"]

QUEUES = 4
LAB_NETWORK = "10.213.7."          # what the root namespace must never hold


def namespace(prefix: str, r: Role) -> str:
    return f"{prefix}-{r.suffix}"


def switch_namespace(prefix: str) -> str:
    return f"{prefix}-{SWITCH}"


def namespaces() -> set[str]:
    """The network namespaces that exist (``ip netns list``)."""
    out = run([tool("ip"), "netns", "list"], "listing network namespaces").stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def add_namespace(name: str) -> None:
    run([tool("ip"), "netns", "add", name], f"creating network namespace {name}")


def _ip(ns: str, *args: str, what: str, check: bool = True):
    return run([tool("ip"), "-n", ns, *args], what, check=check)


def _has_link(ns: str, name: str) -> bool:
    return _ip(ns, "link", "show", "dev", name, what=f"looking for {name} in {ns}", check=False).returncode == 0


def ensure_switch(prefix: str) -> None:
    ns = switch_namespace(prefix)
    if not _has_link(ns, "br0"):
        _ip(ns, "link", "add", "br0", "type", "bridge", "forward_delay", "0", what=f"creating br0 in {ns}")
    _ip(ns, "addr", "replace", f"{SWITCH_ADDRESS}/{PREFIX_LENGTH}", "dev", "br0", what=f"addressing br0 in {ns}")
    for link in ("lo", "br0"):
        _ip(ns, "link", "set", link, "up", what=f"bringing {link} up in {ns}")
    # The switch is a router without an uplink: whatever a host sends outside 10.213.7.0/24 (a DNS
    # query, say) is answered with "network unreachable" instead of vanishing, so most lookups fail
    # at once rather than after the resolver's 5 s timeouts. The lab has no DNS; nothing leaves it.
    run([tool("ip"), "netns", "exec", ns, tool("sysctl"), "-qw", "net.ipv4.ip_forward=1",
         "net.ipv4.icmp_ratelimit=0"], f"letting {ns} answer for addresses outside the lab")
    _ip(ns, "route", "replace", "unreachable", "default", what=f"making everything outside the lab "
        f"unreachable in {ns}")


def ensure_host(prefix: str, r: Role) -> None:
    """``eth0`` in the host's namespace, its peer on the switch's bridge, address, default route."""
    ns, switch = namespace(prefix, r), switch_namespace(prefix)
    if not _has_link(ns, "eth0"):
        if _has_link(switch, r.suffix):      # a peer left alone by an interrupted `up`
            _ip(switch, "link", "del", r.suffix, what=f"removing a half-made veth in {switch}")
        queues = ["numtxqueues", str(QUEUES), "numrxqueues", str(QUEUES)]
        _ip(ns, "link", "add", "eth0", *queues, "type", "veth", "peer", "name", r.suffix, "netns", switch,
            *queues, what=f"creating the veth pair eth0 ({ns}) / {r.suffix} ({switch})")
    _ip(switch, "link", "set", r.suffix, "master", "br0", "up", what=f"attaching {r.suffix} to br0 in {switch}")
    _ip(ns, "addr", "replace", f"{r.address}/{PREFIX_LENGTH}", "dev", "eth0", what=f"addressing eth0 in {ns}")
    for link in ("lo", "eth0"):
        _ip(ns, "link", "set", link, "up", what=f"bringing {link} up in {ns}")
    _ip(ns, "route", "replace", "default", "via", SWITCH_ADDRESS, "dev", "eth0",
        what=f"setting the default route in {ns}")


def set_link(ns: str, up: bool) -> None:
    """``ip link set eth0 down|up`` in ``ns``. Taking a link down drops its default route, so
    bringing it up puts the route back, as a real interface's configuration would."""
    _ip(ns, "link", "set", "eth0", "up" if up else "down", what=f"setting eth0 {'up' if up else 'down'} in {ns}")
    if up:
        _ip(ns, "route", "replace", "default", "via", SWITCH_ADDRESS, "dev", "eth0",
            what=f"restoring the default route in {ns}")


def delete_namespace(name: str) -> None:
    """Delete ``name`` (its veth ends go with it; the peers in the other namespace too)."""
    if name in namespaces():
        run([tool("ip"), "netns", "del", name], f"deleting network namespace {name}")


def namespace_pids(ns: str) -> list[int]:
    """Every process whose network namespace is ``ns`` (``ip netns pids``)."""
    done = run([tool("ip"), "netns", "pids", ns], f"listing the processes of {ns}", check=False)
    return sorted(int(p) for p in done.stdout.split() if p.isdigit()) if done.returncode == 0 else []


def link_summary(ns: str, link: str) -> str:
    """``ip -br addr show dev LINK`` in ``ns``: name, state, addresses (empty if it is missing)."""
    done = _ip(ns, "-br", "addr", "show", "dev", link, what=f"reading {link} in {ns}", check=False)
    return " ".join(done.stdout.split()) if done.returncode == 0 else ""


def default_route(ns: str) -> str:
    done = _ip(ns, "route", "show", "default", what=f"reading the routes of {ns}", check=False)
    return " ".join(done.stdout.split()) if done.returncode == 0 else ""


def root_lab_addresses() -> list[str]:
    """Lab addresses or routes in the root namespace (there must be none)."""
    found = []
    for what in (["-4", "-o", "addr", "show"], ["-4", "route", "show", "table", "all"]):
        out = run([tool("ip"), *what], "reading the root namespace's addresses and routes").stdout
        found += [" ".join(line.split()) for line in out.splitlines() if LAB_NETWORK in line]
    return found
