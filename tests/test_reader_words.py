"""Recorded words as a reader reads them (publish/reader_words.py and where the pages get them):
no loopback SSH address (a random port each lab run) and no whole kernel command line in a
run's notes, the per-client table naming each client by its label, and a repetitions note that
names the variants as the table does. run.json keeps every note as it was written."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT
from tunepath.evidence.store import RunStore
from tunepath.publish.hugo_data import notes_for
from tunepath.publish.reader_words import cmdline_words, host_label, loopback_everywhere, loopback_words

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs")
VM = "live-20261124-135634-tunepath-vm"          # its restore note holds a whole command line
CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-56-amd64 root=UUID=4b9a ro net.ifnames=0 console=ttyS0"


def test_a_kernel_command_line_in_a_note_keeps_the_paths_parameters():
    text = cmdline_words(f"rebooted: the line is `{CMDLINE} iommu.strict=1` again")
    assert "BOOT_IMAGE" not in text and "root=UUID" not in text
    assert "`iommu.strict=1`; 5 others not shown, full line in the run record" in text
    assert cmdline_words(f"(`{CMDLINE}`)") == \
        "(none of the path's kernel parameters; 5 others not shown, full line in the run record)"
    assert cmdline_words("ran `ethtool -L eth0 combined 2`") == "ran `ethtool -L eth0 combined 2`"


def test_a_loopback_address_becomes_its_hosts_name():
    clients = {"tplab-c1@127.0.0.1:49313"}
    assert host_label("tplab-c1@127.0.0.1:49313") == "tplab-c1"
    assert host_label("10.213.7.3") == "10.213.7.3"
    assert loopback_words("installed on tplab-c1@127.0.0.1:49313 as wrk2", "tunepath-vm", clients) == \
        "installed on client tplab-c1 as wrk2"
    assert loopback_words("again on tunepath@127.0.0.1:54799 (`x`)", "tunepath-vm", clients) == \
        "again on tunepath-vm (`x`)"
    assert loopback_words("client tplab-c2@127.0.0.1:44085: calibration", "vm") == "client tplab-c2: calibration"
    data = loopback_everywhere({"a": ["on tunepath@127.0.0.1:1"], "n": 3}, "vm")
    assert data == {"a": ["on vm"], "n": 3}


def test_the_notes_name_hosts_and_reduce_command_lines_while_run_json_keeps_them_whole():
    run = STORE.load(VM)
    recorded = " ".join(n.text for n in run.info.notes)
    assert "@127.0.0.1:" in recorded and "BOOT_IMAGE=" in recorded           # the evidence, as written
    notes = " ".join(notes_for(run, "baseline"))
    assert "@127.0.0.1:" not in notes and "BOOT_IMAGE=" not in notes and "root=UUID" not in notes
    assert "client tplab-c1" in notes and "on tunepath-vm" in notes
    assert "full line in the run record" in notes


@pytest.mark.docs
def test_no_loopback_address_or_whole_command_line_reaches_a_reader(built_site):
    data = sorted((built_site.site_dir / "data").rglob("*.json"))
    assert data
    for path in data:
        text = path.read_text(encoding="utf-8")
        assert "@127.0.0.1:" not in text, path.name
        for run in json.loads(text).get("runs") or ():
            assert not any("BOOT_IMAGE=" in note for note in run.get("notes") or ()), (path.name, run["run_id"])
    for page in built_site.lp.rglob("index.html"):
        assert "@127.0.0.1:" not in page.read_text(encoding="utf-8"), page


@pytest.mark.docs
def test_the_per_client_table_and_repetitions_note_use_labels(built_site):
    doc = json.loads((built_site.site_dir / "data" / "steps" / "nic-queues.json").read_text())
    labels = {m["variant"]: m["label"] for r in doc["runs"] for m in r["measurements"]}
    soup = BeautifulSoup(built_site.page("nic-queues").read_text(encoding="utf-8"), "html.parser")
    clients = [td.get_text() for td in soup.select('table.clients-table td[data-label="Client"]')]
    assert clients and set(clients) <= {"tplab-c1", "tplab-c2"}
    notes = [p.get_text(" ") for p in soup.select("p.repetitions-note")]
    assert notes
    for note in notes:
        assert "queues-8" not in note.split("—")[0] and labels["queues-8"] in note


@pytest.mark.docs
def test_each_ethtool_output_shows_once_on_the_nic_queues_page(built_site):
    soup = BeautifulSoup(built_site.page("nic-queues").read_text(encoding="utf-8"), "html.parser")
    outputs = [(b.get("data-run"), b.select_one("pre.output").get_text())
               for b in soup.select("div.verification-run") if b.select_one("pre.output")]
    assert outputs and len(outputs) == len(set(outputs)), "an output shown twice"
