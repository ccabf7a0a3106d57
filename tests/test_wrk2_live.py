"""A live rate sweep with wrk2 built from the vendored source (smoke profile, this machine).

`tunepath run --steps rate-sweep --wrk2-source <tarball>`: the run builds wrk2 on the client
(this machine, with a home of its own), probes the capacity, climbs, and records wrk2 reports;
the pages render the commands the run executed. Real Tomcat 11, real wrk2, no SSH.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from conftest import ROOT, VENDOR as VENDORED, unavailable
from sshd import free_port
from tunepath.versions import TOMCAT_VERSION
from tunepath.evidence.store import RunStore
from tunepath.live.runner import run_path
from tunepath.live.session import LiveOptions
from tunepath.parse.reports import parse_report_file
from tunepath.steps import plan
from tunepath.versions import WRK2_COMMIT

pytestmark = pytest.mark.system
VENDOR = VENDORED / "wrk2-44a94c1.tar.gz"
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    missing = [n for n, ok in (("java", shutil.which("java")), ("luajit", shutil.which("luajit")),
                               ("Tomcat tarball", TARBALL.exists()), ("wrk2 tarball", VENDOR.exists())) if not ok]
    if missing:
        unavailable(f"the live wrk2 sweep needs {', '.join(missing)} (scripts/bootstrap --live)")
    tmp = tmp_path_factory.mktemp("wrk2-sweep")
    home = tmp / "home"
    home.mkdir()
    old = os.environ["HOME"]
    os.environ["HOME"] = str(home)          # the client's ~/.tunepath/bin is this test's own
    try:
        options = LiveOptions(profile="smoke", tomcat_home=str(tmp / "tc"), tomcat_tarball=str(TARBALL),
                              http_port=free_port(), wrk2_source=str(VENDOR))
        path = run_path(options, steps=["rate-sweep"], runs_dir=tmp / "runs", build=False)
    finally:
        os.environ["HOME"] = old
    return RunStore(tmp / "runs").load(path.name)


def test_the_run_built_wrk2_and_every_raw_output_is_a_wrk2_report(sweep_run):
    run = sweep_run
    assert run.record["status"] == "complete"
    fact = run.record["hosts"]["client"]["facts"]["load_generator"]
    assert fact["name"] == "wrk2" and fact["commit"] == WRK2_COMMIT and fact["built_in_s"] > 0
    assert run.context.load_generator == "~/.tunepath/bin/wrk2" and run.context.uncorrected
    assert len(run.measurements) >= 2
    for m in run.measurements:
        report = parse_report_file(m.stdout)
        assert report.tool == "wrk2" and m.tool == "wrk2", m.stdout
        assert report.uncorrected_percentiles_ms, "recorded with -U"
        assert f"-R{m.variant.split('-')[-1]} -U --latency" in m.command


def test_the_sweep_climbed_from_its_capacity_probe_and_said_why_it_stopped(sweep_run):
    run = sweep_run
    ctx = run.context
    assert ctx.rate_probed > 0 and ctx.sweep_rates
    rates = list(ctx.sweep_rates)
    assert rates == sorted(rates) and rates[0] == pytest.approx(ctx.rate_probed / 2, rel=0.05)
    assert [m.variant for m in run.measurements if m.repetition == 1] == [f"rate-{r}" for r in rates]
    probe = [v for v in run.record["verification"] if v["name"] == "capacity-probe"]
    # closed loop: Debian's wrk, on the load generator's own CPUs where it shares the server's kernel
    assert probe and re.search(r"\n(taskset -c [0-9,-]+ )?wrk -t1 -c8 -d3 ", probe[0]["command"])
    notes = " ".join(n["text"] for n in run.record["notes"])
    assert "capacity probe" in notes and "stopped:" in notes and "was built on" in notes
    assert run.record["repetitions"]["rate-sweep"]["reason"]


def test_the_page_renders_the_commands_the_sweep_ran(sweep_run):
    run = sweep_run
    planned = {b.id: b.text for b in plan("rate-sweep", run.context)}
    ran = [b for b in run.record["blocks"] if b["step"] == "rate-sweep"] + \
        [{"block": v["name"], "text": v["command"]} for v in run.record["verification"]]
    assert {"capacity-probe", "restart-tomcat"} <= {b["block"] for b in ran}
    for b in ran:
        if b["block"] in planned:
            assert b["text"] == planned[b["block"]], b["block"]
    for m in run.measurements:
        assert m.command == planned[f"load-{m.variant}"]
