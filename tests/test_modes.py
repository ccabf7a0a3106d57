"""Two modes of server CPU per request, and whether the slow one goes with a JVM fact.

The gap rule (``analysis/modes.find_gap``) on constructed values; the verdicts on constructed
variant rows (as the frames hold them: ``repetitions`` entries with the figure and the JVM facts);
then a small synthetic live run recorded through ``RunRecorder`` (raw wrk2 outputs kept in
``runs/``, each measurement with ``tomcat_cpu_s``, ``jvm`` and ``warmup``), through the frames into
the step data (``modes``, the per-repetition facts, the per-variant medians) and the ``jvm-modes``
shortcode rendered by Hugo.
"""

from __future__ import annotations

import json
import math
import re
from html import unescape

import pytest

from conftest import ROOT
from test_precision import hugo
from tunepath.analysis.frames import JVM_COLUMNS, measurements_frame, repetitions_frame
from tunepath.analysis.modes import (FACTS, compare_fact, find_gap, mode_report, mode_split)
from tunepath.analysis.steady import WarmUp
from tunepath.evidence.recorder import RunRecorder
from tunepath.evidence.store import RunStore
from tunepath.parse.reports import parse_report_file
from tunepath.publish.hugo_data import step_document
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs")
RAW = ROOT / "runs" / "sandbox-wrk2-rate-sweep" / "raw"
RUN_ID = "live-20990101-000000-modes"
CMD = "wrk2 -t2 -c16 -d20 -R2000 -U --latency http://127.0.0.1:18180/"


# --- the gap rule ---------------------------------------------------------------------------------
@pytest.mark.parametrize("values, low, high", [
    ([21, 24, 22, 52, 60, 55], 24, 52),                  # two modes, unsorted
    ([20, 28, 50, 65], 28, 50),                          # the modes seen so far, two values each
    ([20, 20, 20, 50, 50], 20, 50),                      # ties within each mode
    ([20, None, 21, math.nan, 0, 50, 52], 21, 50),       # None, NaN and 0 ignored
])
def test_a_clear_gap_splits_in_two(values, low, high):
    gap = find_gap(values)
    assert gap.bimodal and (gap.low, gap.high) == (low, high), gap
    assert gap.pct == pytest.approx((high / low - 1) * 100)


@pytest.mark.parametrize("values, why", [
    ([20, 21, 22, 23, 24], "under 25 %"),                # one mode, a few per cent apart
    ([20, 22, 26, 27], "under 25 %"),                    # a gap, but only 18 %
    ([30, 30, 30, 30], "under 25 %"),                    # all tied
    ([20, 50, 51, 52], "under 25 %"),                    # one far value is an outlier, not a mode
    ([10, 14, 20, 28, 39], "not 1.5 times"),             # widely scattered: every gap large
    ([10, 20, 40, 80], "not 1.5 times"),                 # equal largest gaps: no single split
    ([20, 50, 51], "at least 4"),                        # too few values
    ([None, math.nan, 20, 50], "at least 4"),
])
def test_no_split(values, why):
    gap = find_gap(values)
    assert not gap.bimodal and why in gap.why, gap


def test_too_few_values_have_no_gap():
    assert find_gap([20, 50, 51]).pct is None
    assert mode_split(row("x", [20, 50, 51])) is None     # not tested at all


# --- constructed configurations -----------------------------------------------------------------------
def row(variant: str, cpu, facts=None, step: str = "baseline", rps=None, dropped=()) -> dict:
    """A variant row as the frames hold it: repetitions with the figure and the JVM facts."""
    facts = facts or {}
    reps = []
    for i, value in enumerate(cpu, 1):
        entry = {"repetition": i, "server_cpu_us_per_req": value,
                 "requests_per_sec": rps[i - 1] if rps else 1000.0, "dropped": i in dropped}
        entry.update({c: (facts[c][i - 1] if c in facts else None) for c in JVM_COLUMNS})
        reps.append(entry)
    return {"step": step, "variant": variant, "label": f"{variant} label", "repetitions": reps}


def test_the_slow_side_is_more_cpu_or_fewer_requests():
    split = mode_split(row("a", [22, 55, 23, 58, 24]))
    assert split.figure == "server_cpu_us_per_req" and split.bimodal
    assert (split.fast, split.slow) == ((1, 3, 5), (2, 4))
    by_rps = mode_split(row("b", [None] * 4, rps=[9000, 4000, 8800, 4100]))
    assert by_rps.figure == "requests_per_sec" and (by_rps.fast, by_rps.slow) == ((1, 3), (2, 4))
    assert "gap" in split.text and "repetitions 2, 4 (slow)" in split.text


