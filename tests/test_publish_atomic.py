"""Atomic publish: a build that fails leaves every published file byte for byte as it was;
one that succeeds replaces them, and no path of this machine ends up in what it publishes.

A small site (two steps) is built once for the module into a temporary directory, from
copies of runs/ and notebooks/ (the work tree is never touched). Each failing build is a
real one: a broken run.json through the CLI, a notebook that raises, Hugo that fails
(the two steps alone do not make a whole site). Only the successful build fakes Hugo, for
the same reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from tunepath.errors import TunepathError
from tunepath.publish import build, swap
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

STEPS = ["baseline", "numa"]
WATCHED = ("public", "data", "static", "build/cache", "content", "layouts", "config.toml")


class Site:
    def __init__(self, base: Path):
        self.base = base
        self.site_dir = base / "site"
        self.runs = base / "runs"
        self.notebooks = base / "notebooks"
        shutil.copytree(ROOT / "runs", self.runs, ignore=shutil.ignore_patterns(".inprogress"))
        shutil.copytree(ROOT / "notebooks", self.notebooks, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))

    def build(self, **kw):
        kw.setdefault("with_hugo", False)
        return build.build_site(site_dir=self.site_dir, runs_dir=self.runs, steps=STEPS,
                                notebooks_dir=self.notebooks, **kw)

    def snapshot(self) -> dict[str, tuple[str, int]]:
        """Every published file: its SHA-256 and modification time."""
        out = {}
        for name in WATCHED:
            top = self.site_dir / name
            for path in ([top] if top.is_file() else sorted(top.rglob("*")) if top.exists() else []):
                if path.is_file():
                    out[path.relative_to(self.site_dir).as_posix()] = (
                        hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
        return out

    def leftovers(self) -> list[str]:
        return sorted(str(p.relative_to(self.base)) for p in self.base.rglob("*")
                      if p.name.endswith((build.OLD, ".tunepath-staging")))


def fake_hugo(site_dir: Path, destination: Path, log=None) -> None:
    """What Hugo would do with a whole site: write pages from the staged data."""
    destination.mkdir(parents=True)
    steps = sorted(p.stem for p in (Path(site_dir) / "data" / "steps").glob("*.json"))
    (destination / "index.html").write_text(f"<p>steps: {', '.join(steps)}</p>\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    s = Site(tmp_path_factory.mktemp("atomic"))
    s.build()
    (s.site_dir / "public").mkdir()          # what an earlier build's Hugo published: its mark too
    (s.site_dir / "public" / "index.html").write_text("<p>the published site</p>\n")
    (s.site_dir / "public" / build.SITE_MARK).write_text("written by tunepath build\n")
    return s


def _cli_build(site: Site, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "scripts"), TUNEPATH_PROJECT=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tunepath.cli", "build", "--site-dir", str(site.site_dir),
                           "--runs-dir", str(site.runs), "--steps", ",".join(STEPS), *args],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("breakage, field", [
    (lambda r: r["measurements"].__setitem__(0, dict(r["measurements"][0], repetition="2")),
     "measurements[0].repetition"),
    (lambda r: r["verification"].__setitem__(0, dict(r["verification"][0], output="../../../../etc/os-release")),
     "verification[0].output"),
    (lambda r: r.__setitem__("context", []), "context"),
], ids=["repetition-a-string", "verification-output-outside", "context-a-list"])
def test_a_broken_run_fails_in_one_line_and_publishes_nothing(site, breakage, field):
    meta = site.runs / "reference-grace" / "run.json"
    original = meta.read_bytes()
    record = json.loads(original)
    breakage(record)
    before = site.snapshot()
    meta.write_text(json.dumps(record))
    try:
        proc = _cli_build(site, "--no-cache")
    finally:
        meta.write_bytes(original)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "reference-grace/run.json" in lines[0] and f" {field}: " in lines[0], lines[0]
    assert "executing" not in proc.stdout           # failed before any notebook ran
    assert site.snapshot() == before


def test_a_run_directory_without_its_run_json_stops_the_build(site):
    meta = site.runs / "reference-grace" / "run.json"
    moved = meta.with_name("run.json.away")
    before = site.snapshot()
    meta.rename(moved)
    try:
        proc = _cli_build(site)
    finally:
        moved.rename(meta)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "reference-grace" in proc.stderr and "without its run.json" in proc.stderr
    assert site.snapshot() == before


def test_a_failing_notebook_publishes_nothing(site):
    path = site.notebooks / REGISTRY.get("numa").notebook
    original = path.read_bytes()
    nb = json.loads(original)
    nb["cells"].insert(3, {"cell_type": "code", "id": "atomic-boom", "metadata": {}, "execution_count": None,
                           "outputs": [], "source": ["raise RuntimeError('boom')"]})
    before = site.snapshot()
    path.write_text(json.dumps(nb))
    try:
        with pytest.raises(TunepathError, match=r"step 'numa'.*RuntimeError: boom") as info:
            site.build(use_cache=False)           # baseline executes into staging first
    finally:
        path.write_bytes(original)
    assert site.snapshot() == before
    kept = str(info.value).rsplit("kept at ", 1)[1].rstrip(")")
    assert Path(kept).is_file() and build.STAGING in kept      # the failed notebook, for inspection


def test_hugo_failing_publishes_nothing(site):
    before = site.snapshot()
    with pytest.raises(TunepathError, match="hugo failed") as info:
        site.build(use_cache=False, with_hugo=True)   # two steps are not a whole site: Hugo refuses
    assert "\n" not in str(info.value)
    assert site.snapshot() == before
    assert site.leftovers() == []


def test_a_successful_build_replaces_what_is_published(site, monkeypatch):
    before = site.snapshot()
    monkeypatch.setattr(build, "run_hugo", fake_hugo)
    site.build(use_cache=False, with_hugo=True)
    after = site.snapshot()
    assert after["public/index.html"] != before["public/index.html"]
    assert (site.site_dir / "public" / "index.html").read_text() == "<p>steps: baseline, numa</p>\n"
    for step in STEPS:
        nb = f"static/notebooks/{REGISTRY.get(step).notebook}"
        assert after[nb] != before[nb]                      # executed again, published
        assert f"build/cache/{step}.json" in after
    assert set(before) <= set(after)
    assert site.leftovers() == [] and not (site.site_dir / build.STAGING).exists()
    last = json.loads((site.site_dir / "build" / "last-build.json").read_text())
    assert last["executed"] == STEPS


def test_a_warm_build_executes_nothing_and_changes_nothing_but_the_site(site, monkeypatch, capsys):
    monkeypatch.setattr(build, "run_hugo", fake_hugo)
    before = site.snapshot()
    capsys.readouterr()
    site.build(with_hugo=True)
    assert "notebooks: 0 executed, 2 unchanged" in capsys.readouterr().out
    after = site.snapshot()
    assert {k: v for k, v in after.items() if not k.startswith("public/")} == \
        {k: v for k, v in before.items() if not k.startswith("public/")}


def test_hugo_runs_again_only_when_its_input_or_output_changed(site, monkeypatch, capsys):
    ran = []

    def counting_hugo(site_dir, destination, log=None):
        ran.append(destination)
        fake_hugo(site_dir, destination, log)

    monkeypatch.setattr(build, "run_hugo", counting_hugo)
    site.build(with_hugo=True)                      # whatever the last test left: now a known site
    ran.clear()
    capsys.readouterr()
    site.build(with_hugo=True)
    assert ran == [] and "unchanged (same site sources, data and Hugo) — not run" in capsys.readouterr().out
    page = site.site_dir / "public" / "index.html"
    page.unlink()                                   # the published site changed by hand: made again
    site.build(with_hugo=True)
    assert len(ran) == 1 and page.is_file()
    site.build(with_hugo=True, use_cache=False)     # no cache: Hugo runs
    assert len(ran) == 2
    chart = next((site.site_dir / "static" / "charts").glob("*.svg"))
    chart.write_bytes(chart.read_bytes() + b" ")    # an output changed: its step runs again, then Hugo
    site.build(with_hugo=True)
    assert len(ran) == 3
    last = json.loads((site.site_dir / "build" / "last-build.json").read_text())
    assert last["hugo_s"] is not None


def test_published_notebooks_carry_no_path_of_this_machine(site):
    paths = [str(p) for p in (site.base, site.base.resolve(), ROOT, ROOT.resolve())]
    published = sorted((site.site_dir / "static" / "notebooks").iterdir())
    assert published
    for path in published:
        text = path.read_text(encoding="utf-8")
        assert not [p for p in paths if p in text], path.name
    params = json.loads(published[0].with_suffix(".ipynb").read_text())["metadata"]["papermill"]
    assert params["parameters"]["runs_dir"] == "../runs"
    assert not Path(params["input_path"]).is_absolute() and not Path(params["output_path"]).is_absolute()


def test_publish_undoes_every_rename_when_one_fails(tmp_path, monkeypatch):
    published = {name: tmp_path / "site" / name for name in ("a", "b", "c")}
    staged = {name: tmp_path / "stage" / name for name in published}
    for name in published:
        published[name].mkdir(parents=True)
        (published[name] / "f").write_text(f"old {name}")
        staged[name].mkdir(parents=True)
        (staged[name] / "f").write_text(f"new {name}")
    real, calls = os.rename, []

    def rename(src, dst):
        calls.append(dst)
        if len(calls) == 5:               # a aside, a in, b aside, b in, c aside: fails
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(swap.os, "rename", rename)
    with pytest.raises(OSError):
        build.publish([(staged[n], published[n]) for n in published])
    monkeypatch.setattr(swap.os, "rename", real)
    assert {n: (p / "f").read_text() for n, p in published.items()} == {n: f"old {n}" for n in published}
    assert {n: (p / "f").read_text() for n, p in staged.items()} == {n: f"new {n}" for n in staged}
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == ["a", "b", "c"]


def test_a_build_killed_while_publishing_is_recovered(tmp_path):
    site_dir = tmp_path / "site"
    (site_dir / "data" / f"steps{build.OLD}").mkdir(parents=True)     # aside, its replacement never came
    (site_dir / "data" / f"steps{build.OLD}" / "x.json").write_text("{}")
    (site_dir / "static" / "charts").mkdir(parents=True)               # replaced; the old one still aside
    (site_dir / "static" / f"charts{build.OLD}").mkdir()
    for rel in build.OUTPUTS:
        build.recover(site_dir / rel)
    assert (site_dir / "data" / "steps" / "x.json").is_file()
    assert not (site_dir / "static" / f"charts{build.OLD}").exists()


@pytest.mark.parametrize("where", ["foreign", "runs", "run"])
def test_a_destination_that_holds_other_files_is_refused_and_left_alone(site, where):
    dest = {"foreign": site.base / "precious", "runs": site.runs / "site", "run": site.runs / "reference-grace"}[where]
    if where == "foreign":
        dest.mkdir(exist_ok=True)
        (dest / "thesis.txt").write_text("years of work\n")
    before = sorted((p.relative_to(site.base).as_posix(), p.read_bytes()) for p in site.base.rglob("*") if p.is_file())
    with pytest.raises(TunepathError, match="--destination") as info:
        site.build(with_hugo=True, destination=dest)
    assert "\n" not in str(info.value)
    assert sorted((p.relative_to(site.base).as_posix(), p.read_bytes())
                  for p in site.base.rglob("*") if p.is_file()) == before


def test_a_destination_an_earlier_build_wrote_is_replaced(site, monkeypatch):
    monkeypatch.setattr(build, "run_hugo", fake_hugo)
    dest = site.base / "elsewhere"
    site.build(with_hugo=True, destination=dest)
    assert (dest / build.SITE_MARK).is_file()
    (dest / "stale.html").write_text("old page\n")
    site.build(with_hugo=True, destination=dest)          # ours: replaced as a whole
    assert not (dest / "stale.html").exists() and (dest / "index.html").is_file()


@pytest.mark.parametrize("inside", ["runs", "content"])
def test_a_site_dir_inside_what_the_build_reads_is_refused(site, inside):
    place = site.runs / "reference-grace" if inside == "runs" else ROOT / "content" / "x"
    with pytest.raises(TunepathError, match="--site-dir .* lies inside"):
        build.build_site(site_dir=place, runs_dir=site.runs, steps=STEPS, notebooks_dir=site.notebooks,
                         with_hugo=False)
    assert not (place / "build").exists() and not (place / "data").exists()


FOREIGN = ["content/mine.md", "static/charts/mine.svg", "layouts/mine.html", "data/mine.json", "public/mine.html"]


def _tree(root: Path) -> list[tuple[str, bytes]]:
    return sorted((p.relative_to(root).as_posix(), p.read_bytes()) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("rel", FOREIGN)
def test_a_site_dir_holding_files_no_build_wrote_is_refused_and_left_alone(site, tmp_path, rel):
    """Issue 30, item 6 (the census): a build into a site directory of someone's deleted its
    content/, static/charts/ and layouts/ files, and Hugo's output replaced its public/ whole."""
    other = tmp_path / "site"
    (other / rel).parent.mkdir(parents=True)
    (other / rel).write_text("mine: not written by tunepath\n")
    before = _tree(other)
    with pytest.raises(TunepathError, match="--site-dir .* holds files no tunepath build wrote") as info:
        build.build_site(site_dir=other, runs_dir=site.runs, steps=STEPS, notebooks_dir=site.notebooks,
                         with_hugo=rel.startswith("public/"))
    assert "\n" not in str(info.value) and f"({rel})" in str(info.value) and "move them out" in str(info.value)
    assert _tree(other) == before and sorted(p.name for p in other.iterdir()) == [rel.split("/")[0]]


def test_a_site_dir_a_build_made_is_its_own_and_a_file_added_since_is_refused(site):
    assert (site.site_dir / build.SITE_MARK).is_file()
    site.build()                                          # a site directory an earlier build made
    mine = site.site_dir / "content" / "mine.md"
    mine.write_text("mine\n")
    try:
        with pytest.raises(TunepathError, match=r"holds files no tunepath build wrote \(content/mine.md\)"):
            site.build()
        assert mine.read_text() == "mine\n"
    finally:
        mine.unlink()
    (site.site_dir / build.SITE_MARK).unlink()           # made before site directories were marked
    site.build()
    assert (site.site_dir / build.SITE_MARK).is_file()
    listed = json.loads((site.site_dir / build.SITE_MARK).read_text())["files"]
    assert "content/_index.md" in listed and "config.toml" in listed and "public/index.html" not in listed


def test_the_project_as_its_own_site_dir_is_never_refused_for_its_sources():
    from tunepath.publish import sitedir

    sitedir.check_foreign_files(ROOT.resolve(), ROOT.resolve(), public=True)
    assert not (ROOT / build.SITE_MARK).exists()
