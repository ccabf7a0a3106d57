"""The history across runs (analysis/history.py, publish/historydoc.py): series never mix host kinds
or emulated servers, change points fall between two runs and come from Apache Otava, the false-alarm
rate is measured on shuffled values, and the page's data binds each median to its run.

The recorded runs include superseded ones: the pages leave them out, but five of them are runs of
one lab host kind across dates, which is what a history is made of."""

from __future__ import annotations

import pytest

from conftest import ROOT
from tunepath.analysis import history as H
from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.pairing import host_kind
from tunepath.evidence.store import RunStore
from tunepath.publish.historychart import history_chart, shown
from tunepath.publish.historydoc import charted, history_document
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def recorded():
    runs = RunStore(ROOT / "runs").load_all()
    rows = measurements_frame(runs, REGISTRY)
    return runs, rows, H.history(runs, rows, skip_steps=frozenset({"setup"}), shuffles=5)


def _point(run_id, values, tomcat="11.0.10", java=21, date="2026-12-01"):
    return H.Point(run_id, date, tomcat, java, tuple(values), sorted(values)[len(values) // 2], None, None, None)


def test_a_series_is_one_host_kind_without_emulated_servers_in_version_then_date_order(recorded):
    runs, _, h = recorded
    by_id = {r.run_id: r for r in runs}
    lab = {str(host_kind(r)) for r in runs if r.kind == "live" and not r.emulated and "Lab:" in r.info.label}
    assert h.series and len(lab) >= 2 and set(h.kinds) == lab   # the lab's machines, each its own kind; no emulated VM
    for s in h.series:
        kinds = {str(host_kind(by_id[p.run_id])) for p in s.points}
        assert kinds == {s.kind} and not any(by_id[p.run_id].emulated for p in s.points)
        assert s.step != "setup" and len(s.points) >= 2
        key = [((p.tomcat, p.java) if s.axis == "tomcat" else (p.java,), p.date) for p in s.points]
        assert [k[1] for k in key] == sorted(k[1] for k in key) or s.axis == "java"
    java = [s for s in h.series if s.axis == "java"]
    assert java and all(len({p.java for p in s.points}) >= 2 for s in java)     # only where Java varies


def test_a_series_never_mixes_an_offered_rate_with_a_closed_loop_load(recorded):
    _, rows, h = recorded
    loads = set()
    for s in h.series:
        open_loop = {bool(rows[(rows.run_id == p.run_id) & (rows.step == s.step) & (rows.variant == s.variant)]
                          .iloc[0].offered_rate > 0) for p in s.points}
        assert len(open_loop) == 1 and s.fixed.endswith(("open-loop load", "closed-loop load")), s.id
        loads |= open_loop
    assert loads == {True, False}             # the recorded runs have both: each followed apart


def test_requests_per_second_is_followed_only_where_the_rate_was_not_just_the_offered_one(recorded):
    _, rows, h = recorded
    for s in (s for s in h.series if s.figure.key == "rps"):
        for p in s.points:
            row = rows[(rows.run_id == p.run_id) & (rows.step == s.step) & (rows.variant == s.variant)].iloc[0]
            assert not (row.offered_rate and row.requests_per_sec >= 0.95 * row.offered_rate), (s.id, p.run_id)


def test_change_points_fall_between_two_runs_below_the_threshold(recorded):
    _, _, h = recorded
    assert h.changes
    for s, c in h.changes:
        ids = [p.run_id for p in s.points]
        assert ids.index(c.after.run_id) == ids.index(c.before.run_id) + 1
        assert c.pvalue < H.MAX_PVALUE and s.searched and len(s.points) >= H.MIN_RUNS
    assert h.false_alarms.series == sum(s.searched for s in h.series) and h.false_alarms.shuffles == 5


def test_otava_finds_a_shift_between_runs_and_none_in_steady_values():
    steady = [_point(f"r{i}", [100 + d for d in (-1, 0, 1, 0.5)]) for i in range(4)]
    assert H._changes(steady) == []
    shifted = steady[:2] + [_point(f"s{i}", [130 + d for d in (-1, 0, 1, 0.5)], tomcat="11.0.24") for i in range(2)]
    [change] = H._changes(shifted)
    assert (change.before.run_id, change.after.run_id) == ("r1", "s0") and 28 < change.change_pct < 32
    assert change.what("tomcat") == "Tomcat 11.0.10 → 11.0.24" and change.pvalue < 0.001


def test_the_same_runs_give_the_same_history(recorded):
    runs, rows, h = recorded
    again = H.history(runs, rows, skip_steps=frozenset({"setup"}), shuffles=5)
    assert again.false_alarms == h.false_alarms and [s.changes for s in again.series] == [s.changes for s in h.series]


def test_the_page_data_binds_each_median_to_its_run_and_the_chart_says_where_the_changes_are(recorded, tmp_path):
    runs, _, h = recorded
    series = charted(h, ("baseline", "stock"))
    kind, s = next((k, s) for k, s in series.items() if k.startswith("AMD EPYC"))   # the kind with change points
    assert (s.step, s.variant, s.figure.key) == ("baseline", "stock", "cpu")
    chart = history_chart(s, "title", tmp_path, "history-1")
    assert (tmp_path / chart.src).is_file() and (tmp_path / chart.narrow_src).is_file()
    assert "Change points:" in chart.alt and shown("cpu", s.points[0].median) in chart.alt
    doc = history_document(h, REGISTRY.get("history"), REGISTRY, runs, {kind: chart.to_dict()}, {})
    [k] = [k for k in doc["kinds"] if k["kind"] == kind]
    assert k["chart"]["src"] == chart.src and not k["arm"] and k["runs"] >= 5
    for c in k["changes"]:
        for side in (c["before"], c["after"]):
            assert side["field"] in ("server_cpu_per_req", "latency_p99", "requests_per_sec")
            assert side["step"] == c["step"] and side["variant"] == c["variant"] and side["value"]
    assert doc["false_alarms"]["shuffled"] == h.false_alarms.series * 5


def test_a_github_runners_runs_are_a_host_kind_of_their_own_and_reach_the_export(tmp_path):
    """Issue 33, item 5: runs on GitHub's Arm runners (labelled by runner_label, their CPU model in
    the facts) are one more host kind: never in a lab series, and the export's history keeps them."""
    import json
    import shutil

    from tunepath.live.inventory import runner_label
    from tunepath.publish.upstream.tables import history_changes

    label = runner_label({"GITHUB_ACTIONS": "true", "RUNNER_ENVIRONMENT": "github-hosted", "RUNNER_ARCH": "ARM64",
                          "ImageOS": "ubuntu24"})
    lab = ["live-20261124-021310-vm", "live-20261124-051513-vm", "live-20261124-081847-vm"]
    for i, name in enumerate(lab + lab):
        dest = tmp_path / (name if i < len(lab) else name.replace("-vm", "-runner"))
        shutil.copytree(ROOT / "runs" / name, dest)
        record = json.loads((dest / "run.json").read_text())
        record.pop("superseded_by", None)
        if i >= len(lab):                                     # the same measurements, on an Arm runner
            record["run_id"] = dest.name
            record["label"] = f"runner, live run (quick profile); {label}"
            record["hosts"]["server"]["facts"].update(cpu_model="Neoverse-N2", cpus=4)
        (dest / "run.json").write_text(json.dumps(record))
    runs = RunStore(tmp_path).load_all()
    h = H.history(runs, measurements_frame(runs, REGISTRY), skip_steps=frozenset({"setup"}), shuffles=2)
    assert set(h.kinds) == {"AMD EPYC, 2 CPUs", "Neoverse-N2, 4 CPUs"}
    for s in h.series:
        assert {p.run_id.endswith("-runner") for p in s.points} == {s.kind.startswith("Neoverse")}
    doc = history_document(h, REGISTRY.get("history"), REGISTRY, runs, {}, {})
    runner = next(k for k in doc["kinds"] if k["kind"].startswith("Neoverse"))
    assert runner["arm"] and any("GitHub-hosted runner (Arm64" in x for x in runner["labels"])
    assert not next(k for k in doc["kinds"] if k["kind"].startswith("AMD"))["arm"]
    shown_ = history_changes(runner)                          # what the export writes for that kind
    assert shown_.startswith("| Configuration |") or shown_.startswith("No change point")


def test_every_recorded_matrix_cell_ran_the_versions_its_mark_names(recorded):
    """A run marked as a version matrix's cell (``matrix`` in run.json) ran that cell's Tomcat and
    Java by its own facts; the cells of one matrix are distinct and within its size."""
    from tunepath.live.matrix import cell_mismatch

    runs, _, _ = recorded
    by_matrix: dict = {}
    for run in runs:
        cell = run.info.matrix
        if cell is not None:
            assert cell_mismatch(cell.cell, run.server.facts) is None, run.run_id
            assert 1 <= cell.index <= cell.cells, run.run_id
            by_matrix.setdefault(cell.matrix, []).append(cell.cell)
    for matrix, cells in by_matrix.items():
        assert len(set(cells)) == len(cells), matrix


def test_a_version_matrix_is_one_grid_of_tomcat_by_java_with_each_median_bound_to_its_cell(tmp_path):
    """The history page shows each version matrix at a glance: a configuration's medians with one
    row per Tomcat release and one column per Java release, each bound to the cell's own run."""
    import json
    import shutil

    from tunepath.evidence.amend import amend

    src = "live-20261124-021310-vm"                       # a lab run of the baseline
    cells = [("11.0.10", 17), ("11.0.10", 21), ("11.0.24", 17), ("11.0.24", 21)]
    for i, (tomcat, java) in enumerate(cells, 1):
        dest = tmp_path / f"live-cell{i}"
        shutil.copytree(ROOT / "runs" / src, dest)
        record = json.loads((dest / "run.json").read_text())
        record.pop("superseded_by", None)
        record["run_id"] = dest.name
        record["hosts"]["server"]["facts"].update(tomcat_version=tomcat, java_version=f'openjdk version "{java}.0.2"')
        (dest / "run.json").write_text(json.dumps(record))
        amend(RunStore(tmp_path), dest.name, "matrix",
              {"id": "matrix-20261207-062434", "index": i, "cells": 4, "tomcat": tomcat, "java": java})
    runs = RunStore(tmp_path).load_all()
    h = H.history(runs, measurements_frame(runs, REGISTRY), skip_steps=frozenset({"setup"}), shuffles=1)
    doc = history_document(h, REGISTRY.get("history"), REGISTRY, runs, {}, {}, grid=("baseline", "stock"))
    [grid] = doc["kinds"][0]["grids"]
    assert grid["columns"] == ["Java 17", "Java 21"] and [r["tomcat"] for r in grid["rows"]] == ["11.0.10", "11.0.24"]
    bound = [[(c["run_id"], c["step"], c["variant"]) for c in r["cells"]] for r in grid["rows"]]
    assert bound == [[("live-cell1", "baseline", "stock"), ("live-cell2", "baseline", "stock")],
                     [("live-cell3", "baseline", "stock"), ("live-cell4", "baseline", "stock")]]
    assert "by Tomcat and Java release, the version matrix of" in grid["caption"]
