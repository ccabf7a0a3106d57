"""The hostile-input census (scripts/census, scripts/harness/census/) without running it: the
classifier on made-up outcomes, the table's counts, what a snapshot sees, the commands the census
refuses to run, and the cases themselves (unique names, safe commands, set-ups that still find
what they damage). The census itself runs as `scripts/census` (docs/census.md)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from harness.census.case import (ACCEPT, FLAG, HANG, OK, REFUSE, SILENT, TRACEBACK, WORDS, WRITE, WRONG_REFUSAL,
                                 Case, Outcome, Verdict)
from harness.census.cases import all_cases
from harness.census.classify import classify
from harness.census.report import render, summary_rows
from harness.census.runner import Result
from harness.census.sandbox import refuse_unsafe
from harness.census.snapshot import changes, snapshot

pytestmark = pytest.mark.fast

REFUSING = Case("parse/x", "parse", ("parse", "{tmp}/r.txt"), REFUSE)
FLAGGING = Case("parse/y", "parse", ("parse", "{tmp}/r.txt"), FLAG)
ACCEPTING = Case("parse/z", "parse", ("parse", "{tmp}/r.txt"), ACCEPT)
REPORT = {"tool": "ab", "requests": 2000, "requests_per_sec": 1929.75, "requests_per_sec_trusted": True,
          "latency_ms": {"avg": 4.1}, "warnings": [], "problems": []}
ONE_LINE = "tunepath: report.txt: no report found\n"


def parsed(**changes) -> str:
    return json.dumps({**REPORT, **changes})


def verdict(case: Case, status: int | None, stdout: str = "", stderr: str = "", **fields) -> Verdict:
    return classify(case, Outcome(status, stdout, stderr, **fields))


@pytest.mark.parametrize("outcome, cls", [
    (Outcome(None, timed_out=True, wall_s=60.0), HANG),
    (Outcome(2, "", "Traceback (most recent call last):\n  File …\nValueError: x\n"), TRACEBACK),
    (Outcome(0, "Traceback (most recent call last):\nKeyError: 'a'\n"), TRACEBACK),
    (Outcome(-9), TRACEBACK),
    (Outcome(134, "", "Aborted\n"), TRACEBACK),
    (Outcome(2, "", "tunepath: a\ntunepath: b\n"), TRACEBACK),
    (Outcome(1, "Fatal Python error\n", ""), SILENT),
    (Outcome(2, "", ONE_LINE, writes=["created runs/x"]), WRITE),
    (Outcome(2, "", ONE_LINE, left="a user's file was removed"), WRITE),
    (Outcome(2, "", ONE_LINE), OK),
    (Outcome(2, "", "tunepath: warning: odd line\n" + ONE_LINE), OK),
    (Outcome(130, "", "tunepath: interrupted\n"), OK),
    (Outcome(0, parsed()), SILENT),
])
def test_a_case_that_must_be_refused(outcome, cls):
    assert classify(REFUSING, outcome).cls == cls


def test_a_hang_wins_over_everything_and_says_how_long():
    v = classify(REFUSING, Outcome(None, "Traceback (most recent call last)", timed_out=True, wall_s=61.2,
                                   writes=["created x"]))
    assert v == Verdict(HANG, "no exit after 61 s; its process group was killed")


def test_a_refusal_that_only_flagged_says_so():
    v = verdict(REFUSING, 0, parsed(problems=[{"code": "damaged", "field": "percentiles_ms"}]))
    assert v.cls == SILENT and "only flagged: damaged percentiles_ms" in v.reason
    v = verdict(REFUSING, 0, parsed())
    assert "read one ab report of 2000 requests" in v.reason


@pytest.mark.parametrize("stdout, reference, cls", [
    (parsed(problems=[{"code": "cut", "field": "socket_errors"}]), None, OK),
    (parsed(requests_per_sec_trusted=False), None, OK),
    (parsed(), None, SILENT),                                        # nothing to vouch for the figures
    (parsed(), json.loads(parsed()), OK),                            # the damage reached no figure
    (parsed(requests=20), json.loads(parsed()), SILENT),             # a cut count, read as a count
    (parsed(requests=None, warnings=["no count"]), json.loads(parsed()), SILENT),
    ("not json", None, SILENT),
])
def test_a_damaged_report_must_show_it(stdout, reference, cls):
    assert verdict(FLAGGING, 0, stdout, reference=reference).cls == cls


def test_a_refused_damaged_report_is_ok_and_a_silent_one_names_the_figures():
    assert verdict(FLAGGING, 2, "", ONE_LINE).cls == OK
    v = verdict(FLAGGING, 0, parsed(latency_ms={"avg": 9.9}, warnings=["odd"]), reference=json.loads(parsed()))
    assert "latency_ms differ from the intact report's; only a warning: odd" in v.reason


def test_a_changed_rate_must_not_be_trusted_whatever_else_is_flagged():
    stdout = parsed(requests=20, problems=[{"code": "absurd", "field": "percentiles_ms"}])
    v = verdict(FLAGGING, 0, stdout, reference=json.loads(parsed()))
    assert v.cls == SILENT and "requests differ from the intact report's, yet requests_per_sec_trusted" in v.reason
    assert verdict(FLAGGING, 0, parsed(requests=20, requests_per_sec_trusted=False),
                   reference=json.loads(parsed())).cls == OK


def test_the_warning_a_case_names_shows_the_damage():
    cut = replace(FLAGGING, warned="no percentile table")
    stdout = parsed(warnings=["no percentile table: the report is truncated or ab ran with -d"])
    intact = json.loads(parsed(latency_ms={"avg": 4.146}))
    assert verdict(cut, 0, stdout, reference=intact).cls == OK
    assert verdict(FLAGGING, 0, stdout, reference=intact).cls == SILENT


@pytest.mark.parametrize("stdout, cls", [
    ("variant  363,570.33 ⚑  235,505.32", OK),
    ("a derived rate", OK),
    ('{"a_requests_per_sec": 1, "a_trusted": false}', OK),
    ("variant  363,570.33  235,505.32  0.65×", SILENT),
    ("the problems of a", OK),
])
def test_a_table_for_people_shows_the_damage_by_a_flag_or_a_word(stdout, cls):
    assert verdict(replace(FLAGGING, shows=WORDS), 0, stdout).cls == cls


def test_a_valid_input():
    assert verdict(ACCEPTING, 0, "done\n").cls == OK
    assert verdict(ACCEPTING, 2, "", ONE_LINE).cls == WRONG_REFUSAL
    assert verdict(ACCEPTING, 0, parsed(), reference=json.loads(parsed())).cls == OK
    assert verdict(ACCEPTING, 0, parsed(requests=1), reference=json.loads(parsed())).cls == SILENT
    assert verdict(ACCEPTING, 0, "", left="01-my-analysis.ipynb was removed").cls == SILENT
    status = replace(ACCEPTING, accepted=frozenset({0, 1}))
    assert verdict(status, 1, "lab tpcensus: 1 part(s) missing or dead\n").cls == OK
    assert verdict(status, 2, "", ONE_LINE).cls == WRONG_REFUSAL


def _result(group: str, name: str, cls: str) -> Result:
    return Result(Case(f"{group}/{name}", group, ("steps",), ACCEPT), Outcome(0), Verdict(cls, "why"))


def test_the_table_counts_each_class_per_group_and_in_total():
    results = [_result("parse", "a", OK), _result("parse", "b", SILENT), _result("run", "c", HANG),
               _result("run", "d", OK), _result("parse", "e", TRACEBACK)]
    rows = summary_rows(results)
    assert [(r.group, r.cases, r.counts) for r in rows] == [
        ("parse", 3, (1, 1, 0, 0, 1, 0)), ("run", 2, (1, 0, 1, 0, 0, 0)), ("total", 5, (2, 1, 1, 0, 1, 0))]
    text = render(results, [])
    assert "| total |     5 |" in text and "3 case(s) not ok:" in text
    assert "- `run/c`: **hang**: why" in text
    assert "THE CHECKOUT CHANGED" in render(results, ["changed runs/x/run.json"])


def test_a_snapshot_sees_what_changed_and_never_opens_a_fifo(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b")
    os.mkfifo(tmp_path / "pipe")                    # opening it would block the census
    before = snapshot(tmp_path)
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "sub" / "b.txt").unlink()
    (tmp_path / "c.txt").write_text("c")
    assert changes(before, snapshot(tmp_path), "w") == ["changed w/a.txt", "created w/c.txt", "removed w/sub/b.txt"]
    assert changes(snapshot(tmp_path / "none"), snapshot(tmp_path / "sub"), "sub") == ["created sub"]


@pytest.mark.parametrize("argv", [("run", "--steps", "baseline"), ("restore",), ("lab", "up"), ("lab", "down"),
                                  ("build", "--steps", "baseline"), ("build", "--site-dir", "/srv/site")])
def test_the_census_refuses_commands_that_would_act_on_this_machine(argv):
    with pytest.raises(ValueError):
        refuse_unsafe(Case(f"{argv[0]}/x", argv[0], argv, REFUSE))


def test_every_case_is_named_once_safe_and_set_up_from_what_is_there():
    cases = all_cases()                             # raises when a damaged line is no longer in its report
    assert len(cases) >= 150 and len({c.name for c in cases}) == len(cases)
    for case in cases:
        refuse_unsafe(case)
    groups = {c.group for c in cases}
    assert {"parse", "run", "restore", "supersede", "compare", "export", "notebooks", "build", "lab"} <= groups
