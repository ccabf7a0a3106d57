"""A Ctrl-C held while the server is put back (:class:`HeldInterrupts`), and the other signals
that stop a run as a Ctrl-C does (:class:`StopSignals`)."""

from __future__ import annotations

import signal
import threading
import time


__all__ = ["HeldInterrupts", "StopSignals"]


class HeldInterrupts:
    """Ctrl-C while the server is put back (by the run, or by a step's guard in its kernel, which
    JupyterLab's stop button interrupts): it is held until that is done (a half-restored server is
    worse than a late exit), and each one says so and how long it may take (``budget_s`` from the
    first); only a third one stops at once."""

    def __init__(self, budget_s: float, who: str = "the run"):
        self.pending, self.previous, self.presses, self.since = False, None, 0, 0.0
        self.budget_s, self.who = budget_s, who

    def hold(self) -> None:
        if self.previous is not None or threading.current_thread() is not threading.main_thread():
            return
        self.previous = signal.getsignal(signal.SIGINT) or signal.default_int_handler
        signal.signal(signal.SIGINT, self._held)

    def _held(self, signum, frame) -> None:
        from tunepath.live.session import progress

        self.presses += 1
        if self.presses >= 3:
            raise KeyboardInterrupt
        if not self.pending:
            self.pending, self.since = True, time.monotonic()
        left = max(0, self.budget_s - (time.monotonic() - self.since))
        progress(f"interrupt: the server is being put back; {self.who} stops once that is done (at most about "
                 f"{left:.0f} s more, where the server must be reached again)" +
                 (" — Ctrl-C once more stops now, and leaves the server for `tunepath restore --force`"
                  if self.presses == 2 else ""))

    def release(self, raise_pending: bool = True) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        if self.pending and raise_pending:
            self.pending, self.presses = False, 0
            raise KeyboardInterrupt


class StopSignals:
    """While a run records: SIGTERM (``kill PID``, a service manager stopping it) and SIGHUP (its
    terminal closed) stop it as a Ctrl-C does, so the server is put back and its lock released,
    instead of the process dying with the server changed. Each is passed to whatever handles
    SIGINT at that moment (held while the server is put back); where SIGINT is ignored (a run
    started in the background by a script), it interrupts all the same. A SIGHUP ignored when the
    run started (``nohup``) stays ignored."""

    def __init__(self):
        self.previous: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self.previous[signum] = signal.signal(signum, self._as_ctrl_c)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    @staticmethod
    def _as_ctrl_c(signum, frame) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt
