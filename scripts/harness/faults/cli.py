"""The options and the course of ``python -m harness.faults [--vm] …`` (``scripts/faults``).

Without ``--vm`` the target is the namespace lab's server (:mod:`harness.faults.server`), with it
the lab's VM guest (:mod:`harness.faults.vm`); the defaults (trials, lab prefix and directory,
results file) are the target's. ``--table FILE`` only prints the table of a results file. Needs
root. However the harness ends (Ctrl-C and SIGTERM included), it cleans up: the run in flight,
the server, the lab, this machine's CPUs and huge pages; then it writes the results, prints the
table and exits 0 when every trial ended restored (automatically or by one ``tunepath restore``),
1 when one left the server modified or unbootable or the harness stopped early, 130 when it was
stopped before any trial ended, 2 on a usage error or without root.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from harness import ROOT
from harness.faults.harness import Config, Harness
from harness.faults.probe import apply_lock, say
from harness.faults.moments import render_moments
from harness.faults.report import AUTO, RESTORE, Trial, load_trials, render
from harness.faults.server import LabServer
from harness.faults.target import Target
from harness.faults.vm import VmGuest
from tunepath.errors import TunepathError

__all__ = ["Options", "parse", "main", "run", "exit_status"]


@dataclass
class Options:
    target: Target
    config: Config
    table: Path | None = None          # --table FILE: only print its table


def table(trials: list[Trial], layout) -> str:
    """The results table; with ``--at``, a second one per moment of the run."""
    text = render(trials, layout)
    return text + ("\n\n" + render_moments(trials) if any(t.moment for t in trials) else "")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/faults", description="Fault injection on the lab: interrupt applied "
                                "live runs and check that the server (a network namespace, or with --vm the VM) "
                                "is put back.")
    p.add_argument("--vm", action="store_true", help="the lab's VM guest instead of its namespace server")
    p.add_argument("--arch", default=None, help="with --vm: amd64 (default) or arm64, the Arm VM the host boots from "
                                                "its own grub.cfg")
    p.add_argument("--trials", type=int, default=None,
                   help=f"trials per fault kind (default {LabServer.trials}; with --vm {VmGuest.trials}, ~5 min each)")
    p.add_argument("--kinds", default=None, help=f"comma-separated, of {','.join(LabServer.layout.kinds)} "
                                                 f"(with --vm: {','.join(VmGuest.layout.kinds)})")
    p.add_argument("--prefix", default=None, help=f"the lab's name prefix (default {LabServer.prefix}; "
                                                  f"with --vm {VmGuest.prefix})")
    p.add_argument("--dir", type=Path, default=None, help=f"the lab's directory (default build/{LabServer.lab_dir}; "
                                                          f"with --vm build/{VmGuest.lab_dir})")
    p.add_argument("--seed", type=int, default=11, help="seed of the delays and outages (default 11)")
    p.add_argument("--out", type=Path, default=None, help=f"the JSON results (default build/{LabServer.out}; "
                                                          f"with --vm build/{VmGuest.out})")
    p.add_argument("--only", default="", help="just these trials, e.g. controller:1,dropin:2")
    p.add_argument("--merge", type=Path, help="earlier results to keep in --out (trials run again replace theirs)")
    p.add_argument("--keep-lab", action="store_true", help="leave the lab (and its VM) up at the end")
    p.add_argument("--keep-runs", action="store_true", help="keep the recorded runs (their directory is printed)")
    p.add_argument("--table", type=Path, default=None, metavar="FILE", help="only print the table of a results file")
    LabServer.add_options(p.add_argument_group("only for the namespace server (without --vm)"))
    return p


def parse(argv: list[str]) -> Options:
    """The options, checked; usage errors exit 2 with a message."""
    p = parser()
    a = p.parse_args(argv)
    kind: type[Target] = VmGuest if a.vm else LabServer
    if a.vm and (a.steps is not None or a.delay_max is not None):
        p.error("--steps and --delay-max are for the namespace server, not --vm")
    if a.arch is not None and not a.vm:
        p.error("--arch is for --vm")
    target = kind.from_options(a, p)
    kinds = tuple(k.strip() for k in (a.kinds or ",".join(kind.layout.kinds)).split(",") if k.strip())
    if not kinds or set(kinds) - set(kind.layout.kinds):
        p.error(f"--kinds {a.kinds}: choose among {', '.join(kind.layout.kinds)}")
    trials = kind.trials if a.trials is None else a.trials
    if trials < 1:
        p.error("--trials must be 1 or more")
    try:
        only = tuple((k, int(i)) for k, _, i in (x.partition(":") for x in a.only.split(",") if x))
    except ValueError:
        p.error("--only takes kind:index pairs, e.g. controller:1,dropin:2")
    config = Config(trials, kinds, a.prefix or kind.prefix, (a.dir or ROOT / "build" / kind.lab_dir).absolute(),
                    (a.out or ROOT / "build" / _out_name(kind.out, getattr(target, "arch", "amd64"))).absolute(),
                    a.seed, a.keep_lab, a.keep_runs, only,
                    a.merge.absolute() if a.merge else None, " ".join(["scripts/faults", *argv]))
    return Options(target, config, a.table)


def _out_name(name: str, arch: str) -> str:
    """The default results file: the Arm VM's has its own (faults-vm-arm64.json)."""
    return name if arch == "amd64" else name.replace(".json", f"-{arch}.json")


def exit_status(trials: list[Trial], stopped: bool) -> int:
    """0: every trial restored; 1: one was not, or the harness stopped early; 130: stopped before any trial."""
    if stopped:
        return 1 if trials else 130
    return 0 if trials and all(t.outcome in (AUTO, RESTORE) for t in trials) else 1


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def run(target: Target, config: Config) -> int:
    """The harness on ``target``, its clean-up whatever happens, the results and the table."""
    try:
        harness, stopped = Harness(config, target), False
    except TunepathError as exc:
        print(f"{target.prog}: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        harness.run()
    except KeyboardInterrupt:
        say("interrupted")
        stopped = True
    except (TunepathError, OSError, subprocess.SubprocessError) as exc:
        say(f"stopped: {exc}")
        stopped = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)          # the clean-up runs to its end
        say("cleaning up: the run in flight, the server, the lab, CPUs and huge pages")
        for line in harness.close():
            say(f"  {line}")
        if config.keep_runs:
            say(f"the runs are kept in {harness.records}")
    report(harness)
    return exit_status(harness.trials, stopped)


def report(harness: Harness) -> None:
    """The results file (not overwritten when no trial ended and none are merged) and the table."""
    trials, out = harness.trials, harness.config.out
    if not trials and not harness.config.merge:
        print(f"\nno trial ended; {out} is left as it was")
        return
    harness.save()
    mean = sum(t.duration_s for t in trials) / len(trials) if trials else 0.0
    print(f"\n{len(trials)} trials in {harness.elapsed()} (a trial took {mean:.0f} s on average, setup and "
          f"calibration included in the total); results in {out}\n")
    print(table(trials, harness.target.layout))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options = parse(argv)
    target, config = options.target, options.config
    if options.table:
        print(table(load_trials(options.table), target.layout))
        return 0
    if os.geteuid() != 0:
        print(f"{target.prog}: needs root ({target.root_for})", file=sys.stderr)
        return 2
    with apply_lock() if target.machine_wide else nullcontext():
        return run(target, config)
