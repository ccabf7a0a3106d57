"""wrk2 built on a client from a source (live/wrk2.py), found by the live run (live/loadgen.py).

The real build: the vendored upstream tarball, the project's patch, Debian's LuaJIT 2.1, on
this machine as a client whose home is a temporary directory (so this machine's own
``~/.tunepath/bin`` is left alone).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT, VENDOR as VENDORED, unavailable
from tunepath.errors import TunepathError
from tunepath.live.hosts import LocalHost
from tunepath.live.loadgen import PROFILES, LoadTool, calibration_s, detect, duration_for
from tunepath.live.session import LiveOptions
from tunepath.live.wrk2 import BINARY, PATCH_FILE, Wrk2Source, blocks, ensure, patch_sha256
from tunepath.model.context import HostContext
from tunepath.model.load import load_spec
from tunepath.steps import plan
from tunepath.versions import WRK2_COMMIT, WRK2_REPO

pytestmark = pytest.mark.fast

VENDOR = VENDORED / "wrk2-44a94c1.tar.gz"
DEPS = ("make", "cc", "luajit", "pkg-config", "patch", "git")


# --- where the source comes from -------------------------------------------------------------
def test_the_default_source_is_upstream_at_the_pinned_commit():
    src = Wrk2Source.parse(None)
    assert (src.kind, src.location) == ("git", WRK2_REPO)
    text = blocks(src)[2].text
    assert f"git clone -q {WRK2_REPO}" in text and f"checkout -q {WRK2_COMMIT}" in text
    assert "install -m 0755 wrk ~/.tunepath/bin/wrk2" in text
    assert "/usr/local/bin" not in text and " wrk\n" not in text.replace("install -m 0755 wrk", "")


def test_a_tarball_a_directory_and_urls_are_sources(tmp_path):
    tree = tmp_path / "wrk2"
    (tree / "src").mkdir(parents=True)
    (tree / "Makefile").write_text("all:\n")
    (tree / "src" / "wrk.c").write_text("")
    tgz = tmp_path / "w.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(tree, arcname="w")
    assert Wrk2Source.parse(str(tgz)).kind == "tarball"
    assert Wrk2Source.parse(str(tree)).kind == "directory"
    assert Wrk2Source.parse("https://example.org/w.tar.gz").kind == "url"
    assert Wrk2Source.parse("https://example.org/wrk2.git").kind == "git"


@pytest.mark.parametrize("value, words", [("/nonexistent/w.tgz", "no such file"), ("ftp://x/w.tgz", "http(s) URL"),
                                          ("https://", "not a usable URL"), ("a\nb", "control character")])
def test_bad_sources_are_refused_in_words(value, words):
    with pytest.raises(TunepathError, match=words.replace("(", r"\(").replace(")", r"\)")):
        Wrk2Source.parse(value)


def test_a_file_that_is_no_tarball_and_a_directory_without_wrk2_are_refused(tmp_path):
    (tmp_path / "x.tgz").write_text("not a tarball")
    with pytest.raises(TunepathError, match="not a tar archive"):
        Wrk2Source.parse(str(tmp_path / "x.tgz"))
    with pytest.raises(TunepathError, match="no wrk2 source tree"):
        Wrk2Source.parse(str(tmp_path))
    with pytest.raises(TunepathError, match="no such file"):
        LiveOptions(wrk2_source=str(tmp_path / "missing.tgz")).check()


@pytest.mark.parametrize("given", [None, "https://example.org/w.tar.gz", "https://example.org/wrk2.git", "vendor"])
def test_the_page_renders_from_the_context_the_commands_the_build_ran(given):
    """The setup page renders the build from the recorded context (``wrk2_source``): the same
    text as the build ran with the source given on the command line."""
    src = Wrk2Source.parse(str(VENDOR) if given == "vendor" else given)
    ran = {b.id: b.text for b in blocks(src)}
    page = {b.id: b.text for b in plan("setup", HostContext(wrk2_source=src.shown))}
    for block_id, text in ran.items():
        assert page[block_id] == text, block_id
    assert str(ROOT.parent) not in "".join(page.values())      # no path of this machine


# --- what the live run measures with ------------------------------------------------------------
def test_wrk2_runs_last_their_calibration_longer_than_the_profile():
    """A stock wrk2 (no -W) runs its calibration longer than the counted window; the project's wrk2
    warms up and calibrates inside -W, so -d is what counts."""
    wrk2, wrk = LoadTool("wrk2", BINARY, None, 2), LoadTool("wrk", "wrk", None, 2, "wrk")
    warm = LoadTool("wrk2", BINARY, None, 2, warmup=True)
    assert calibration_s(2, 64) == pytest.approx(10.16)
    assert duration_for(PROFILES["quick"], wrk2, 2, 64) == 15 + 11
    assert duration_for(PROFILES["quick"], warm, 2, 64) == 15
    assert duration_for(PROFILES["full"], warm, 2, 64) == 60 + 11       # the full profile: a separate warm-up
    assert duration_for(PROFILES["quick"], wrk, 2, 64) == 15
    assert duration_for(PROFILES["smoke"], wrk2, 1, 8) == PROFILES["smoke"].duration_s


def test_open_loop_commands_print_the_uncorrected_latency_too():
    ctx = HostContext(load_generator=BINARY, uncorrected=True, latency_flag=True)
    assert f"{BINARY} -c1280 -t128 -R500000 -d60 -U --latency " in load_spec(ctx).command()
    assert " -U" not in load_spec(HostContext()).command()              # the original's commands: as published
    assert " -U" not in load_spec(HostContext(open_loop=False, uncorrected=True)).command()
    warm = load_spec(HostContext(load_generator=BINARY, uncorrected=True, latency_flag=True, load_warmup_s=10,
                                 duration_s=15)).command()
    assert f"{BINARY} -c1280 -t128 -R500000 -W10 -d15 -U --latency " in warm    # warm-up, then 15 s counted
    assert "-W" not in load_spec(HostContext(open_loop=False, load_warmup_s=10)).command()   # wrk has no -W
    lg = {b.id: b.text for b in plan("load-generators", ctx)}
    assert f"\n{BINARY} -c1280" in lg["load-wrk2"] and " -U --latency" in lg["load-wrk2"]
    assert "\nwrk -c1280" in lg["load-wrk"]                       # Debian's wrk stays wrk


# --- the real build ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory):
    missing = [d for d in DEPS if not shutil.which(d)]
    if missing or not VENDOR.exists():
        unavailable(f"building wrk2 needs {', '.join(missing) or VENDOR} (scripts/bootstrap --live installs "
                    "the build dependencies)")
    home = tmp_path_factory.mktemp("client-home")
    old = os.environ["HOME"]
    os.environ["HOME"] = str(home)
    try:
        yield LocalHost(), home
    finally:
        os.environ["HOME"] = old


@pytest.fixture(scope="module")
def built(client):
    host, home = client
    return ensure(host, Wrk2Source.parse(str(VENDOR)), progress=lambda m: None), host, home


@pytest.mark.system
def test_the_tarball_builds_wrk2_with_the_patch_into_the_project_directory(built):
    (build, ran), host, home = built
    assert build.built and build.seconds > 0
    assert build.commit == WRK2_COMMIT and build.patch_sha256 == patch_sha256()
    assert build.version and build.version.startswith("wrk 4.0.0")
    assert [b.id for b in ran] == ["wrk2-dependencies", "wrk2-patch", "build-wrk2"]
    assert (home / ".tunepath" / "bin" / "wrk2").is_file()
    assert not (home / ".tunepath" / "bin" / "wrk").exists()
    assert (home / ".tunepath" / "src" / "wrk2-tunepath.patch").read_bytes() == PATCH_FILE.read_bytes()


@pytest.mark.system
def test_a_second_build_of_the_same_source_and_patch_is_skipped(built):
    _, host, _ = built
    again, ran = ensure(host, Wrk2Source.parse(str(VENDOR)), progress=lambda m: None)
    assert not again.built and ran == [] and again.commit == WRK2_COMMIT


@pytest.mark.system
def test_another_source_or_patch_on_record_makes_the_run_build_again(built):
    """The provenance file decides: a different source (or patch) is rebuilt, over the read-only
    copies an earlier upload left (the vendored tarball is 0444, and an upload keeps the mode;
    as root this machine cannot show that part: the lab run does)."""
    _, host, home = built
    (home / ".tunepath" / "bin" / "wrk2.source").write_text("source=elsewhere\n")
    again, _ = ensure(host, Wrk2Source.parse(str(VENDOR)), progress=lambda m: None)
    assert again.built and again.commit == WRK2_COMMIT


@pytest.mark.system
def test_the_live_run_finds_the_built_wrk2_and_keeps_debians_wrk_as_wrk(built):
    _, host, _ = built
    tool = detect(host)
    assert (tool.name, tool.binary, tool.open_loop) == ("wrk2", BINARY, True)
    if shutil.which("wrk"):
        assert tool.closed_loop == "wrk"
        usage = subprocess.run(["wrk"], capture_output=True, text=True)
        assert "--rate" not in usage.stdout + usage.stderr        # Debian's, not wrk2


@pytest.mark.system
def test_the_built_wrk2_parses_its_options_on_a_valid_command_line(built):
    """getopt's result in a char (blocker 4) makes every command line print the usage."""
    _, _, home = built
    r = subprocess.run([str(home / ".tunepath/bin/wrk2"), "-t1", "-c1", "-d1", "-R10", "http://127.0.0.1:9/"],
                       capture_output=True, text=True, timeout=30)
    assert "Usage: wrk" not in r.stdout + r.stderr


@pytest.mark.system
def test_a_broken_source_fails_the_build_in_words(client, tmp_path):
    host, _ = client
    bad = tmp_path / "bad.tar.gz"
    tree = tmp_path / "bad"
    (tree / "src").mkdir(parents=True)
    (tree / "Makefile").write_text("all:\n\tfalse\n")
    with tarfile.open(bad, "w:gz") as tar:
        tar.add(tree, arcname="bad")
    with pytest.raises(TunepathError, match=r"(?s)on local: building wrk2 from bad.tar.gz failed .*--wrk2-source"):
        ensure(host, Wrk2Source.parse(str(bad)), progress=lambda m: None)


def test_a_client_with_no_load_generator_at_all_gets_wrk2_built_instead_of_a_refusal(monkeypatch):
    """A fresh client (the Arm VM as its own client had neither wrk2 nor wrk): with a source to
    build from, the run's start goes on to the build, which detects the tool again; without one,
    it stops with the one-line reason."""
    from tunepath.live import start
    from tunepath.live.hosts import LocalHost
    from tunepath.live.session import LiveOptions

    def nothing(host):
        raise TunepathError(f"on {host.name}: neither wrk2 nor wrk is installed")

    monkeypatch.setattr(start, "detect", nothing)
    # the facts script runs `java -version`: a JVM is the system tier's; what matters here is the tool
    monkeypatch.setattr(start, "gather_facts", lambda host, tomcat, tool, role: ({"load_generator": tool}, {}))
    tarball = str(ROOT / "tests" / "data" / "shared" / "vendor" / "wrk2-44a94c1.tar.gz")
    found = start.gather(LocalHost(), LocalHost(), LiveOptions(wrk2_source=tarball))
    assert found.tool is None and found.client_facts["load_generator"] == {"name": "wrk2", "version": None}
    with pytest.raises(TunepathError, match="neither wrk2 nor wrk is installed"):
        start.gather(LocalHost(), LocalHost(), LiveOptions())