def test_dropped_repetitions_are_left_out():
    split = mode_split(row("a", [22, 55, 23, 58, 24], dropped=(2,)))
    assert split is not None and not split.bimodal          # 22, 23, 24, 58: one value above
    assert [r for r, _ in split.values] == [1, 3, 4, 5]


SLOW_CPU = [22, 55, 23, 58, 24, 60]                  # repetitions 2, 4, 6 slow
COMPILES = [30, 1100, 25, 950, 35, 1020]             # the slow ones compiled far more during the load
SAME = [4, 5, 5, 4, 4, 5]                            # GC pauses: no difference


def test_the_slow_mode_goes_with_many_more_compiles():
    rows = [row("stock", SLOW_CPU, {"compiles_during": COMPILES, "gc_pauses_during": SAME}),
            row("access-log-off", [21, 56, 22, 61, 23, 57],
                {"compiles_during": [28, 990, 33, 1040, 31, 1005], "gc_pauses_during": SAME}),
            row("other", [30, 31, 30, 32], {"compiles_during": [1, 2, 3, 4]})]    # one mode
    report = mode_report("r", rows)
    assert [s.variant for s in report.bimodal] == ["stock", "access-log-off"] and len(report.splits) == 3
    assert [f.fact for f in report.goes_with] == ["compiles_during"]
    compiles = next(f for f in report.facts if f.fact == "compiles_during")
    assert compiles.goes_with and compiles.significant and compiles.overlap is False and compiles.consistent
    assert compiles.verdict.startswith("The slow mode goes with more JIT compilations during the load:")
    assert compiles.short == "goes with more"
    gc = next(f for f in report.facts if f.fact == "gc_pauses_during")
    assert not gc.goes_with and gc.significant is False and gc.short == "no clear difference"
    assert gc.verdict.startswith("No clear difference in GC pauses during the load")
    missing = next(f for f in report.facts if f.fact == "steady_after_s")
    assert missing.short == "not recorded" and not missing.goes_with
    assert report.text == ("2 configurations had two modes; the slow mode goes with more JIT compilations "
                           "during the load.")
    data = report.to_data()
    json.dumps(data, allow_nan=False)
    assert data["goes_with"] == ["compiles_during"] and data["tested"] == 3
    assert [b["variant"] for b in data["bimodal"]] == ["stock", "access-log-off"]
    assert [u["variant"] for u in data["unimodal"]] == ["other"]


def test_no_fact_separates_the_modes():
    mixed = [31, 900, 1000, 28, 950, 35]           # compiles unrelated to the mode
    report = mode_report("r", [row("stock", SLOW_CPU, {"compiles_during": mixed, "gc_pauses_during": SAME,
                                                       "compiles_at_start": [4000] * 6}),
                               row("access-log-off", SLOW_CPU, {"compiles_during": mixed,
                                                                "compiles_at_start": [4000] * 6})])
    assert report.bimodal and report.recorded and not report.goes_with
    assert report.text == ("2 configurations had two modes; no measurable JVM fact separates the slow mode "
                           "from the fast one.")
    assert all(not f.goes_with for f in report.facts)
    assert next(f for f in report.facts if f.fact == "compiles_at_start").short == "no clear difference"


def test_too_few_repetitions_to_test():
    report = mode_report("r", [row("stock", [22, 55, 23, 58], {"compiles_during": [30, 1100, 25, 950]})])
    compiles = next(f for f in report.facts if f.fact == "compiles_during")
    assert compiles.overlap is False and compiles.significant is None and not compiles.goes_with
    assert compiles.short == "too few to test" and "2 slow, 2 fast" in compiles.verdict


def test_a_difference_that_reverses_between_configurations_is_no_link():
    a = row("a", [20] * 5 + [50] * 5, {"gc_pauses_during": [0] * 5 + [100] * 5})
    b = row("b", [20, 21, 50, 51], {"gc_pauses_during": [50, 51, 40, 41]})     # slow: fewer here
    report = mode_report("r", [a, b])
    gc = compare_fact(report.bimodal, "gc_pauses_during")
    assert gc.significant is True and gc.consistent is False and not gc.goes_with
    assert gc.short == "no clear link"


