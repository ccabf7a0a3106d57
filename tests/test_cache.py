"""The replay build's execution cache: a notebook runs again only when its inputs changed.

One small site (two steps, no Hugo) is built once for the module into a temporary
directory, from copies of runs/ and notebooks/ (the work tree is never touched). Each
test changes one thing, rebuilds, and checks which notebooks executed; every rebuild
leaves the site consistent for the next test.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import ROOT
from tunepath.steps import REGISTRY
from tunepath.publish import build
from tunepath.publish import cache
from tunepath import cli
from tunepath.errors import TunepathError

pytestmark = pytest.mark.fast

STEPS = ["baseline", "jvm"]
UNCHANGED = "unchanged (code, parameters, runs, package) — not re-executed"


class Site:
    def __init__(self, base):
        self.site_dir = base / "site"
        self.runs = base / "runs"
        self.notebooks = base / "notebooks"
        shutil.copytree(ROOT / "runs", self.runs, ignore=shutil.ignore_patterns(".inprogress"))
        shutil.copytree(ROOT / "notebooks", self.notebooks,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))

    def build(self, **kw):
        return build.build_site(site_dir=self.site_dir, runs_dir=self.runs, steps=STEPS,
                                with_hugo=False, notebooks_dir=self.notebooks, **kw)

    def rebuild(self, monkeypatch, **kw) -> list[str]:
        """Build again; returns the steps whose notebook was executed, in the steps' order (they
        execute side by side, so the calls may come in either order)."""
        executed: list[str] = []
        real = build.execute_step

        def spy(step, *args, **kwargs):
            executed.append(step)
            return real(step, *args, **kwargs)

        with monkeypatch.context() as m:
            m.setattr(build, "execute_step", spy)
            self.build(**kw)
        assert len(executed) == len(set(executed)), executed       # each at most once
        return sorted(executed, key=STEPS.index)

    def manifest(self, step: str) -> dict | None:
        path = cache.manifest_path(self.site_dir, step)
        return json.loads(path.read_text()) if path.exists() else None

    def key(self, step: str) -> cache.StepKey:
        inputs = cache.BuildInputs.collect(self.runs)
        return inputs.key_for(self.notebooks / REGISTRY.get(step).notebook,
                              build.step_parameters(self.site_dir.resolve(), self.runs))

    def live_raw(self):
        """A baseline output of the newest run that has one (a live run's, else the reference's)."""
        live = sorted(p for p in self.runs.iterdir() if p.name.startswith("live-"))
        for run in [*reversed(live), self.runs / "reference-aws-c8g"]:
            found = sorted(run.glob("raw/baseline-*.txt"))
            if found:
                return found[0]
        raise AssertionError("no run has a baseline output")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = Site(tmp_path_factory.mktemp("cache"))
    s.build()
    return s


def test_cold_build_records_each_steps_outputs(site):
    for step in STEPS:
        nb = REGISTRY.get(step).notebook
        manifest = site.manifest(step)
        assert manifest and manifest["key"] == site.key(step).key
        outputs = manifest["outputs"]
        stem = nb.removesuffix(".ipynb")
        assert {f"static/notebooks/{nb}", f"static/notebooks/{stem}.html", f"data/steps/{step}.json"} <= set(outputs)
        charts = [rel for rel in outputs if rel.startswith("static/charts/")]
        assert charts and all(rel.startswith(f"static/charts/{step}-") for rel in charts)
        data = json.loads((site.site_dir / f"data/steps/{step}.json").read_text())
        assert {f"static/{c[k]}" for c in data["charts"] for k in ("src", "narrow_src") if c.get(k)} == set(charts)
        for rel, digest in outputs.items():
            assert cache.sha256_file(site.site_dir / rel) == digest
    assert not list((site.site_dir / "build" / "cache").glob("*.tmp"))
    last = json.loads((site.site_dir / "build" / "last-build.json").read_text())
    assert last["executed"] == STEPS and last["unchanged"] == []


def test_warm_build_executes_nothing(site, monkeypatch, capsys):
    notebooks = [site.site_dir / "static" / "notebooks" / REGISTRY.get(s).notebook for s in STEPS]
    mtimes = [p.stat().st_mtime_ns for p in notebooks]
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == []
    out = capsys.readouterr().out
    assert out.count(UNCHANGED) == len(STEPS), out
    assert "notebooks: 0 executed, 2 unchanged" in out
    assert [p.stat().st_mtime_ns for p in notebooks] == mtimes
    last = json.loads((site.site_dir / "build" / "last-build.json").read_text())
    assert last["executed"] == [] and last["unchanged"] == STEPS


def test_runs_and_package_are_hashed_once_per_build(site, monkeypatch):
    seen: list[str] = []
    real = cache.sha256_file
    monkeypatch.setattr(cache, "sha256_file", lambda p: (seen.append(str(p)), real(p))[1])
    assert site.rebuild(monkeypatch) == []
    inputs = [p for p in seen if p.startswith(str(site.runs)) or "/tunepath/" in p]
    assert inputs and len(inputs) == len(set(inputs))           # each input file once, not once per step
    assert any(p.endswith("/tunepath/publish/cache.py") for p in inputs)


def test_a_run_being_recorded_changes_nothing(site, monkeypatch):
    busy = site.runs / ".inprogress" / "live-29990101-000000-x"
    busy.mkdir(parents=True)
    (busy / "run.json").write_text("{}")
    try:
        assert site.rebuild(monkeypatch) == []
    finally:
        shutil.rmtree(site.runs / ".inprogress")


def test_changed_raw_file_reexecutes(site, monkeypatch, capsys):
    raw = site.live_raw()
    raw.write_bytes(raw.read_bytes() + b"\n")
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == STEPS
    out = capsys.readouterr().out
    assert "runs changed" in out and "notebook changed" not in out
    assert site.rebuild(monkeypatch) == []


def test_changed_notebook_reexecutes_only_that_step(site, monkeypatch, capsys):
    path = site.notebooks / REGISTRY.get("jvm").notebook
    nb = json.loads(path.read_text())
    nb["cells"].append({"cell_type": "markdown", "id": "cache-test-note", "metadata": {}, "source": ["A note added by the cache test."]})
    path.write_text(json.dumps(nb, indent=1))
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == ["jvm"]
    out = capsys.readouterr().out
    assert "jvm: executing" in out and "notebook changed" in out
    assert f"baseline: {UNCHANGED}" in out
    assert "A note added by the cache test." in (site.site_dir / "static/notebooks" / path.name).read_text()


def test_deleted_output_reexecutes_that_step(site, monkeypatch, capsys):
    chart = next(rel for rel in site.manifest("baseline")["outputs"] if rel.startswith("static/charts/"))
    (site.site_dir / chart).unlink()
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == ["baseline"]
    assert f"output missing: {chart}" in capsys.readouterr().out
    assert (site.site_dir / chart).is_file()


def test_altered_output_is_not_trusted(site):
    rel = "data/steps/jvm.json"
    path = site.site_dir / rel
    original = path.read_bytes()
    try:
        path.write_bytes(original.replace(b"{", b"{ ", 1))
        verdict = cache.check(site.site_dir, "jvm", site.key("jvm"))
        assert not verdict.fresh and verdict.reasons == [f"output changed: {rel}"]
    finally:
        path.write_bytes(original)
    assert cache.check(site.site_dir, "jvm", site.key("jvm")).fresh


def test_no_cache_executes_every_step_and_refreshes_the_cache(site, monkeypatch, capsys):
    capsys.readouterr()
    assert site.rebuild(monkeypatch, use_cache=False) == STEPS
    assert "cache off (--no-cache)" in capsys.readouterr().out
    assert site.rebuild(monkeypatch) == []


def test_failed_execution_changes_no_manifest(site, monkeypatch, capsys):
    """A notebook that fails mid-build publishes nothing: every manifest stays as it was, and
    once the notebook is back, nothing needs executing again."""
    path = site.notebooks / REGISTRY.get("baseline").notebook
    original = path.read_bytes()
    manifests = {s: cache.manifest_path(site.site_dir, s).read_bytes() for s in STEPS}
    nb = json.loads(original)
    nb["cells"].append({"cell_type": "code", "id": "cache-boom", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": ["raise RuntimeError('boom')"]})
    path.write_text(json.dumps(nb, indent=1))
    try:
        with pytest.raises(TunepathError, match="step 'baseline'.*boom"):
            site.rebuild(monkeypatch)
    finally:
        path.write_bytes(original)
    assert {s: cache.manifest_path(site.site_dir, s).read_bytes() for s in STEPS} == manifests
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == []            # the published outputs still match their inputs


def test_runs_changed_while_the_build_read_them_are_neither_published_nor_cached(site, monkeypatch, capsys):
    """Issue 34, finding 2: a raw report tripled while its step's notebook ran, then put back, must
    not leave the tripled figures cached under the original runs' key."""
    raw = site.live_raw()
    original = raw.read_bytes()
    manifests = {s: cache.manifest_path(site.site_dir, s).read_bytes() for s in STEPS}
    real = build.execute_step

    def edits_while_it_runs(step, *args, **kwargs):
        raw.write_bytes(original + b"\n")             # another process writes into runs/ meanwhile
        return real(step, *args, **kwargs)

    try:
        with monkeypatch.context() as m:
            m.setattr(build, "execute_step", edits_while_it_runs)
            with pytest.raises(TunepathError, match="changed while the build read them"):
                site.build(use_cache=False)
    finally:
        raw.write_bytes(original)
    assert {s: cache.manifest_path(site.site_dir, s).read_bytes() for s in STEPS} == manifests
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == []            # what is published still matches the runs as they are


