"""GC and JIT counters of a running JVM, read from its hsperfdata file: no jcmd, no jstat.

HotSpot maps its performance counters from ``/tmp/hsperfdata_<user>/<pid>``
(:mod:`tunepath.parse.hsperf` reads the format). The file is found through the process, not
guessed: the path comes from the mapping in ``/proc/<pid>/maps`` and is read through
``/proc/<pid>/root``, so a JVM in a container or under systemd's ``PrivateTmp`` (where its
``/tmp`` and pid differ from the host's) is read too, and a stale file of a dead JVM never is.
When the maps cannot be read (a JVM of another user), the command falls back to
``/tmp/hsperfdata_<owner>/<pid>``; a file only its owner may read is then read again with
``sudo -n`` (never a password prompt), when ``sudo`` is allowed.

A JVM without the file is normal (``-XX:-UsePerfData``, ``-XX:+PerfDisableSharedMem``, a
runtime that is not HotSpot, a JVM still starting): :func:`read_counters` then returns a
:class:`JvmReading` whose ``counters`` is None and whose ``why_missing`` says why, and
:func:`snapshot` returns None. Neither raises for a missing or damaged file, nor for a command
that fails on the host; only a pid that is not a positive whole number is refused.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from tunepath.errors import TunepathError
from tunepath.live.hosts import Host
from tunepath.model.shell import number
from tunepath.parse.hsperf import MAX_HSPERF_BYTES, JvmCounters, parse_hsperf

__all__ = ["JvmReading", "hsperf_command", "read_counters", "snapshot", "MARK"]

MARK = "tp-hsperf"
TIMEOUT = 30      # seconds; the file is 32 KiB by default

# $p is the pid; every other value is computed on the host. Prints one line "MARK STATUS ...",
# and for "ok" a second line with the file in base64. STATUS: ok, none (no file: why), denied.
_SCRIPT = r"""p={pid}; lim={limit}; off='-XX:-UsePerfData or -XX:+PerfDisableSharedMem'
say() {{ printf '{mark} %s\n' "$*"; }}
[ -d /proc/$p ] || {{ say none "no process $p is running"; exit 0; }}
owner=$(stat -c %U /proc/$p 2>/dev/null) || {{ say none "no process $p is running"; exit 0; }}
f=$(awk 'NF == 6 && $6 ~ /\/hsperfdata_[^\/]+\/[0-9]+$/ {{print $6; exit}}' /proc/$p/maps 2>/dev/null) \
  && maps=1 || maps=0
if [ -n "$f" ]; then src=/proc/$p/root$f
elif [ $maps = 1 ]; then
  say none "process $p (user $owner) has no hsperfdata file mapped: not a HotSpot JVM," \
    "started with $off, or its file was deleted"; exit 0
else src=/tmp/hsperfdata_$owner/$p
fi
[ -e "$src" ] || {{ say none "no file $src (user $owner): the JVM runs with $off, in another /tmp," \
  "or is not HotSpot"; exit 0; }}
[ -r "$src" ] || {{ say denied "$src belongs to $owner and $(id -un) cannot read it"; exit 0; }}
now=$(date +%s%3N)
say ok "$now" "$src"
head -c $((lim + 1)) "$src" | base64 -w0; echo
tk=$(getconf CLK_TCK 2>/dev/null) || tk=100; gc=0; vm=0
for t in /proc/$p/task/[0-9]*; do
  IFS= read -r c < $t/comm 2>/dev/null || continue
  s=$(cat $t/stat 2>/dev/null) || continue; set -- ${{s##*) }}
  case $c in {gc_threads}) gc=$((gc + ${{12}} + ${{13}}));; "VM Thread") vm=$((vm + ${{12}} + ${{13}}));; esac
