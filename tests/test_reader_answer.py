"""Issue 29, items 1, 4, 5 and 7: pages for readers.

- Every step page opens with its answer (what to change, what it did on each kind of host with its
  95 % verdict in words, when not to), built from the verdicts, never typed.
- The summary has one "what to change" table, without an emulated server.
- A reader's command never carries a run's own choices: no ``taskset`` CPU list, no probed rate.
- The built site keeps to its budgets: each step page's open text (folded blocks closed) at most
  1,500 words, the whole path's under 15,000.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from conftest import ROOT
from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.verdicts import Verdict
from tunepath.evidence.store import RunStore
from tunepath.model.context import HostContext
from tunepath.publish.answer import verdict_short, verdict_words
from tunepath.publish.hugo_data import change_table, step_document
from tunepath.steps import REGISTRY

LAB = "live-20261202-070808-vm"
EMULATED = "live-20261124-135634-tunepath-vm"
REFERENCE = "reference-aws-c8g"
STEP_PAGE_WORDS = 1500
PAGE_WORDS_AVERAGE = 1000      # the path's open words, over its pages (the original's: 300-1,200 each)


@pytest.fixture(scope="module")
def recorded():
    runs = RunStore(ROOT / "runs", REGISTRY.names).load_all([REFERENCE, LAB, EMULATED])
    return runs, measurements_frame(runs, REGISTRY)


def _verdict(**kw) -> Verdict:
    base = dict(change="NIO2", against="NIO", variant="nio2", figure="server_cpu_us_per_req", change_pct=-17.1,
                low_pct=-40.0, high_pct=3.0, level=0.971, significant=False, n_a=4, n_b=4, p99_a_ms=1.0,
                p99_b_ms=1.0, sentence="", reason="", why=None)
    base.update(kw)
    return Verdict(**base)


@pytest.mark.fast
def test_verdict_words_say_what_the_interval_says():
    assert "no difference is shown at 95" in verdict_words(_verdict())
    assert "a real difference at 95" in verdict_words(_verdict(significant=True, low_pct=-30.0, high_pct=-5.0))
    said = verdict_words(_verdict(significant=None, why="reference", figure="requests_per_sec", level=None,
                                  low_pct=None, high_pct=None, change_pct=31.7))
    assert "one measurement each, so no verdict" in said and "+31.70 % requests/s" in said
    assert verdict_short(_verdict(significant=True)).endswith("a real difference at 95 %")


@pytest.mark.fast
def test_a_reference_run_is_judged_on_what_its_server_served(recorded):
    """wrk2 at -R500000 served far less than offered: requests/s is a measurement there."""
    runs, frame = recorded
    doc = step_document(REGISTRY.get("baseline"), runs, frame, [], {}, [], REGISTRY)
    ref = next(r for r in doc["runs"] if r["run_id"] == REFERENCE)
    assert {v["figure"] for v in ref["verdicts"]} == {"requests_per_sec"}
    lab = next(r for r in doc["runs"] if r["run_id"] == LAB)
    assert {v["figure"] for v in lab["verdicts"]} == {"server_cpu_us_per_req"}


@pytest.mark.fast
def test_every_changing_step_answers_per_kind_of_host(recorded):
    runs, frame = recorded
    doc = step_document(REGISTRY.get("baseline"), runs, frame, [], {}, [], REGISTRY)
    answer = doc["answer"]
    assert answer["change"] and answer["avoid"]
    kinds = [h["kind"] for h in answer["hosts"]]
    assert kinds == ["reference", "live", "emulated"]
    ref, lab, emulated = answer["hosts"]
    assert "single measurement" in ref["who"] and all(line["verdict"] == "none" for line in ref["lines"])
    assert "the lab" in lab["who"]
    assert all("95" in line["text"] for line in lab["lines"])
    assert not emulated["lines"] and "no figure" in emulated["note"]
    for step in REGISTRY:
        if step.kind in ("tuning", "comparison", "sweep", "setup"):
            assert step.change and step.avoid, f"step {step.name} says neither what to change nor when not to"


@pytest.mark.fast
def test_the_summary_table_has_a_row_per_change_and_no_emulated_server(recorded):
    runs, frame = recorded
    rows = change_table(runs, frame, REGISTRY)
    assert [r["step"] for r in rows] == [s.name for s in REGISTRY if s.change and s.kind in ("tuning", "comparison", "sweep")]
    assert all(h["kind"] != "emulated" for r in rows for h in r["hosts"])
    baseline = next(r for r in rows if r["step"] == "baseline")
    assert {h["kind"] for h in baseline["hosts"]} == {"reference", "live"}


@pytest.mark.fast
def test_reader_commands_carry_no_run_choice(recorded):
    """A reader's command has no CPU pinning and no rate that only a run chose (a probed rate)."""
    runs, frame = recorded
    path = HostContext()
    allowed = {path.rate, path.smoke_rate}
    for step in REGISTRY:
        if step.kind == "analysis":
            continue
        doc = step_document(step, runs, frame, [], {}, [], REGISTRY)
        for run in doc["runs"]:
            for block, c in run["commands"].items():
                text = c["text"]
                assert "taskset" not in text, f"{step.name}/{block} of {run['run_id']}: {text}"
                rates = {int(r) for r in re.findall(r"-R\s?(\d+)", text)}
                if step.name != "rate-sweep":     # its points are its variants
                    assert rates <= allowed, f"{step.name}/{block} of {run['run_id']}: rate {rates - allowed}"


