"""The VM guest as a fault target (``scripts/faults --vm``), its pure logic (no VM, no SSH): the
guest's state and its differences, the outcome of a trial, the seeded schedule, the results table
and file, the options."""

from __future__ import annotations

import json

import pytest

from harness.faults.cli import parse
from harness.faults.guest import STATE_SCRIPT, WATCH_SCRIPT
from harness.faults.report import AUTO, MODIFIED, RESTORE, UNBOOTABLE, Trial, load_trials, render, summary_rows, \
    write_results
from harness.faults.state import GuestState, parse_state
from harness.faults.vm import GUEST_LAYOUT, KINDS, VmGuest, schedule

pytestmark = pytest.mark.fast

CMDLINE = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-56-amd64 root=UUID=4b9a ro net.ifnames=0 console=ttyS0"
GUEST_TEXT = f"""cmdline={CMDLINE}
dropin=absent
grub_cfg=ok
grub_iommu=0
cpus=0-1
queues=2
lock=no
saved_state=no
tomcat=
"""


def state(**changes) -> GuestState:
    return GuestState(**{**parse_state(GUEST_TEXT).to_dict(), **changes})


def test_parse_state_reads_every_field():
    s = parse_state(GUEST_TEXT)
    assert s.cmdline == CMDLINE and s.dropin == "absent" and s.grub_cfg == "ok" and s.grub_iommu == 0
    assert (s.cpus_online, s.queues, s.lock, s.saved_state, s.tomcat) == ("0-1", "2", False, False, False)
    running = parse_state(GUEST_TEXT.replace("tomcat=", "tomcat=812 ").replace("lock=no", "lock=yes"))
    assert running.tomcat and running.lock


def test_parse_state_refuses_a_cut_answer():
    with pytest.raises(ValueError, match="grub_cfg"):
        parse_state("cmdline=x\ndropin=absent\n")


def test_differences_name_each_field():
    before = state()
    assert state().differences(before) == []
    after = state(cmdline=CMDLINE + " iommu.strict=0 iommu.passthrough=1", dropin="0123456789ab", grub_iommu=2,
                  cpus_online="1", queues="1", lock=True, tomcat=True)
    diff = after.differences(before)
    assert f"cmdline: {CMDLINE} → {CMDLINE} iommu.strict=0 iommu.passthrough=1" in diff
    assert "dropin: absent → 0123456789ab" in diff and "grub_iommu: 0 → 2" in diff
    assert "cpus_online: 0-1 → 1" in diff and "queues: 2 → 1" in diff
    assert "lock: False → True" in diff and "tomcat: False → True" in diff
    assert state(grub_cfg="empty").differences(before) == ["grub_cfg: ok → empty"]


@pytest.mark.parametrize("fields, outcome", [
    ({}, AUTO),
    ({"differences": ["lock: False → True"]}, RESTORE),
    ({"differences": ["dropin: absent → x"], "left": ["dropin: absent → x"]}, MODIFIED),
    ({"late": ["queues: 2 → 1"]}, MODIFIED),
    ({"booted": False, "differences": ["x"], "left": ["x"]}, UNBOOTABLE),
])
def test_classify(fields, outcome):
    t = Trial("grub", 1, 7, 1.0, **fields)
    assert t.classify() == outcome and t.outcome == outcome


def test_schedule_is_seeded_and_takes_turns():
    a = schedule(KINDS, 2, 11, grub_s=17.0)
    assert a == schedule(KINDS, 2, 11, grub_s=17.0)
    assert a != schedule(KINDS, 2, 12, grub_s=17.0)
    assert [(p.kind, p.index) for p in a] == [(k, i) for i in (1, 2) for k in KINDS]
    for p in a:
        window = {"grub": 0.9 * 17.0, "dropin": 0.3}.get(p.kind, 60.0)
        assert 0 <= p.delay_s <= window
        assert (p.off_s == 0) == (p.kind == "controller") and (p.off_s == 0 or 2 <= p.off_s <= 5)
    assert [p.signal for p in a if p.kind == "controller"] == ["SIGKILL", "SIGINT"]
    # one trial is the same whatever else runs: its draw depends on the seed, its kind and its index
    alone = schedule(("rebootwait",), 2, 11, grub_s=17.0)
    assert alone == [p for p in a if p.kind == "rebootwait"]


