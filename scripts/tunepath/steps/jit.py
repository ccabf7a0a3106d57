"""Step: the JIT compiler — tiered compilation and the code cache, with the flags the JVM set
for itself on the server's CPU."""

from __future__ import annotations

from tunepath.model.plan import Variant
from tunepath.steps.jvmoptions import JvmOptionsStep

__all__ = ["STEP"]

HEAP = ("-Xms1g", "-Xmx1g")
NO_TIERED = ("-XX:-TieredCompilation",)
CODE_CACHE = ("-XX:ReservedCodeCacheSize=64M", "-XX:InitialCodeCacheSize=64M")


class Jit(JvmOptionsStep):
    name = "jit"
    title = "JIT: tiered compilation and the code cache"
    why = ("Tries the JIT settings AWS's Graviton performance runbook suggests testing for Java services, "
           "with and without: tiered compilation off (`-XX:-TieredCompilation`: C2 only), a 64 MB code "
           "cache (`-XX:ReservedCodeCacheSize=64M -XX:InitialCodeCacheSize=64M`), and both. Each keeps the "
           "1 GB heap and the JVM's own collector. The JVM's counters show how much it compiled before "
           "and during the load, and the warm-up how long it took to become steady; the server's "
           "`-XX:+PrintFlagsFinal` shows the CPU features the JVM turned on by itself.")
    change = ("Keep the JVM's defaults (tiered compilation, its own code cache size) unless a measurement on "
              "your server shows a gain; on Arm, let the JVM detect the CPU's features rather than set them.")
    avoid = ("Without tiered compilation the JVM interprets longer before C2 compiles, so it warms up slowly: "
             "avoid it where Tomcat restarts often or serves traffic straight after it starts. A code cache "
             "too small for the application stops compilation altogether (`CodeCache is full`).")
    variants = (
        Variant("tiered", "Tiered compilation (default)", "-Xms1g -Xmx1g"),
        Variant("no-tiered", "Tiered compilation off", "-Xms1g -Xmx1g -XX:-TieredCompilation"),
        Variant("code-cache-64m", "Code cache 64 MB",
                "-Xms1g -Xmx1g -XX:ReservedCodeCacheSize=64M -XX:InitialCodeCacheSize=64M"),
        Variant("no-tiered-code-cache-64m", "Tiered off, code cache 64 MB",
                "-Xms1g -Xmx1g -XX:-TieredCompilation -XX:ReservedCodeCacheSize=64M -XX:InitialCodeCacheSize=64M"),
    )
    options = {
        "tiered": HEAP,
        "no-tiered": (*HEAP, *NO_TIERED),
        "code-cache-64m": (*HEAP, *CODE_CACHE),
        "no-tiered-code-cache-64m": (*HEAP, *NO_TIERED, *CODE_CACHE),
    }
    facts = ("compiles_at_start", "compiles_during", "compile_s_during", "steady_after_s")
    verifications = ("java-version", "jvm-flags")


STEP = Jit()
