"""A figure that cannot be trusted keeps its ⚑ in a comparison (issue 30; the census's
``compare/raw/*`` cases). Where the parser derived requests/s from requests ÷ duration (a report
cut in ``Requests/sec: 363``, a rate of ``inf``) or found the printed rate inconsistent with them,
the frames say so (``requests_per_sec_trusted``, ``problems``), and so do ``tunepath compare``'s
table (⚑ and a note), its ``--json`` and the compare page (the step pages' ⚑)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from hugosite import hugo
from tunepath.analysis.compare import compare_document, pair_document
from tunepath.analysis.frames import measurements_frame
from tunepath.evidence.store import RunStore
from tunepath.publish.compare_text import pair_lines
from tunepath.publish.upstream.tables import compare_pair
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

AWS, GRACE = "reference-aws-c8g", "reference-grace"
RAW = "raw/numa-numa-local.txt"
RATE = "Requests/sec: 363744.39"
DAMAGES = {                                   # name → (A's raw report from the recorded one, problem code)
    "cut": (lambda text: text[:text.index(RATE) + len("Requests/sec: 363")], "derived"),
    "inf": (lambda text: text.replace(RATE, "Requests/sec: inf"), "derived"),
    "ten-times": (lambda text: text.replace(RATE, "Requests/sec: 3637443.90"), "inconsistent"),
}
LIVE = "live-20261124-081847-vm"              # two clients at once, three repetitions


def _runs(tmp: Path, damage: str | None, run_ids=(AWS, GRACE)) -> Path:
    runs = tmp / "runs"
    for run_id in run_ids:
        shutil.copytree(ROOT / "runs" / run_id, runs / run_id, ignore=shutil.ignore_patterns("notebooks"))
    if damage:
        raw = runs / AWS / RAW
        raw.write_text(DAMAGES[damage][0](raw.read_text(encoding="utf-8")), encoding="utf-8")
    return runs


def _pair(runs: Path) -> dict:
    store = RunStore(runs, REGISTRY.names)
    a, b = store.load(AWS), store.load(GRACE)
    return pair_document(a, b, measurements_frame([a, b], REGISTRY), REGISTRY)


def _row(doc: dict) -> dict:
    (step,) = doc["steps"]
    (row,) = step["rows"]
    return row


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_an_untrusted_rate_keeps_its_flag_in_the_pair_document_and_the_table(tmp_path, damage):
    row = _row(doc := _pair(_runs(tmp_path, damage)))
    assert row["a_requests_per_sec"] == pytest.approx(21814220 / 60)          # requests ÷ duration
    assert row["a_requests_per_sec_trusted"] is False and row["b_requests_per_sec_trusted"] is True
    assert [p["code"] for p in row["a_problems"]] == [DAMAGES[damage][1]] and row["b_problems"] == []
    assert [(f["code"], f["field"]) for f in row["a_flags"]] == [(f"report-{DAMAGES[damage][1]}", "requests_per_sec")]
    assert doc["untrusted"] == 1
    lines = pair_lines(doc)
    (figures,) = [ln for ln in lines if ln.startswith("  CPUs on the NIC's NUMA node")]
    assert "363,570.33⚑" in figures and "235,505.32⚑" not in figures
    notes = [ln for ln in lines if ln.startswith("  ⚑ A, CPUs on the NIC's NUMA node: requests/s not trusted")]
    assert len(notes) == 1 and row["a_problems"][0]["text"] in notes[0]
    assert any(ln.startswith("1 figure(s) marked ⚑ cannot be trusted") for ln in lines)


def test_intact_reports_have_no_flag(tmp_path):
    row = _row(doc := _pair(_runs(tmp_path, None)))
    assert row["a_requests_per_sec_trusted"] is True and row["a_problems"] == [] and row["a_flags"] == []
    assert doc["untrusted"] == 0 and not any("⚑" in ln for ln in pair_lines(doc))
    assert "⚑" not in compare_pair(doc, {})


def test_the_exported_compare_page_shows_the_flag_too(tmp_path):
    """The upstream export's Markdown table of a pair: ⚑ beside the figure, the reason under it."""
    shown = compare_pair(_pair(_runs(tmp_path, "cut")), {"numa": "NUMA"})
    assert "| CPUs on the NIC's NUMA node | 363,570.33 ⚑ | 235,505.32 |" in shown
    assert "- A: CPUs on the NIC's NUMA node, `report-derived`: 'Requests/sec: 363' (line 5) is cut" in shown


