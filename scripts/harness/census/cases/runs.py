"""The commands that read recorded runs, on copies of two or three small runs of ``runs/`` in the
case's directory (``--runs-dir``): ``tunepath supersede`` (cycles of two and three runs, a cycle
already in the records, missing and damaged runs), ``tunepath compare`` (a ``run.json`` damaged
in every way a file can be, and a raw report whose rate the parser derives or distrusts: the
comparison must flag that figure) and ``tunepath plan`` (damaged runs, odd step names, a run
whose context holds a shell command). ``tunepath plan`` has no ``--set``-like option: only
``--run`` and ``--runs-dir``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from harness import ROOT
from harness.census.case import ACCEPT, FLAG, REFUSE, WORDS, Case
from harness.census.cases.inputs import all_of, copy_runs, directory, edit_json, fifo, last_number, put, sparse, writes

__all__ = ["A", "B", "C", "RAW", "cases"]

A, B, C = "reference-aws-c8g", "reference-grace", "sandbox-wrk2-rate-sweep"
RAW = f"runs/{A}/raw/numa-numa-local.txt"       # A's report of the one configuration A and B share
RUNS = ("--runs-dir", "{tmp}/runs")
WATCH = ("runs",)


def _runs(*extra) -> object:
    return all_of(copy_runs("runs", A, B, C), *extra)


def _supersede(run: str, by: str, why: str = "a newer run") -> tuple[str, ...]:
    return ("supersede", run, "--by", by, "--why", why, *RUNS)


def _superseded(run: str, by: str):
    def edit(data: dict) -> None:
        data["superseded_by"] = {"run": by, "why": "set by the census"}
    return edit_json(f"runs/{run}/run.json", edit)


def _truncated_json(run: str):
    def setup(tmp: Path) -> None:
        path = tmp / "runs" / run / "run.json"
        path.write_bytes(path.read_bytes()[:700])
    return setup


def supersede_cases() -> list[Case]:
    def case(name: str, argv, expect=REFUSE, *extra, note="") -> Case:
        return Case(f"supersede/{name}", "supersede", argv, expect, setup=_runs(*extra), watch=WATCH, note=note)
    return [
        case("valid", _supersede(A, B), ACCEPT, note="A by B: the control"),
        case("cycle-of-two", _supersede(B, A), REFUSE, _superseded(A, B), note="A is superseded by B; then B by A"),
        case("cycle-of-three", _supersede(C, A), REFUSE, _superseded(A, B), _superseded(B, C),
             note="A by B and B by C recorded; then C by A"),
        case("cycle-in-the-records", _supersede(C, A), REFUSE, _superseded(A, B), _superseded(B, A),
             note="A by B and B by A already recorded; then C by A"),
        case("itself", _supersede(A, A), note="A by A"),
        case("missing-run", _supersede("live-20990101-000000-x", A), note="a run that is not recorded"),
        case("missing-by", _supersede(A, "live-20990101-000000-x"), note="by a run that is not recorded"),
        case("run-id-traversal", _supersede("../runs/" + A, B), note="a run id with ../"),
        case("damaged-run", _supersede(A, B), REFUSE, _truncated_json(A), note="A's run.json cut at 700 bytes"),
        case("damaged-by", _supersede(A, B), REFUSE, _truncated_json(B), note="B's run.json cut at 700 bytes"),
        case("by-a-failed-run", _supersede(A, B), REFUSE, edit_json(f"runs/{B}/run.json", _failed),
             note="B's status is failed"),
        case("empty-why", _supersede(A, B, " "), note="--why ' '"),
        Case("supersede/runs-dir-missing", "supersede", _supersede(A, B), REFUSE, watch=WATCH, note="no runs/"),
    ]


def _failed(data: dict) -> None:
    data["status"] = "failed"


def _run_json(make) -> object:
    return writes(f"runs/{A}/run.json", make)


def _record() -> dict:
    return json.loads((ROOT / "runs" / A / "run.json").read_text(encoding="utf-8"))


def _with(path: tuple, value) -> str:
    data = _record()
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(data)


# A's run.json, damaged: name → what the file holds (bytes or text), or a set-up
DAMAGED_RECORDS = {
    "invalid-json": lambda: "{not json",
    "empty": lambda: b"",
    "nan": lambda: json.dumps(_record()).replace('"total_cpus": 192', '"total_cpus": NaN', 1),
    "repetition-a-string": lambda: _with(("measurements", 3, "repetition"), "2"),
    "stdout-outside-the-run": lambda: _with(("measurements", 5, "stdout"), "../../../../etc/os-release"),
    "nested-100000-deep": lambda: b"[" * 100_000 + b"]" * 100_000,
    "invalid-utf8": lambda: json.dumps(_record()).encode().replace(b'"aws-c8g"', b'"aws-\xff"', 1),
    "a-list": lambda: json.dumps([_record()]),
    "duplicate-key": lambda: json.dumps(_record())[:-1] + ', "kind": "live"}',
}


def _cut_rate(keep: int):
    """A's NUMA report cut after ``keep`` characters of its Requests/sec value: the parser derives the rate."""
    def setup(tmp: Path) -> None:
        path = tmp / RAW
        text = path.read_text(encoding="utf-8")
        at = text.index("Requests/sec:")
        line_end = text.index("\n", at)
        begin, _ = last_number(text[at:line_end])
        path.write_text(text[:at + begin + keep], encoding="utf-8")
    return setup