def test_no_bimodal_configuration_and_no_jvm_facts():
    one = mode_report("r", [row("stock", [22, 23, 24, 25])])
    assert not one.bimodal and not one.facts
    assert one.text.startswith("None of the 1 configuration tested had two modes")
    assert mode_report("r", [row("stock", [22, 23])]).text.startswith("No configuration of this run has 4")
    blind = mode_report("r", [row("stock", SLOW_CPU)])              # no JVM facts recorded
    assert blind.bimodal and not blind.recorded
    assert blind.text == "1 configuration had two modes, but its measurements recorded no JVM facts."


# --- a synthetic live run, through the frames into the step data and the shortcode -------------------
CPU = {"stock": SLOW_CPU, "access-log-off": [21, 56, 22, 61, 23, 57]}
PAUSES = [5, 4, 4, 5, 5, 4]                          # GC pauses: unrelated to the mode
RUN_COMPILES = {"stock": COMPILES, "access-log-off": [28, 990, 33, 1040, 31, 1005]}


def jvm(compiles: int, pauses: int, at_start: int) -> dict:
    counters = lambda compiles, pauses, delta: {                       # noqa: E731  (JvmCounters.to_dict)
        "delta": delta, "vm": "OpenJDK 64-Bit Server VM 21", "started_ms": 1, "uptime_s": 20.0,
        "compiles": compiles, "compile_s": compiles / 1000, "osr": 0, "bailouts": 0, "invalidated": 0,
        "compiler_threads": 2, "collectors": [{"name": "G1 young collection pauses", "invocations": pauses,
                                               "seconds": pauses / 500}],
        "gc_pauses": pauses, "gc_pause_s": pauses / 500, "gc_cpu_s": None, "safepoints": 3,
        "safepoint_s": 0.001, "last_gc_cause": "G1 Evacuation Pause"}
    return {"start": counters(at_start, 2, False), "during": counters(compiles, pauses, True)}


def synthetic_run(tmp_path):
    src = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record = {k: src[k] for k in ("label", "date", "date_note", "source", "same_machine", "hosts")}
    record.update(run_id=RUN_ID, kind="live", status="complete", measurements=[],
                  context=dict(src["context"], warmup_window_s=5, steady_windows=3, steady_pct=5, warmup_s=60))
    rec = RunRecorder(tmp_path, record)
    raws = sorted(RAW.glob("rate-sweep-rate-*.txt"))
    for variant, cpus in CPU.items():
        for i, cpu in enumerate(cpus, 1):
            raw = raws[(i - 1) % len(raws)]
            requests = parse_report_file(raw, "wrk2").to_row()["requests"]
            warm = WarmUp(5, (1500.0, 1990.0, 2000.0, 2010.0), 30.0, 15.0 + i, 3, 5.0, "wrk2").to_dict()
            facts = {"jvm": jvm(RUN_COMPILES[variant][i - 1], PAUSES[i - 1], 4000)} if i != 6 or variant == "stock" \
                else {"jvm": {"missing": "no hsperfdata file"}}
            rec.measurement("baseline", variant, raw.read_text(), "", 0, CMD, "wrk2", repetition=i,
                            tomcat_cpu_s=cpu * requests / 1e6, warmup=warm, **facts)
    rec.finish()
    return RunStore(tmp_path).load(RUN_ID)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return synthetic_run(tmp_path_factory.mktemp("modes-run"))


@pytest.fixture(scope="module")
def doc(run):
    runs = [STORE.load("reference-aws-c8g"), run]
    frame = measurements_frame(runs, REGISTRY)
    return step_document(REGISTRY.get("baseline"), runs, frame, [], {}, path=REGISTRY)


def block(doc: dict, run_id: str) -> dict:
    return next(r for r in doc["runs"] if r["run_id"] == run_id)


def test_the_frames_carry_each_repetitions_jvm_facts(run):
    reps = repetitions_frame([run], REGISTRY)
    stock = reps[reps.variant == "stock"].sort_values("repetition")
    assert list(stock.compiles_during) == COMPILES and list(stock.compiles_at_start) == [4000] * 6
    assert list(stock.steady_after_s) == [16.0, 17.0, 18.0, 19.0, 20.0, 21.0]
    assert stock.gc_pause_ms_during.iloc[0] == pytest.approx(10.0)          # 5 pauses × 2 ms
    off = reps[(reps.variant == "access-log-off") & (reps.repetition == 6)].iloc[0]
    assert all(off[c] is None or math.isnan(off[c]) for c in JVM_COLUMNS if c != "steady_after_s")