def test_tunepath_compare_prints_the_flag_and_json_says_untrusted(tmp_path):
    runs = _runs(tmp_path, "cut")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))
    command = [sys.executable, "-m", "tunepath.cli", "compare", AWS, GRACE, "--runs-dir", str(runs)]
    text = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    assert re.search(r"CPUs on the NIC's NUMA node +363,570\.33⚑", text) and "derived from 21,814,220" in text
    data = json.loads(subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, timeout=120,
                                     check=True).stdout)
    row = _row(data)
    assert row["a_requests_per_sec_trusted"] is False and row["a_problems"][0]["code"] == "derived"


def test_a_clients_untrusted_rate_makes_the_measurement_untrusted_and_names_the_client(tmp_path):
    """Several clients at once: their rates are summed, so one client's untrusted rate is the sum's;
    with several repetitions, a problem names its repetition."""
    runs = _runs(tmp_path, None, (LIVE,))
    raw = runs / LIVE / "raw" / "baseline-access-log-off.r2.client-1.txt"
    text = raw.read_text(encoding="utf-8")
    raw.write_text(re.sub(r"Requests/sec:\s+[\d.]+", "Requests/sec:  139485.20", text), encoding="utf-8")
    run = RunStore(runs, REGISTRY.names).load(LIVE)
    frame = measurements_frame([run], REGISTRY)
    rows = frame[(frame.step == "baseline")].set_index("variant")
    assert rows.loc["stock", "requests_per_sec_trusted"] and rows.loc["stock", "problems"] == []
    assert not rows.loc["access-log-off", "requests_per_sec_trusted"]
    (problem,) = rows.loc["access-log-off", "problems"]
    assert problem["code"] == "inconsistent" and problem["repetition"] == 2
    assert problem["client"].startswith("tplab-c1@") and problem["text"].startswith(f"client {problem['client']}: ")
    (step,) = [s for s in pair_document(run, run, frame, REGISTRY)["steps"] if s["step"] == "baseline"]
    row = {r["variant"]: r for r in step["rows"]}["access-log-off"]
    assert row["a_flags"][0]["text"].startswith("repetition 2: client tplab-c1@")


def test_the_compare_page_shows_the_flag_beside_the_figure_and_says_why(tmp_path):
    store = RunStore(_runs(tmp_path, "cut"), REGISTRY.names)
    runs = [store.load(AWS), store.load(GRACE)]
    doc = compare_document(runs, measurements_frame(runs, REGISTRY), REGISTRY, REGISTRY.get("compare"))
    site = tmp_path / "site"
    code, out = hugo(site, {"compare": "{{< compare >}}", "numa": "numa"}, {"compare": doc})
    assert code == 0, out
    page = (site / "public" / "compare" / "index.html").read_text()
    part = page.split(f'id="compare-{AWS}--{GRACE}"')[1]
    cell = re.search(rf'data-run="{AWS}" data-variant="numa-local" data-field="requests_per_sec">363,570.33</span>'
                     r'(.*?)</td>', part, re.DOTALL)
    assert cell and 'data-flag="report-derived"' in cell.group(1) and "⚑" in cell.group(1)
    assert not re.search(rf'data-run="{GRACE}" data-variant="numa-local" data-field="requests_per_sec">[^<]*</span>'
                         r'<span class="flag', part)
    assert re.search(r'<li class="flag-warning" data-flag="report-derived"><strong>A: [^<]+</strong> '
                     r"<code>report-derived</code>: &#39;Requests/sec: 363&#39; \(line 5\) is cut", part), part
    assert "1 figure not trusted (⚑)" in page
