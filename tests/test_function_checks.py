"""Issue 29, item 3: a run on an emulated server is a function check.

Its pages show which command blocks ran and what they verified (a pass mark per block, the
kernel command line a reboot read back, what the step's checks printed); its figures time the
emulator, so no page shows them, sets them in a ratio or reads a sweep from them. They stay in
the run's data and notebook.
"""

from __future__ import annotations

import html as htmllib
import re

import pytest

from conftest import ROOT
from tunepath.evidence.store import RunStore
from tunepath.publish.answer import RunFacts, step_answer
from tunepath.publish.checks import function_checks, tally
from tunepath.steps import REGISTRY

EMULATED = "live-20261124-135634-tunepath-vm"


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", htmllib.unescape(re.sub(r"<[^>]+>", " ", html)))


class _Run:
    """The parts of a recorded run function_checks reads: its blocks and its context."""

    def __init__(self, blocks: list[dict], context) -> None:
        self.record = {"blocks": blocks}
        self.context = context


@pytest.fixture(scope="module")
def emulated():
    return RunStore(ROOT / "runs", REGISTRY.names).load(EMULATED)


@pytest.mark.fast
def test_each_block_gets_one_mark_over_all_its_runs(emulated):
    checks = function_checks(emulated, REGISTRY.get("baseline"))
    by_block = {c.block: c for c in checks}
    assert [c.block for c in checks] == ["iommu-strict", "offline-cpus", "restart-tomcat", "warm-up", "load"]
    assert {c.mark for c in checks} == {"pass"}
    assert by_block["load"].times == 3 and by_block["restart-tomcat"].times == 3     # one per variant
    assert "iommu.strict=1" in by_block["iommu-strict"].read_back                      # /proc/cmdline after the reboot
    assert by_block["load"].title == "Drive the servlet at a constant offered rate"    # the reader's title
    setup = tally(function_checks(emulated, REGISTRY.get("setup")))
    assert setup == {"pass": 4, "skipped": 4}                                          # wrk2 and the JDK were there


@pytest.mark.fast
def test_a_non_zero_exit_fails_the_block_and_a_check_block_is_left_to_the_verification(emulated):
    blocks = [{"step": "baseline", "block": "load", "host": "client", "text": "wrk2 …", "outcome": "ran", "exit_status": 0},
              {"step": "baseline", "block": "load", "host": "client", "text": "wrk2 …", "outcome": "ran", "exit_status": 2},
              {"step": "baseline", "block": "offline-cpus", "host": "server", "text": "…", "outcome": "dry-run",
               "reason": "a dry run prints it"},
              {"step": "baseline", "block": "verify-lscpu", "host": "server", "text": "lscpu", "outcome": "skipped",
               "reason": "not run"},
              {"step": "numa", "block": "load", "host": "client", "text": "…", "outcome": "ran", "exit_status": 1}]
    checks = function_checks(_Run(blocks, emulated.context), REGISTRY.get("baseline"))
    assert [(c.block, c.mark, c.exits, c.times) for c in checks] == [("load", "fail", (2,), 2),
                                                                    ("offline-cpus", "dry-run", (), 1)]
    assert checks[1].reason == "a dry run prints it"
    assert tally(checks) == {"fail": 1, "dry-run": 1}


@pytest.mark.fast
def test_the_answer_counts_the_blocks_that_passed_and_says_so_when_one_failed(emulated):
    step = REGISTRY.get("iommu")
    answer = step_answer(step, [RunFacts(emulated, (), (), True, ("pass",) * 6)])
    assert answer.hosts == ()                     # an emulated run alone compares nothing: no "what it did"
    real = RunStore(ROOT / "runs", REGISTRY.names).load("reference-aws-c8g")
    from tunepath.analysis.verdicts import step_verdicts
    from tunepath.analysis.frames import measurements_frame
    frame = measurements_frame([real], REGISTRY)
    rows = frame[(frame.run_id == real.run_id) & (frame.step == "iommu")].to_dict("records")
    ref = RunFacts(real, tuple(step_verdicts(step, real, rows, frame.to_dict("records"))), (), True)
    ok = step_answer(step, [ref, RunFacts(emulated, (), (), True, ("pass",) * 6)]).hosts[-1]
    bad = step_answer(step, [ref, RunFacts(emulated, (), (), True, ("pass", "fail", "skipped"))]).hosts[-1]
    assert ok.kind == "emulated" and ok.note.startswith("its 6 command blocks passed; ")
    assert bad.note.startswith("1 of 3 command blocks passed, 1 failed; ")
    assert "no figure" in ok.note and not re.search(r"\d+(\.\d+)? ?(req/s|µs|ms)", ok.note + bad.note)


@pytest.mark.docs
def test_the_pages_show_an_emulated_runs_checks_and_none_of_its_figures(built_site):
    run = RunStore(ROOT / "runs", REGISTRY.names).load(EMULATED)
    probe = re.search(r"Requests/sec:\s*([\d.]+)", (run.path / "verify" / "baseline-capacity-probe.txt").read_text())[1]
    for step in run.steps():
        page = REGISTRY.get(step).page
        html = built_site.page(page).read_text()
        m = re.search(rf'<details class="evidence run[^"]*" id="results-{step}-{EMULATED}".*?</details>\s*(?=<details|</div>)',
                      html, re.S)
        assert m, (step, "the emulated run's evidence is missing")
        evidence = m[0]
        assert 'class="checks"' in evidence and "check-pass" in evidence, step
        assert "results-table" not in evidence and "<figure" not in evidence, step     # no table, no chart
        # a block's title may name the rate it offers (the rate sweep's "Offer 38 req/s"): a command, not a figure
        words = text_of(re.sub(r'<span class="check-title">.*?</span>', "", evidence))
        assert not re.search(r"\d[\d,.]* ?req/s|Requests/s|CPU/req", words), (step, words[:400])
        assert f"Requests/sec: {probe}" not in words, step                               # nor the probe's report
    iommu = text_of(built_site.page("iommu").read_text())
    assert re.search(r"Read back from /proc/cmdline ?: iommu\.strict=0 iommu\.passthrough=1", iommu)
    assert "Default domain type: Passthrough" in iommu
    summary = built_site.page("summary").read_text()
    section = re.search(rf'<section class="summary-host[^"]*" id="summary-{EMULATED}".*?</section>', summary, re.S)[0]
    assert "results-table" not in section and "Function check:" in section and "<figure" not in section
    assert re.search(rf'href="[^"]*iommu/#results-iommu-{EMULATED}"', section)           # each step links its marks
    sweep = built_site.page("rate-sweep").read_text()
    assert f'class="sweep-reading" data-step="rate-sweep" data-run="{EMULATED}"' not in sweep
    compare = built_site.page("compare").read_text()
    assert not re.search(rf'class="compare-pair"[^>]*data-[ab]="{EMULATED}"', compare)
