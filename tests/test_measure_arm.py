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
    measure = flow["jobs"]["measure"]
    assert measure["runs-on"] == "ubuntu-24.04-arm" and "vars.TUNEPATH_MEASURE_ARM" in measure["if"]
    run = next(s for s in measure["steps"] if s.get("id") == "run")
    assert run["run"].startswith(".ci/measure-arm --steps \"$STEPS\" --profile \"$PROFILE\"")
    assert "${{" not in run["run"]                     # inputs reach the shell through env, never spliced in
    assert "NOT YET RUN ON GITHUB" in text
    assert flow["permissions"] == {"contents": "read"}
    release = flow["jobs"]["tomcat-release"]
    assert any(s.get("run") == ".ci/tomcat-release" for s in release["steps"])


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