def test_both_notebooks_failing_names_the_first_step(site, monkeypatch):
    """Side by side, the failure reported is the first step's, as one after the other."""
    paths = [site.notebooks / REGISTRY.get(s).notebook for s in STEPS]
    originals = [p.read_bytes() for p in paths]
    for path, original in zip(paths, originals):
        nb = json.loads(original)
        nb["cells"].append({"cell_type": "code", "id": "cache-boom-2", "metadata": {}, "execution_count": None,
                            "outputs": [], "source": [f"raise RuntimeError('boom in {path.name}')"]})
        path.write_text(json.dumps(nb, indent=1))
    try:
        with pytest.raises(TunepathError, match=f"step 'baseline'.*boom in {paths[0].name}"):
            site.build(jobs=2)
    finally:
        for path, original in zip(paths, originals):
            path.write_bytes(original)
    assert site.rebuild(monkeypatch) == []


def test_progress_comes_in_the_steps_order(site, monkeypatch, capsys):
    capsys.readouterr()
    assert site.rebuild(monkeypatch, use_cache=False, jobs=2) == STEPS
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")]
    assert [ln.split(":")[0] + ":" + ln.split(":")[1].split()[0] for ln in lines] == [
        "[1/2] baseline:executing", "[1/2] baseline:done", "[2/2] jvm:executing", "[2/2] jvm:done"]
    last = json.loads((site.site_dir / "build" / "last-build.json").read_text())
    assert last["executed"] == STEPS and last["workers"] == 2


