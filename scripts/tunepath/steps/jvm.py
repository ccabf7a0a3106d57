"""Step: the JVM — heap size, garbage collector, large pages."""

from __future__ import annotations

from tunepath.live.tomcatconf import TomcatConfig, setenv_command
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.steps.base import Step
from tunepath.steps.commands import load_blocks, restart

__all__ = ["STEP"]

OPTIONS = {
    "heap-256m": ("-Xms256m", "-Xmx256m"),
    "heap-512m": ("-Xms512m", "-Xmx512m"),
    "heap-1g": ("-Xms1g", "-Xmx1g"),
    "heap-2g": ("-Xms2g", "-Xmx2g"),
    "parallel-gc": ("-Xms1g", "-Xmx1g", "-XX:+UseParallelGC"),
    "large-pages": ("-Xms1g", "-Xmx1g", "-XX:+UseLargePages"),
    "thp": ("-Xms1g", "-Xmx1g", "-XX:+UseTransparentHugePages"),
}


class Jvm(Step):
    name = "jvm"
    title = "JVM: heap size, garbage collector, large pages"
    why = ("Sweeps the heap (`-Xms` = `-Xmx` from 256 MB to 2 GB), compares G1 (the default) with the Parallel "
           "collector, and tries `-XX:+UseLargePages` and `-XX:+UseTransparentHugePages`, reading the JVM's own "
           "warnings to tell when it could not get large pages.")
    variants = (
        Variant("heap-256m", "Heap 256 MB", "-Xms256m -Xmx256m"),
        Variant("heap-512m", "Heap 512 MB", "-Xms512m -Xmx512m"),
        Variant("heap-1g", "Heap 1 GB", "-Xms1g -Xmx1g"),
        Variant("heap-2g", "Heap 2 GB", "-Xms2g -Xmx2g"),
        Variant("parallel-gc", "Parallel GC, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseParallelGC"),
        Variant("large-pages", "Large pages, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseLargePages"),
        Variant("thp", "Transparent huge pages, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseTransparentHugePages"),
    )
    verifications = ("java-version",)
    probes = ("hugepages", "thp")

    def config(self, variant: str, ctx: HostContext) -> TomcatConfig:
        if variant in OPTIONS:
            return TomcatConfig(access_log=False, jvm_options=OPTIONS[variant])
        return super().config(variant, ctx)

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block("hugepages", "server", "How many huge pages the kernel has reserved",
                        "grep -i huge /proc/meminfo"),
                  Block("thp", "server", "Whether transparent huge pages are enabled",
                        "cat /sys/kernel/mm/transparent_hugepage/enabled")]
        for v in self.variants:
            blocks.append(Block(f"setenv-{v.name}", "server", f"{v.label}: JVM options in {ctx.tomcat_home}/bin/setenv.sh",
                                setenv_command(ctx.tomcat_home, self.tomcat_config(v.name, ctx)), variant=v.name))
        return blocks + [restart(ctx), *load_blocks(ctx)]


STEP = Jvm()