done
say threads "$tk" "$gc" "$vm"
"""

# HotSpot's garbage-collector threads by name (``comm``, cut to 15 characters): G1's and
# Parallel's workers, G1's concurrent threads, ZGC's and Shenandoah's. Serial GC has none: it
# collects in the "VM Thread", which every collector also uses for its safepoints.
GC_THREADS = ('"GC Thread"*|"G1 "*|ZDirector|ZDriver*|ZStat|ZUnmapper*|ZUncommitter*|ZWorker*|ZRelocat*|'
              'Shenandoah*')


@dataclass(frozen=True)
class JvmReading:
    """One attempt to read a JVM's counters: ``counters``, or None and ``why_missing``."""

    pid: int
    counters: JvmCounters | None
    why_missing: str = ""
    source: str = ""          # the file read, as the host named it
    gc_threads_s: float | None = None    # CPU seconds of the JVM's GC threads so far (GC_THREADS)
    vm_thread_s: float | None = None     # … of its "VM Thread" (Serial's collections, every safepoint)


def hsperf_command(pid: int) -> str:
    """The bash script that finds and prints process ``pid``'s hsperfdata file."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise TunepathError(f"a JVM's pid must be a positive whole number, not {pid!r}")
    return _SCRIPT.format(pid=number(pid, "JVM pid"), limit=number(MAX_HSPERF_BYTES, "size limit"), mark=MARK,
                          gc_threads=GC_THREADS)


def read_counters(host: Host, pid: int, sudo: bool = True) -> JvmReading:
    """Process ``pid``'s counters on ``host``. ``sudo``: read another user's file with ``sudo -n``."""
    command = hsperf_command(pid)
    reading = _attempt(host, pid, command, False)
    if reading.counters is None and reading.why_missing.startswith("denied: ") and sudo:
        retry = _attempt(host, pid, command, True)
        if retry.counters is not None or not retry.why_missing.startswith("could not run"):
            return retry
        return JvmReading(pid, None, f"{reading.why_missing.removeprefix('denied: ')}, and sudo -n failed: "
                          f"{retry.why_missing}")
    if reading.why_missing.startswith("denied: "):
        return JvmReading(pid, None, reading.why_missing.removeprefix("denied: "))
    return reading


def snapshot(host: Host, pid: int) -> JvmCounters | None:
    """Process ``pid``'s counters on ``host``, or None (see :func:`read_counters` for the reason)."""
    return read_counters(host, pid).counters


def _attempt(host: Host, pid: int, command: str, sudo: bool) -> JvmReading:
    try:
        result = host.run(command, timeout=TIMEOUT, sudo=sudo, check=False)
    except (TunepathError, OSError) as exc:
        return JvmReading(pid, None, f"could not run the command: {_one_line(str(exc))}")
    lines = result.stdout.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(MARK + " ")), None)
    if not result.ok or at is None:
        why = "timed out" if result.timed_out else f"exited with status {result.exited}"
        tail = _one_line(result.stderr or result.stdout)
        return JvmReading(pid, None, f"could not run the command: it {why}" + (f": {tail}" if tail else ""))
    status, _, rest = lines[at][len(MARK) + 1:].partition(" ")
    if status == "denied":
        return JvmReading(pid, None, f"denied: {rest}")
    if status != "ok" or at + 1 >= len(lines):
        return JvmReading(pid, None, rest or f"unexpected answer {lines[at]!r}")
    now, _, source = rest.partition(" ")
    try:
        data = base64.b64decode(lines[at + 1].strip(), validate=True)
        entries = parse_hsperf(data)
        counters = JvmCounters.from_entries(entries, int(now) if now.isdigit() else None)
    except (TunepathError, binascii.Error, ValueError) as exc:
        return JvmReading(pid, None, f"{source}: {_one_line(str(exc))}", source)
    return JvmReading(pid, counters, "", source, *_thread_cpu(lines[at + 2:]))


def _thread_cpu(lines: list[str]) -> tuple[float | None, float | None]:
    """(GC threads, VM Thread) CPU seconds from the script's ``threads`` line; Nones without it."""
    for line in lines:
        fields = line.split()
        if fields[:2] == [MARK, "threads"] and len(fields) == 5 and all(f.isdigit() for f in fields[2:]):
            ticks, gc, vm = (int(f) for f in fields[2:])
            if ticks > 0:
                return gc / ticks, vm / ticks
    return None, None


def _one_line(text: str, limit: int = 300) -> str:
    flat = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[:limit] + "…"
