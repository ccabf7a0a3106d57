"""A notebook's execution that a Ctrl-C interrupts within seconds.

Jupyter starts each kernel in a session of its own, so a Ctrl-C in the terminal reaches only this
process; and nbclient, executing in the main thread, would take the SIGINT for itself and only ask
the busy kernel to shut down. :func:`interruptible` runs the execution in a worker thread: the main
thread takes the Ctrl-C, passes it to the kernels (:class:`Kernels`), waits for their cells to end
(a live step's guard puts the server back) and raises it.

A replay build executes notebooks in worker threads (:mod:`tunepath.publish.pool`): their kernels
are registered while they run (:func:`running`), and a Ctrl-C in the build's main thread ends them
(:func:`end_running`): they only write into the build's staging directory, which is dropped, so
the build stops in a second or two instead of waiting for every running notebook to finish.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Kernels", "interruptible", "running", "end_running", "INTERRUPT_GRACE_S"]


@dataclass
class Kernels:
    """The kernels one notebook's execution started, and whether a Ctrl-C interrupted them."""

    pids: list[int] = field(default_factory=list)
    interrupted: bool = False


_RUNNING: list[Kernels] = []
_RUNNING_LOCK = threading.Lock()


@contextmanager
def running(kernels: Kernels):
    """``kernels`` registered while the block runs, for :func:`end_running`."""
    with _RUNNING_LOCK:
        _RUNNING.append(kernels)
    try:
        yield kernels
    finally:
        with _RUNNING_LOCK:
            _RUNNING.remove(kernels)


def end_running() -> None:
    """End every registered kernel now (SIGKILL; their managers then shut them down at once)."""
    with _RUNNING_LOCK:
        found = list(_RUNNING)
    for kernels in found:
        kernels.interrupted = True
        for pid in list(kernels.pids):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


INTERRUPT_GRACE_S = 60.0   # how long a Ctrl-C waits for the interrupted kernel's cell to end


def interruptible(run, kernels: Kernels, what: str):
    """``run()`` in a worker thread; a Ctrl-C in the main thread interrupts ``kernels``."""
    box: dict = {}
    done = threading.Event()     # not Thread.join: a join that a Ctrl-C interrupts can leave is_alive() False

    def work() -> None:
        try:
            box["result"] = run()
        except BaseException as exc:      # handed to the main thread as it was raised
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name=f"papermill {what}", daemon=True).start()
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        signalled: set[int] = set()

        kernels.interrupted = True

        def interrupt() -> None:      # a kernel that starts after the Ctrl-C is interrupted too
            for pid in set(kernels.pids) - signalled:
                if ignores_sigint(pid):   # idle between two cells: the next cell takes it
                    continue
                signalled.add(pid)
                try:
                    os.kill(pid, signal.SIGINT)
                except ProcessLookupError:
                    pass

        deadline, presses = time.monotonic() + INTERRUPT_GRACE_S, 1
        print(f"interrupt: {what} stops and puts back what it changed (at most {INTERRUPT_GRACE_S:.0f} s)",
              file=sys.stderr, flush=True)
        while not done.is_set() and time.monotonic() < deadline:
            interrupt()
            try:
                done.wait(0.1)
            except KeyboardInterrupt:
                presses += 1
                if presses >= 3:
                    break
                print(f"interrupt: {what} is still putting back what it changed (at most "
                      f"{max(0.0, deadline - time.monotonic()):.0f} s more; Ctrl-C once more stops waiting)",
                      file=sys.stderr, flush=True)
        raise KeyboardInterrupt from None
    if "error" in box:
        raise box["error"]
    return box["result"]


def ignores_sigint(pid: int) -> bool:
    """Does process ``pid`` ignore SIGINT now? An IPython kernel does while no cell executes (before
    the first, between two), so a Ctrl-C sent then would be lost: it is sent once a cell runs."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGINT - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False