def test_render_counts_and_lists_bad_trials(tmp_path):
    trials = [Trial("grub", 1, 1, 1.0, injected=True, boot_s=40.0, duration_s=300),
              Trial("grub", 2, 2, 1.0, injected=True, boot_s=50.0, duration_s=360,
                    differences=["dropin: absent → x"]),
              Trial("controller", 1, 3, 1.0, signal="SIGKILL", injected=True, booted=False,
                    console_tail=["Kernel panic"], repaired="a new disk from the cached image", duration_s=200)]
    for t in trials:
        t.classify()
    rows = summary_rows(trials, GUEST_LAYOUT.labels)
    assert [(r.trials, r.auto, r.by_restore, r.unbootable) for r in rows] == [(2, 1, 1, 0), (1, 0, 0, 1), (3, 1, 1, 1)]
    assert rows[0].boot_median_s == 45.0 and rows[1].boot_median_s is None
    table = render(trials, GUEST_LAYOUT)
    assert table.splitlines()[0] == (
        "| fault | trials | fault injected | restored automatically | restored by one `tunepath restore` | "
        "left modified | unbootable | boot after the fault (median) | time per trial (median) |")
    assert "| QEMU killed during `update-grub` | 2 | 2 | 1 | 1 | 0 | 0 | 45 s | 5.5 min |" in table
    assert "controller 1: unbootable: no sshd: Kernel panic (repaired: a new disk from the cached image)" in table
    out = tmp_path / "vm.json"
    write_results(out, {"seed": 11}, trials, GUEST_LAYOUT)
    assert [t.outcome for t in load_trials(out)] == [t.outcome for t in trials]
    data = json.loads(out.read_text())
    assert [list(t) for t in data["trials"]] == [list(GUEST_LAYOUT.trial_fields)] * 3
    assert list(data["summary"][0]) == list(GUEST_LAYOUT.summary_fields) and "landed" not in data["trials"][0]


def test_guest_scripts_do_not_match_themselves():
    # the watcher's pgrep pattern must not find the watcher's own shell
    assert "'[u]pdate-grub|[g]rub-mkconfig'" in WATCH_SCRIPT and "[o]rg.apache.catalina" in STATE_SCRIPT
    assert "99-tunepath-iommu.cfg" in WATCH_SCRIPT and "99-tunepath-iommu.cfg" in STATE_SCRIPT


def test_parse_options():
    options = parse(["--vm", "--trials", "3", "--kinds", "grub,controller", "--seed", "5", "--only",
                     "controller:1,grub:2"])
    c = options.config
    assert isinstance(options.target, VmGuest)
    assert (c.trials, c.kinds, c.seed, c.prefix) == (3, ("grub", "controller"), 5, "tpvmf")
    assert c.only == (("controller", 1), ("grub", 2))
    with pytest.raises(SystemExit):
        parse(["--vm", "--kinds", "grub,bogus"])


def test_the_arm_vm_is_a_target_of_its_own(capsys):
    options = parse(["--vm", "--arch", "aarch64", "--kinds", "grub"])
    assert isinstance(options.target, VmGuest) and options.target.arch == "arm64"
    assert options.config.out.name == "faults-vm-arm64.json"
    assert parse(["--vm"]).target.arch == "amd64" and parse(["--vm"]).config.out.name == "faults-vm.json"
    with pytest.raises(SystemExit):
        parse(["--arch", "arm64"])                         # the namespace server has no architecture to choose
    with pytest.raises(SystemExit):
        parse(["--vm", "--arch", "riscv64"])
    assert "choose one of amd64, arm64" in capsys.readouterr().err
