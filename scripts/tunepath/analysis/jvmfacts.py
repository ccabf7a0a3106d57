"""A measurement's JVM facts: the record's GC/JIT counters and warm-up, as plain figures.

A live measurement records ``jvm`` (``{"start": …, "during": …}``, each
:meth:`tunepath.parse.hsperf.JvmCounters.to_dict`, or ``{"missing": "why"}``) and ``warmup``
(:class:`tunepath.analysis.steady.WarmUp`). :func:`jvm_facts` turns them into one figure per
column of :data:`JVM_COLUMNS`, None where the record has none (a reference run, a JVM without
performance counters, a warm-up that never became steady, a counter this JVM does not keep):

- ``compiles_during``: JIT compilations during the measured load (``during.compiles``);
- ``compile_s_during``: the JIT compilers' time during the load, seconds (``during.compile_s``);
- ``gc_pauses_during``: GC pauses during the load, from the collector counters named "… pauses"
  (None for Shenandoah, whose counters count whole cycles: :func:`_pauses`);
- ``gc_pause_ms_during``: their total time, ms;
- ``compiles_at_start``: JIT compilations since the JVM started, when the load began
  (``start.compiles``);
- ``steady_after_s``: seconds of warm-up until the throughput was steady
  (``warmup.steady_after_s``; None without a steady-state warm-up or when it never was steady);
- ``gc_cpu_pct_during``: the CPU time of the JVM's garbage-collector threads during the load, in %
  of Tomcat's CPU time over the same window (``threads_during.gc_s`` / ``tomcat_cpu_s``). The GC
  threads are found by name (``live.jvmfacts.GC_THREADS``); Serial GC has none, as it collects in
  the VM Thread, so its share counts the VM Thread instead (``threads_during.vm_thread_s``).

:func:`collector` names the collector a measurement ran from the JVM's own counter names
(``G1 young collection pauses`` → ``G1``), not from the options it was given.
"""

from __future__ import annotations

import math

__all__ = ["JVM_COLUMNS", "COUNT_COLUMNS", "jvm_facts", "fact_value", "collector"]

JVM_COLUMNS = ["compiles_during", "compile_s_during", "gc_pauses_during", "gc_pause_ms_during",
               "compiles_at_start", "steady_after_s", "gc_cpu_pct_during"]
COUNT_COLUMNS = frozenset({"compiles_during", "gc_pauses_during", "compiles_at_start"})


def _number(value) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def jvm_facts(live: dict) -> dict:
    """The JVM facts of one measurement (``live``: ``LiveFigures.to_data()``), by column."""
    jvm = live.get("jvm") if isinstance(live.get("jvm"), dict) else {}
    during = jvm.get("during") if isinstance(jvm.get("during"), dict) else {}
    start = jvm.get("start") if isinstance(jvm.get("start"), dict) else {}
    warmup = live.get("warmup") if isinstance(live.get("warmup"), dict) else {}
    pauses, pause_s = _pauses(during)
    return {
        "compiles_during": _number(during.get("compiles")),
        "compile_s_during": _number(during.get("compile_s")),
        "gc_pauses_during": pauses,
        "gc_pause_ms_during": None if pause_s is None else round(pause_s * 1000, 3),
        "compiles_at_start": _number(start.get("compiles")),
        "steady_after_s": _number(warmup.get("steady_after_s")) if warmup.get("window_s") else None,
        "gc_cpu_pct_during": _gc_share(jvm, during, _number(live.get("tomcat_cpu_s"))),
    }


def _pauses(during: dict) -> tuple[int | float | None, float | None]:
    """GC pauses during the load and their time, s: what the collector counters HotSpot names
    "… pauses" count (G1's, Parallel's, Serial's, ZGC's). Shenandoah's two counters ("Shenandoah
    partial", "Shenandoah full") count whole cycles, their concurrent phases included, so its
    pauses are not known: (None, None). A record without the collectors: the JVM's own sums."""
    collectors = during.get("collectors")
    if not isinstance(collectors, list):
        return _number(during.get("gc_pauses")), _number(during.get("gc_pause_s"))
    counted = [c for c in collectors if isinstance(c, dict) and str(c.get("name", "")).endswith(" pauses")]
    if not counted:
        return None, None
    counts = [_number(c.get("invocations")) for c in counted]
    times = [_number(c.get("seconds")) for c in counted]
    return (None if None in counts else sum(counts)), (None if None in times else round(sum(times), 6))


def _gc_share(jvm: dict, during: dict, tomcat_cpu_s: float | None) -> float | None:
    threads = jvm.get("threads_during") if isinstance(jvm.get("threads_during"), dict) else {}
    name = collector(during)
    gc_s = _number(threads.get("vm_thread_s" if name == "Serial" else "gc_s"))
    if gc_s is None or not tomcat_cpu_s or tomcat_cpu_s <= 0:
        return None
    return round(min(100.0, 100 * gc_s / tomcat_cpu_s), 2)


def collector(during: dict | None) -> str | None:
    """The collector the JVM's counters name (``G1``, ``Parallel``, ``Serial``, ``ZGC``,
    ``Shenandoah`` …): the first word its collectors' names share; None without counters."""
    collectors = during.get("collectors") if isinstance(during, dict) else None
    names = [c.get("name") for c in collectors or () if isinstance(c, dict) and isinstance(c.get("name"), str)]
    words = {n.split()[0] for n in names if n.split()}
    return words.pop() if len(words) == 1 else (" + ".join(sorted(words)) or None)


def fact_value(column: str, value) -> float | int | None:
    """A fact as read back from a frame (where pandas made NaN of None and floats of counts):
    None, an int for a count, else a float."""
    value = _number(value.item() if hasattr(value, "item") else value)
    if value is None:
        return None
    return int(value) if column in COUNT_COLUMNS and float(value).is_integer() else value
