"""The package as users get it: a non-editable install, and a lean ``tunepath parse``.

The install tests build a wheel from a copy of the sources (so the checkout gets no
``build/`` or ``*.egg-info``), install it with ``--no-deps`` into a fresh virtual
environment, and make the pinned dependencies importable there through a ``.pth`` file
naming this interpreter's site-packages. Nothing is downloaded: the wheel is built with
``--no-build-isolation`` (this environment's setuptools) and installed with ``--no-index``.
Then ``tunepath`` runs from a directory outside the checkout, with no PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import conftest
from conftest import ROOT

pytestmark = pytest.mark.fast

PKG = ROOT / "scripts" / "tunepath"
WRK2_REPORT = "latency.txt"            # a real wrk2 --latency report in the shared fixtures
HEAVY_MODULES = ("fabric", "paramiko", "invoke", "pandas", "matplotlib", "papermill")
# tunepath.settings: the table `tunepath run`'s options are built from (it imports only errors and versions)
PARSE_NEEDS = ("tunepath", "tunepath.cli", "tunepath.errors", "tunepath.versions", "tunepath.settings", "tunepath.parse",
               "tunepath.terminal")     # the CLI prints every error through it (control characters escaped)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    python: Path
    tunepath: Path
    outside: Path       # a working directory outside the checkout


def wrk2_report() -> Path:
    path = conftest.FIXTURES / "wrk2" / WRK2_REPORT
    return path


def clean_env() -> dict[str, str]:
    """The environment without anything that would point Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    return env


def run(cmd: list, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=180)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited with {done.returncode}\n"
                    f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def need_tools() -> None:
    """Skip (with the reason) when this interpreter cannot build a wheel or make a venv."""
    for module, why in (("venv", "create a virtual environment"), ("pip", "build and install a wheel"),
                        ("setuptools", "build the wheel without downloading a build backend")):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{sys.executable} has no {module!r} module, needed to {why}")
    import pip

    if tuple(int(x) for x in pip.__version__.split(".")[:2]) < (22, 3):
        pytest.skip(f"pip {pip.__version__} is too old for `pip --python` (22.3 or later needed)")


def copy_sources(dest: Path) -> Path:
    """What a build needs: pyproject.toml, the readme it names, and scripts/tunepath."""
    dest.mkdir()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for name in ("pyproject.toml", project.get("readme")):
        if name:
            shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(PKG, dest / "scripts" / "tunepath", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def dependency_paths() -> list[str]:
    """This interpreter's site-packages, where the pinned dependencies are installed."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(paths[k] for k in ("purelib", "platlib")))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    need_tools()
    tmp = tmp_path_factory.mktemp("packaging")
    src = copy_sources(tmp / "src")
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", tmp / "dist", src], cwd=tmp)
    wheel = next((tmp / "dist").glob("tunepath-*.whl"))
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    run([*pip, "--python", python, "install", "--no-deps", "--no-index", "-q", wheel], cwd=tmp)
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
    Path(purelib.stdout.strip(), "_tunepath_test_deps.pth").write_text("\n".join(dependency_paths()) + "\n")
    (tmp / "elsewhere").mkdir()
    return Installed(wheel=wheel, venv=venv, python=python, tunepath=venv / "bin" / "tunepath",
                     outside=tmp / "elsewhere")


# --- the wheel and the installed copy ---------------------------------------------------

def test_wheel_ships_every_package_and_data_file(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    wanted = {str(f.relative_to(PKG.parent)) for f in PKG.rglob("*")
              if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"}
    assert "tunepath/steps/templates/jmeter-plan.jmx" in wanted
    for sub in ("parse", "analysis", "publish", "evidence", "live", "steps"):
        assert f"tunepath/{sub}/__init__.py" in wanted
    missing = sorted(wanted - names)
    assert not missing, f"files of scripts/tunepath missing from {installed.wheel.name}: {missing}"


def test_installed_tunepath_parses_a_report_from_any_directory(installed):
    from tunepath.parse.reports import parse_report_file

    report = wrk2_report()
    done = run([installed.tunepath, "parse", report], cwd=installed.outside)
    got = json.loads(done.stdout)
    assert got["tool"] == "wrk2" and got["requests_per_sec"] > 0 and got["percentiles_ms"]["99"] > 0
    assert got == json.loads(json.dumps(parse_report_file(report).to_dict(), allow_nan=False))


def test_installed_tunepath_fails_in_one_line(installed):
    done = run([installed.tunepath, "parse", "no-such-report.txt"], cwd=installed.outside, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == "tunepath: no-such-report.txt: no such file\n"


def test_installed_package_is_the_venv_copy_with_its_templates(installed):
    code = ("import json, tunepath, tunepath.steps\n"
            "from importlib.resources import files\n"
            "plan = files('tunepath.steps') / 'templates' / 'jmeter-plan.jmx'\n"
            "print(json.dumps({'init': tunepath.__file__, 'plan': str(plan), 'is_file': plan.is_file()}))\n")
    got = json.loads(run([installed.python, "-c", code], cwd=installed.outside).stdout)
    venv = installed.venv.resolve()
    assert Path(got["init"]).resolve().is_relative_to(venv), f"imported {got['init']}, not the copy in {venv}"
    assert got["is_file"] and Path(got["plan"]).resolve().is_relative_to(venv), got


# --- `tunepath parse` loads only the parsers --------------------------------------------

LOADED = """\
import contextlib, io, json, sys
from tunepath import cli
with contextlib.redirect_stdout(io.StringIO()) as out:
    status = cli.main(["parse", sys.argv[1]])
print(json.dumps({"status": status, "json": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def test_parse_imports_only_what_parsing_needs(tmp_path):
    report = wrk2_report()
    done = subprocess.run([sys.executable, "-c", LOADED, str(report)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**clean_env(), "PYTHONPATH": str(ROOT / "scripts")})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["status"] == 0 and json.loads(got["json"])["tool"] == "wrk2"
    heavy = sorted(m for m in got["modules"] if m.split(".")[0] in HEAVY_MODULES)
    assert not heavy, f"`tunepath parse` imported {heavy}"
    ours = [m for m in got["modules"] if m.split(".")[0] == "tunepath"]
    extra = sorted(m for m in ours if m not in PARSE_NEEDS and not m.startswith("tunepath.parse."))
    assert not extra, f"`tunepath parse` imported tunepath modules it does not need: {extra}"
