"""What makes the cold replay build fast, and keeps it the same build: notebooks side by side with
their progress and failures in the steps' order, the kernels' shared parse of the runs, charts not
drawn again from the same input, and kernels forked from a preloading process.

Everything here works on temporary copies (the work tree is never touched); the one build that
executes notebooks is a single step.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath import memo, pipeline
from tunepath.errors import TunepathError
from tunepath.publish import build, cache, chartmemo, charts, kernels, notebooks, pool
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast


# --- the pool: side by side, reported in order ---------------------------------------------------

def test_jobs_report_in_their_own_order_whatever_order_they_finish_in():
    seen = []

    def job(i, delay):
        def run():
            time.sleep(delay)
            seen.append(("ran", i))
            return i * 10
        return run

    jobs = [job(0, 0.3), job(1, 0.0), job(2, 0.1)]
    results = pool.run_in_order(jobs, 3, before=lambda i: seen.append(("before", i)),
                                after=lambda i, r: seen.append(("after", i, r)))
    assert results == [0, 10, 20]
    reports = [s for s in seen if s[0] != "ran"]
    assert reports == [("before", 0), ("after", 0, 0), ("before", 1), ("after", 1, 10), ("before", 2), ("after", 2, 20)]
    assert [s for s in seen if s[0] == "ran"][0] == ("ran", 1)       # they did run side by side


def test_the_first_failure_in_order_is_raised_and_later_jobs_do_not_start():
    started, finished = [], []

    def job(i, delay, fail=False):
        def run():
            started.append(i)
            time.sleep(delay)
            if fail:
                raise TunepathError(f"job {i} failed")
            finished.append(i)
            return i
        return run

    # job 2 fails first in time, job 1 later: job 1's failure is the one reported, as in order
    jobs = [job(0, 0.0), job(1, 0.4, fail=True), job(2, 0.05, fail=True), job(3, 0.0), job(4, 0.0)]
    with pytest.raises(TunepathError, match="job 1 failed"):
        pool.run_in_order(jobs, 2)
    assert 4 not in started                  # dropped, never started
    assert set(started) - {1, 2} <= set(finished)   # whatever started has finished when it raises


def test_workers_default_to_one_more_than_the_cpus_and_never_exceed_the_jobs(monkeypatch):
    import os

    monkeypatch.delenv(pool.ENV, raising=False)
    assert pool.workers(None, 1) == 1
    assert pool.workers(None, 100) == len(os.sched_getaffinity(0)) + 1
    assert pool.workers(3, 2) == 2 and pool.workers(0, 5) == 1
    monkeypatch.setenv(pool.ENV, "3")
    assert pool.workers(None, 10) == 3


# --- one build's shared values --------------------------------------------------------------------

def test_shared_values_are_computed_once_per_build(tmp_path, monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.1)
        return {"value": [1.0, float("nan")]}

    monkeypatch.delenv(memo.ENV, raising=False)
    memo.shared("x", ["a"], compute)
    memo.shared("x", ["a"], compute)
    assert len(calls) == 2                       # outside a build: computed every time
    monkeypatch.setenv(memo.ENV, str(tmp_path / "memo"))
    out = []
    threads = [threading.Thread(target=lambda: out.append(memo.shared("x", ["a"], compute))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 3 and len(out) == 3     # three at once: one computes, two wait and load
    assert all(o["value"][0] == 1.0 and math.isnan(o["value"][1]) for o in out)
    memo.shared("x", ["b"], compute)
    assert len(calls) == 4                       # another key is another value


def test_a_replay_from_the_shared_parse_equals_one_computed_alone(tmp_path, monkeypatch):
    monkeypatch.delenv(memo.ENV, raising=False)
    alone = pipeline.replay_step("numa", ROOT / "runs")
    monkeypatch.setenv(memo.ENV, str(tmp_path / "memo"))
    pipeline.replay_step("numa", ROOT / "runs")                  # computes and stores
    shared = pipeline.replay_step("numa", ROOT / "runs")         # loads
    assert list(tmp_path.joinpath("memo").glob("frame-*.pickle"))
    assert [r.run_id for r in shared.runs] == [r.run_id for r in alone.runs]
    assert shared.all_rows.dtypes.equals(alone.all_rows.dtypes)
    assert shared.all_rows.to_json() == alone.all_rows.to_json()
    assert shared.frame.to_json() == alone.frame.to_json()


# --- charts not drawn again -------------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    x: float
    label: str


def test_canonical_inputs_tell_apart_what_a_chart_could_tell_apart():
    c = chartmemo.canonical
    assert len({c(1), c(1.0), c(True), c("1"), c(None)}) == 5
    assert c([1, 2]) != c((1, 2)) and c({"a": 1, "b": 2}) != c({"b": 2, "a": 1})
    assert c({2, 1}) == c({1, 2}) and c(float("nan")) == c(float("nan"))
    assert c(Point(1.0, "a")) != c(Point(1.0, "b")) and c(Path("a/b")) == c(Path("a/b"))
    with pytest.raises(Exception):
        c(object())


def _rows():
    result = pipeline.replay_step("baseline", ROOT / "runs")
    run = result.runs[0]
    return result.definition.history(result, run), run.run_id


def test_a_chart_drawn_from_the_same_input_is_not_drawn_again(tmp_path, monkeypatch):
    rows, run_id = _rows()
    monkeypatch.delenv(chartmemo.ENV, raising=False)
    plain = tmp_path / "plain" / "static"
    charts.throughput_chart(rows, set(), plain, "t-x", run_id)
    assert not (tmp_path / "plain" / "build").exists()           # no memo asked for: none written

    static = tmp_path / "site" / "static"
    monkeypatch.setenv(chartmemo.ENV, str(tmp_path / "site" / "build" / "cache" / "charts"))
    first = charts.throughput_chart(rows, set(), static, "t-x", run_id)
    svg = static / first.src
    assert svg.read_bytes() == (plain / first.src).read_bytes()   # the same bytes either way
    mtime = svg.stat().st_mtime_ns
    drawn = []
    real = charts.render_svg
    monkeypatch.setattr(charts, "render_svg", lambda fig: (drawn.append(1), real(fig))[1])
    assert charts.throughput_chart(rows, set(), static, "t-x", run_id) == first
    assert drawn == [] and svg.stat().st_mtime_ns == mtime        # not drawn, not written

    changed = [dict(rows[0], requests_per_sec=rows[0]["requests_per_sec"] * 2), *rows[1:]]
    charts.throughput_chart(changed, set(), static, "t-x", run_id)
    assert drawn == [1, 1]                                        # another input: both drawings drawn again
    charts.throughput_chart(changed, set(), static, "t-x", run_id)
    assert drawn == [1, 1]
    svg.write_bytes(svg.read_bytes() + b" ")                      # an SVG edited by hand is not trusted
    charts.throughput_chart(changed, set(), static, "t-x", run_id)
    assert drawn == [1, 1, 1]                                     # only that drawing is drawn again


def test_an_input_that_cannot_be_written_down_means_no_record(tmp_path, monkeypatch):
    monkeypatch.setenv(chartmemo.ENV, str(tmp_path / "memo"))
    assert chartmemo.key(("latency", [{"x": object()}])) is None
    assert chartmemo.key(("latency", [{"x": 1.0}])) is not None
    assert not chartmemo.unchanged(tmp_path, "charts/a.svg", None)


# --- the runs' validation, once for the same runs ----------------------------------------------------

def test_the_runs_check_key_covers_files_directories_selection_and_package(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "runs" / "reference-grace", runs / "reference-grace")
    inputs = cache.BuildInputs.collect(runs)
    key = cache.runs_check_key(runs, None, inputs)
    assert cache.runs_check_key(runs, ["reference-grace"], inputs) != key
    (runs / "stray" / "raw").mkdir(parents=True)                  # a run's directory without run.json
    assert cache.runs_check_key(runs, None, cache.BuildInputs.collect(runs)) != key
    shutil.rmtree(runs / "stray")
    (runs / ".inprogress" / "x").mkdir(parents=True)              # a run being recorded is not a run yet
    assert cache.runs_check_key(runs, None, cache.BuildInputs.collect(runs)) == key
    cache.record_runs_checked(tmp_path / "site", key, 1)
    assert cache.runs_checked(tmp_path / "site", key) == 1 and cache.runs_checked(tmp_path / "site", "other") is None


# --- preloaded kernels ---------------------------------------------------------------------------------

def test_a_forked_kernel_is_alive_until_it_exits():
    import os
    import signal

    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    child = kernels.Forked(pid)
    assert child.poll() is None
    child.send_signal(signal.SIGKILL)
    os.waitpid(pid, 0)                                            # (here this test reaps it, not a preloader)
    assert child.wait(timeout=5) == 0 and child.poll() == 0
    child.kill()                                                  # gone: nothing to signal, no error


def test_a_notebook_in_a_forked_kernel_writes_the_same_bytes(tmp_path, monkeypatch):
    """One step's notebook, executed in an ordinary kernel and in one forked from the preloading
    process: the same Hugo data and charts, and the kernel ran where the notebook is."""
    step = REGISTRY.get("iommu")
    nbdir = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", nbdir)
    monkeypatch.setenv(kernels.ENV, "1")
    out = {}
    for how in ("ordinary", "forked"):
        site = tmp_path / how
        log = site / "build" / "logs" / "kernel-stderr.log"
        preloaded = kernels.Preloaded({}, log, nbdir) if how == "forked" else None
        try:
            build.execute_step(step.name, site, ROOT / "runs", notebooks_dir=nbdir, log_path=log, preloaded=preloaded)
        finally:
            if preloaded is not None:
                preloaded.close()
        files = sorted(p for p in site.rglob("*") if p.is_file() and ("data" in p.parts or "charts" in p.parts))
        out[how] = {p.relative_to(site).as_posix(): p.read_bytes() for p in files}
        executed = json.loads((site / "static" / "notebooks" / step.notebook).read_text())
        assert executed["metadata"]["papermill"]["input_path"] == step.notebook
    assert out["forked"] == out["ordinary"] and any(k.startswith("static/charts/") for k in out["forked"])


def test_a_kernel_command_it_cannot_fork_starts_the_ordinary_way(tmp_path):
    preloaded = kernels.Preloaded({}, tmp_path / "log", tmp_path)
    try:
        assert preloaded.fork(["/bin/true", "-m", "ipykernel_launcher", "-f", "x"], {}, None) is None
        assert preloaded.fork(["python"], {}, None) is None
    finally:
        preloaded.close()
    assert not preloaded.dir.exists()


def test_papermill_quiet_logging_is_restored_once_every_execution_ended():
    import logging

    log = logging.getLogger("papermill")
    level = log.level
    with notebooks.quiet_papermill():
        with notebooks.quiet_papermill():
            assert log.level == logging.CRITICAL
        assert log.level == logging.CRITICAL
    assert log.level == level
