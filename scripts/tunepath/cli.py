"""The ``tunepath`` command.

    tunepath parse FILE            one wrk/wrk2 (or ab, JMeter) report as JSON (``-`` reads stdin)
    tunepath steps                 the learning path's steps, in order
    tunepath plan STEP [--run ID]  the exact commands a step runs, for a recorded run's hosts
    tunepath build [--site-dir D] [--steps LIST] [--no-hugo] [--no-cache]
                                   replay every step's notebook (only those whose inputs
                                   changed), write data + charts, run Hugo
    tunepath run [--hosts FILE] [--steps LIST] [--profile smoke|quick|full] [--apply] …
                                   run the path live on your hosts, record a run, rebuild the site
    tunepath restore [--hosts FILE] return the server to the state saved before the first change
    tunepath compare RUN_A RUN_B   two recorded runs side by side: ratios per step, differing facts
    tunepath export --upstream DIR [--run ID] | --check DIR
                                   the path in Arm's learning-paths layout, figures frozen from one run
    tunepath lab up|down|status    a server and two clients as network namespaces on this machine
                                   (root): real sshd per host, veth NICs; writes lab/hosts.toml;
                                   `up --vm` makes the server a QEMU VM (reboots for real)

Expected failures print one line on stderr and exit with status 2; no tracebacks.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import threading
from pathlib import Path

from tunepath import __version__
from tunepath.errors import TunepathError as UserError, is_expected
from tunepath.settings import LIVE, WHERE, by_name
from tunepath.terminal import one_line_cut, safe


def _cmd_parse(args) -> int:
    # only the parsers: `tunepath parse` must start without the live, steps or publish code
    from tunepath.parse.reports import parse_report_file, parse_report_stream

    # both name the file (or stdin) in every ParseError: unreadable, too large, not a report,
    # more than one report, nothing trustworthy left; the CLI prints it as one line
    if args.file == "-":
        if sys.stdin is None:     # started with stdin closed (`<&-`)
            raise UserError("standard input is closed: give a report on it "
                            "(`tunepath parse - < report.txt`) or name the file")
        report = parse_report_stream(sys.stdin.buffer, args.tool)
    else:
        report = parse_report_file(args.file, args.tool)
    json.dump(report.to_dict(), sys.stdout, indent=None if args.compact else 2, allow_nan=False)
    sys.stdout.write("\n")
    return 0


def _cmd_steps(args) -> int:
    from tunepath.steps import STEPS

    for step in STEPS:
        print(f"{step.number:02d}  {step.name:<15} {step.kind:<10} {step.title}")
    return 0


def _cmd_notebooks(args) -> int:
    from tunepath.project import project_dir
    from tunepath.publish.notebooks import check_all, write_all
    from tunepath.steps import REGISTRY

    directory = Path(args.notebooks_dir) if args.notebooks_dir else project_dir() / "notebooks"
    if directory.exists() and not directory.is_dir():
        raise UserError(f"--notebooks-dir {directory} is a file, not a directory")
    if args.check:
        problems = check_all(directory, REGISTRY)
        if problems:
            raise UserError("the notebooks differ from the step registry: " + "; ".join(problems)
                            + " (`tunepath notebooks` rewrites the ones it generates)")
        print(f"{len(REGISTRY)} notebooks match the step registry")
        return 0
    for line in write_all(directory, REGISTRY) or ["every notebook is up to date"]:
        print(line)
    return 0


def _cmd_supersede(args) -> int:
    from tunepath.evidence.store import RunStore
    from tunepath.evidence.supersede import supersede
    from tunepath.steps import REGISTRY

    path = supersede(RunStore(_runs_dir(args), REGISTRY.names), args.run, args.by, args.why)
    print(f"{args.run} is superseded by {args.by} ({path}); the pages show {args.by} from the next build")
    return 0


def _cmd_compare(args) -> int:
    from tunepath.analysis.compare import pair_document
    from tunepath.analysis.frames import measurements_frame
    from tunepath.evidence.store import RunStore
    from tunepath.publish.compare_text import pair_lines
    from tunepath.steps import REGISTRY

    store = RunStore(_runs_dir(args), REGISTRY.names)
    a, b = store.load(args.run_a), store.load(args.run_b)
    doc = pair_document(a, b, measurements_frame([a, b], REGISTRY), REGISTRY)
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return 0
    print("\n".join(pair_lines(doc)))
    return 0


def _cmd_plan(args) -> int:
    from tunepath.evidence.store import RunStore
    from tunepath.steps import REGISTRY

    step = REGISTRY.get(args.step)
    run = RunStore(_runs_dir(args), REGISTRY.names).load(args.run)
    for block in step.plan(run.context):
        print(safe(f"# [{block.id}] on the {block.host}: {block.title}", newlines=False))
        print(safe(block.text))
        print()
    return 0


def _runs_dir(args) -> Path:
    """``--runs-dir``, or the project's runs/."""
    from tunepath.project import project_dir

    return Path(args.runs_dir) if args.runs_dir else project_dir() / "runs"


