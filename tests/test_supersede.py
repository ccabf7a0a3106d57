"""A superseded run stays in runs/ as evidence but leaves the pages: ``tunepath supersede``
marks it, a replay without a selection leaves it out (and still replays it when it is named),
and a mark naming a run that is not recorded is one clear error, not a silently missing page."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from tunepath.errors import TunepathError
from tunepath.evidence.store import RunError, RunStore
from tunepath.evidence.supersede import supersede
from tunepath.pipeline import _read
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

OLD, NEW, OTHER = "reference-grace", "reference-aws-c8g", "sandbox-wrk2-rate-sweep"


@pytest.fixture
def runs(tmp_path):
    dst = tmp_path / "runs"
    for run_id in (OLD, NEW, OTHER):
        shutil.copytree(ROOT / "runs" / run_id, dst / run_id)
    return dst


def test_supersede_marks_the_old_run_and_changes_nothing_else(runs):
    before = json.loads((runs / OLD / "run.json").read_text())
    supersede(RunStore(runs, REGISTRY.names), OLD, NEW, "  measured again with steady state  ")
    after = json.loads((runs / OLD / "run.json").read_text())
    assert after.pop("superseded_by") == {"run": NEW, "why": "measured again with steady state"}
    assert after == before
    info = RunStore(runs, REGISTRY.names).load(OLD).info
    assert (info.superseded_by, info.superseded_why) == (NEW, "measured again with steady state")


def test_a_replay_leaves_a_superseded_run_out_unless_it_is_named(runs):
    assert {r.run_id for r in _read(runs, None)} == {OLD, NEW, OTHER}
    supersede(RunStore(runs, REGISTRY.names), OLD, NEW, "newer")
    assert {r.run_id for r in _read(runs, None)} == {NEW, OTHER}
    assert [r.run_id for r in _read(runs, [OLD])] == [OLD]


@pytest.mark.parametrize("old, by, why, says", [
    (OLD, OLD, "x", "cannot supersede itself"),
    (OLD, "live-19990101-000000-x", "x", "no recorded run 'live-19990101-000000-x'"),
    (OLD, NEW, "   ", "say why"),
    ("no-such-run", NEW, "x", "no recorded run 'no-such-run'"),
])
def test_bad_requests_are_refused_and_write_nothing(runs, old, by, why, says):
    before = (runs / OLD / "run.json").read_bytes()
    with pytest.raises(RunError, match=says):
        supersede(RunStore(runs, REGISTRY.names), old, by, why)
    assert (runs / OLD / "run.json").read_bytes() == before
    assert not (runs / OLD / "run.json.tmp").exists()


def test_a_mark_naming_a_missing_run_stops_the_replay_with_the_fix(runs):
    record = json.loads((runs / OLD / "run.json").read_text())
    record["superseded_by"] = {"run": "live-19990101-000000-x", "why": "gone"}
    (runs / OLD / "run.json").write_text(json.dumps(record))
    with pytest.raises(TunepathError, match=r"superseded by 'live-19990101-000000-x', which is not recorded.*"
                                            r"remove \"superseded_by\""):
        _read(runs, None)


def test_a_malformed_mark_is_a_schema_error(runs):
    record = json.loads((runs / OLD / "run.json").read_text())
    record["superseded_by"] = NEW                       # a bare id, not {"run", "why"}
    (runs / OLD / "run.json").write_text(json.dumps(record))
    with pytest.raises(RunError, match="superseded_by"):
        RunStore(runs, REGISTRY.names).load(OLD)


def test_the_command_says_what_it_did_and_refuses_without_a_traceback(runs):
    cli = [sys.executable, "-m", "tunepath.cli", "supersede", "--runs-dir", str(runs)]
    ok = subprocess.run([*cli, OLD, "--by", NEW, "--why", "newer"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert f"{OLD} is superseded by {NEW}" in ok.stdout
    bad = subprocess.run([*cli, NEW, "--by", "nope", "--why", "x"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.startswith("tunepath: ") and "Traceback" not in bad.stderr


def test_a_cycle_is_refused_when_marked_and_when_found_in_the_records(runs):
    """Issue 30, review finding 18: A by B, then B by A hid both runs, with exit 0."""
    store = RunStore(runs, REGISTRY.names)
    supersede(store, OLD, NEW, "newer")
    supersede(store, NEW, OTHER, "newer still")
    with pytest.raises(RunError, match="cycle") as err:
        supersede(store, OTHER, OLD, "back to the start")
    assert f"{NEW} → {OTHER}" in str(err.value) or OTHER in str(err.value)
    assert "superseded_by" not in json.loads((runs / OTHER / "run.json").read_text())    # nothing written
    # a cycle written by hand is caught when the runs are read
    record = json.loads((runs / OTHER / "run.json").read_text())
    record["superseded_by"] = {"run": OLD, "why": "by hand"}
    (runs / OTHER / "run.json").write_text(json.dumps(record))
    from tunepath.evidence.supersede import check_superseding
    loaded = RunStore(runs, REGISTRY.names).load_all()
    with pytest.raises(RunError, match="cycle"):
        check_superseding(loaded, {r.run_id for r in loaded})


def test_a_full_disk_leaves_no_temp_file_and_the_record_unchanged(runs, monkeypatch):
    """Issue 34: ENOSPC while writing run.json.tmp left the half-written file behind."""
    import errno
    from pathlib import Path

    before = (runs / OLD / "run.json").read_bytes()
    real = Path.write_text

    def full(self, data, *args, **kwargs):
        real(self, data[:100], *args, **kwargs)               # part of it reached the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(RunError, match="No space left on device"):
        supersede(RunStore(runs, REGISTRY.names), OLD, NEW, "newer")
    assert not (runs / OLD / "run.json.tmp").exists()
    assert (runs / OLD / "run.json").read_bytes() == before
