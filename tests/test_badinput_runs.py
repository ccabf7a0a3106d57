"""Bad run records never win: every malformed ``run.json`` is one line naming the file and
the field (a RunError), never a traceback and never a run accepted with wrong types or a
file outside its directory.

Hand-picked cases first (each one a traceback, a silently accepted record or a leaked file
before the schema), then hypothesis: mutations of the recorded runs (keys dropped, values
of another type, nodes wrapped in a list, files named outside the run), and whatever the
store accepts must still be readable by what the pages and ``tunepath compare`` do with it.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from conftest import ROOT
from tunepath.analysis.compare import fact_rows
from tunepath.analysis.frames import measurements_frame
from tunepath.evidence.store import FACT_KEYS, KINDS, SCHEMA_FILE, STATUSES, RunError, RunStore
from tunepath.model.context import HostContext
from tunepath.publish.hugo_data import run_header
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

RUNS = ROOT / "runs"
AWS, LIVE = "reference-aws-c8g", "live-20261122-075337-vm"
OUTSIDE = ("../../../../etc/os-release", "/etc/os-release", "raw/../../reference-grace/raw/numa-numa-local.txt",
           "../" + AWS + "/raw/setup-smoke.txt")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("badruns") / "runs"
    shutil.copytree(RUNS, dst, ignore=shutil.ignore_patterns(".inprogress", "notebooks"))
    return dst


def _record(run_id: str) -> dict:
    return json.loads((RUNS / run_id / "run.json").read_text(encoding="utf-8"))


class Written:
    """Write a run.json into the copy for one check, and put the recorded one back after."""

    def __init__(self, runs: Path, run_id: str):
        self.path = runs / run_id / "run.json"
        self.original = self.path.read_bytes()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.path.write_bytes(self.original)

    def write(self, data) -> None:
        self.path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())


def _refused(runs: Path, run_id: str, data) -> str:
    with Written(runs, run_id) as w:
        w.write(data)
        with pytest.raises(RunError) as info:
            RunStore(runs, REGISTRY.names).load(run_id)
    message = str(info.value)
    assert "\n" not in message and f"{run_id}/run.json: " in message, message
    return message


def _set(data, path, value=None, delete=False):
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def test_every_recorded_run_is_valid():
    runs = RunStore(RUNS, REGISTRY.names).load_all()
    assert {r.run_id for r in runs} >= {AWS, LIVE, "reference-grace", "sandbox-wrk2-rate-sweep"}


def test_the_schema_knows_every_host_context_field_and_the_stores_names():
    schema = json.loads(SCHEMA_FILE.read_text())
    assert set(schema["$defs"]["context"]["properties"]) == {f.name for f in fields(HostContext)}
    assert schema["$defs"]["facts"]["required"] == list(FACT_KEYS)
    assert schema["properties"]["kind"]["enum"] == list(KINDS)
    assert schema["properties"]["status"]["enum"] == list(STATUSES)


BASE = _record(AWS)
CASES = [   # (what, run.json, the field the message names)
    ("a top-level list", [BASE], "the top level"),
    ("missing hosts", _set(BASE, ["hosts"], delete=True), "the top level: 'hosts' is a required property"),
    ("no context", _set(BASE, ["context"], delete=True), "'context' is a required property"),
    ("context a list", _set(BASE, ["context"], []), "context"),
    ("context empty", _set(BASE, ["context"], {}), "context"),
    ("port a string", _set(BASE, ["context", "port"], "8080"), "context.port"),
    ("port a bool", _set(BASE, ["context", "port"], True), "context.port"),
    ("threads negative", _set(BASE, ["context", "threads"], -1), "context.threads"),
    ("unknown context key", _set(BASE, ["context", "cpus"], 4), "context"),
    ("CPU list backwards", _set(BASE, ["context", "numa_cpus"], "7-0"), "context"),
    ("newline in a command value", _set(BASE, ["context", "tomcat_home"], "~/t\nrm -rf ~"), "context.tomcat_home"),
    ("interface with a slash", _set(BASE, ["context", "nic"], "../../etc"), "context.nic"),
    ("cpus a string", _set(BASE, ["hosts", "server", "facts", "cpus"], "x"), "hosts.server.facts.cpus"),
    ("load generator a string", _set(BASE, ["hosts", "client", "facts", "load_generator"], "wrk"),
     "hosts.client.facts.load_generator"),
    ("null fact without reason", _set(BASE, ["hosts", "server", "facts", "kernel"], None),
     "hosts.server.facts.kernel"),
    ("measurements an object", _set(BASE, ["measurements"], {}), "measurements"),
    ("repetition a string", _set(BASE, ["measurements", 3, "repetition"], "2"), "measurements[3].repetition"),
    ("repetition a bool", _set(BASE, ["measurements", 3, "repetition"], True), "measurements[3].repetition"),
    ("stdout a number", _set(BASE, ["measurements", 0, "stdout"], 5), "measurements[0].stdout"),
    ("parts an object", _set(BASE, ["measurements", 0, "parts"], {}), "measurements[0].parts"),
    ("unknown step", _set(BASE, ["measurements", 0, "step"], "http3"), "measurements[0].step"),
    ("measured twice", _set(BASE, ["measurements"], BASE["measurements"] + BASE["measurements"][:1]),
     "measurements[7]"),
    ("skipped entry a number", _set(BASE, ["skipped"], [5]), "skipped[0]"),
    ("skipped without reason", _set(BASE, ["skipped"], [{"step": "numa", "variant": "x"}]), "skipped[0]"),
    ("note without text", _set(BASE, ["notes"], [{"steps": ["numa"]}]), "notes[0]"),
    ("run id of another run", _set(BASE, ["run_id"], "reference-grace"), "run_id"),
    ("status unknown", _set(BASE, ["status"], "done"), "status"),
]


@pytest.mark.parametrize("what, data, field", CASES, ids=[c[0] for c in CASES])
def test_malformed_records_are_one_line_naming_the_field(runs, what, data, field):
    assert field in _refused(runs, AWS, data)


@pytest.mark.parametrize("key, value", [("repetitions", []), ("repetitions", {"baseline": 5}),
                                        ("repetitions", {"baseline": {"rounds": "x"}})])
def test_bad_repetitions_are_one_line(runs, key, value):
    assert "repetitions" in _refused(runs, LIVE, _set(_record(LIVE), [key], value))


@pytest.mark.parametrize("data, problem", [
    (json.dumps(BASE).encode().replace(b'"aws-c8g"', b'"aws-\xff"', 1), "not UTF-8"),
    (json.dumps(BASE).replace('"cpus": 192', '"cpus": NaN', 1).encode(), "NaN"),
    ((json.dumps(BASE)[:-1] + ', "kind": "live"}').encode(), "'kind' appears twice"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (json.dumps(BASE).encode()[:700], "not valid JSON"),
    (b"", "not valid JSON"),
], ids=["invalid-utf8", "nan", "duplicate-key", "deep", "truncated", "empty"])
def test_unreadable_json_is_one_line(runs, data, problem):
    assert problem in _refused(runs, AWS, data)


@pytest.mark.parametrize("field", ["measurements.0.stdout", "measurements.0.stderr", "verification.0.output",
                                   "measurements.0.parts"])
@pytest.mark.parametrize("outside", OUTSIDE)
def test_files_outside_the_run_are_refused(runs, field, outside):
    key, i, name = field.split(".")
    value = [{"client": "c", "stdout": outside}] if name == "parts" else outside
    message = _refused(runs, AWS, _set(BASE, [key, int(i), name], value))
    assert f"{key}[{i}].{name}" in message and "leaves the run's directory" in message


def test_symlinks_out_of_the_run_and_special_files_are_refused(runs):
    run = runs / AWS
    (run / "verify" / "link.txt").symlink_to("/etc/os-release")
    (run / "elsewhere").symlink_to("/etc")
    os.mkfifo(run / "raw" / "fifo.txt")
    try:
        for output in ("verify/link.txt", "elsewhere/os-release"):
            message = _refused(runs, AWS, _set(BASE, ["verification", 0, "output"], output))
            assert "verification[0].output" in message and "symlink" in message
        message = _refused(runs, AWS, _set(BASE, ["measurements", 0, "stdout"], "raw/fifo.txt"))
        assert "measurements[0].stdout" in message and "not a regular file" in message
    finally:
        for p in (run / "verify" / "link.txt", run / "elsewhere", run / "raw" / "fifo.txt"):
            p.unlink()


@pytest.mark.parametrize("command", [["compare", AWS, "reference-grace"], ["plan", "numa", "--run", AWS]])
def test_compare_and_plan_stop_at_a_broken_run_in_one_line(runs, command):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"))
    with Written(runs, AWS) as w:
        w.write(_set(BASE, ["measurements", 3, "repetition"], "2"))
        proc = subprocess.run([sys.executable, "-m", "tunepath.cli", *command, "--runs-dir", str(runs)],
                              capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{AWS}/run.json: measurements[3].repetition: '2' is not of type 'integer'" in proc.stderr


def test_a_bad_run_id_is_refused_before_any_path_is_built(runs):
    for run_id in ("../reference-grace", "/etc", "", "A"):
        with pytest.raises(RunError, match="bad run id"):
            RunStore(runs, REGISTRY.names).load(run_id)


# --- hypothesis: mutations of the recorded runs ------------------------------------------

def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node[:4]):          # a few entries of each list are enough
            yield from _paths(value, prefix + (i,))


RECORDS = {AWS: BASE, LIVE: _record(LIVE)}
PATHS = {run_id: [p for p in _paths(record) if not (p and p[0] in ("blocks", "step_timings", "warnings"))]
         for run_id, record in RECORDS.items()}
FILE_FIELDS = {run_id: [p for p in PATHS[run_id] if p and p[-1] in ("stdout", "stderr", "output")]
               for run_id in RECORDS}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                   st.text(max_size=6), st.lists(st.integers(0, 9), max_size=2),
                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.sampled_from(OUTSIDE))


@st.composite
def mutations(draw):
    run_id = draw(st.sampled_from(sorted(RECORDS)))
    record = copy.deepcopy(RECORDS[run_id])
    kind = draw(st.sampled_from(["drop", "retype", "wrap", "outside"]))
    path = draw(st.sampled_from(FILE_FIELDS[run_id] if kind == "outside" else PATHS[run_id]))
    if not path:
        return run_id, kind, ([record] if kind == "wrap" else draw(VALUES))
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    if kind == "drop":
        del parent[path[-1]]
    elif kind == "wrap":
        parent[path[-1]] = [parent[path[-1]]]
    else:
        parent[path[-1]] = draw(st.sampled_from(OUTSIDE)) if kind == "outside" else draw(VALUES)
    return run_id, kind, record


def _still_readable(run) -> None:
    """What the pages and `tunepath compare` do with an accepted run works."""
    run_dir = run.path.resolve()
    for m in run.measurements:
        assert all(p.resolve().is_relative_to(run_dir) for p in [m.stdout, *(p for _, p in m.parts)])
        assert isinstance(m.repetition, int) and m.repetition >= 1
    assert all(v.output.resolve().is_relative_to(run_dir) for v in run.verifications)
    run_header(run)
    fact_rows(run, run)
    for step in REGISTRY:
        step.plan(run.context)
        step.verify_commands(run.context)
    measurements_frame([run], REGISTRY)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(mutations())
def test_mutated_records_are_refused_in_one_line_or_stay_readable(runs, mutation):
    run_id, kind, data = mutation
    with Written(runs, run_id) as w:
        w.write(data)
        try:
            run = RunStore(runs, REGISTRY.names).load(run_id)
        except RunError as exc:
            message = str(exc)
            assert "\n" not in message and f"{run_id}/run.json: " in message, message
            event(f"{kind}: refused")
            return
        assert kind != "outside", "a file outside the run was accepted"
        event(f"{kind}: accepted")
        _still_readable(run)