def _cmd_build(args) -> int:
    from tunepath.publish.build import build_site

    steps = [s.strip() for s in args.steps.split(",")] if args.steps is not None else None
    if steps is not None and not all(steps):
        raise UserError(f"--steps {args.steps!r}: give step names separated by commas, e.g. --steps baseline,numa "
                        "(`tunepath steps` lists them)")
    build_site(site_dir=Path(args.site_dir) if args.site_dir else None,
               runs_dir=Path(args.runs_dir) if args.runs_dir else None,
               steps=steps, with_hugo=not args.no_hugo, destination=args.destination,
               use_cache=not args.no_cache)
    return 0


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be 1 or more")
    return value


def _live_options(args):
    """The live options of ``tunepath run`` / ``restore`` (those given; the rest keep the defaults of
    :mod:`tunepath.settings`); checked by ``run_path``/``restore_host`` (and ``--check-options``)
    before anything connects."""
    from tunepath.live.session import LiveOptions
    from tunepath.settings import resolve_paths

    given = {s.name: getattr(args, s.name) for s in LIVE if hasattr(args, s.name)}
    return LiveOptions(**resolve_paths(given))


def _cmd_run(args) -> int:
    from tunepath.live.runner import check_run, run_path

    options = _live_options(args)
    steps = args.steps.split(",") if args.steps is not None else None
    runs_dir = Path(args.runs_dir) if args.runs_dir else None
    site_dir = Path(args.site_dir) if args.site_dir else None
    if args.matrix:
        from tunepath.live.matrix import matrix_command

        given = {s.name for s in LIVE if hasattr(args, s.name)}
        return matrix_command(options, given, args.matrix, steps, runs_dir, site_dir, not args.no_build, args.check_options)
    if args.check_options:             # scripts/run: before it installs anything
        chosen = check_run(options, steps, runs_dir, site_dir)
        print(f"options are valid: steps {', '.join(s.name for s in chosen)}; profile {options.profile}")
        return 0
    run_path(options, steps=steps, runs_dir=runs_dir, build=not args.no_build, site_dir=site_dir)
    return 0


def _cmd_restore(args) -> int:
    from tunepath.live.runner import restore_and_note

    done = restore_and_note(_live_options(args), force=args.force, reboot=args.allow_reboot, runs_dir=_runs_dir(args))
    print("\n".join(done) if done else "nothing to restore: no saved state and no changed server.xml")
    return 0


def _cmd_export(args) -> int:
    from tunepath.project import project_dir
    from tunepath.publish.upstream import command

    return command(project_dir(), args.upstream, args.check, args.run)


def _cmd_lab(args) -> int:
    from tunepath.lab.command import lab_command

    return lab_command(args.action, args.dir, args.prefix, vm=getattr(args, "vm", False),
                       arch=getattr(args, "arch", None))


def _add_settings(sp, settings) -> None:
    """Options from :mod:`tunepath.settings` (names, meanings and defaults shared with the notebooks'
    parameters). An option not given is left out of ``args``, so ``LiveOptions`` keeps its default."""
    for s in settings:
        common = {"dest": s.name, "default": argparse.SUPPRESS, "help": s.cli_help()}
        if s.kind == "switch":
            sp.add_argument(s.flag, action="store_true", **common)
        elif s.kind == "off-switch":
            sp.add_argument(s.flag, action="store_false", **common)
        else:
            kind = {"int": int, "count": _positive_int, "float": float, None: None}[s.type]
            sp.add_argument(s.flag, type=kind, metavar=s.metavar, **common)