def test_a_warm_build_checks_the_runs_again_only_when_they_changed(site, monkeypatch, capsys):
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == []
    assert "recorded runs, unchanged since the last build found them valid" in capsys.readouterr().out
    meta = site.runs / "reference-grace" / "run.json"
    original = meta.read_bytes()
    record = json.loads(original)
    record["context"] = []
    meta.write_text(json.dumps(record))
    try:
        with pytest.raises(TunepathError, match="reference-grace/run.json"):
            site.build()                                   # the cache on: a changed run is checked again
    finally:
        meta.write_bytes(original)
    capsys.readouterr()
    assert site.rebuild(monkeypatch) == []
    assert "recorded runs, unchanged since" in capsys.readouterr().out


def test_cli_no_cache_option(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(build, "build_site", lambda **kw: calls.append(kw))
    assert cli.main(["build", "--site-dir", str(tmp_path), "--no-hugo", "--no-cache"]) == 0
    assert cli.main(["build", "--site-dir", str(tmp_path), "--no-hugo"]) == 0
    assert [c["use_cache"] for c in calls] == [False, True]


# --- the key's parts, without executing anything -------------------------------------------

def test_runs_digest_covers_paths_and_contents_but_not_runs_in_progress(tmp_path):
    runs = tmp_path / "runs"
    (runs / "r1" / "raw").mkdir(parents=True)
    (runs / "r1" / "run.json").write_text("{}")
    (runs / "r1" / "raw" / "a.txt").write_text("a")
    first = cache.runs_digest(runs)
    (runs / ".inprogress" / "r2").mkdir(parents=True)
    (runs / ".inprogress" / "r2" / "run.json").write_text("{}")
    (runs / ".r3.abcd").mkdir()                                   # RunStore.write's temporary dir
    (runs / ".r3.abcd" / "run.json").write_text("{}")
    assert cache.runs_digest(runs) == first
    (runs / "r1" / "raw" / "a.txt").rename(runs / "r1" / "raw" / "b.txt")
    renamed = cache.runs_digest(runs)
    assert renamed != first
    (runs / "r1" / "raw" / "b.txt").write_text("b")
    assert cache.runs_digest(runs) not in (first, renamed)


def test_package_digest_covers_version_and_files_not_bytecode(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "templates").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "templates" / "page.html").write_text("<p>")
    first = cache.package_digest(pkg, "1.0")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert cache.package_digest(pkg, "1.0") == first
    assert cache.package_digest(pkg, "1.1") != first
    (pkg / "templates" / "page.html").write_text("<p>changed")
    assert cache.package_digest(pkg, "1.0") != first


