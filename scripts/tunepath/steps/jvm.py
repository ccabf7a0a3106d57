"""Step: the JVM — heap size, garbage collector, large pages."""

from __future__ import annotations

from tunepath.live.facts import HUGEPAGES_COMMAND
from tunepath.model.context import HostContext
from tunepath.model.plan import Block, Variant
from tunepath.model.shell import number
from tunepath.steps.commands import load_blocks, restart, tomcat_path
from tunepath.steps.jvmoptions import JvmOptionsStep

__all__ = ["STEP", "hugepages_for", "LARGE_PAGES_HEAP_MB", "PAGESIZE_LOG"]

# the JVM's own account of its page sizes, each line tagged with its pid (catalina.out holds every start)
PAGESIZE_LOG = "-Xlog:gc+init,pagesize:stdout:uptime,level,tags,pid"
LARGE_PAGES_HEAP_MB = 1024
CODE_CACHE_MB = 240     # ReservedCodeCacheSize with tiered compilation (the default): mapped with large pages too

OPTIONS = {
    "heap-256m": ("-Xms256m", "-Xmx256m"),
    "heap-512m": ("-Xms512m", "-Xmx512m"),
    "heap-1g": ("-Xms1g", "-Xmx1g"),
    "heap-2g": ("-Xms2g", "-Xmx2g"),
    "parallel-gc": ("-Xms1g", "-Xmx1g", "-XX:+UseParallelGC"),
    "large-pages": ("-Xms1g", "-Xmx1g", "-XX:+UseLargePages", PAGESIZE_LOG),
    "thp": ("-Xms1g", "-Xmx1g", "-XX:+UseTransparentHugePages"),
}


def hugepages_for(heap_mb: int, page_kb: int) -> int:
    """Huge pages for a JVM with ``-XX:+UseLargePages``: the heap, the code cache (240 MB) and
    heap/16 for G1's side tables. The tables need about heap/27 (Java 17: two marking bitmaps
    of heap/64 and three tables of heap/512; Java 21+ has one bitmap), so heap/16 leaves a
    margin. Measured on this path's lab with a 1 GB heap and 2 MB pages: Java 17 maps 651
    pages, Java 25 642; this gives 664."""
    need_kb = heap_mb * 1024 + CODE_CACHE_MB * 1024 + heap_mb * 1024 // 16
    return -(-need_kb // page_kb)


def _size(kb: int) -> str:
    return f"{kb // 1048576} GB" if kb % 1048576 == 0 else f"{kb // 1024} MB" if kb % 1024 == 0 else f"{kb} kB"


class Jvm(JvmOptionsStep):
    name = "jvm"
    title = "JVM: heap size, garbage collector, large pages"
    why = ("Sweeps the heap (`-Xms` = `-Xmx` from 256 MB to 2 GB), compares G1 (the default) with the Parallel "
           "collector, and tries `-XX:+UseLargePages` and `-XX:+UseTransparentHugePages`, reading the JVM's own "
           "warnings to tell when it could not get large pages.")
    change = 'Set the heap with `-Xms` equal to `-Xmx` in `bin/setenv.sh` (`CATALINA_OPTS`), and keep the default G1 collector unless your own measurement says otherwise.'
    avoid = "Do not size the heap beyond the server's free memory. Large pages need huge pages reserved by the kernel first (`vm.nr_hugepages`); without them the JVM warns and falls back."
    variants = (
        Variant("heap-256m", "Heap 256 MB", "-Xms256m -Xmx256m"),
        Variant("heap-512m", "Heap 512 MB", "-Xms512m -Xmx512m"),
        Variant("heap-1g", "Heap 1 GB", "-Xms1g -Xmx1g"),
        Variant("heap-2g", "Heap 2 GB", "-Xms2g -Xmx2g"),
        Variant("parallel-gc", "Parallel GC, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseParallelGC"),
        Variant("large-pages", "Large pages, heap 1 GB",
                "-Xms1g -Xmx1g -XX:+UseLargePages, with huge pages reserved (vm.nr_hugepages)"),
        Variant("thp", "Transparent huge pages, heap 1 GB", "-Xms1g -Xmx1g -XX:+UseTransparentHugePages"),
    )
    verifications = ("java-version",)
    probes = ("hugepages", "thp", "hugepages-reserved")
    disruptive_needs = {"large-pages": ("reserve-hugepages",)}
    options = OPTIONS
    facts = ("gc_pauses_during", "gc_pause_ms_during", "gc_cpu_pct_during")

    def plan(self, ctx: HostContext) -> list[Block]:
        blocks = [Block("hugepages", "server", "How many huge pages the kernel has reserved",
                        "grep -i huge /proc/meminfo"),
                  Block("thp", "server", "Whether transparent huge pages are enabled",
                        "cat /sys/kernel/mm/transparent_hugepage/enabled"),
                  *self.large_page_blocks(ctx)]
        blocks += self.setenv_blocks(ctx)
        blocks.append(Block("large-pages-in-use", "server",
                            "Large pages: while Tomcat runs, the JVM's own words on its page sizes, and the "
                            "huge pages in use (HugePages_Free below HugePages_Total)",
                            f"pid=$(cat {tomcat_path(ctx, 'temp/tomcat.pid')})\n"
                            f"grep -F \"[$pid][\" {tomcat_path(ctx, 'logs/catalina.out')} | "
                            "grep -E 'Large [Pp]age|Heap: |CodeHeap|warning'\n"
                            f"{HUGEPAGES_COMMAND}", variant="large-pages"))
        blocks.append(Block("release-hugepages", "server",
                            "After the step: release the huge pages (back to the count the host had before, "
                            "0 unless it reserved some itself)",
                            "sudo sysctl -w vm.nr_hugepages=0", variant="large-pages"))
        return blocks + [restart(ctx), *load_blocks(ctx, self.load(ctx))]

    def large_page_blocks(self, ctx: HostContext) -> list[Block]:
        """Reserve the huge pages the large-pages variant needs, then show what the kernel reserved."""
        page_kb = int(number(ctx.hugepage_kb, "hugepage_kb"))
        pages = hugepages_for(LARGE_PAGES_HEAP_MB, page_kb)
        return [Block("reserve-hugepages", "server",
                      f"Large pages: reserve {pages} huge pages of {_size(page_kb)} ({_size(pages * page_kb)}) for "
                      "the 1 GB heap, the 240 MB code cache and G1's tables",
                      f"sudo sysctl -w vm.nr_hugepages={pages}", disruptive=True, variant="large-pages"),
                Block("hugepages-reserved", "server", "How many huge pages the kernel reserved",
                      HUGEPAGES_COMMAND)]

    def run_live(self, session) -> None:
        """The standard flow, then the huge pages back to the host's own count (a failure or an
        interrupt restores them with the rest of the host)."""
        from tunepath.live.actions import release_hugepages
        from tunepath.live.execute import standard_flow

        standard_flow(self, session)
        release_hugepages(session, self.name)

    def before_load(self, session, variant: str, blocks: dict[str, Block], repetition: int):
        """For large pages: once the load has run (Tomcat still up), record that the JVM used them."""
        if variant != "large-pages" or "large-pages-in-use" not in blocks:
            return None
        from tunepath.live.actions import large_pages_evidence

        return lambda: large_pages_evidence(session, self.name, blocks["large-pages-in-use"], repetition)


STEP = Jvm()