def _add_supersede(sub) -> None:
    """``tunepath supersede OLD --by NEW --why TEXT``."""
    sp = sub.add_parser("supersede", help="mark a recorded run as replaced by a newer one (kept as evidence, "
                                          "left off the pages)")
    sp.add_argument("run")
    sp.add_argument("--by", required=True, help="the run that replaces it")
    sp.add_argument("--why", required=True, help="what the newer run does better (recorded in run.json)")
    sp.add_argument("--runs-dir", default=None, help="recorded runs (default: runs/ of the project)")
    sp.set_defaults(func=_cmd_supersede)


def _add_restore(sub) -> None:
    """``tunepath restore``."""
    sp = sub.add_parser("restore", help="return the server to its saved original state")
    _add_settings(sp, WHERE)
    sp.add_argument("--force", action="store_true", help="also when a (dead) run still holds the lock")
    sp.add_argument("--runs-dir", default=None, help="where the run that held the lock is recorded, to note the "
                                                     "restore in it (default: runs/ of the project)")
    sp.add_argument("--allow-reboot", action="store_true",
                    help="reboot the server when its kernel runs other parameters than before the run (the GRUB "
                         "change is put back, but only a boot applies it), and check them afterwards")
    sp.set_defaults(func=_cmd_restore)


def _add_run(sub) -> None:
    """``tunepath run``: its many options, apart from make_parser."""
    sp = sub.add_parser("run", help="run the path live on real hosts, record a new run, rebuild the site")
    _add_settings(sp, LIVE)
    sp.add_argument("--steps", default=None, help="comma-separated steps (default: all but the summary)")
    sp.add_argument("--runs-dir", default=None, help=by_name("runs_dir").cli_help())
    sp.add_argument("--site-dir", default=None, help="where the site is rebuilt (default: the project)")
    sp.add_argument("--no-build", action="store_true", help="record the run only")
    sp.add_argument("--matrix", nargs="+", metavar="AXIS=V1,V2", default=None,
                    help="one run per combination: tomcat=11.0.A,11.0.B (pinned releases, fetched with Maven) and/or "
                         "java=17,21,25 (pinned JDKs, installed on the server); a failed cell is named, the rest run")
    sp.add_argument("--check-options", action="store_true",
                    help="only check the options (and load the inventory); connect to nothing, write nothing")
    sp.set_defaults(func=_cmd_run)


def _add_export(sub) -> None:
    sp = sub.add_parser("export", help="write the path in the layout of Arm's learning-paths repository, "
                                       "or check such a directory against that repository's rules")
    to = sp.add_mutually_exclusive_group(required=True)
    to.add_argument("--upstream", metavar="DIR", help="a checkout of ArmDeveloperEcosystem/arm-learning-paths "
                    "(or a new directory); needs a build (tunepath build) first")
    to.add_argument("--check", metavar="DIR", help="check an exported path (its directory, or DIR of --upstream)")
    sp.add_argument("--run", metavar="ID", help="freeze the figures of this run (default: each step's primary run)")
    sp.set_defaults(func=_cmd_export)


