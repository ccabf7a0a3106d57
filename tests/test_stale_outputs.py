"""Issue 30, review finding 19: after runs are removed, a build no longer publishes their charts
(they stayed in static/charts/ and public/charts/, with or without the cache)."""

from __future__ import annotations

import json

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
