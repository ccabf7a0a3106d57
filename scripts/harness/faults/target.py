"""What the fault harness needs of the server it breaks: the :class:`Target` interface.

:class:`harness.faults.harness.Harness` runs the same trials on either target, the namespace
lab's server (:class:`harness.faults.server.LabServer`, ``scripts/faults``) or the lab's VM
guest (:class:`harness.faults.vm.VmGuest`, ``scripts/faults --vm``). A target says how its lab
comes up, how its state is read, when a fault's delay starts counting (the trigger), how each
kind of fault is injected, how the server is restored and repaired, which options its runs take,
and what its results hold (its :class:`harness.faults.report.Layout`).
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from harness.faults.probe import Controller
from harness.faults.report import Layout, Plan, Trial
from harness.faults.state import State

if TYPE_CHECKING:
    from harness.faults.harness import Config, Harness

__all__ = ["Target"]


class Target(ABC):
    """One kind of server to break; its class attributes are its settings and defaults."""

    prog: str = "scripts/faults"            # in usage and error messages
    root_for: str = ""                      # why it needs root
    machine_wide: bool = False              # changes this machine's CPUs or huge pages: hold the apply lock
    layout: Layout
    trials: int = 2                         # default trials per kind
    prefix: str = ""                        # default lab prefix
    lab_dir: str = ""                       # default lab directory, under build/
    out: str = ""                           # default results file, under build/
    records_prefix: str = "tunepath-faults-"    # the temporary directory of the runs
    run_options: tuple[str, ...] = ()       # every `tunepath run` of the harness
    trial_options: tuple[str, ...] = ("--apply",)
    setup_options: tuple[str, ...] = ()
    setup_limit_s: float = 600
    run_limit_s: float = 300                # after the fault, how long a run may take before it counts as hung
    restore_limit_s: float = 240
    no_trigger: str = "no trigger before the run ended: no fault injected"     # the trial's note then

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        """Options only this target takes."""

    @classmethod
    def from_options(cls, args: argparse.Namespace, parser: argparse.ArgumentParser) -> "Target":
        return cls()

    def before_run(self, harness: "Harness", plan: Plan) -> tuple[str, ...]:
        """Prepare the trial's run; returns the options its ``tunepath run`` takes besides
        ``trial_options`` (``--site-dir``: the run rebuilds that site instead of ``--no-build``)."""
        return ()

    # -- the lab and the server's state ----------------------------------------------------
    @abstractmethod
    def up(self, harness: "Harness") -> None:
        """Bring the lab up and get hold of its server."""

    def tomcat_installed(self) -> bool:
        return False

    @abstractmethod
    def state(self) -> State:
        """The server's state now."""

    @abstractmethod
    def record_before(self, before: State) -> str:
        """Keep the server's state before the trials; a line on it. Raises TunepathError if the
        server cannot be used so."""

    def calibrate(self, harness: "Harness") -> None:
        """Measurements before the trials that the plans need."""

    @abstractmethod
    def plans(self, config: "Config") -> list[Plan]:
        """Every trial, drawn from the seed: the kinds take turns (trial 1 of each, then trial 2 …)."""

    # -- one trial -------------------------------------------------------------------------
    def start_watch(self) -> None:
        """Before the run starts: whatever the trigger needs."""

    def stop_watch(self) -> None:
        """Once the trigger came, or never will."""

    @abstractmethod
    def wait_trigger(self, harness: "Harness", plan: Plan, ctl: Controller) -> float | None:
        """The moment (monotonic) the fault's delay counts from; None if the run ended (or took too long) first."""

    @abstractmethod
    def inject(self, harness: "Harness", plan: Plan, trial: Trial, ctl: Controller) -> None:
        """The fault, recorded in ``trial``."""

    @abstractmethod
    def settle(self, harness: "Harness", trial: Trial, first: bool) -> State | None:
        """The server's state once the run (``first``) or the restore ended; None if it did not come
        back (the trial is then marked and the server repaired)."""

    @abstractmethod
    def restore_argv(self, harness: "Harness") -> list[str]:
        """One ``tunepath restore --force`` of the server."""

    @abstractmethod
    def repair(self, harness: "Harness") -> str:
        """Put the server back as root, whatever the run and the restore left: what was done."""

    @abstractmethod
    def record_repair(self, trial: Trial, done: str) -> None:
        """Write what :meth:`repair` did into the trial."""

    def reachable(self, lab) -> bool:
        """Before the next trial: the lab is whole (brought up again if need be) and its server answers."""
        return True

    # -- the results and the end -----------------------------------------------------------
    @abstractmethod
    def header(self, harness: "Harness") -> dict:
        """The results' settings and machine."""

    def put_back(self, harness: "Harness") -> list[str]:
        """At the end, however it came: the server as before, where the target can."""
        return []
