"""Host facts recorded with every run, and CPU utilisation sampled around a measurement.

Facts are read, never guessed: a fact the host does not reveal (no permission for
``dmesg``, no ``ethtool``, a loopback-only machine) is ``None`` with the reason in
``facts_missing``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tunepath.live.hosts import Host
from tunepath.evidence.store import FACT_KEYS

__all__ = ["gather_facts", "MODES", "CpuSample", "cpu_sample", "cpu_utilisation", "Channels", "channels_command",
           "parse_channels", "current_queues_command", "SBIN_PATH", "HugePages", "HUGEPAGES_COMMAND",
           "parse_hugepages"]

# a user's non-interactive SSH session on Debian has no /usr/sbin in its PATH: ethtool and sysctl live there
SBIN_PATH = 'PATH="$PATH:/usr/sbin:/sbin"'
HUGEPAGES_COMMAND = "grep -E '^(HugePages_(Total|Free|Rsvd|Surp)|Hugepagesize):' /proc/meminfo"


@dataclass(frozen=True)
class Channels:
    """A NIC's channel counts from ``ethtool -l``: current and pre-set maximum, None where n/a."""

    combined: int | None = None
    rx: int | None = None
    tx: int | None = None
    max_combined: int | None = None
    max_rx: int | None = None
    max_tx: int | None = None

    @property
    def kind(self) -> str | None:
        """``combined`` (one queue pair per channel, most NICs), ``rx-tx`` (separate receive and
        transmit queues: veth, some virtual NICs) or None (no channel settings)."""
        if (self.combined or 0) > 0:
            return "combined"
        if (self.rx or 0) > 0 or (self.tx or 0) > 0:
            return "rx-tx"
        return None

    @property
    def queues(self) -> int | None:
        """The current count: combined channels, else receive queues."""
        return {"combined": self.combined, "rx-tx": self.rx}.get(self.kind or "")

    def maximum(self, kind: str) -> int | None:
        return self.max_combined if kind == "combined" else self.max_rx


def channels_command(nic: str) -> str:
    """Prints ``max_rx=4 max_tx=4 max_combined=n/a rx=4 tx=4 combined=n/a`` for the NIC (nothing
    when the driver has no channel settings); ``nic`` is one shell word (quoted, or ``"$dev"``)."""
    return (f"{SBIN_PATH} ethtool -l {nic} 2>/dev/null | awk '/^Pre-set maximums/{{p=\"max_\"}} "
            "/^Current hardware settings/{p=\"\"} /^(RX|TX|Combined):/{k=tolower($1); sub(/:$/, \"\", k); "
            "printf \"%s%s=%s \", p, k, $2} END{print \"\"}'")


def parse_channels(text: str) -> Channels:
    """What :func:`channels_command` printed, as counts."""
    values = {k: int(v) for k, v in re.findall(r"\b((?:max_)?(?:rx|tx|combined))=(\d+)", text)}
    return Channels(**values)


def current_queues_command(nic: str) -> str:
    """Prints the NIC's current queue count (combined channels, else receive queues; nothing if
    the driver has no channel settings); ``nic`` is one shell word."""
    return (f"{SBIN_PATH} ethtool -l {nic} 2>/dev/null | awk '/Current hardware settings/{{c=1}} "
            "c && /^Combined:/ && $2+0 > 0 {print $2; f=1; exit} c && /^RX:/ && $2+0 > 0 {r=$2} "
            "END{if (!f && r) print r}'")


@dataclass(frozen=True)
class HugePages:
    """The kernel's huge page pool (``/proc/meminfo``)."""

    total: int | None = None
    free: int | None = None
    reserved: int | None = None     # promised to a mapping, not yet touched
    size_kb: int | None = None

    @property
    def in_use(self) -> int | None:
        """Pages some process has touched (Total - Free): above 0 while a JVM uses large pages."""
        return None if self.total is None or self.free is None else self.total - self.free


def parse_hugepages(text: str) -> HugePages:
    v = dict(re.findall(r"^(HugePages_Total|HugePages_Free|HugePages_Rsvd|Hugepagesize):\s+(\d+)", text, re.M))
    get = lambda k: int(v[k]) if k in v else None  # noqa: E731
    return HugePages(get("HugePages_Total"), get("HugePages_Free"), get("HugePages_Rsvd"), get("Hugepagesize"))

_SCRIPT = r"""
sec() { echo "@@@ $1"; }
sec cpu_model; (lscpu 2>/dev/null | sed -n 's/^ *Model name: *//p' | head -1) || true
sec cpus; nproc --all
sec cpus_online; cat /sys/devices/system/cpu/online 2>/dev/null
sec numa_nodes; ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l
sec kernel; uname -r
sec kernel_cmdline; cat /proc/cmdline 2>/dev/null
sec hugepages; @HUGEPAGES@
sec iommu; (dmesg 2>&1 || sudo -n dmesg 2>&1) | grep -iE 'iommu: (Default domain|DMA domain)|Operation not permitted|not allowed' | head -5
sec nic; dev=$(ip -o route show default 2>/dev/null | awk '{for(i=1;i<=NF;i++) if($i=="dev"){print $(i+1); exit}}'); echo "name=$dev"; \
  if [ -n "$dev" ]; then echo "numa_node=$(cat /sys/class/net/$dev/device/numa_node 2>/dev/null || cat /sys/class/net/$dev/device/../numa_node 2>/dev/null)"; \
  echo "$(@CHANNELS@)"; \
  @SBIN@ command -v ethtool >/dev/null || echo "no_ethtool=1"; fi
sec os; (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
sec java_version; java -version 2>&1 | head -1
sec nofile_limit; echo "soft=$(ulimit -n) hard=$(ulimit -Hn)"
sec end
"""


_SCRIPT = (_SCRIPT.replace("@CHANNELS@", channels_command('"$dev"')).replace("@SBIN@", SBIN_PATH)
           .replace("@HUGEPAGES@", HUGEPAGES_COMMAND))


def _sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("@@@ "):
            current = line[4:].strip()
            out[current] = ""
        elif current:
            out[current] += line + "\n"
    return {k: v.strip() for k, v in out.items()}


def gather_facts(host: Host, tomcat_version: str | None = None, load_generator: dict | None = None,
                 role: str = "server") -> tuple[dict, dict]:
    """``(facts, facts_missing)`` with every key of :data:`~tunepath.evidence.store.FACT_KEYS`."""
    s = _sections(host.run(_SCRIPT, check=False, timeout=60).stdout)
    facts: dict = {k: None for k in FACT_KEYS}
    missing: dict[str, str] = {}

    def put(key, value, reason):
        if value in (None, "", {}):
            missing[key] = reason
            facts[key] = None
        else:
            facts[key] = value

    put("cpu_model", s.get("cpu_model"), "lscpu reports no model name")
    put("cpus", int(s["cpus"]) if s.get("cpus", "").isdigit() else None, "nproc failed")
    put("cpus_online", s.get("cpus_online"), "/sys/devices/system/cpu/online unreadable")
    n = s.get("numa_nodes", "")
    put("numa_nodes", int(n) if n.isdigit() and int(n) > 0 else None, "no NUMA information in /sys")
    put("kernel", s.get("kernel"), "uname failed")
    put("kernel_cmdline", s.get("kernel_cmdline"), "/proc/cmdline unreadable")
    iommu = s.get("iommu", "")
    if re.search(r"not permitted|not allowed", iommu, re.I) or not iommu:
        put("iommu", None, "dmesg not readable by this user" if iommu else
            "the kernel log has no IOMMU mode lines (none configured, or the log has rotated)")
    else:
        put("iommu", [re.sub(r"^\[[^\]]*\]\s*", "", ln) for ln in iommu.splitlines()], "")
    facts["nic"], why = _nic(s.get("nic", ""))
    if why:
        missing["nic"] = why
    pages = parse_hugepages(s.get("hugepages", ""))
    if pages.size_kb:             # not a FACT_KEY: the huge page size the JVM step's reservation is sized by
        facts["hugepages"] = {"size_kb": pages.size_kb, "total": pages.total, "free": pages.free}
    put("os", s.get("os"), "/etc/os-release unreadable")
    put("java_version", s.get("java_version") if "version" in s.get("java_version", "") else None,
        "no java on this host" if role == "server" else "not needed on a client")
    put("tomcat_version", tomcat_version, "Tomcat not installed on this host" if role == "server"
        else "not installed on a client")
    put("load_generator", load_generator, "runs on the client" if role == "server"
        else "no load generator found")
    lim = dict(re.findall(r"(soft|hard)=(\S+)", s.get("nofile_limit", "")))
    put("nofile_limit", {"soft": lim.get("soft"), "hard": lim.get("hard")} if lim else None, "ulimit failed")
    return facts, missing


def _nic(section: str) -> tuple[dict | None, str]:
    """The NIC of the default route: name, channel kind and current queue count, NUMA node; and
    what is unknown about it."""
    nic = dict(re.findall(r"(\w+)=(\S*)", section))
    if not nic.get("name"):
        return None, "no default route: loopback only"
    channels = parse_channels(section)
    entry = {"name": nic["name"], "channels": channels.kind, "queues": channels.queues,
             "numa_node": int(nic["numa_node"]) if re.fullmatch(r"\d+", nic.get("numa_node", "")) else None}
    notes = []
    if entry["queues"] is None:
        notes.append("queue count unknown (" + ("ethtool missing" if nic.get("no_ethtool") else
                                               "the driver reports no channel settings") + ")")
    if entry["numa_node"] is None or entry["numa_node"] < 0:
        notes.append("NUMA node unknown (virtual NIC or single-node host)")
    return entry, "; ".join(notes)


@dataclass(frozen=True)
class CpuSample:
    host: str
    jiffies: dict[str, int]     # totals over all CPUs since boot, by mode


MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_MODES = MODES


def cpu_sample(host: Host) -> CpuSample:
    line = host.run("head -1 /proc/stat", check=False, timeout=15).stdout.split()
    values = [int(v) for v in line[1:9]] if line and line[0] == "cpu" else [0] * 8
    return CpuSample(host.name, dict(zip(_MODES, values)))


def cpu_utilisation(before: CpuSample, after: CpuSample) -> dict[str, float] | None:
    """Percent of all CPUs' time per mode between two samples (user, system, softirq, steal, idle …)."""
    delta = {m: after.jiffies[m] - before.jiffies[m] for m in _MODES}
    total = sum(delta.values())
    if total <= 0:
        return None
    pct = {m: round(100.0 * v / total, 2) for m, v in delta.items()}
    pct["busy"] = round(100.0 - pct["idle"] - pct["iowait"], 2)
    return pct
