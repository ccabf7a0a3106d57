"""Step: the garbage collector — G1, Parallel, Serial, generational ZGC, generational Shenandoah,
and compact object headers."""

from __future__ import annotations

from tunepath.model.plan import Variant
from tunepath.steps.jvmoptions import JvmOptionsStep

__all__ = ["STEP"]

HEAP = ("-Xms1g", "-Xmx1g")


class Gc(JvmOptionsStep):
    name = "gc"
    title = "Garbage collector: G1, Parallel, Serial, ZGC, Shenandoah"
    why = ("Runs Tomcat's JVM with each collector a current JDK offers, every one named explicitly and with "
           "the same 1 GB heap: G1 (the JVM's own choice on a server with 2 or more CPUs), Parallel, "
           "Serial (its choice on one CPU), generational ZGC (JDK 23 and later), generational Shenandoah "
           "and G1 with compact object headers (both JDK 25). Which collector really ran is read from "
           "the JVM's own counters, with its pauses and its threads' CPU time.")
    change = ("Name the collector in `bin/setenv.sh` (`-XX:+UseG1GC` …) rather than relying on the JVM's choice, "
              "which depends on the CPUs it sees; keep G1 unless your own measurement favors another.")
    avoid = ("Concurrent collectors (ZGC, Shenandoah) spend CPU beside the application to keep pauses short: "
             "on a server with few CPUs to spare, or where throughput matters more than the longest pause, "
             "they cost more than they give.")
    variants = (
        Variant("g1", "G1", "-Xms1g -Xmx1g -XX:+UseG1GC"),
        Variant("parallel", "Parallel", "-Xms1g -Xmx1g -XX:+UseParallelGC"),
        Variant("serial", "Serial", "-Xms1g -Xmx1g -XX:+UseSerialGC"),
        Variant("zgc", "Generational ZGC", "-Xms1g -Xmx1g -XX:+UseZGC (generational from JDK 23; "
                "JDK 21 and 22 need -XX:+ZGenerational)", requires_java=23),
        Variant("shenandoah", "Generational Shenandoah",
                "-Xms1g -Xmx1g -XX:+UseShenandoahGC -XX:ShenandoahGCMode=generational", requires_java=25),
        Variant("g1-compact-headers", "G1, compact object headers",
                "-Xms1g -Xmx1g -XX:+UseG1GC -XX:+UseCompactObjectHeaders", requires_java=25),
    )
    options = {
        "g1": (*HEAP, "-XX:+UseG1GC"),
        "parallel": (*HEAP, "-XX:+UseParallelGC"),
        "serial": (*HEAP, "-XX:+UseSerialGC"),
        "zgc": (*HEAP, "-XX:+UseZGC"),
        "shenandoah": (*HEAP, "-XX:+UseShenandoahGC", "-XX:ShenandoahGCMode=generational"),
        "g1-compact-headers": (*HEAP, "-XX:+UseG1GC", "-XX:+UseCompactObjectHeaders"),
    }
    facts = ("gc_pauses_during", "gc_pause_ms_during", "gc_cpu_pct_during")
    verifications = ("java-version",)


STEP = Gc()
