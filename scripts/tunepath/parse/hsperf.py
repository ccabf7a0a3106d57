"""HotSpot's performance counters (the ``hsperfdata`` file jstat reads), without JDK tools.

A HotSpot JVM started with ``-XX:+UsePerfData`` (the default) keeps its counters in a file it
maps into memory, ``/tmp/hsperfdata_<user>/<pid>``; :func:`parse_hsperf` reads a copy of those
bytes. The format (PerfData version 2.0, the same from JDK 1.5 to 25):

- a 32-byte prologue: magic ``0xcafec0c0`` (always in this byte order), the byte order of the
  rest (0 big-endian, 1 little-endian), major and minor version, ``accessible`` (0 while the
  JVM starts), ``used`` bytes, overflow, a time stamp, ``entry_offset`` and ``num_entries``;
- ``num_entries`` entries from ``entry_offset``, each a 20-byte header (``entry_length``,
  ``name_offset``, ``vector_length``, ``data_type``, ``flags``, ``data_units``,
  ``data_variability``, ``data_offset``; the offsets relative to the entry), a NUL-terminated
  ASCII name and the data: a signed 64-bit long (type ``J``) or a byte vector (type ``B``,
  a NUL-terminated string when the units are ``String``).

The file is read strictly: anything out of place (a short file, another magic, an offset outside
the entry or past ``used``, a name without its NUL, a name twice) is a :class:`HsperfError`
(a :class:`~tunepath.errors.TunepathError`) with a one-line message; values whose type the format
knows but tunepath does not use (long vectors, byte vectors that are not strings) are skipped.

:class:`JvmCounters` picks what a run records from the entries: JIT compilations and their time,
the GC collectors' pauses, safepoints, uptime. Times are in ticks of ``sun.os.hrt.frequency``.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import NamedTuple

from tunepath.errors import TunepathError

__all__ = ["MAX_HSPERF_BYTES", "HsperfError", "parse_hsperf", "Collector", "JvmCounters"]

MAX_HSPERF_BYTES = 16 * 1024 * 1024   # the JVM's default is 32 KiB (-XX:PerfDataMemorySize)
MAGIC = b"\xca\xfe\xc0\xc0"
PROLOGUE = 32                          # bytes
HEADER = 20                            # bytes of an entry's header
UNITS_STRING = 5
_ORDERS = {0: ">", 1: "<"}
_NAME = re.compile(rb"[\x21-\x7e]{1,200}")      # printable ASCII, as HotSpot names its counters
_COLLECTOR = re.compile(r"sun\.gc\.collector\.(\d+)\.name")


class HsperfError(TunepathError):
    """The bytes are not a readable hsperfdata file; the message says what is wrong."""


def parse_hsperf(data: bytes) -> dict[str, int | str]:
    """Every long (as int) and every string (as str) of an hsperfdata file, by counter name."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise HsperfError(f"hsperfdata must be bytes, not {type(data).__name__}")
    data = bytes(data)
    order, used, offset, count = _prologue(data)
    entries: dict[str, int | str] = {}
    for index in range(count):
        if offset + HEADER > used:
            raise HsperfError(f"hsperfdata: entry {index} of {count} starts at byte {offset}, past the "
                              f"{used} bytes in use (a truncated or damaged file)")
        name, value, length = _entry(data, order, offset, used, index)
        if name in entries:
            raise HsperfError(f"hsperfdata: counter {name!r} appears twice (entry {index}): a damaged file")
        if value is not None:
            entries[name] = value
        offset += length
    return entries


def _prologue(data: bytes) -> tuple[str, int, int, int]:
    """(struct byte order, bytes in use, first entry's offset, number of entries), all checked."""
    if len(data) > MAX_HSPERF_BYTES:
        raise HsperfError(f"hsperfdata: {len(data)} bytes, more than the {MAX_HSPERF_BYTES // 2**20} MiB "
                          "a performance-data file can be here (the JVM's default is 32 KiB)")
    if len(data) < PROLOGUE:
        raise HsperfError(f"hsperfdata: truncated: {len(data)} bytes, shorter than the {PROLOGUE}-byte prologue")
    if data[:4] != MAGIC:
        raise HsperfError(f"not a HotSpot hsperfdata file: magic 0x{data[:4].hex()} (expected 0xcafec0c0)")
    if data[4] not in _ORDERS:
        raise HsperfError(f"hsperfdata: unknown byte order {data[4]} (expected 0 or 1)")
    major, minor, accessible = data[5], data[6], data[7]
    if major != 2:
        raise HsperfError(f"hsperfdata: version {major}.{minor} is not supported (only 2.x, JDK 5 and later)")
    if not accessible:
        raise HsperfError("hsperfdata: the JVM has not finished creating its counters (accessible flag 0); "
                          "read it again in a moment")
    order = _ORDERS[data[4]]
    used, _overflow, _stamp, offset, count = struct.unpack_from(order + "iiqii", data, 8)
    if not PROLOGUE <= used <= len(data):
        raise HsperfError(f"hsperfdata: truncated or damaged: the prologue says {used} bytes are in use, "
                          f"the file has {len(data)}")
    if not PROLOGUE <= offset <= used:
        raise HsperfError(f"hsperfdata: entry offset {offset} is outside the {used} bytes in use")
    if not 0 <= count <= (used - offset) // HEADER:
        raise HsperfError(f"hsperfdata: {count} entries cannot fit in the {used - offset} bytes after "
                          f"offset {offset}")
    return order, used, offset, count


