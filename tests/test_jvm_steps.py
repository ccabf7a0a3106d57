"""The steps that change only the JVM's options (JVM, garbage collector, JIT): what a refused
option says, which collector the counters name, the GC threads' share of Tomcat's CPU, the
GC-thread CPU line of the counters' command, and the per-variant table of JVM facts.

The system tests run a real JVM with the garbage collectors and the JIT options the steps use."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest

from test_hsperf import java, java_candidates, kill, start_jvm, wait_for_line  # noqa: F401  (fixture)
from tunepath.analysis.jvmfacts import JVM_COLUMNS, collector, jvm_facts
from tunepath.live.hosts import CommandResult, LocalHost
from tunepath.live.jvmfacts import MARK, _thread_cpu, read_counters
from tunepath.live.measure import jvm_facts as measured_facts
from tunepath.live.tomcat import java_major
from tunepath.steps import get_step
from tunepath.steps.jvmoptions import jvm_table, refusal

pytestmark = pytest.mark.fast


# --- what the JVM says about options it does not take ------------------------------------------

@pytest.mark.parametrize("started, output, expected", [
    (True, 'openjdk version "25.0.2" 2026-01-20 LTS\nOpenJDK Runtime Environment', None),
    (True, "OpenJDK 64-Bit Server VM warning: Ignoring option ZGenerational; support was removed in 24.0\n"
           'openjdk version "25.0.2"', "OpenJDK 64-Bit Server VM warning: Ignoring option ZGenerational; "
                                       "support was removed in 24.0"),
    (False, "Unrecognized VM option 'UseCompactObjectHeaders'\nError: Could not create the Java Virtual Machine.\n"
            "Error: A fatal exception has occurred. Program will exit.", "Unrecognized VM option 'UseCompactObjectHeaders'"),
    (False, "Error occurred during initialization of VM\nUnknown -XX:ShenandoahGCMode option",
     "Unknown -XX:ShenandoahGCMode option"),
    (False, "", "it did not start (no output)"),
    (False, "Error: Could not create the Java Virtual Machine.", "it did not start (Error: Could not create the "
                                                                 "Java Virtual Machine.)"),
])
def test_refusal_quotes_the_jvm(started, output, expected):
    assert refusal(started, output) == expected


class FakeServer:
    def __init__(self, exited: int, stdout: str):
        self.result = CommandResult("srv", "", stdout, "", exited, 0.1)
        self.commands: list[str] = []

    def run(self, command, check=False, timeout=None):
        self.commands.append(command)
        return self.result


class FakeSession:
    def __init__(self, server):
        from tunepath.model.context import HostContext
        self.server, self.ctx = server, HostContext(java_home="/opt/jdk 25")


def test_a_variant_the_jvm_refuses_is_skipped_with_its_words_and_the_others_are_not():
    gc = get_step("gc")
    shenandoah = next(v for v in gc.variants if v.name == "shenandoah")
    refused = FakeServer(1, "Error occurred during initialization of VM\nOption -XX:+UseShenandoahGC not "
                            "supported\n")
    reasons = gc.skip_reasons(FakeSession(refused), shenandoah)
    assert reasons == ["the server's JVM does not take -Xms1g -Xmx1g -XX:+UseShenandoahGC "
                       "-XX:ShenandoahGCMode=generational: Option -XX:+UseShenandoahGC not supported"]
    # the JDK the measurements use, its path quoted, and exactly the variant's options
    assert refused.commands == ["'/opt/jdk 25/bin/java' -Xms1g -Xmx1g -XX:+UseShenandoahGC "
                                "-XX:ShenandoahGCMode=generational -version 2>&1"]
    assert gc.skip_reasons(FakeSession(FakeServer(0, 'openjdk version "25"')), shenandoah) == []


# --- the collector and the GC threads' share -----------------------------------------------------

@pytest.mark.parametrize("names, expected", [
    (["G1 young collection pauses", "G1 full collection pauses", "G1 concurrent cycle pauses"], "G1"),
    (["Serial young collection pauses", "Serial full collection pauses"], "Serial"),
    (["ZGC minor collection pauses", "ZGC major collection pauses"], "ZGC"),
    (["Shenandoah partial", "Shenandoah full"], "Shenandoah"),
    (["Parallel young collection pauses", "G1 full collection pauses"], "G1 + Parallel"),
    ([], None),
])
def test_collector_is_named_from_the_counters(names, expected):
    during = {"collectors": [{"name": n, "invocations": 1, "seconds": 0.1} for n in names]}
    assert collector(during) == expected
    assert collector(None) is None and collector({"collectors": "junk"}) is None


def live(names, gc_s=None, vm_s=None, tomcat_cpu_s=10.0):
    threads = {k: v for k, v in (("gc_s", gc_s), ("vm_thread_s", vm_s)) if v is not None}
    jvm = {"during": {"collectors": [{"name": n} for n in names]}}
    if threads:
        jvm["threads_during"] = threads
    return {"jvm": jvm, "tomcat_cpu_s": tomcat_cpu_s}


def test_gc_share_counts_the_collectors_threads_and_for_serial_the_vm_thread():
    assert jvm_facts(live(["G1 young collection pauses"], gc_s=0.5, vm_s=2.0))["gc_cpu_pct_during"] == 5.0
    assert jvm_facts(live(["Serial young collection pauses"], gc_s=0.0, vm_s=0.25))["gc_cpu_pct_during"] == 2.5
    # no thread reading (older runs), no Tomcat CPU, or a reading past Tomcat's own CPU
    assert jvm_facts(live(["G1 young collection pauses"]))["gc_cpu_pct_during"] is None
    assert jvm_facts(live(["ZGC minor collection pauses"], gc_s=1.0, tomcat_cpu_s=None))["gc_cpu_pct_during"] is None
    assert jvm_facts(live(["ZGC minor collection pauses"], gc_s=20.0))["gc_cpu_pct_during"] == 100.0
    assert set(jvm_facts({})) == set(JVM_COLUMNS)


def test_pauses_are_counted_only_from_the_counters_of_pauses():
    def during(*collectors):
        return {"jvm": {"during": {"gc_pauses": 99, "gc_pause_s": 9.0,
                                   "collectors": [{"name": n, "invocations": i, "seconds": t} for n, i, t in collectors]}}}
    g1 = jvm_facts(during(("G1 young collection pauses", 3, 0.012), ("G1 concurrent cycle pauses", 1, 0.003)))
    assert g1["gc_pauses_during"] == 4 and g1["gc_pause_ms_during"] == 15.0
    # Shenandoah's two counters count whole cycles, concurrent phases included: its pauses are unknown
    shenandoah = jvm_facts(during(("Shenandoah partial", 0, 0.0), ("Shenandoah full", 36, 0.95)))
    assert shenandoah["gc_pauses_during"] is None and shenandoah["gc_pause_ms_during"] is None
    # a record without the collectors keeps the JVM's own sums
    assert jvm_facts({"jvm": {"during": {"gc_pauses": 2, "gc_pause_s": 0.5}}})["gc_pause_ms_during"] == 500.0


def test_thread_cpu_line_is_read_in_clock_ticks():
    assert _thread_cpu([f"{MARK} threads 100 250 7"]) == (2.5, 0.07)
    assert _thread_cpu(["noise", f"{MARK} threads 1000 5 0"]) == (0.005, 0.0)
    for bad in ([], [f"{MARK} threads 0 1 1"], [f"{MARK} threads 100 x 1"], [f"{MARK} threads 100 1"]):
        assert _thread_cpu(bad) == (None, None)


class Reading:
    def __init__(self, gc, vm):
        from tunepath.parse.hsperf import JvmCounters
        self.counters = JvmCounters(vm=None, started_ms=1, uptime_s=1.0, compiles=1, compile_s=0.1, osr=0,
                                    bailouts=0, invalidated=0, compiler_threads=1, collectors=(), gc_cpu_s=None,
                                    safepoints=None, safepoint_s=None, last_gc_cause=None)
        self.why_missing, self.gc_threads_s, self.vm_thread_s = "", gc, vm


def test_a_measurement_records_the_threads_cpu_while_the_load_ran():
    assert measured_facts(Reading(1.0, 0.5), Reading(1.75, 0.5))["threads_during"] == {"gc_s": 0.75,
                                                                                       "vm_thread_s": 0.0}
    assert "threads_during" not in measured_facts(Reading(None, None), Reading(1.0, 1.0))


# --- the table of JVM facts ----------------------------------------------------------------------

class Result:
    def __init__(self, rows):
        self.frame = pd.DataFrame(rows)


class Run:
    run_id = "r1"


def test_jvm_table_shows_the_recorded_collector_and_each_fact_with_its_format():
    rows = [{"run_id": "r1", "variant": "zgc", "label": "Generational ZGC", "collector": "ZGC",
             "gc_pauses_during": 12.0, "gc_pause_ms_during": 0.31, "gc_cpu_pct_during": 4.5},
            {"run_id": "r1", "variant": "g1", "label": "G1", "collector": None,
             "gc_pauses_during": float("nan"), "gc_pause_ms_during": None, "gc_cpu_pct_during": None},
            {"run_id": "other", "variant": "g1", "label": "G1", "collector": "G1",
             "gc_pauses_during": 1.0, "gc_pause_ms_during": 1.0, "gc_cpu_pct_during": 1.0}]
    table = jvm_table(Result(rows), Run(), ("gc_pauses_during", "gc_pause_ms_during", "gc_cpu_pct_during")).data()
    assert [c["key"] for c in table["columns"]] == ["collector", "gc_pauses_during", "gc_pause_ms_during",
                                                    "gc_cpu_pct_during"]
    assert [r["variant"] for r in table["rows"]] == ["zgc", "g1"]
    zgc, g1 = (r["cells"] for r in table["rows"])
    assert zgc["collector"] == "ZGC" and zgc["gc_pauses_during"] == "12" and zgc["gc_pause_ms_during"] == "310.00 µs"
    assert zgc["gc_cpu_pct_during"].startswith("4.5")
    assert set(g1.values()) == {"n/a"}
    assert table["text_columns"] == ["collector"]           # the facts are figures, the collector words
    assert jvm_table(Result([{**rows[0], "run_id": "x"}]), Run(), ()).analysis() is None


def test_every_jvm_step_variant_is_one_set_of_options_in_setenv():
    for name in ("jvm", "gc", "jit"):
        step = get_step(name)
        blocks = {b.id: b for b in step.plan(step_ctx())}
        for v in step.variants:
            assert set(step.options[v.name]) <= set(step.tomcat_config(v.name, step_ctx()).jvm_options)
            assert "CATALINA_OPTS='" + " ".join(step.options[v.name]) + "'" in blocks[f"setenv-{v.name}"].text


def step_ctx():
    from tunepath.model.context import HostContext
    return HostContext()


# --- a real JVM ----------------------------------------------------------------------------------

def major(java_path: str) -> int:
    out = subprocess.run([java_path, "-version"], capture_output=True, text=True, timeout=60)
    return java_major(out.stderr) or 0


@pytest.mark.system
@pytest.mark.parametrize("step", ["gc", "jit"])
def test_the_jdk_takes_every_variant_it_is_new_enough_for_and_refuses_with_words_otherwise(java, step):
    found = major(java)
    for v in get_step(step).variants:
        r = subprocess.run([java, *get_step(step).options[v.name], "-version"], capture_output=True, text=True,
                           timeout=60)
        why = refusal(r.returncode == 0, r.stdout + r.stderr)
        if v.requires_java <= found:
            assert why is None, f"{v.name} on Java {found}: {why}"
    bogus = subprocess.run([java, "-XX:+UseNoSuchCollectorGC", "-version"], capture_output=True, text=True,
                           timeout=60)
    assert refusal(bogus.returncode == 0, bogus.stdout + bogus.stderr) == \
        "Unrecognized VM option 'UseNoSuchCollectorGC'"


@pytest.mark.system
@pytest.mark.parametrize("flag, threads", [("-XX:+UseParallelGC", "gc"), ("-XX:+UseSerialGC", "vm")])
def test_the_counters_command_reads_the_gc_threads_cpu_of_a_running_jvm(java, tmp_path, flag, threads):
    proc = start_jvm(java, tmp_path, 4_000, "-XX:+UsePerfData", flag, "-XX:ParallelGCThreads=2")
    try:
        wait_for_line(proc, "idle")
        reading = read_counters(LocalHost(), proc.pid)
        assert reading.counters is not None, reading.why_missing
        assert reading.gc_threads_s is not None and reading.vm_thread_s is not None
        # 4 s of allocation: the collector's own threads (Parallel) or the VM Thread (Serial) worked
        assert (reading.gc_threads_s if threads == "gc" else reading.vm_thread_s) > 0
        if threads == "vm":
            assert reading.gc_threads_s == 0
        name = collector(reading.counters.to_dict())
        assert name == ("Parallel" if threads == "gc" else "Serial")
    finally:
        kill(proc)
