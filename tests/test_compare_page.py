"""The comparison page: which pair it opens on (the same host kind, else the newest two live
runs, else the servers nearest in size; never an emulated run), load settings that are right
for closed-loop tools, differences of tool marked, and pairs with nothing in common only listed."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT
from hugosite import hugo
from tunepath.analysis.compare import compare_document, default_pair, fact_rows, kernel_parameters
from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.pairing import RULES, choose_default, common_ground, host_kind, same_kind
from tunepath.evidence.store import Measurement, Run, RunStore
from tunepath.model.context import HostContext
from tunepath.model.run import HostRecord, RunInfo
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs", REGISTRY.names)
WRK2 = HostContext(load_generator="~/.tunepath/bin/wrk2", open_loop=True, rate=14000, threads=2, connections=64,
                   duration_s=21, warmup_s=45)
WRK = HostContext(load_generator="wrk", open_loop=False, rate=20000, threads=2, connections=64, duration_s=10,
                  warmup_s=10)


def run(run_id: str, cpu: str | None = "AMD EPYC", cpus: int | None = 2, kind: str = "live", date: str | None = None,
        emulated: bool = False, context: HostContext = WRK2, **facts) -> Run:
    server = HostRecord("server", run_id.split("-")[0], facts={"cpu_model": cpu, "cpus": cpus, **facts})
    info = RunInfo(run_id, kind, "complete", run_id, server, HostRecord("client", "client"), emulated=emulated,
                   date=date)
    return Run(run_id, Path("/nonexistent") / run_id, {}, context, info)


def frame(measured: dict[str, list[str]], tools: dict[str, str] | None = None) -> pd.DataFrame:
    """A measurements frame: run id → the baseline variants it measured (each at 1000 req/s)."""
    rows = [dict(run_id=r, step="baseline", variant=v, label=v, requests_per_sec=1000.0, rps_values=[1000.0],
                 server_cpu_us_per_req=None, n=1, tool=(tools or {}).get(r, "wrk2"))
            for r, variants in measured.items() for v in variants]
    return pd.DataFrame(rows)


def ids(pair) -> set[str]:
    return {pair[0].run_id, pair[1].run_id}


# --- the default pair, on synthetic run sets ---------------------------------------------------------------
def test_the_same_host_kind_wins_over_newer_live_runs():
    runs = [run("ref", "Arm Neoverse-V2", 64, kind="reference"), run("old", "arm  neoverse-v2 ", 64, date="2026-01-01"),
            run("new1", "AMD EPYC", 2, date="2026-03-01"), run("new2", "Intel Xeon", 2, date="2026-03-02")]
    f = frame({r.run_id: ["stock"] for r in runs})
    pick = choose_default(runs, f)
    assert ids((pick.a, pick.b)) == {"ref", "old"}               # model compared without case or spacing
    assert pick.rule == RULES["host-kind"].format(kind=host_kind(runs[0]))
    assert "Arm Neoverse-V2, 64 CPUs" in pick.rule


def test_of_several_pairs_of_one_host_kind_the_newest_wins():
    runs = [run("a", date="2026-01-01"), run("b", date="2026-02-01"), run("c", date="2026-03-01"),
            run("x", "Intel Xeon", 2, date="2026-04-01")]
    assert ids(default_pair(runs, frame({r.run_id: ["stock"] for r in runs}))) == {"b", "c"}


def test_a_pair_with_nothing_in_common_is_never_the_default():
    runs = [run("a", date="2026-01-01"), run("b", date="2026-02-01"), run("c", date="2026-03-01")]
    f = frame({"a": ["stock"], "b": ["threads"], "c": ["stock", "threads"]})
    assert common_ground(runs[0], runs[1], f) == 0
    pick = choose_default(runs, f)                                # a and b share nothing: b and c, the newest
    assert ids((pick.a, pick.b)) == {"b", "c"} and pick.rule == RULES["host-kind"].format(kind=host_kind(runs[0]))
    assert choose_default(runs, frame({"a": ["stock"], "b": ["threads"], "c": ["access-log-off"]})) is None


def test_two_different_machines_are_never_the_default_pair():
    """The NUMA page says not to set its two reference servers against each other: nor does the
    comparison open on them, or on two live runs of different host kinds, or on a run without one."""
    runs = [run("aws", "Arm Neoverse-V2 (AWS Graviton4)", 192, kind="reference"),
            run("grace", "NVIDIA Grace, Arm Neoverse-V2", 144, kind="reference"),
            run("l1", "AMD EPYC", 2, date="2026-01-01"), run("l2", "Intel Xeon", 4, date="2026-02-01"),
            run("l3", None, None, date="2026-03-01"),
            run("vm1", "QEMU TCG", 2, date="2026-11-25", emulated=True),
            run("vm2", "QEMU TCG", 2, date="2026-11-26", emulated=True)]
    f = frame({r.run_id: ["stock"] for r in runs})
    assert choose_default(runs, f) is None
    assert host_kind(runs[4]) is None and not same_kind(runs[4], runs[4])   # no CPU facts: no host kind
    assert not same_kind(runs[5], runs[2])                       # emulated and real are never one kind
    doc = compare_document(runs, f, REGISTRY, REGISTRY.get("compare"))
    assert not any(p["default"] for p in doc["pairs"]) and doc["default_rule"] is None
    assert doc["pairs"] and not any({p["a"]["run_id"], p["b"]["run_id"]} & {"vm1", "vm2"}
                                    for p in doc["pairs"])       # an emulated run is in no pair: no ratio of its figures


# --- the default pair, on the recorded runs -------------------------------------------------------------------
def recorded():
    runs = [r for r in STORE.load_all() if r.info.status != "failed" and not r.info.superseded_by]
    return runs, measurements_frame(runs, REGISTRY)


def test_the_recorded_runs_open_on_two_runs_of_one_host_kind_or_none():
    runs, f = recorded()
    pick = choose_default(runs, f)
    real = [r for r in runs if not r.emulated]
    pairs = [(a, b) for i, a in enumerate(real) for b in real[i + 1:] if common_ground(a, b, f)]
    if any(same_kind(a, b) for a, b in pairs):
        assert pick and same_kind(pick.a, pick.b) and common_ground(pick.a, pick.b, f) > 0
    else:                                                         # today: no two runs of one host kind
        assert pick is None


# --- load settings and tools ------------------------------------------------------------------------------
def test_a_closed_loop_run_has_no_offered_rate_and_its_tool_differs():
    rows = {r["key"]: r for r in fact_rows(run("open", context=WRK2), run("closed", context=WRK))}
    assert rows["context.rate"]["b"] == "closed loop (no offered rate)"
    assert rows["context.rate"]["a"] == "14,000 req/s"
    assert not any("20,000" in r["b"] or "20000" in r["b"] for k, r in rows.items() if k.startswith("context."))
    assert (rows["context.tool"]["a"], rows["context.tool"]["b"]) == ("wrk2 (open loop)", "wrk (closed loop)")
    for key in ("context.tool", "context.rate", "context.connections", "context.duration_s", "context.warmup_s"):
        assert rows[key]["differs"] is (key != "context.connections"), key
    assert rows["context.duration_s"]["b"] == "10 s" and rows["context.warmup_s"]["b"] == "10 s"


def test_the_recorded_closed_loop_run_against_a_wrk2_run():
    old = STORE.load("live-20261122-075337-vm")                   # Debian's wrk, a context rate of 20000
    assert old.context.open_loop is False and old.context.rate
    rows = {r["key"]: r for r in fact_rows(old, STORE.load("live-20261124-081847-vm"))}
    assert rows["context.rate"]["a"] == "closed loop (no offered rate)" and rows["context.rate"]["differs"]
    assert rows["context.tool"]["differs"] and rows["context.threads"]["state"] == "same"
    assert rows["server.java_version"]["differs"]                # Java 25 against 17
    assert rows["server.kernel"]["differs"]


def test_several_clients_each_offered_the_rate_and_the_total_is_said():
    """Where two clients drove the load at once, each offered the context's rate: the row says per
    client and the total, and differs from a one-client run at the same rate."""
    one, two = run("one"), run("two")
    two.measurements.append(Measurement("baseline", "default", Path("a"), "wrk2", "wrk2", "two", "client",
                                        parts=(("client1", Path("a")), ("client2", Path("b")))))
    rows = {r["key"]: r for r in fact_rows(one, two)}
    assert rows["context.rate"]["a"] == "14,000 req/s"
    assert rows["context.rate"]["b"].startswith("14,000 req/s per client: 28,000 req/s in all")
    assert rows["context.rate"]["differs"]
    recorded = STORE.load("live-20261124-081847-vm")             # two clients at once on the lab
    rate = recorded.context.rate
    shown = {r["key"]: r for r in fact_rows(recorded, recorded)}["context.rate"]["a"]
    assert shown.startswith(f"{rate:,} req/s per client: {2 * rate:,} req/s in all where 2 clients")


def test_facts_not_recorded_are_unknown_and_java_compares_by_version():
    a = run("a", java_version="OpenJDK 17.0.15", kernel="6.1", kernel_cmdline="console=ttyS0 iommu.strict=1 quiet")
    b = run("b", java_version='openjdk version "17.0.15" 2025-04-15', kernel=None,
            kernel_cmdline="init=/sbin/init iommu.strict=0 isolcpus=2-3 hugepages=64 root=/dev/vda")
    rows = {r["key"]: r for r in fact_rows(a, b)}
    assert rows["server.java_version"]["state"] == "same"
    assert rows["server.kernel"]["state"] == "unknown" and not rows["server.kernel"]["differs"]
    assert rows["server.kernel_cmdline"]["a"] == "iommu.strict=1"
    assert rows["server.kernel_cmdline"]["b"] == "iommu.strict=0 isolcpus=2-3 hugepages=64"
    assert rows["server.kernel_cmdline"]["differs"]
    assert kernel_parameters("console=ttyS0 quiet") == "none of them set" and kernel_parameters(None) is None


# --- the page ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    """Four runs: two with a tool difference on a common measurement, two with nothing in common."""
    runs = [run("ref", "Arm Neoverse-V2", 64, kind="reference"), run("wrk", context=WRK, date="2026-01-01"),
            run("wrk2", date="2026-02-01"), run("alone", "Intel Xeon", 8, date="2026-03-01")]
    f = frame({"wrk": ["stock", "threads"], "wrk2": ["stock", "threads"], "ref": ["threads"], "alone": ["access-log-off"]},
              tools={"wrk": "wrk"})
    doc = compare_document(runs, f, REGISTRY, REGISTRY.get("compare"))
    site = tmp_path_factory.mktemp("compare") / "site"
    code, out = hugo(site, {"compare": "{{< compare >}}", "baseline": "baseline"}, {"compare": doc})
    assert code == 0, out
    return (site / "public" / "compare" / "index.html").read_text()


def test_the_page_opens_the_default_pair_and_marks_a_tool_difference(page):
    opened = re.findall(r'<details class="compare-pair" id="compare-([^"]+)"[^>]*?( open)?>', page)
    assert opened[0] == ("wrk--wrk2", " open")                   # one host kind: first and open
    assert [o for o in opened if o[1]] == [opened[0]]
    assert "Opened first as the most comparable pair: the newest two runs of the same host kind (AMD EPYC, 2 CPUs)" in page
    part = page.split('id="compare-wrk--wrk2"')[1].split("</details>")[0]
    rows = re.findall(r'<tr data-variant="(\w+)" class="differs" data-differs="tool">', part)
    assert rows == ["stock", "threads"]
    assert 'data-fact="client.cpu_model"' not in part and re.search(r"Recorded by neither run: [^<]*client: CPU, ", part)
    assert "different tools: wrk (A) ≠ wrk2 (B)" in part and "2 measured with different tools" in part
    tool = re.search(r'<tr class="differs" data-fact="context.tool"[^>]*><th scope="row">load generator</th>'
                     r'<td data-side="A: wrk">([^<]+)</td><td data-side="B: wrk2">([^<]+)</td>', part)
    assert tool and tool.groups() == ("wrk (closed loop)", "wrk2 (open loop)")
    assert '<tr class="differs" data-fact="context.rate" data-state="differs"><th scope="row">offered rate' \
           '</th><td data-side="A: wrk">closed loop (no offered rate)</td>' in part


def test_pairs_with_nothing_in_common_are_listed_not_expanded(page):
    apart = re.findall(r'<li class="compare-apart-pair" id="compare-([^"]+)"', page)
    assert sorted(apart) == ["ref--alone", "wrk--alone", "wrk2--alone"]
    details = re.findall(r'<details class="compare-pair" id="compare-([^"]+)"', page)
    assert sorted(details) == ["ref--wrk", "ref--wrk2", "wrk--wrk2"] and not set(details) & set(apart)
    assert "tunepath compare RUN_A RUN_B" in page
