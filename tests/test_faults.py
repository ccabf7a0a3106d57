"""The fault-injection harness (scripts/faults, ``python -m harness.faults``) on the namespace lab.

One trial per fault kind (a SIGINT to the controller's process group and one to `tunepath run` alone,
a SIGKILL, the server's sshd, its link) on a lab of its own, with the short NIC-queue step (its queue change
lands a few seconds into the run) and no calibration run (``--delay-max``), so the whole harness
takes about two minutes. It must leave no host modified, its counts must add up, and it must
leave nothing behind: no lab, CPU 1 online, no huge pages. The harness takes
``/tmp/tunepath-apply.lock`` itself. The records, the table and the course of a trial without a
lab: tests/test_faults_report.py and tests/test_faults_vm.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from harness.faults.server import SERVER_LAYOUT
from test_lab_runs import need_lab_parts

pytestmark = pytest.mark.system

KINDS = ("sigint-pgrp", "sigint-runner", "sigkill", "sshd", "link")


def _harness(args: list[str], limit_s: float, prefix: str, lab_dir: Path) -> subprocess.CompletedProcess:
    """The harness in a session of its own. Past ``limit_s`` it gets a Ctrl-C (its own clean-up takes
    its lab down), then a SIGKILL, and the lab is taken down here: a harness that overran must not
    leave a VM or a lab running under the tests that follow (an emulated Arm VM takes both CPUs)."""
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "python"), "-m", "harness.faults", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit_s)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        down = subprocess.run([str(ROOT / ".venv" / "bin" / "tunepath"), "lab", "down", "--dir", str(lab_dir),
                               "--prefix", prefix], capture_output=True, text=True, timeout=300)
        pytest.fail(f"the harness did not end within {limit_s:.0f} s; stopped, lab down (exit {down.returncode}). "
                    f"Its last output:\n{out[-3000:]}\n{err[-2000:]}")


def test_the_harness_leaves_no_host_modified(tmp_path):
    need_lab_parts(cpu_hotplug=False)           # the NIC-queue step changes no CPU
    out = tmp_path / "faults.json"
    cpus, hugepages = (Path(p).read_text() for p in ("/sys/devices/system/cpu/online", "/proc/sys/vm/nr_hugepages"))
    prefix = f"tpf{os.getpid() % 1000}"
    r = _harness(["--trials", "1", "--kinds", ",".join(KINDS), "--steps", "nic-queues", "--delay-max", "6",
                  "--prefix", prefix, "--dir", str(tmp_path / "lab"), "--out", str(out)], 600, prefix, tmp_path / "lab")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    data = json.loads(out.read_text())
    assert list(data) == ["date", "machine", "seed", "trials_per_kind", "kinds", "step_sets", "profile", "elapsed_s",
                          "before", "calibration", "trials", "summary"]
    trials = data["trials"]
    assert all(list(t) == list(SERVER_LAYOUT.trial_fields) for t in trials)
    assert [t["kind"] for t in trials] == list(KINDS)
    assert all(t["landed"] for t in trials), [(t["kind"], t["note"]) for t in trials]    # each hit a change
    assert [t["outcome"] for t in trials if t["outcome"] == "left modified"] == []
    total = data["summary"][-1]
    assert total["trials"] == len(KINDS) == total["auto"] + total["by_restore"] + total["modified"]
    assert total["modified"] == 0
    sigkill = next(t for t in trials if t["kind"] == "sigkill")
    assert sigkill["outcome"] == "restored by one tunepath restore" and sigkill["differences"]  # nothing ran after it
    assert f"| all | {len(KINDS)} | {len(KINDS)} |" in r.stdout
    for t in (t for t in trials if t["kind"].startswith("sigint")):    # a Ctrl-C ends the run: recorded, timed
        assert t["exit_status"] == 130 and not t["hung"] and t["to_exit_s"] is not None, t
    assert not (tmp_path / "lab" / "state.json").exists()                  # the lab is down
    assert (Path("/sys/devices/system/cpu/online").read_text(), Path("/proc/sys/vm/nr_hugepages").read_text()) == (
        cpus, hugepages)


def test_a_power_cut_of_the_arm_vm_during_update_grub_leaves_it_bootable_and_restored(tmp_path):
    """Issue 32: one power-cut trial on the Arm VM, whose host boots what its grub.cfg names: QEMU
    SIGKILLed while the IOMMU step's `update-grub` runs, powered on again, then checked (and restored
    by one `tunepath restore` if the run could not). Every kind, 3 trials each: docs/faults.md."""
    from test_lab_vm import _need_vm_parts

    from tunepath.lab.vmimage import default_recipe, ensure_image

    _need_vm_parts("arm64")
    # the image first, outside the trial's time limit: on a new machine building it takes about 13 min
    ensure_image(ROOT / ".cache", lambda line: None, default_recipe("arm64"))
    out = tmp_path / "faults-vm-arm64.json"
    prefix = f"tpaf{os.getpid() % 1000}"
    r = _harness(["--vm", "--arch", "arm64", "--trials", "1", "--kinds", "grub", "--seed", "11", "--prefix", prefix,
                  "--dir", str(tmp_path / "lab"), "--out", str(out)], 1800, prefix, tmp_path / "lab")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    trial = json.loads(out.read_text())["trials"][0]
    assert trial["kind"] == "grub" and trial["injected"], trial["note"]
    assert trial["booted"] and trial["outcome"] in ("restored automatically", "restored by one tunepath restore"), trial
    assert not (tmp_path / "lab" / "state.json").exists()                  # the lab is down