def test_parameters_digest_ignores_key_order():
    assert cache.parameters_digest({"a": 1, "b": [2]}) == cache.parameters_digest({"b": [2], "a": 1})
    assert cache.parameters_digest({"run_ids": ["x"]}) != cache.parameters_digest({"run_ids": []})


def test_manifests_are_written_atomically_and_bad_ones_are_not_trusted(tmp_path):
    key = cache.StepKey("n", "p", "r", "k")
    assert cache.check(tmp_path, "jvm", key).reasons == ["no cache"]
    cache.write_manifest(tmp_path, "jvm", {"cache_version": cache.CACHE_VERSION, "key": key.key,
                                          "components": key.to_dict(), "outputs": {}})
    assert os.listdir(tmp_path / "build" / "cache") == ["jvm.json"]
    assert cache.check(tmp_path, "jvm", key).reasons == ["no outputs recorded"]
    assert cache.check(tmp_path, "jvm", cache.StepKey("n", "p", "r2", "k2")).reasons[:2] == \
        ["runs changed", "package changed"]
    cache.manifest_path(tmp_path, "jvm").write_text("{ half")
    assert cache.check(tmp_path, "jvm", key).reasons == ["cache manifest unreadable"]


# --- scripts/bench's arithmetic (no build, no timing) ---------------------------------------

def _live_run(runs, run_id, blocks, timings=None, notebook_duration=None):
    d = runs / run_id
    d.mkdir(parents=True)
    record = {"run_id": run_id, "kind": "live", "profile": "quick", "blocks": blocks}
    if timings is not None:
        record["step_timings"] = timings
    (d / "run.json").write_text(json.dumps(record))
    if notebook_duration is not None:
        (d / "notebooks").mkdir()
        (d / "notebooks" / "09-proxy.ipynb").write_text(json.dumps(
            {"metadata": {"papermill": {"duration": notebook_duration}}, "cells": []}))