def _entry(data: bytes, order: str, start: int, used: int, index: int) -> tuple[str, int | str | None, int]:
    """(name, value or None when skipped, entry length) of the entry at ``start``."""
    length, name_at, vector, kind, _flags, units, _var, data_at = struct.unpack_from(order + "iiiBBBBi",
                                                                                   data, start)
    where = f"hsperfdata: entry {index} at byte {start}"
    if length < HEADER or start + length > used:
        raise HsperfError(f"{where}: length {length} does not fit (at least {HEADER}, ending by byte {used})")
    if not HEADER <= name_at < length:
        raise HsperfError(f"{where}: name offset {name_at} is outside the entry's {length} bytes")
    end = data.find(b"\0", start + name_at, start + length)
    if end < 0 or not _NAME.fullmatch(data[start + name_at:end]):
        raise HsperfError(f"{where}: the name is not NUL-terminated printable ASCII within the entry")
    name = data[start + name_at:end].decode("ascii")
    size = 8 if kind == ord("J") and vector == 0 else vector
    if vector < 0 or not HEADER <= data_at <= length - size:
        raise HsperfError(f"{where} ({name}): data offset {data_at} and length {size} fall outside the "
                          f"entry's {length} bytes")
    raw = data[start + data_at:start + data_at + size]
    if kind == ord("J") and vector == 0:
        return name, struct.unpack(order + "q", raw)[0], length
    if kind == ord("B") and units == UNITS_STRING and vector > 0:
        return name, raw.split(b"\0", 1)[0].decode("utf-8", errors="replace"), length
    return name, None, length


class Collector(NamedTuple):
    """One of the GC's collectors (``sun.gc.collector.N``): its pauses, or their increase."""

    name: str
    invocations: int
    seconds: float


def _ticks(entries: dict, name: str, frequency: int) -> float | None:
    value = _long(entries, name)
    return None if value is None else value / frequency


def _long(entries: dict, name: str) -> int | None:
    value = entries.get(name)
    if value is not None and not isinstance(value, int):
        raise HsperfError(f"hsperfdata: counter {name} holds text, not a number")
    return value


def _text(entries: dict, name: str) -> str | None:
    value = entries.get(name)
    return value if isinstance(value, str) else None


def _collectors(entries: dict, frequency: int) -> tuple[Collector, ...]:
    """The collectors in the JVM's order (ZGC skips numbers: 0 and 2)."""
    found = sorted(int(m.group(1)) for key in entries if (m := _COLLECTOR.fullmatch(key)))
    out = []
    for n in found:
        invocations = _long(entries, f"sun.gc.collector.{n}.invocations")
        ticks = _long(entries, f"sun.gc.collector.{n}.time")
        name = _text(entries, f"sun.gc.collector.{n}.name")
        if name and invocations is not None and ticks is not None:
            out.append(Collector(name, invocations, ticks / frequency))
    return tuple(out)


def _minus(later, earlier, what: str):
    if later is None or earlier is None:
        return None
    if later < earlier:
        raise HsperfError(f"JVM counters: {what} went down ({earlier} then {later}): the snapshots are out "
                          "of order or from different JVMs")
    return later - earlier


def _seconds(value: float | None, places: int = 4) -> float | None:
    return None if value is None else round(value, places)


