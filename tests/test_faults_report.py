"""The fault harness without a lab: the server's state compared, the trial record and its outcome,
the seeded plans, the one table and the JSON results of either target, the options, the exit
status, and the course of a trial (:class:`harness.faults.harness.Harness`) on a fake target.
The VM guest's own parts: tests/test_faults_vm.py; the harness on the lab: tests/test_faults.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
from harness.faults import cli
from harness.faults.harness import Config, Harness
from harness.faults.report import AUTO, MODIFIED, RESTORE, Plan, Trial, load_trials, render, summary_rows, \
    write_results
from harness.faults.server import SERVER_LAYOUT, LabServer
from harness.faults.state import ServerState
from harness.faults.target import Target
from harness.faults.vm import GUEST_LAYOUT, VmGuest

pytestmark = pytest.mark.fast

KINDS = ("sigint-pgrp", "sigint-runner", "sigkill", "sshd", "link")
RESULTS = ROOT / "docs" / "faults" / "results-2026-11-23.json"


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
    assert before.differences(_state(httpd=(7,))) == ["httpd: stopped"]
    # only a sha256 digest is shortened: a 64-character value of another kind is shown whole
    assert _state(queues="x " * 32).differences(before) == [f"queues: rx 4 tx 4 → {'x ' * 32}"]


def _server_trials() -> list[Trial]:
    return [Trial("sigint-pgrp", 1, 1, 0.5, steps="nic-queues", changed_at_fault=["queues: …"], duration_s=20,
                  to_exit_s=3.0),
            Trial("sigint-pgrp", 2, 2, 0.5, steps="nic-queues", differences=["lock: False → True"], duration_s=30,
                  to_exit_s=8.0),
            Trial("sigkill", 1, 3, 0.5, steps="nic-queues", differences=["x"], left=["cpus_online: 0-1 → 0"]),
            Trial("sigkill", 2, 4, 0.5, steps="nic-queues", late=["tomcat: running (pids 5)"], hung=True)]


def test_outcomes_and_the_table_add_up():
    trials = _server_trials()
    assert [t.classify() for t in trials] == ["restored automatically", "restored by one tunepath restore",
                                              "left modified", "left modified"]
    rows = summary_rows(trials, SERVER_LAYOUT.labels)
    assert [(r.trials, r.landed, r.auto, r.by_restore, r.modified, r.hung) for r in rows] == [
        (2, 1, 1, 1, 0, 0), (2, 0, 0, 0, 2, 1), (4, 1, 1, 1, 2, 1)]
    table = render(trials, SERVER_LAYOUT)
    assert table.splitlines()[0] == ("| fault | trials | fault during an applied change | restored automatically | "
                                     "restored by one `tunepath restore` | hosts left modified | "
                                     "signal to exit (median) | signal to exit (max) | time per trial (median) |")
    assert "| SIGINT to the controller's process group | 2 | 1 | 1 | 1 | 0 | 5.5 s | 8.0 s | 25 s |" in table
    assert "| SIGKILL to the controller | 2 | 0 | 0 | 0 | 2 | – | – |" in table      # a SIGKILL is not timed
    assert "sigkill 1: left modified: cpus_online: 0-1 → 0" in table
    assert "sigkill 2: left modified (the run hung and was killed): tomcat: running (pids 5)" in table


def test_results_hold_the_layouts_fields_and_read_back(tmp_path):
    trials = _server_trials()
    for t in trials:
        t.classify()
    out = tmp_path / "faults.json"
    write_results(out, {"seed": 11}, trials, SERVER_LAYOUT)
    data = json.loads(out.read_text())
    assert list(data) == ["seed", "trials", "summary"]
    assert [list(t) for t in data["trials"]] == [list(SERVER_LAYOUT.trial_fields)] * 4
    assert data["trials"][0]["landed"] is True and "booted" not in data["trials"][0]
    assert [list(r) for r in data["summary"]] == [list(SERVER_LAYOUT.summary_fields)] * 3
    again = load_trials(out)
    assert [(t.kind, t.index, t.steps, t.outcome, t.left) for t in again] == [
        (t.kind, t.index, t.steps, t.outcome, t.left) for t in trials]
    assert render(again, SERVER_LAYOUT) == render(trials, SERVER_LAYOUT)


def test_a_recorded_results_file_is_written_again_as_it_was(tmp_path):
    """The committed results of the harness before the merge: the same table, the same JSON bytes."""
    for name, layout in (("results-2026-11-23.json", SERVER_LAYOUT), ("vm-results-2026-11-24.json", GUEST_LAYOUT)):
        path = ROOT / "docs" / "faults" / name
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        header = {k: v for k, v in data.items() if k not in ("trials", "summary")}
        write_results(tmp_path / name, header, load_trials(path), layout)
        again = json.loads((tmp_path / name).read_text(encoding="utf-8"))
        # fields added since (a SIGINT's time to exit) are new keys; every recorded one is written as it was
        same = lambda new, old: [{k: n[k] for k in o} for n, o in zip(new, old)] == old    # noqa: E731
        assert same(again["trials"], data["trials"]) and same(again["summary"], data["summary"]), name


def test_server_plans_are_seeded_and_take_turns():
    target = LabServer(("nic-queues", "jvm"), delay_max=6.0)
    config = Config(2, KINDS, "tpx", Path("/nonexistent"), Path("/nonexistent/out.json"), seed=11)
    plans = target.plans(config)
    assert plans == target.plans(config)
    assert plans != target.plans(Config(2, KINDS, "tpx", Path("/n"), Path("/n/o.json"), seed=12))
    assert [(p.kind, p.index, p.steps) for p in plans] == [(k, i, s) for i, s in ((1, "nic-queues"), (2, "jvm"))
                                                           for k in KINDS]
    assert all(0 <= p.delay_s <= 6.0 and 2.0 <= p.outage_s <= 8.0 for p in plans)


def test_options_take_the_targets_defaults():
    server = cli.parse(["--trials", "3", "--kinds", "sigint-runner,link", "--steps", "nic-queues"])
    assert isinstance(server.target, LabServer) and server.target.step_sets == ("nic-queues",)
    c = server.config
    assert (c.trials, c.kinds, c.prefix, c.out.name, c.directory.name) == (
        3, ("sigint-runner", "link"), "tpflt", "faults.json", "faults-lab")
    vm = cli.parse(["--vm"])
    assert isinstance(vm.target, VmGuest)
    assert (vm.config.trials, vm.config.kinds, vm.config.prefix, vm.config.out.name) == (
        2, ("grub", "dropin", "rebootwait", "controller"), "tpvmf", "faults-vm.json")
    assert vm.config.command == "scripts/faults --vm"
    for wrong in (["--kinds", "grub"], ["--kinds", "sigint"], ["--vm", "--kinds", "sigint-pgrp"], ["--trials", "0"], ["--steps", ";"],
                  ["--vm", "--delay-max", "3"], ["--only", "sigint:x"]):
        with pytest.raises(SystemExit):
            cli.parse(wrong)


def test_table_option_prints_a_results_file(capsys):
    assert cli.main(["--table", str(RESULTS)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| fault | trials | fault during an applied change |")
    assert "| all | 80 |" in out


def test_exit_status():
    good, bad = Trial("sigint", 1, 1, 0.0, outcome=AUTO), Trial("sigint", 2, 2, 0.0, outcome=MODIFIED)
    assert cli.exit_status([good, Trial("link", 1, 3, 0.0, outcome=RESTORE)], stopped=False) == 0
    assert cli.exit_status([good, bad], stopped=False) == 1
    assert cli.exit_status([], stopped=False) == 1
    assert cli.exit_status([good], stopped=True) == 1
    assert cli.exit_status([], stopped=True) == 130


# ---- the course of a trial, on a fake target -----------------------------------------------------

class FakeTarget(Target):
    """A server whose states come from a list: after the run, after the restore, before the next trial."""

    layout = SERVER_LAYOUT

    def __init__(self, states: list[ServerState]):
        self.states, self.repairs = states, 0

    def up(self, harness):
        pass

    def state(self):
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def record_before(self, before):
        return "before"

    def plans(self, config):
        return []

    def wait_trigger(self, harness, plan, ctl):
        return None

    def inject(self, harness, plan, trial, ctl):
        pass

    def settle(self, harness, trial, first):
        return self.state()

    def restore_argv(self, harness):
        return ["sh", "-c", "echo restored; exit 3"]

    def repair(self, harness):
        self.repairs += 1
        return "CPU 1 online"

    def record_repair(self, trial, done):
        trial.add_note(f"repaired: {done}")

    def header(self, harness):
        return {}


@pytest.fixture
def harness(tmp_path):
    """A harness on a fake target, the server as ``_state()`` before; never closed (that would put
    this machine's CPUs back, under the feet of a lab test that may run beside)."""
    config = Config(1, KINDS, "tpfake", tmp_path / "lab", tmp_path / "out.json")
    harness = Harness(config, FakeTarget([_state()]))
    harness.before = _state()
    yield harness
    shutil.rmtree(harness.records, ignore_errors=True)


@pytest.mark.parametrize("after_run, after_restore, outcome, restored, repairs", [
    (_state(), None, AUTO, False, 0),
    (_state(cpus_online="0"), _state(), RESTORE, True, 0),
    (_state(cpus_online="0"), _state(cpus_online="0"), MODIFIED, True, 1),
])
def test_check_restores_once_and_repairs_what_is_left(harness, after_run, after_restore, outcome, restored, repairs):
    harness.target.states = [after_run] + ([after_restore] if after_restore else [])
    t = Trial("sigint", 1, 1, 0.0)
    harness.check(t)
    assert t.classify() == outcome
    assert (t.restore_output == ["restored", "(exit status 3)"]) == restored
    assert harness.target.repairs == repairs and ("repaired: CPU 1 online" in t.note) == bool(repairs)


def test_a_late_change_counts_against_the_trial_before(harness):
    harness.trials = [Trial("sigint", 1, 1, 0.0)]
    harness.trials[0].classify()
    harness.target.states = [_state(hugepages=664), _state()]
    harness.check_late()
    previous = harness.trials[0]
    assert previous.late == ["hugepages: 0 → 664"] and previous.outcome == MODIFIED
    assert harness.target.repairs == 1
    harness.check_late()                                   # the server as before: nothing more
    assert harness.target.repairs == 1


def test_only_and_merge(harness, tmp_path):
    harness.target.plans = lambda config: [Plan(k, i, 0, 0.0) for i in (1, 2) for k in ("sigint", "link")]
    harness.config.only = (("link", 2), ("sigint", 1))
    assert [(p.kind, p.index) for p in harness.plans()] == [("sigint", 1), ("link", 2)]
    earlier = tmp_path / "earlier.json"
    write_results(earlier, {}, [Trial("sigint", 1, 1, 0.0, outcome=MODIFIED),
                                Trial("link", 1, 2, 0.0, outcome=AUTO)], SERVER_LAYOUT)
    harness.config.merge = earlier
    harness.trials = [Trial("sigint", 1, 1, 0.0, outcome=AUTO)]
    harness.save()
    assert [(t.kind, t.index, t.outcome) for t in load_trials(harness.config.out)] == [
        ("link", 1, AUTO), ("sigint", 1, AUTO)]
