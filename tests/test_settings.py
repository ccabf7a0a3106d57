"""The live settings are listed once (tunepath/settings.py): `tunepath run`'s options, the
``LiveOptions`` defaults and every step notebook's parameters cell all come from that list, so a
notebook's parameter has the option's meaning and a papermill ``-p NAME`` reaches the run."""

from __future__ import annotations

import ast
import re
import contextlib
import io
import json
from dataclasses import fields

import pytest

from conftest import ROOT
from tunepath import cli, pipeline
from tunepath.errors import TunepathError
from tunepath.live.session import LiveOptions
from tunepath.publish import notebooks
from tunepath.settings import LIVE, NOTEBOOK, WHERE, literal
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.make_parser().parse_args([*argv, "--help"])
    text = re.sub(r"-\n\s+", "-", out.getvalue())      # argparse wraps lines, also after a hyphen
    return " ".join(text.split())                     # compare words


def _parameters(step) -> list[tuple[str, object, str]]:
    """(name, default, meaning) of each assignment in the step notebook's parameters cell, as committed,
    the meaning being the comment lines just above it."""
    nb = json.loads((ROOT / "notebooks" / step.notebook).read_text(encoding="utf-8"))
    [cell] = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    rows, comment = [], []
    for line in "".join(cell["source"]).splitlines():
        if line.startswith("# ") and not line[2:].isupper() and not line.startswith("# PARAMETERS"):
            comment.append(line[2:])
        elif "=" in line and not line.startswith("#"):
            target = ast.parse(line).body[0]
            rows.append((target.targets[0].id, ast.literal_eval(target.value), " ".join(comment)))
            comment = []
        else:
            comment = []
    return rows


def test_live_options_take_every_field_and_default_from_the_settings():
    assert [f.name for f in fields(LiveOptions)] == [s.name for s in LIVE]
    assert {f.name: f.default for f in fields(LiveOptions)} == {s.name: s.default for s in LIVE}


@pytest.mark.parametrize("command, settings", [("run", LIVE), ("restore", WHERE)])
def test_the_options_are_the_settings_with_their_meanings(command, settings):
    text = _help(command)
    for s in settings:
        assert s.flag in text and s.help.replace("None: ", "default: ") in text, s.name
    if command == "run":
        assert "sets pin = False" in text and "(notebook parameter: hosts_file)" in text


@pytest.mark.parametrize("argv, expected", [
    ([], {}),
    (["--no-pin", "--first-client-only"], {"pin": False, "all_clients": False}),
    (["--ci-target", "2.5", "--step-budget", "60", "--repetitions", "2", "--http-port", "18080"],
     {"ci_target_pct": 2.5, "step_budget_s": 60.0, "repetitions": 2, "http_port": 18080}),
    (["--apply", "--allow-reboot", "--profile", "smoke"], {"apply": True, "allow_reboot": True, "profile": "smoke"}),
])
def test_an_option_sets_its_setting_and_the_rest_keep_their_defaults(argv, expected):
    args = cli.make_parser().parse_args(["run", *argv])
    options = cli._live_options(args)
    for s in LIVE:
        assert getattr(options, s.name) == expected.get(s.name, getattr(LiveOptions(), s.name)), s.name
    assert options.tomcat_home == f"~/apache-tomcat-{options.tomcat_version}"     # None follows the version


def test_a_file_option_is_made_absolute_and_a_missing_one_named(tmp_path, monkeypatch):
    (tmp_path / "hosts.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    args = cli.make_parser().parse_args(["run", "--hosts", "hosts.toml"])
    assert cli._live_options(args).hosts_file == str(tmp_path / "hosts.toml")
    args = cli.make_parser().parse_args(["run", "--tomcat-tarball", "nowhere.tar.gz"])
    with pytest.raises(TunepathError, match=r"^--tomcat-tarball \(tomcat_tarball\) nowhere.tar.gz: no such file"):
        cli._live_options(args)


@pytest.mark.parametrize("step", list(REGISTRY), ids=lambda s: s.name)
def test_each_notebook_lists_the_settings_with_their_defaults_and_meanings(step):
    listed = _parameters(step)
    expected = [(s.name, s.default, s.help) for s in NOTEBOOK]
    if step.live:
        expected += [(s.name, s.default, s.help) for s in LIVE]
    expected += [(name, ast.literal_eval(value), comment) for name, value, comment in step.notebook_parameters]
    assert listed == expected


def test_papermill_sees_the_same_parameters():
    import papermill

    found = papermill.inspect_notebook(str(ROOT / "notebooks" / REGISTRY.get("baseline").notebook))
    assert list(found) == [s.name for s in (*NOTEBOOK, *LIVE)]
    assert {name: p["default"] for name, p in found.items()} == {s.name: literal(s.default) for s in (*NOTEBOOK, *LIVE)}


def test_the_notebook_call_passes_its_parameters_by_name_and_nothing_else():
    namespace = {"mode": "live", "run_ids": [], "runs_dir": None, "site_dir": None, "profile": "smoke",
                 "http_port": 18080, "slo_ms": 5.0, "pipeline": pipeline, "result": None, "In": [], "_": None}
    got = pipeline.parameters(namespace)
    assert got == {"mode": "live", "run_ids": [], "runs_dir": None, "profile": "smoke", "http_port": 18080,
                   "slo_ms": 5.0}


def test_live_mode_refuses_an_unknown_setting_and_a_step_that_runs_nothing(tmp_path):
    with pytest.raises(TunepathError, match=r"unknown live setting\(s\) tomcat_hme"):
        pipeline.step("baseline", "live", tmp_path, tomcat_hme="/x")
    summary = next(s for s in REGISTRY if not s.live)
    with pytest.raises(TunepathError, match=f"step '{summary.name}' runs nothing on any host.*replay"):
        pipeline.step(summary.name, "live", tmp_path)
    assert list(tmp_path.iterdir()) == []                  # nothing recorded


def test_papermill_parameters_name_settings_only(tmp_path):
    params = notebooks.parameters("live", tmp_path / "runs", tmp_path, ["live-x"], cwd=tmp_path, profile="smoke")
    assert params == {"mode": "live", "run_ids": ["live-x"], "runs_dir": "runs", "site_dir": ".", "profile": "smoke"}
    with pytest.raises(TypeError, match="not live settings: live_options"):
        notebooks.parameters("live", tmp_path, tmp_path, live_options={})