class _OpenText(HTMLParser):
    """The words of <article>, with every folded <details> closed (its <summary> stays, unless a
    folded <details> around it hides it too; one the page opens, `open`, counts as open). A word: a run of letters or digits with the marks
    that join a figure ("7,201.41", "−3.97 %" is one word and a sign)."""

    WORD = re.compile(r"\w[\w.,%/×-]*")

    def __init__(self):
        super().__init__()
        self.words, self.article, self.details, self.skip = 0, 0, 0, 0
        self.stack: list[bool] = []         # each <details> met: folded or not
        self.summaries: list[bool] = []     # each <summary> met: shown (no folded <details> around its own)

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.article += 1
        elif tag == "details":
            folded = not any(k == "open" for k, _ in attrs)
            self.stack.append(folded)
            self.details += folded
        elif tag == "summary":
            self.summaries.append(bool(self.stack) and self.details - self.stack[-1] == 0)
        elif tag in ("script", "style"):
            self.skip += 1

    def handle_endtag(self, tag):
        if tag == "article":
            self.article -= 1
        elif tag == "details" and self.stack:
            self.details -= self.stack.pop()
        elif tag == "summary" and self.summaries:
            self.summaries.pop()
        elif tag in ("script", "style"):
            self.skip -= 1

    def handle_data(self, data):
        if self.article and not self.skip and (not self.details or (self.summaries and self.summaries[-1])):
            self.words += len(self.WORD.findall(data))


def open_words(html: str) -> int:
    parser = _OpenText()
    parser.feed(html)
    return parser.words


@pytest.mark.fast
def test_open_words_skip_folded_blocks():
    html = ("<article><p>one two</p><details><summary>three</summary><p>four five six</p>"
            "<details open><p>inside a folded block</p></details><p>still folded</p></details>"
            "<details open><p>seven, 7,201.41</p></details><script>x y</script>"
            "<details><summary>eight</summary><details><summary>hidden with its block</summary></details></details>"
            "</article><p>outside</p>")
    assert open_words(html) == 6


@pytest.mark.docs
def test_pages_keep_to_their_word_budgets(built_site):
    total, over = 0, []
    for page in sorted(built_site.lp.glob("*/index.html")) + [built_site.page()]:
        words = open_words(page.read_text())
        total += words
        if page.parent.name in {s.page for s in REGISTRY if s.kind != "analysis"} and words > STEP_PAGE_WORDS:
            over.append(f"{page.parent.name}: {words}")
    assert not over, f"step pages over {STEP_PAGE_WORDS} open words: {over}"
    pages = len(list(built_site.lp.glob("*/index.html"))) + 1
    assert total < PAGE_WORDS_AVERAGE * pages, f"the path has {total} open words over {pages} pages"


@pytest.mark.docs
def test_every_step_page_opens_with_its_answer(built_site):
    for step in REGISTRY:
        if not step.change:
            continue
        html = built_site.page(step.page).read_text()
        h1 = html.index("<h1>")
        answer = html.find('<aside class="answer"')
        content = html.find('<div class="prose">')
        assert h1 < answer < content, f"{step.page}: the answer box is not the first thing under the title"


@pytest.mark.docs
def test_summary_opens_with_what_to_change(built_site):
    html = built_site.page("summary").read_text()
    assert html.index('class="changes-table') < html.index('class="summary"')
    for step in REGISTRY:
        if step.change and step.kind in ("tuning", "comparison", "sweep"):
            assert f'data-step="{step.name}"' in html
    # each host is named whole: "the lab (vm: AMD EPYC, 2 CPUs)", not cut at its first comma
    hosts = re.findall(r'class="changes-host"[^>]*><strong>([^<]*)</strong>', html)
    assert hosts and all(h.count("(") == h.count(")") for h in hosts), hosts
    assert any(h.startswith("the lab (") and "CPUs)" in h for h in hosts), hosts


@pytest.mark.fast
def test_a_step_that_compares_nothing_says_what_to_change_without_hosts(recorded):
    """The set-up compares nothing: its answer has no "what it did", not even the emulated check."""
    runs, frame = recorded
    answer = step_document(REGISTRY.get("setup"), runs, frame, [], {}, [], REGISTRY)["answer"]
    assert answer["change"] and answer["hosts"] == []
