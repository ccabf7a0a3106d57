"""What a build leaves must not outlive it: after runs are removed, their charts (issue 30, review
finding 19: they stayed in static/charts/ and public/charts/, with or without the cache); after a
build is killed, its kernels' socket directory (issue 34, finding 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tunepath.publish.build import _prune_charts

pytestmark = pytest.mark.fast


def test_only_the_charts_some_steps_data_names_are_kept(tmp_path):
    charts = tmp_path / "static" / "charts"
    charts.mkdir(parents=True)
    for name in ("baseline-a.svg", "baseline-a-narrow.svg", "summary-b.svg", "baseline-removed-run.svg"):
        (charts / name).write_text("<svg/>")
    (tmp_path / "data" / "steps").mkdir(parents=True)
    (tmp_path / "data" / "steps" / "baseline.json").write_text(json.dumps(
        {"charts": [{"src": "charts/baseline-a.svg", "narrow_src": "charts/baseline-a-narrow.svg"}]}))
    (tmp_path / "data" / "summary.json").write_text(json.dumps({"hosts": [{"charts": [{"src": "charts/summary-b.svg"}]}]}))
    _prune_charts(tmp_path)
    assert sorted(p.name for p in charts.iterdir()) == ["baseline-a-narrow.svg", "baseline-a.svg", "summary-b.svg"]


def test_no_charts_directory_is_nothing_to_do(tmp_path):
    (tmp_path / "data").mkdir()
    _prune_charts(tmp_path)
    assert not (tmp_path / "static").exists()


def test_a_run_directory_linked_from_elsewhere_is_hashed_through_the_link(tmp_path):
    """Review finding 20: a run directory that is a symlink, edited where it points, read as unchanged."""
    from tunepath.publish.cache import runs_digest

    elsewhere = tmp_path / "elsewhere" / "live-x"
    elsewhere.mkdir(parents=True)
    (elsewhere / "run.json").write_text("{}")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "live-x").symlink_to(elsewhere, target_is_directory=True)
    before = runs_digest(runs)
    (elsewhere / "run.json").write_text('{"edited": true}')
    assert runs_digest(runs) != before


def test_a_killed_builds_kernel_socket_directory_goes_with_the_next_build(tmp_path, monkeypatch):
    """Issue 34, finding 11: a SIGKILLed build leaves /tmp/tunepath-kernels-*; the next build's
    preloading removes those whose build is gone, and no other."""
    from tunepath.publish import kernels

    monkeypatch.setattr(kernels.tempfile, "gettempdir", lambda: str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f"{kernels.DIR_PREFIX}{dead.stdout.strip()}-abc"
    alive = tmp_path / f"{kernels.DIR_PREFIX}{os.getpid()}-def"
    for d in (gone, alive):
        d.mkdir()
        (d / "fork.sock").write_text("")
    kernels._forget_dead()
    assert not gone.exists() and alive.exists()
