"""The scheduled measurement on GitHub's Arm runners (issue 33, item 4): the workflow's shape, the
pin of a newer Tomcat release in versions.py, and the label of a run on a GitHub-hosted runner.
actionlint checks the workflow with the others (tests/test_workflow.py); .ci/measure-arm itself is
a live run (README, "Scheduled runs on GitHub's Arm runners")."""

from __future__ import annotations

import pytest
import yaml

from conftest import ROOT
from harness.measure.tomcat_release import pin, version_key
from tunepath.errors import TunepathError
from tunepath.live.inventory import local_inventory, runner_label
from tunepath.versions import TOMCAT_SHA512, TOMCAT_VERSION

pytestmark = pytest.mark.fast

WORKFLOW = ROOT / ".github" / "workflows" / "measure-arm.yml"
VERSIONS = ROOT / "scripts" / "tunepath" / "versions.py"


def test_the_workflow_measures_weekly_or_on_demand_on_an_arm_runner_and_says_it_never_ran_on_github():
    text = WORKFLOW.read_text()
    flow = yaml.safe_load(text)
    on = flow[True]                                   # YAML 1.1 reads the key `on` as True
    assert on["schedule"] and set(on["workflow_dispatch"]["inputs"]) == {"steps", "profile"}
    jobs = flow["jobs"]
    measure = jobs["measure"]
    assert measure["runs-on"] == "ubuntu-24.04-arm" and "vars.TUNEPATH_MEASURE_ARM" in measure["if"]
    run = next(s for s in measure["steps"] if s.get("id") == "run")
    assert run["run"].startswith(".ci/measure-arm --steps \"$STEPS\" --profile \"$PROFILE\"")
    assert any(s.get("run") == ".ci/tomcat-release" for s in jobs["tomcat-release"]["steps"])
    assert "NOT YET RUN ON GITHUB" in text
    assert flow["permissions"] == {"contents": "read"}
    for name, job in jobs.items():
        scripts = [s["run"] for s in job["steps"] if "run" in s]
        assert not any("${{" in s for s in scripts), name      # values reach the shell through env, never spliced in
        if any(".ci/" in s for s in scripts):          # runs pip, Maven, a wrk2 build: no write token, none kept
            assert "permissions" not in job, name
            assert job["steps"][0]["with"]["persist-credentials"] is False, name
        elif "permissions" in job:                     # the jobs that open the pull requests run none of it
            assert job["needs"] in ("measure", "tomcat-release"), name


def test_a_newer_tomcat_is_pinned_with_its_checksum_and_the_old_pins_stay():
    text = VERSIONS.read_text()
    sha = "ab" * 64
    new = pin(text, "11.0.99", sha)
    scope: dict = {}
    exec(compile(new, "versions.py", "exec"), scope)   # still a module: no imports, only values
    assert scope["TOMCAT_VERSION"] == "11.0.99" and scope["TOMCAT_SHA512"]["11.0.99"] == sha
    assert all(scope["TOMCAT_SHA512"][v] == s for v, s in TOMCAT_SHA512.items())
    assert pin(new, "11.0.99", "cd" * 64).count('"11.0.99":') == 1          # pinned again: replaced, not doubled
    assert version_key("11.0.10") > version_key("11.0.9")
    with pytest.raises(TunepathError, match="not a SHA-512"):
        pin(text, "11.0.99", "abc")
    with pytest.raises(TunepathError, match="not of the form 11.0.N"):
        pin(text, "11.0.x", sha)
    assert TOMCAT_VERSION in TOMCAT_SHA512


def test_a_run_on_a_github_hosted_runner_is_labeled_as_one(monkeypatch):
    env = {"GITHUB_ACTIONS": "true", "RUNNER_ENVIRONMENT": "github-hosted", "RUNNER_ARCH": "ARM64",
           "ImageOS": "ubuntu24"}
    assert runner_label(env).startswith("GitHub-hosted runner (Arm64, ubuntu24)")
    assert runner_label({**env, "RUNNER_ENVIRONMENT": "self-hosted"}) is None     # someone's own machine
    assert runner_label({}) is None
    for key in ("GITHUB_ACTIONS", "RUNNER_ENVIRONMENT"):
        monkeypatch.delenv(key, raising=False)
    assert local_inventory().label is None
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "github-hosted")
    assert "GitHub-hosted runner" in local_inventory().label


FAKE_MVN = """#!/bin/sh
# a stand-in for Maven: resolves the range to $NEWEST and "downloads" a tarball of known bytes
[ -n "$FAIL" ] && { echo "[ERROR] Could not resolve dependencies"; exit 1; }
for arg in "$@"; do
  case "$arg" in
    -DoutputFile=*) printf '\\nThe following files have been resolved:\\n   org.apache.tomcat:tomcat:tar.gz:%s:compile\\n' "$NEWEST" > "${arg#-DoutputFile=}" ;;
    -DoutputDirectory=*) printf 'tomcat %s' "$NEWEST" > "${arg#-DoutputDirectory=}/tomcat-$NEWEST.tar.gz" ;;
  esac
done
"""


@pytest.mark.parametrize("newest, changed", [("11.0.99", True), (TOMCAT_VERSION, False), ("11.0.1", False)])
def test_the_release_job_pins_only_a_newer_release_and_says_so_to_the_workflow(tmp_path, monkeypatch, capsys,
                                                                             newest, changed):
    import hashlib

    from harness.measure.tomcat_release import main

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mvn").write_text(FAKE_MVN)
    (tmp_path / "bin" / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("NEWEST", newest)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    versions = tmp_path / "versions.py"
    versions.write_text(VERSIONS.read_text())
    assert main([str(versions)]) == 0
    out = (tmp_path / "out").read_text()
    if changed:
        sha = hashlib.sha512(f"tomcat {newest}".encode()).hexdigest()
        assert f'TOMCAT_VERSION = "{newest}"' in versions.read_text() and sha in versions.read_text()
        assert out == f"changed=true\nversion={newest}\nprevious={TOMCAT_VERSION}\n"
    else:
        assert versions.read_text() == VERSIONS.read_text()
        assert out.startswith("changed=false\n") and "nothing to change" in capsys.readouterr().out


def test_a_failed_maven_is_one_line_and_changes_nothing(tmp_path, monkeypatch, capsys):
    from harness.measure.tomcat_release import main

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "mvn").write_text(FAKE_MVN)
    (tmp_path / "bin" / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("FAIL", "1")
    versions = tmp_path / "versions.py"
    versions.write_text(VERSIONS.read_text())
    assert main([str(versions)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Could not resolve dependencies" in err and "exited with status 1" in err
    assert versions.read_text() == VERSIONS.read_text()