@dataclass(frozen=True)
class JvmCounters:
    """What a run records of a JVM's counters: a snapshot, or (``delta``) the change between two.

    ``None`` marks a counter this JVM does not keep: no JIT counters under ``-Xint``,
    ``gc_cpu_s`` before JDK 24, ``uptime_s`` on JDK 23 and later (where ``sun.os.hrt.ticks`` is
    gone) unless the reader gave the host's clock as ``now_ms``."""

    vm: str | None                 # java.vm.name and java.vm.version
    started_ms: int | None         # sun.rt.createVmBeginTime, ms since the epoch: which JVM this is
    uptime_s: float | None         # since the JVM started; in a delta, the time between the snapshots
    compiles: int | None           # sun.ci.totalCompiles
    compile_s: float | None        # java.ci.totalTime
    osr: int | None                # sun.ci.osrCompiles
    bailouts: int | None           # sun.ci.totalBailouts
    invalidated: int | None        # sun.ci.totalInvalidates
    compiler_threads: int | None   # sun.ci.threads
    collectors: tuple[Collector, ...]
    gc_cpu_s: float | None         # sun.threads.total_gc_cpu_time (ns): CPU of the GC's threads
    safepoints: int | None         # sun.rt.safepoints
    safepoint_s: float | None      # sun.rt.safepointTime
    last_gc_cause: str | None      # sun.gc.lastCause
    delta: bool = False

    @classmethod
    def from_entries(cls, entries: dict[str, int | str], now_ms: int | None = None) -> "JvmCounters":
        """The record from :func:`parse_hsperf`'s entries; ``now_ms``: the host's clock (ms since
        the epoch) when the file was read, for the uptime of JVMs without ``sun.os.hrt.ticks``."""
        frequency = _long(entries, "sun.os.hrt.frequency")
        if frequency is None or frequency <= 0:
            raise HsperfError("JVM counters: sun.os.hrt.frequency is missing or not positive, so no time "
                              "can be converted (not a HotSpot counters file?)")
        started = _long(entries, "sun.rt.createVmBeginTime")
        uptime = _ticks(entries, "sun.os.hrt.ticks", frequency)
        if uptime is None and now_ms is not None and started is not None:
            uptime = max(0, now_ms - started) / 1000
        name, version = _text(entries, "java.property.java.vm.name"), _text(entries, "java.property.java.vm.version")
        gc_cpu = _long(entries, "sun.threads.total_gc_cpu_time")
        return cls(
            vm=" ".join(filter(None, (name, version))) or None, started_ms=started, uptime_s=uptime,
            compiles=_long(entries, "sun.ci.totalCompiles"),
            compile_s=_ticks(entries, "java.ci.totalTime", frequency) if "sun.ci.totalCompiles" in entries else None,
            osr=_long(entries, "sun.ci.osrCompiles"), bailouts=_long(entries, "sun.ci.totalBailouts"),
            invalidated=_long(entries, "sun.ci.totalInvalidates"), compiler_threads=_long(entries, "sun.ci.threads"),
            collectors=_collectors(entries, frequency), gc_cpu_s=None if gc_cpu is None else gc_cpu / 1e9,
            safepoints=_long(entries, "sun.rt.safepoints"),
            safepoint_s=_ticks(entries, "sun.rt.safepointTime", frequency),
            last_gc_cause=_text(entries, "sun.gc.lastCause"))

    def minus(self, earlier: "JvmCounters") -> "JvmCounters":
        """The increase of every counter since ``earlier`` (a snapshot of the same JVM); collectors are
        matched by name, one only here counts from zero. Text and thread counts are this snapshot's."""
        if not isinstance(earlier, JvmCounters) or self.delta or earlier.delta:
            raise HsperfError("JVM counters: minus() takes two snapshots, not a delta")
        if None not in (self.started_ms, earlier.started_ms) and self.started_ms != earlier.started_ms:
            raise HsperfError(f"JVM counters: the snapshots are of different JVMs (started at "
                              f"{earlier.started_ms} and {self.started_ms} ms since the epoch)")
        before = {c.name: c for c in earlier.collectors}
        collectors = tuple(Collector(c.name, _minus(c.invocations, before[c.name].invocations,
                                                    f"collector {c.name!r} invocations"),
                                     _minus(c.seconds, before[c.name].seconds, f"collector {c.name!r} time"))
                           if c.name in before else c for c in self.collectors)
        pairs = {f: _minus(getattr(self, f), getattr(earlier, f), f)
                 for f in ("uptime_s", "compiles", "compile_s", "osr", "bailouts", "invalidated", "gc_cpu_s",
                           "safepoints", "safepoint_s")}
        return JvmCounters(vm=self.vm, started_ms=self.started_ms, compiler_threads=self.compiler_threads,
                           collectors=collectors, last_gc_cause=self.last_gc_cause, delta=True, **pairs)

    @property
    def gc_pauses(self) -> int:
        return sum(c.invocations for c in self.collectors)

    @property
    def gc_pause_s(self) -> float:
        return sum(c.seconds for c in self.collectors)

    def to_dict(self) -> dict:
        """Plain JSON values: seconds rounded to 0.1 ms (uptime to 1 ms), counts as ints, None as null."""
        return {
            "delta": self.delta, "vm": self.vm, "started_ms": self.started_ms,
            "uptime_s": _seconds(self.uptime_s, 3), "compiles": self.compiles,
            "compile_s": _seconds(self.compile_s), "osr": self.osr, "bailouts": self.bailouts,
            "invalidated": self.invalidated, "compiler_threads": self.compiler_threads,
            "collectors": [{"name": c.name, "invocations": c.invocations, "seconds": _seconds(c.seconds)}
                           for c in self.collectors],
            "gc_pauses": self.gc_pauses, "gc_pause_s": _seconds(self.gc_pause_s),
            "gc_cpu_s": _seconds(self.gc_cpu_s), "safepoints": self.safepoints,
            "safepoint_s": _seconds(self.safepoint_s), "last_gc_cause": self.last_gc_cause,
        }