def _add_lab(sub) -> None:
    """``tunepath lab up|down|status``."""
    sp = sub.add_parser("lab", help="a server and two clients as network namespaces on this machine (root)")
    sp.add_argument("action", choices=["up", "down", "status"])
    sp.add_argument("--prefix", default=None,
                    help="name prefix of its namespaces and users (default: $TUNEPATH_LAB_PREFIX or tplab)")
    sp.add_argument("--dir", default=None, help="its key, inventory and state (default: lab/ of the project)")
    sp.add_argument("--vm", action="store_true",
                    help="with up: add a server VM (a Debian guest under QEMU, software emulation: 2 vCPUs, 2 NUMA "
                         "nodes, an Intel IOMMU, a 4-queue NIC), which becomes the inventory's server; its image is "
                         "built from Debian packages once and cached in .cache/")
    sp.add_argument("--arch", default=None, choices=["amd64", "x86_64", "arm64", "aarch64"],
                    help="with up --vm: the VM's architecture (default: the lab's VM, else amd64); arm64 is an emulated Neoverse-N1 server (4 vCPUs, 2 "
                         "NUMA nodes, an SMMUv3; the host boots the kernel the guest's own grub.cfg names)")
    sp.set_defaults(func=_cmd_lab)


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line on stderr (exit 2) like every other expected failure."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tunepath", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"tunepath {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("parse", help="parse a wrk/wrk2 report into JSON")
    sp.add_argument("file", help="the report (stdout of wrk or wrk2); - for stdin")
    sp.add_argument("--compact", action="store_true", help="one line of JSON")
    sp.add_argument("--tool", choices=["wrk2", "wrk", "ab", "jmeter", "siege"], default=None,
                    help="the tool that printed it (default: recognised from the text)")
    sp.set_defaults(func=_cmd_parse)

    sp = sub.add_parser("steps", help="list the steps of the learning path")
    sp.set_defaults(func=_cmd_steps)

    sp = sub.add_parser("plan", help="print the exact commands of a step")
    sp.add_argument("step")
    sp.add_argument("--run", default="reference-aws-c8g", help="recorded run whose hosts to use")
    sp.add_argument("--runs-dir", default=None, help="recorded runs (default: runs/ of the project)")
    sp.set_defaults(func=_cmd_plan)

    sp = sub.add_parser("notebooks", help="write each step's notebook from the template, in the registry's order")
    sp.add_argument("--check", action="store_true", help="only check that notebooks/ matches the registry")
    sp.add_argument("--notebooks-dir", default=None, help="default: notebooks/ of the project")
    sp.set_defaults(func=_cmd_notebooks)

    sp = sub.add_parser("build", help="replay the notebooks, write data and charts, build the site")
    sp.add_argument("--site-dir", default=None, help="where data/, static/ and public/ go (default: the project)")
    sp.add_argument("--runs-dir", default=None, help="recorded runs (default: runs/ of the project)")
    sp.add_argument("--steps", default=None, help="comma-separated step names (default: all)")
    sp.add_argument("--destination", default=None, help="Hugo output dir (default: SITE_DIR/public)")
    sp.add_argument("--no-hugo", action="store_true", help="stop after data and charts")
    sp.add_argument("--no-cache", action="store_true",
                    help="execute every notebook, even those whose notebook, parameters, runs and "
                         "package are unchanged since the last build (the cache is refreshed)")
    sp.set_defaults(func=_cmd_build)

    _add_run(sub)

    sp = sub.add_parser("compare", help="two recorded runs side by side (ratios per step, facts that differ)")
    sp.add_argument("run_a")
    sp.add_argument("run_b")
    sp.add_argument("--runs-dir", default=None, help="recorded runs (default: runs/ of the project)")
    sp.add_argument("--json", action="store_true", help="the comparison as JSON")
    sp.set_defaults(func=_cmd_compare)

    _add_supersede(sub)

    _add_restore(sub)

    _add_export(sub)
    _add_lab(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    finally:
        if argv is None:      # the command itself, not a caller in Python (a test)
            _late_ctrl_c_exits()


def _late_ctrl_c_exits() -> None:
    """Once the command is done, a Ctrl-C while Python ends its threads and kernels exits 130 with
    one line at once: not a traceback, nor a death by SIGINT with nothing said. Whatever the
    command wrote is whole by then."""
    def late(signum, frame) -> None:
        os.write(2, b"tunepath: interrupted\n")
        os._exit(130)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, late)


def _main(argv: list[str] | None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:   # e.g. `tunepath parse F | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("tunepath: interrupted", file=sys.stderr, flush=True)
        # what the libraries print while they shut down (a kernel's unfinished tasks) is noise now
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        return 130
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT):   # writing our output failed
            print(f"tunepath: writing the output failed: {one_line_cut(safe(exc.strerror))}", file=sys.stderr)
            return 2
        raise
    except Exception as exc:  # noqa: BLE001 - only the expected ones are caught
        if is_expected(exc):
            print(f"tunepath: {one_line_cut(safe(exc))}", file=sys.stderr)   # quoted fields may hold ESC
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