def _raw_replaced(old: str, new: str):
    def setup(tmp: Path) -> None:
        path = tmp / RAW
        text = path.read_text(encoding="utf-8")
        if old not in text:
            raise ValueError(f"{RAW} no longer holds {old!r}: update the census's case")
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return setup


def compare_cases() -> list[Case]:
    compare, as_json = ("compare", A, B, *RUNS), ("compare", A, B, *RUNS, "--json")

    def case(name: str, expect: str, *setups, argv=compare, note="") -> Case:
        return Case(f"compare/{name}", "compare", argv, expect, setup=_runs(*setups), watch=WATCH, shows=WORDS,
                    note=note)
    out = [case("valid", ACCEPT, note="the two runs as recorded: the control")]
    out += [case(f"run-json/{name}", REFUSE, _run_json(make), note=f"A's run.json: {name}")
            for name, make in DAMAGED_RECORDS.items()]
    out += [
        case("run-json/fifo", REFUSE, lambda tmp: (tmp / "runs" / A / "run.json").unlink(), fifo(f"runs/{A}/run.json"),
             note="A's run.json is a FIFO"),
        case("run-json/directory", REFUSE, lambda tmp: (tmp / "runs" / A / "run.json").unlink(),
             directory(f"runs/{A}/run.json"), note="A's run.json is a directory"),
        case("run-json/missing", REFUSE, lambda tmp: (tmp / "runs" / A / "run.json").unlink(), note="no run.json"),
        case("missing-run", REFUSE, argv=("compare", A, "live-20990101-000000-x", *RUNS), note="B not recorded"),
        case("run-id-traversal", REFUSE, argv=("compare", A, "../runs/" + B, *RUNS), note="a run id with ../"),
        case("raw/rate-cut-derived", FLAG, _cut_rate(3), note="A's report cut in Requests/sec: a derived rate"),
        case("raw/rate-cut-derived-json", FLAG, _cut_rate(3), argv=as_json, note="the same, --json"),
        case("raw/rate-inf", FLAG, _raw_replaced("Requests/sec: 363744.39", "Requests/sec: inf"),
             note="A's Requests/sec is inf"),
        case("raw/rate-ten-times", FLAG, _raw_replaced("Requests/sec: 363744.39", "Requests/sec: 3637443.90"),
             note="A's Requests/sec disagrees with its requests and time"),
        case("raw/not-a-report", FLAG, lambda tmp: put(tmp, RAW, "connection refused\n"),
             note="A's raw file is no report"),
        case("raw/fifo", REFUSE, lambda tmp: (tmp / RAW).unlink(), fifo(RAW), note="A's raw file is a FIFO"),
        case("raw/missing", REFUSE, lambda tmp: (tmp / RAW).unlink(), note="A's raw file is gone"),
        case("raw/over-16-mib", REFUSE, lambda tmp: (tmp / RAW).unlink(), sparse(RAW, (16 << 20) + 1),
             note="A's raw file is a sparse 16 MiB and one byte"),
    ]
    return out


def _no_shell_command(tmp: Path, stdout: str) -> str | None:
    """A check: no printed command runs ``rm`` (the context's value stays one quoted word)."""
    for line in stdout.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if "rm" in words:
            return f"the plan prints a command that runs rm: {line.strip()[:120]!r}"
    return None


def plan_cases() -> list[Case]:
    def case(name: str, argv, expect=REFUSE, *setups, check=None, accepted=frozenset({0}), note="") -> Case:
        return Case(f"plan/{name}", "plan", argv, expect, setup=_runs(*setups), watch=WATCH, check=check,
                    accepted=accepted, note=note)
    hostile_home = _with(("context", "tomcat_home"), "~/t; rm -rf ~")
    return [
        case("valid", ("plan", "baseline", "--run", A, *RUNS), ACCEPT, note="the control"),
        case("unknown-step", ("plan", "tls", "--run", A, *RUNS), note="a step that does not exist"),
        case("empty-step", ("plan", "", "--run", A, *RUNS), note="an empty step name"),
        case("run-id-traversal", ("plan", "numa", "--run", "../runs/" + A, *RUNS), note="--run with ../"),
        case("missing-run", ("plan", "numa", "--run", "live-20990101-000000-x", *RUNS), note="--run not recorded"),
        case("damaged-run", ("plan", "numa", "--run", A, *RUNS), REFUSE,
             _run_json(lambda: _with(("measurements", 3, "repetition"), "2")), note="--run's run.json is damaged"),
        case("runs-dir-fifo", ("plan", "numa", "--run", A, "--runs-dir", "{tmp}/fifo"), REFUSE, fifo("fifo"),
             note="--runs-dir is a FIFO"),
        case("shell-in-context", ("plan", "baseline", "--run", A, *RUNS), ACCEPT, _run_json(lambda: hostile_home),
             check=_no_shell_command, accepted=frozenset({0, 2}),
             note="A's context.tomcat_home is '~/t; rm -rf ~': refused, or printed as one quoted word"),
    ]


def cases() -> list[Case]:
    return supersede_cases() + compare_cases() + plan_cases()
