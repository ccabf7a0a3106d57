"""Applied live runs on the lab: the host changes are made for real and the server is put back.

One lab of their own (prefix ``tpr<pid>``, under pytest's tmp), Tomcat installed once by a run
of the setup step, then: (a) an applied run of the baseline (CPU 1 offline) and the NIC-queue step
(eth0's queues) completes, the record shows the changes, and the server is as before (the JVM step's
huge pages would add two minutes: tests/test_host_changes_real.py reserves and releases them for
real, and scripts/faults injects faults into applied runs of the JVM step); (b) a SIGINT while a change is applied leaves the
server as it was, with no ``tunepath restore``. The server's state is read as root from outside
the lab's SSH (harness.faults.probe). Everything machine-wide runs under
``flock /tmp/tunepath-apply.lock``; the finalisers put the server back, take the lab down, and
bring this machine's CPUs and huge pages back, also when a test fails.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath.versions import TOMCAT_VERSION

pytestmark = pytest.mark.system
TUNEPATH = ROOT / ".venv" / "bin" / "tunepath"
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"
TOOLS = ("ip", "socat", "sudo", "visudo", "ethtool", "ssh-keygen", "useradd", "userdel", "wrk", "java")
APPLY_LOCK = "/tmp/tunepath-apply.lock"
CPU1 = Path("/sys/devices/system/cpu/cpu1/online")


def need_lab_parts(cpu_hotplug: bool = True) -> None:
    """Root, the lab's tools, sshd, the Tomcat tarball (and a hot-pluggable CPU 1): in CI a missing
    part fails the test, elsewhere it skips it."""
    missing = ([] if os.geteuid() == 0 else ["root"]) + [t for t in TOOLS if not shutil.which(t)] \
        + [what for what, ok in (("sshd", Path("/usr/sbin/sshd").exists()), ("Tomcat tarball", TARBALL.exists()),
                                 ("a hot-pluggable CPU 1", os.access(CPU1, os.W_OK) or not cpu_hotplug)) if not ok]
    try:
        from tunepath.lab import Lab  # noqa: F401
    except ImportError:
        missing.append("tunepath.lab")
    if missing:
        msg = f"lab runs need {', '.join(missing)} (root, after scripts/bootstrap --system --lab)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@contextmanager
def apply_lock():
    """``flock /tmp/tunepath-apply.lock``: CPU hotplug and huge pages are this machine's, shared."""
    fd = os.open(APPLY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@dataclass
class LabRuns:
    lab: object
    probe: object
    before: object
    runs: Path

    def start(self, steps: str, *extra: str):
        from harness.faults.probe import Controller

        return Controller([str(TUNEPATH), "run", "--hosts", str(self.lab.hosts_file), "--profile", "smoke",
                           "--steps", steps, "--runs-dir", str(self.runs), "--no-build", *extra], ROOT)

    def newest_run(self) -> dict:
        """The record of the run that ended last, loaded (and so validated) by the run store."""
        from tunepath.evidence.store import RunStore

        [path] = sorted(self.runs.glob("live-*/run.json"), key=lambda p: p.stat().st_mtime)[-1:]
        return RunStore(self.runs).load(path.parent.name).record

    def verification(self, record: dict, step: str, name: str) -> str:
        [entry] = [v for v in record["verification"] if v["step"] == step and v["name"] == name]
        return (self.runs / record["run_id"] / entry["output"]).read_text()


@pytest.fixture(scope="module")
def lab_runs(tmp_path_factory):
    need_lab_parts()
    from harness.faults.probe import Controller, Probe, machine_state, put_machine_back
    from tunepath.lab import Lab

    tmp = tmp_path_factory.mktemp("lab-runs")
    with ExitStack() as stack:
        stack.enter_context(apply_lock())
        stack.callback(put_machine_back, machine_state())        # last: CPUs and huge pages as found
        lab = Lab(tmp / "lab", f"tpr{os.getpid() % 1000}")
        stack.callback(lab.down)                                  # also a lab half up comes down
        lab.up()
        setup = Controller([str(TUNEPATH), "run", "--hosts", str(lab.hosts_file), "--profile", "smoke", "--steps",
                            "setup", "--runs-dir", str(tmp / "runs"), "--no-build", "--tomcat-tarball",
                            str(TARBALL)], ROOT)
        assert setup.wait(600) == 0, "\n".join(setup.lines[-10:])
        probe = Probe(lab)
        before = probe.state()
        stack.callback(probe.repair, before)                      # first: the server as before
        assert not before.lock and not before.tomcat and before.hugepages == 0, before
        yield LabRuns(lab, probe, before, tmp / "runs")


def _watch(lab_runs, ctl) -> dict[str, set]:
    """What the server showed while the run ran: online CPUs and queue counts."""
    seen: dict[str, set] = {"cpus": set(), "queues": set()}
    while ctl.running():
        state = lab_runs.probe.state()
        seen["cpus"].add(state.cpus_online)
        seen["queues"].add(state.queues)
        time.sleep(0.2)
    return seen


def test_an_applied_run_changes_the_host_for_real_and_puts_it_back(lab_runs):
    before = lab_runs.before
    ctl = lab_runs.start("baseline,nic-queues", "--apply", "--no-pin")
    seen = _watch(lab_runs, ctl)
    assert ctl.wait(60) == 0, "\n".join(ctl.lines[-15:])
    assert lab_runs.probe.state().differences(before) == []
    assert "0" in seen["cpus"] and before.cpus_online != "0"                  # CPU 1 was offline
    assert seen["queues"] - {before.queues}, seen["queues"]                    # eth0's queues changed
    record = lab_runs.newest_run()
    assert record["status"] == "complete" and record["apply"] is True
    lscpu = lab_runs.verification(record, "baseline", "lscpu")
    assert re.search(r"On-line CPU\(s\) list:\s+0\s*$", lscpu, re.M), lscpu
    shown = lab_runs.verification(record, "nic-queues", "show-queues")
    after = lab_runs.verification(record, "nic-queues", "ethtool-l")
    current = lambda text: text.split("Current hardware settings:")[1].split()[:4]    # noqa: E731
    assert current(shown) == ["RX:", "4", "TX:", "4"] and current(after) == ["RX:", "1", "TX:", "1"], (shown, after)
    [note] = [n for n in record["notes"] if isinstance(n, dict) and "put back" in n["text"]]
    assert {"baseline", "nic-queues"} <= set(note.get("steps", ())), note
    assert "eth0" in note["text"] and "CPUs" in note["text"], note


def test_sigint_while_a_change_is_applied_leaves_the_host_as_it_was(lab_runs):
    before = lab_runs.before
    ctl = lab_runs.start("baseline,nic-queues", "--apply", "--no-pin")
    deadline = time.monotonic() + 120
    while not lab_runs.probe.changed(before):             # CPU 1 offline: the disruptive block ran
        assert ctl.running() and time.monotonic() < deadline, "\n".join(ctl.lines[-10:])
        time.sleep(0.1)
    time.sleep(3)                                         # Tomcat restarting or measuring on one CPU
    changed = lab_runs.probe.state().differences(before)
    ctl.signal(signal.SIGINT)                             # a Ctrl-C in the controller's terminal
    assert ctl.wait(180) == 130, "\n".join(ctl.lines[-15:])
    assert changed and any(d.startswith("cpus_online") for d in changed), changed
    assert lab_runs.probe.state().differences(before) == []          # no `tunepath restore` needed
    record = lab_runs.newest_run()
    assert record["status"] == "failed" and record["error"]["message"] == "interrupted"
