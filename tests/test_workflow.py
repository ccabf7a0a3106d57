"""The docs workflow (.github/workflows/docs.yml) passes actionlint, and its build job is the docs
tier as the runner's own user: scripts/test --docs under CI=true, then scripts/build, then the
Pages upload, with no step run through sudo."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from conftest import ROOT, unavailable

pytestmark = pytest.mark.docs

WORKFLOW = ROOT / ".github" / "workflows" / "docs.yml"
ACTIONLINT = ROOT / ".cache" / "bin" / "actionlint"


def test_the_workflows_pass_actionlint():
    binary = ACTIONLINT if ACTIONLINT.exists() else shutil.which("actionlint")
    if not binary:
        unavailable(f"actionlint is not at {ACTIONLINT}: scripts/bootstrap --docs builds it with Go 1.21+ (go install)")
    r = subprocess.run([str(binary), "-no-color", *map(str, sorted(WORKFLOW.parent.glob("*.y*ml")))],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_build_job_tests_the_docs_tier_then_builds_then_uploads():
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["build"]
    assert job["runs-on"].startswith("ubuntu-")
    runs = [(n, step) for n, step in enumerate(job["steps"]) if "run" in step]
    commands = [step["run"].strip() for _, step in runs]
    assert commands == ["scripts/test --docs", "scripts/build"], commands
    assert not any("sudo" in c for c in commands), "the docs tier runs as the runner's own user"
    test_step = runs[0][1]
    assert test_step["env"]["CI"] == "true"
    upload = [n for n, step in enumerate(job["steps"]) if str(step.get("uses", "")).startswith("actions/upload-pages")]
    assert upload and upload[0] > runs[1][0], "the Pages artifact is uploaded after the build"
