"""Ctrl-C while a notebook executes (a live step, a build): it reaches the controller at once, is
passed on to the notebook's kernel, and the controller waits for the kernel to put back what its
cell changed before it stops; a Ctrl-C while the run puts the server back is held, and says so.

The "kernel" here is a small Python process that, like a live step's guard, takes SIGINT, spends a
moment putting things back, writes what it did and exits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tunepath.errors import TunepathError
from tunepath.live.held import HeldInterrupts, StopSignals
from tunepath.publish.interrupt import Kernels, interruptible

pytestmark = pytest.mark.fast

KERNEL = """
import signal, sys, time
out = sys.argv[1]
def restore(*_):
    time.sleep(0.5)                     # putting the server back takes a moment
    open(out, "w").write("restored")
    sys.exit(1)
signal.signal(signal.SIGINT, restore)
open(out + ".ready", "w").write("")
time.sleep(60)
"""


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt here as in a terminal, even where the tests were started in
    the background of a shell (``scripts/test &``), whose jobs inherit SIGINT ignored: Python then
    installs no handler of its own, and a SIGINT would do nothing."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _sigint_when(path: str) -> threading.Thread:
    """SIGINT to this process (as a Ctrl-C in its terminal) once ``path`` exists."""
    def press():
        deadline = time.monotonic() + 20
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)
    t = threading.Thread(target=press, daemon=True)
    t.start()
    return t


def test_ctrl_c_is_passed_to_the_kernel_and_waits_for_its_restore(tmp_path):
    out = str(tmp_path / "kernel.out")
    kernels = Kernels()

    def run():
        kernel = subprocess.Popen([sys.executable, "-c", KERNEL, out], start_new_session=True)  # as Jupyter does
        kernels.pids.append(kernel.pid)
        if kernel.wait() != 0:
            raise TunepathError("step 'baseline': the cell failed: KeyboardInterrupt")
        return "finished"

    _sigint_when(out + ".ready")
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interruptible(run, kernels, "step 'baseline'")
    assert open(out).read() == "restored"          # the kernel got the Ctrl-C and ended its restore first
    assert kernels.interrupted                     # its manager then shuts it down at once, not gracefully
    assert time.monotonic() - t0 < 15              # not the kernel's 60 s sleep


def test_without_ctrl_c_the_result_and_errors_pass_through(tmp_path):
    quiet = Kernels()
    assert interruptible(lambda: "done", quiet, "step 'x'") == "done"
    assert not quiet.interrupted

    def fail():
        raise TunepathError("step 'x': notebook failed in cell 3")
    with pytest.raises(TunepathError, match="cell 3"):
        interruptible(fail, Kernels(), "step 'x'")


def test_a_kernel_started_after_the_ctrl_c_is_interrupted_too(tmp_path):
    out = str(tmp_path / "late.out")
    kernels = Kernels()
    pressed = tmp_path / "pressed"

    def run():
        open(pressed, "w").close()     # the Ctrl-C comes now, while the kernel is still starting
        time.sleep(1.0)
        kernel = subprocess.Popen([sys.executable, "-c", KERNEL, out], start_new_session=True)
        kernels.pids.append(kernel.pid)
        ended.append(kernel.wait())

    ended: list[int] = []
    _sigint_when(str(pressed))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interruptible(run, kernels, "step 'x'")
    # interrupted while it starts (its default SIGINT) or once running (its restore): it ends either way
    assert ended and ended[0] in (1, -signal.SIGINT) and time.monotonic() - t0 < 15


def test_ctrl_c_during_the_restore_is_held_and_says_so(capsys):
    held = HeldInterrupts(90)
    held.hold()
    try:
        os.kill(os.getpid(), signal.SIGINT)        # held: the restore goes on
        os.kill(os.getpid(), signal.SIGINT)        # held again, with how to stop now
        said = capsys.readouterr()
        words = said.out + said.err
        assert words.count("the server is being put back") == 2
        assert "at most about" in words and "once more stops now" in words
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)    # a third stops at once
    finally:
        held.release(raise_pending=False)
    with pytest.raises(KeyboardInterrupt):        # the held Ctrl-C is raised once the restore is done
        held2 = HeldInterrupts(90)
        held2.hold()
        os.kill(os.getpid(), signal.SIGINT)
        held2.release()


def test_sigterm_and_sighup_stop_a_run_as_a_ctrl_c_does(capsys):
    """`kill PID` of a run used to end it at once, the server left changed and locked."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        with StopSignals():
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signum)
                time.sleep(5)                        # the handler runs before this ends
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL       # put back afterwards
    # while the server is put back, a SIGTERM is held like a Ctrl-C, and raised once that is done
    held, said = HeldInterrupts(90), ""
    with StopSignals(), pytest.raises(KeyboardInterrupt):
        held.hold()
        os.kill(os.getpid(), signal.SIGTERM)
        out = capsys.readouterr()
        said = out.out + out.err
        held.release()
    assert "the server is being put back" in said