def test_bench_overhead_is_wall_minus_load(tmp_path):
    from harness.bench.overhead import bench_overhead

    runs = tmp_path / "runs"
    blocks = [{"step": "proxy", "block": b, "outcome": "ran", "duration_s": d}
              for b, d in (("restart-tomcat", 0.5), ("warm-up", 10.0), ("load-direct", 15.0),
                           ("httpd-http", 0.2), ("load-http", 15.0))]
    blocks.append({"step": "proxy", "block": "httpd-ajp", "outcome": "skipped", "reason": "x"})
    _live_run(runs, "live-a", blocks, {"proxy": {"started": "2026-01-01T00:00:00+00:00",
                                                 "finished": "2026-01-01T00:00:50+00:00", "wall_s": 50.0}})
    _live_run(runs, "live-b", blocks, notebook_duration=45.0)
    _live_run(runs, "live-c", blocks)
    (runs / ".inprogress" / "live-d").mkdir(parents=True)
    (runs / ".inprogress" / "live-d" / "run.json").write_text(json.dumps({"kind": "live", "blocks": blocks}))
    got = {r["run_id"]: r["steps"][0] for r in bench_overhead(runs)["runs"]}
    assert set(got) == {"live-a", "live-b", "live-c"}
    a, b, c = got["live-a"], got["live-b"], got["live-c"]
    assert a["load_s"] == 40.0 and a["other_blocks_s"] == 0.7
    assert (a["wall_s"], a["overhead_s"], a["wall_source"]) == (50.0, 10.0, "recorded (step_timings)")
    assert b["overhead_s"] == 5.0 and b["wall_source"].startswith("estimated")
    assert c["wall_s"] is None and c["wall_source"] == "not recorded" and "overhead_s" not in c
    assert a["unrecorded_warmups"] == 0 and a["overhead_adjusted_s"] == a["overhead_s"]


def test_bench_overhead_estimates_the_warm_ups_of_later_repetitions(tmp_path):
    from harness.bench.overhead import bench_overhead

    runs = tmp_path / "runs"
    blocks = [{"step": "baseline", "block": b, "outcome": "ran", "duration_s": d, **extra}
              for b, d, extra in (("restart-tomcat", 0.1, {}), ("warm-up", 10.0, {}), ("load", 10.0, {}),
                                  ("load", 10.0, {"repetition": 2}), ("load", 10.0, {"repetition": 3}))]
    _live_run(runs, "live-r", blocks, {"baseline": {"wall_s": 75.0}})
    row = bench_overhead(runs)["runs"][0]["steps"][0]
    assert (row["load_s"], row["overhead_s"]) == (40.0, 35.0)         # wall − recorded blocks, as defined
    assert (row["unrecorded_warmups"], row["unrecorded_warmup_s_est"]) == (2, 20.0)
    assert row["overhead_adjusted_s"] == 15.0


def test_bench_parse_counts_reports_and_leaves_other_files_out(tmp_path, capsys):
    from harness.bench.throughput import bench_parse

    fixtures = tmp_path / "fixtures"
    (fixtures / "wrk").mkdir(parents=True)
    shutil.copy(next((ROOT / "runs").glob("*/raw/baseline-stock.txt")), fixtures / "wrk" / "plain.txt")
    (fixtures / "wrk" / "plain.cmd").write_text("wrk -t1 -c1 -d1 http://x/\n")
    result = bench_parse(0.2, fixtures, tmp_path / "no-runs")
    assert result["files"] == 1 and result["not_reports"] == 1
    assert any("wrk2: absent" in n for n in result["notes"])
    for mode in ("file", "memory"):
        assert result[mode]["seconds"] >= 0.2 and result[mode]["reports_per_s"] > 0


def test_a_build_refuses_a_package_other_than_the_projects_own(tmp_path):
    """A stale editable install or a PYTHONPATH to another copy would build the pages with other code."""
    from tunepath.errors import TunepathError
    from tunepath.publish.cache import check_package

    check_package(ROOT)                                   # this checkout's package: the one imported here
    check_package(tmp_path)                               # a project copy without scripts/ (the package comes from PYTHONPATH)
    (tmp_path / "scripts" / "tunepath").mkdir(parents=True)
    with pytest.raises(TunepathError) as caught:
        check_package(tmp_path)
    assert str(caught.value).startswith(f"the tunepath package imported here is {ROOT / 'scripts' / 'tunepath'}, "
                                        f"not this project's {tmp_path / 'scripts' / 'tunepath'}")
    assert f"pip install --no-deps -e {tmp_path}" in str(caught.value)