def test_the_step_data_carries_the_report(doc):
    modes = block(doc, RUN_ID)["modes"]
    json.dumps(doc, allow_nan=False)
    assert [b["variant"] for b in modes["bimodal"]] == ["stock", "access-log-off"]
    assert modes["bimodal"][0]["slow"] == [2, 4, 6] and modes["bimodal"][0]["figure"] == "server_cpu_us_per_req"
    assert modes["goes_with"] == ["compiles_during", "compile_s_during"]
    assert modes["text"] == ("2 configurations had two modes; the slow mode goes with more JIT compilations "
                             "during the load and more JIT compile time during the load.")
    assert [f["fact"] for f in modes["facts"]] == list(FACTS)
    compiles = modes["facts"][0]
    assert (compiles["n_slow"], compiles["n_fast"]) == (5, 6)              # one slow repetition recorded none
    assert compiles["display"] == {"fast": "30.5", "slow": "1,020"}
    ref = block(doc, "reference-aws-c8g")["modes"]
    assert ref["tested"] == 0 and ref["bimodal"] == [] and ref["text"].startswith("No configuration")


def test_the_measurements_carry_the_facts(doc):
    stock = next(m for m in block(doc, RUN_ID)["measurements"] if m["variant"] == "stock")
    assert [r["compiles_during"] for r in stock["repetitions"]] == COMPILES
    assert isinstance(stock["repetitions"][0]["compiles_during"], int)
    assert stock["jvm_facts"]["compiles_during"] == 492.5 and stock["jvm_facts"]["steady_after_s"] == 18.5
    off = next(m for m in block(doc, RUN_ID)["measurements"] if m["variant"] == "access-log-off")
    assert off["repetitions"][5]["compiles_during"] is None
    ref = block(doc, "reference-aws-c8g")["measurements"][0]
    assert ref["jvm_facts"] == {c: None for c in JVM_COLUMNS}


@pytest.fixture(scope="module")
def rendered(doc, tmp_path_factory):
    site = tmp_path_factory.mktemp("modes-site") / "site"
    pages = {"live": f'{{{{< jvm-modes step="baseline" run="{RUN_ID}" >}}}}',
             "ref": '{{< jvm-modes step="baseline" >}}'}                   # the primary run: the reference
    code, out = hugo(site, pages, {"baseline": doc})
    assert code == 0, out
    return lambda name: unescape((site / "public" / name / "index.html").read_text())


def test_the_shortcode_shows_the_table(rendered, doc):
    html = rendered("live")
    modes = block(doc, RUN_ID)["modes"]
    assert re.findall(r"<th scope=\"col\"[^>]*>([^<]+)</th>", html) == ["Fact", "Fast mode", "Slow mode", "Verdict"]
    figures = dict(((f, m), t) for f, m, t in re.findall(
        r'<span class="modes-figure" data-fact="([^"]+)" data-mode="([^"]+)">([^<]*)</span>', html))
    for fact in modes["facts"]:
        assert figures[(fact["fact"], "fast")] == fact["display"]["fast"]
        assert figures[(fact["fact"], "slow")] == fact["display"]["slow"]
    verdicts = dict(re.findall(r'<span class="modes-verdict[^"]*" data-fact="([^"]+)"[^>]*>([^<]*)</span>', html))
    assert verdicts["compiles_during"] == "goes with more" and verdicts["gc_pauses_during"] == "no clear difference"
    assert '<div class="table-wrap">' in html and modes["text"] in html
    assert all(b["text"] in html for b in modes["bimodal"])


def test_the_shortcode_without_a_bimodal_configuration(rendered):
    html = rendered("ref")
    assert 'data-run="reference-aws-c8g"' in html and "<table" not in html
    assert "could be tested for two modes" in html


def test_step_data_without_modes_fails_the_build(doc, tmp_path):
    old = json.loads(json.dumps(doc))
    for r in old["runs"]:
        del r["modes"]
    code, out = hugo(tmp_path / "site", {"p": f'{{{{< jvm-modes step="baseline" run="{RUN_ID}" >}}}}'},
                     {"baseline": old})
    assert code != 0 and "rebuild the step data" in out, out