def test_a_run_in_the_background_stops_on_sigterm_and_keeps_nohup(tmp_path):
    """A script's `scripts/run … &` ignores SIGINT; a SIGTERM still stops it as a Ctrl-C does. A
    SIGHUP that nohup ignored stays ignored."""
    code = ("import os, signal, time\n"
            "from tunepath.live.held import StopSignals\n"
            "with StopSignals():\n"
            "    os.kill(os.getpid(), signal.SIGHUP); print('hup ignored', flush=True)\n"
            "    try:\n"
            "        os.kill(os.getpid(), signal.SIGTERM); time.sleep(5); print('still running')\n"
            "    except KeyboardInterrupt:\n"
            "        print('interrupted', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                          preexec_fn=lambda: [signal.signal(signal.SIGINT, signal.SIG_IGN),
                                              signal.signal(signal.SIGHUP, signal.SIG_IGN)])
    assert proc.stdout.split() == ["hup", "ignored", "interrupted"], proc.stderr


def test_a_step_guard_finishes_its_restore_through_a_second_ctrl_c(monkeypatch, tmp_path, capsys):
    """JupyterLab's stop button pressed again while the step puts the server back: the restore goes
    on (and says so), and the step ends interrupted."""
    from types import SimpleNamespace

    from tunepath.live import actions

    restored = []

    def cleanup(*args, quick=False):
        os.kill(os.getpid(), signal.SIGINT)          # the second press, mid-restore
        restored.append("cleanup")

    monkeypatch.setattr(actions, "cleanup", cleanup)
    monkeypatch.setattr(actions, "answers", lambda host: True)
    monkeypatch.setattr(actions, "restore_hosts",
                        lambda server, clients: restored.append("restore") or ["eth0: 4 queues again"])
    session = SimpleNamespace(server=None, tomcat=None, clients=[], run_id="r", options=SimpleNamespace(apply=True),
                              recorder=SimpleNamespace(runs_dir=tmp_path, fail=lambda *a, **kw: None,
                                                       note_put_back=lambda *a: None))
    with pytest.raises(KeyboardInterrupt):
        with actions.step_guard(session, "nic-queues"):
            raise KeyboardInterrupt
    assert restored == ["cleanup", "restore"]
    said = capsys.readouterr()
    assert "the server is being put back; step nic-queues stops once that is done" in said.out + said.err


def test_a_kernel_idle_between_cells_gets_the_ctrl_c_when_its_next_cell_runs(tmp_path):
    """An IPython kernel ignores SIGINT while no cell executes: a Ctrl-C sent then would be lost
    and the step would run to its end. It is sent once the kernel takes SIGINT again."""
    out = tmp_path / "idle.out"
    code = ("import signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            f"open({str(out)!r} + '.ready', 'w').close(); time.sleep(1.5); "      # idle: between two cells
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "try:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n"
            f"    open({str(out)!r}, 'w').write('interrupted in the next cell'); sys.exit(1)")
    kernels = Kernels()

    def run():
        kernel = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        kernels.pids.append(kernel.pid)
        kernel.wait()

    _sigint_when(str(out) + ".ready")
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        interruptible(run, kernels, "step 'x'")
    assert out.read_text() == "interrupted in the next cell" and time.monotonic() - t0 < 15


def test_a_ctrl_c_during_a_build_ends_the_running_notebooks_instead_of_waiting_for_them():
    """A replay build's notebooks run in worker threads: a Ctrl-C in the main thread ends their
    work (on_interrupt: their kernels killed) rather than waiting for each to finish."""
    from tunepath.publish import pool

    stop, ended = threading.Event(), []

    def job():
        finished = stop.wait(30)          # a notebook that would run on for 30 s
        ended.append(finished)
        return finished

    main = threading.get_ident()
    threading.Timer(0.5, signal.pthread_kill, (main, signal.SIGINT)).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pool.run_in_order([job, job, job], 2, on_interrupt=stop.set)
    assert time.monotonic() - t0 < 15 and ended == [True, True]   # the two running ended early; the third never ran


def test_no_kernel_is_started_once_a_ctrl_c_has_come():
    """A Ctrl-C between the step's start and its kernel's launch: the kernel is never started (it
    would only be interrupted while it starts, which takes seconds to notice)."""
    import asyncio

    from tunepath.publish.notebooks import quiet_kernel_manager

    kernels = Kernels(interrupted=True)
    manager = quiet_kernel_manager(None, started=kernels)(kernel_name="python3")
    with pytest.raises(TunepathError, match="interrupted before"):
        asyncio.run(manager.start_kernel())
    assert kernels.pids == []
