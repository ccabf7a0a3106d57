"""What a fault harness compares before and after each fault: the state of the lab's server.

:class:`ServerState` is the namespace server's (read from outside its SSH by
:class:`harness.faults.probe.Probe`), :class:`GuestState` the VM guest's (read over SSH by
:class:`harness.faults.guest.Guest`, parsed by :func:`parse_state`). Both say what differs from
an earlier state, one line per field (:meth:`State.differences`). Pure: no lab, no SSH.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

__all__ = ["State", "ServerState", "GuestState", "parse_state"]


def _shown(value):
    """A sha256 hex digest shortened to 12 characters; anything else as it is."""
    digest = isinstance(value, str) and len(value) == 64 and set(value) <= set("0123456789abcdef")
    return value[:12] if digest else value


@dataclass(frozen=True)
class State:
    """A server's state: frozen fields that :meth:`differences` compares."""

    def differences(self, before: "State") -> list[str]:
        """One line per field that differs from ``before``: "queues: rx 4 tx 4 → rx 1 tx 1". Process
        lists (tuples of pids) differ when one is empty and the other not: which pids does not matter."""
        out = []
        for f in fields(self):
            was, now = getattr(before, f.name), getattr(self, f.name)
            if isinstance(was, tuple):
                if bool(was) != bool(now):
                    out.append(f"{f.name}: running (pids {' '.join(map(str, now))})" if now
                               else f"{f.name}: stopped")
            elif was != now:
                out.append(f"{f.name}: {_shown(was)} → {_shown(now)}")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ServerState(State):
    """What a run may change on the namespace lab's server and must put back."""

    queues: str                    # eth0's current channels, as `ethtool -l` prints them: "rx 4 tx 4 combined 0"
    cpus_online: str               # /sys/devices/system/cpu/online
    hugepages: int                 # vm.nr_hugepages
    server_xml: str                # sha256 of conf/server.xml, or "absent"
    setenv_sh: str                 # sha256 of bin/setenv.sh, or "absent"
    context_xml: str               # sha256 of the examples webapp's context.xml, or "absent"
    tomcat: tuple[int, ...] = ()   # pids of the server user's Tomcat JVMs
    httpd: tuple[int, ...] = ()    # pids of the server user's Apache httpd
    load: tuple[int, ...] = ()     # pids of load generators of the client users
    lock: bool = False             # ~/.tunepath/lock of the server user exists
    tls_key: bool = False          # the TLS step's certificate and key (conf/tunepath-tls) exist
    sysctls: str = ""              # the kernel step's settings in each namespace: "server net.core.somaxconn=4096 …"
    saved_sysctls: bool = False    # a lab user's ~/.tunepath/original-sysctls.json (a run's leftover)


@dataclass(frozen=True)
class GuestState(State):
    """What the IOMMU step changes on the VM and a run (or a restore) must put back."""

    cmdline: str                   # /proc/cmdline
    dropin: str                    # sha256 (12 hex) of /etc/default/grub.d/99-tunepath-iommu.cfg, or "absent"
    grub_cfg: str                  # "ok", "missing", "empty" or "no menuentry" (/boot/grub/grub.cfg)
    grub_iommu: int                # lines of grub.cfg holding "iommu."
    cpus_online: str               # /sys/devices/system/cpu/online
    queues: str                    # eth0's current combined channels (ethtool -l)
    lock: bool = False             # ~/.tunepath/lock
    saved_state: bool = False      # ~/.tunepath/original-state.json (a run's or restore's leftover)
    tomcat: bool = False           # a Tomcat JVM of the user runs


GUEST_KEYS = ("cmdline", "dropin", "grub_cfg", "grub_iommu", "cpus", "queues")


def parse_state(text: str) -> GuestState:
    """The guest's ``key=value`` lines (:data:`harness.faults.guest.STATE_SCRIPT`) as a GuestState."""
    kv = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            kv[key.strip()] = value.strip()
    missing = [k for k in GUEST_KEYS if k not in kv]
    if missing:
        raise ValueError(f"the guest's state lacks {', '.join(missing)}: {text[-300:]!r}")
    yes = lambda key: kv.get(key, "no") == "yes"    # noqa: E731
    return GuestState(cmdline=kv["cmdline"], dropin=kv["dropin"], grub_cfg=kv["grub_cfg"],
                      grub_iommu=int(kv["grub_iommu"] or 0), cpus_online=kv["cpus"], queues=kv["queues"],
                      lock=yes("lock"), saved_state=yes("saved_state"), tomcat=bool(kv.get("tomcat", "").strip()))
