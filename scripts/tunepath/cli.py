"""The ``tunepath`` command.

    tunepath parse FILE            one wrk/wrk2 report as JSON (``-`` reads stdin)
    tunepath steps                 the learning path's steps, in order
    tunepath plan STEP [--run ID]  the exact commands a step runs, for a recorded run's hosts
    tunepath build [--site-dir D] [--steps LIST] [--no-hugo]
                                   replay every step's notebook, write data + charts, run Hugo

Expected failures print one line on stderr and exit with status 2; no tracebacks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import __version__


from .errors import TunepathError as UserError, is_expected


def _cmd_parse(args) -> int:
    from .parser import ParseError, parse, parse_file

    source = "stdin" if args.file == "-" else args.file
    try:
        if args.file == "-":
            report = parse(sys.stdin.buffer.read().decode("utf-8", errors="replace"))
        else:
            report = parse_file(args.file)
    except FileNotFoundError:
        raise UserError(f"{source}: no such file")
    except IsADirectoryError:
        raise UserError(f"{source}: is a directory, not a wrk report")
    except ParseError as exc:
        raise UserError(f"{source}: {exc}")
    json.dump(report.to_dict(), sys.stdout, indent=None if args.compact else 2, allow_nan=False)
    sys.stdout.write("\n")
    return 0


def _cmd_steps(args) -> int:
    from .steps import STEPS

    for step in STEPS:
        print(f"{step.number:02d}  {step.name:<11} {step.title}")
    return 0


def _cmd_plan(args) -> int:
    from .runstore import RunStore
    from .steps import get_step, plan

    step = get_step(args.step)
    store = RunStore(Path(args.runs_dir))
    run = store.load(args.run)
    for block in plan(step.name, run.context):
        print(f"# [{block.id}] on the {block.host}: {block.title}")
        print(block.text)
        print()
    return 0


def _cmd_build(args) -> int:
    from .build import build_site

    steps = args.steps.split(",") if args.steps else None
    build_site(site_dir=Path(args.site_dir), runs_dir=Path(args.runs_dir) if args.runs_dir else None,
               steps=steps, with_hugo=not args.no_hugo, destination=args.destination)
    return 0


def make_parser() -> argparse.ArgumentParser:
    root = Path(__file__).resolve().parents[2]
    p = argparse.ArgumentParser(prog="tunepath", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"tunepath {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("parse", help="parse a wrk/wrk2 report into JSON")
    sp.add_argument("file", help="the report (stdout of wrk or wrk2); - for stdin")
    sp.add_argument("--compact", action="store_true", help="one line of JSON")
    sp.set_defaults(func=_cmd_parse)

    sp = sub.add_parser("steps", help="list the steps of the learning path")
    sp.set_defaults(func=_cmd_steps)

    sp = sub.add_parser("plan", help="print the exact commands of a step")
    sp.add_argument("step")
    sp.add_argument("--run", default="reference-aws-c8g", help="recorded run whose hosts to use")
    sp.add_argument("--runs-dir", default=str(root / "runs"))
    sp.set_defaults(func=_cmd_plan)

    sp = sub.add_parser("build", help="replay the notebooks, write data and charts, build the site")
    sp.add_argument("--site-dir", default=str(root), help="where data/, static/ and public/ go")
    sp.add_argument("--runs-dir", default=None, help="recorded runs (default: runs/ of the project)")
    sp.add_argument("--steps", default=None, help="comma-separated step names (default: all)")
    sp.add_argument("--destination", default=None, help="Hugo output dir (default: SITE_DIR/public)")
    sp.add_argument("--no-hugo", action="store_true", help="stop after data and charts")
    sp.set_defaults(func=_cmd_build)
    return p


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:   # e.g. `tunepath parse F | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("tunepath: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - only the expected ones are caught
        if is_expected(exc):
            print(f"tunepath: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
