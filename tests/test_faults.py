"""The fault-injection harness (scripts/faults) itself, and its records.

Live: one trial per fault kind on a lab of its own, with the short NIC-queue step (its queue
change lands a few seconds into the run) and no calibration run (``--delay-max``), so the whole
harness takes about two minutes. It must leave no host modified, its counts must add up, and it
must leave nothing behind: no lab, CPU 1 online, no huge pages. The harness takes
``/tmp/tunepath-apply.lock`` itself. Not live: the state comparison and the table.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from test_lab_runs import need_lab_parts
from tunepath.faults_report import ServerState, Trial, render, summary_rows

pytestmark = pytest.mark.system

KINDS = ("sigint", "sigkill", "sshd", "link")


def _state(**changes) -> ServerState:
    base = dict(queues="rx 4 tx 4", cpus_online="0-1", hugepages=0, server_xml="a" * 64, setenv_sh="absent",
                context_xml="b" * 64)
    return ServerState(**{**base, **changes})


def test_differences_name_each_changed_part_once():
    before = _state()
    assert _state().differences(before) == []
    after = _state(queues="rx 1 tx 1", cpus_online="0", hugepages=664, setenv_sh="c" * 64, tomcat=(12, 13),
                   lock=True)
    assert after.differences(before) == [
        "queues: rx 4 tx 4 → rx 1 tx 1", "cpus_online: 0-1 → 0", "hugepages: 0 → 664",
        "setenv_sh: absent → cccccccccccc", "tomcat: running (pids 12 13)", "lock: False → True"]
    assert _state(tomcat=(99,)).differences(_state(tomcat=(98,))) == []      # which pid does not matter


def test_outcomes_and_the_table_add_up():
    trials = [Trial("sigint", 1, "nic-queues", 1, 0.5, changed_at_fault=["queues: …"]),
              Trial("sigint", 2, "nic-queues", 2, 0.5, differences=["lock: False → True"]),
              Trial("sigkill", 1, "nic-queues", 3, 0.5, differences=["x"], left=["cpus_online: 0-1 → 0"]),
              Trial("sigkill", 2, "nic-queues", 4, 0.5, late=["tomcat: running (pids 5)"])]
    assert [t.classify() for t in trials] == ["restored automatically", "restored by one tunepath restore",
                                              "left modified", "left modified"]
    rows = summary_rows(trials)
    assert [(r.trials, r.landed, r.auto, r.by_restore, r.modified) for r in rows] == [
        (2, 1, 1, 1, 0), (2, 0, 0, 0, 2), (4, 1, 1, 1, 2)]
    table = render(trials)
    assert "| SIGINT to the controller | 2 | 1 | 1 | 1 | 0 |" in table
    assert "sigkill 1: left modified: cpus_online: 0-1 → 0" in table


def test_the_harness_leaves_no_host_modified(tmp_path):
    need_lab_parts(cpu_hotplug=False)           # the NIC-queue step changes no CPU
    out = tmp_path / "faults.json"
    cpus, hugepages = (Path(p).read_text() for p in ("/sys/devices/system/cpu/online", "/proc/sys/vm/nr_hugepages"))
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "tunepath.faults", "--trials", "1",
                        "--kinds", ",".join(KINDS), "--steps", "nic-queues", "--delay-max", "6",
                        "--prefix", f"tpf{os.getpid() % 1000}", "--dir", str(tmp_path / "lab"), "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads(out.read_text())
    trials = data["trials"]
    assert [t["kind"] for t in trials] == list(KINDS)
    assert all(t["landed"] for t in trials), [(t["kind"], t["note"]) for t in trials]    # each hit a change
    assert [t["outcome"] for t in trials if t["outcome"] == "left modified"] == []
    total = data["summary"][-1]
    assert total["trials"] == len(KINDS) == total["auto"] + total["by_restore"] + total["modified"]
    assert total["modified"] == 0
    sigkill = next(t for t in trials if t["kind"] == "sigkill")
    assert sigkill["outcome"] == "restored by one tunepath restore" and sigkill["differences"]  # nothing ran after it
    assert "| all | 4 | 4 |" in r.stdout
    assert not (tmp_path / "lab" / "state.json").exists()                  # the lab is down
    assert (Path("/sys/devices/system/cpu/online").read_text(), Path("/proc/sys/vm/nr_hugepages").read_text()) == (
        cpus, hugepages)
