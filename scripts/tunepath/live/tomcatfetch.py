"""Tomcat release tarballs on the controller: fetched with Maven, checked against ``versions.py``.

``tunepath run --matrix tomcat=…`` installs several releases; each tarball comes from Maven's default
repository (``org.apache.tomcat:tomcat:<version>:tar.gz``, ``--strict-checksums``) into
``.cache/tomcat-<version>.tar.gz``, and is kept only if its SHA-512 is the one ``TOMCAT_SHA512``
pins. A tarball already in the cache is checked again and reused.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.versions import TOMCAT_SHA512

__all__ = ["fetch", "mvn", "version_key", "MVN_TIMEOUT"]

MVN_TIMEOUT = 600


def version_key(version: str) -> tuple[int, ...]:
    """``11.0.24`` → (11, 0, 24), so that 11.0.10 sorts after 11.0.9."""
    if not isinstance(version, str) or not re.fullmatch(r"\d+(\.\d+){2}", version):
        raise TunepathError(f"Tomcat version {version!r} is not of the form 11.0.N")
    return tuple(int(p) for p in version.split("."))


def mvn(args: list[str], cwd: Path) -> str:
    """Run Maven quietly with strict checksums; its stdout, or one line saying how it failed."""
    found = shutil.which("mvn")
    if found is None:
        raise TunepathError("Maven (mvn) is not on the PATH: install it (Debian: maven; scripts/bootstrap --live "
                            "does), then run again")
    try:
        done = subprocess.run([found, "-B", "-q", "--strict-checksums", *args], cwd=cwd, capture_output=True,
                              text=True, timeout=MVN_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise TunepathError(f"`mvn {' '.join(args)}` did not finish within {MVN_TIMEOUT} s") from None
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise TunepathError(f"`mvn {' '.join(args)}` exited with status {done.returncode}: {tail}")
    return done.stdout


def _sha512(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha512").hexdigest()


def fetch(version: str, cache: Path) -> Path:
    """The tarball of Tomcat ``version`` in ``cache``: fetched with Maven where missing, its SHA-512
    checked against the pin every time. A mismatch keeps nothing and says so."""
    version_key(version)
    pinned = TOMCAT_SHA512.get(version)
    if pinned is None:
        raise TunepathError(f"Tomcat {version}: no SHA-512 is pinned for it in tunepath/versions.py; pin it first")
    target = Path(cache) / f"tomcat-{version}.tar.gz"
    if target.is_file() and _sha512(target) == pinned:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tomcat-fetch-", dir=target.parent) as tmp:
        mvn(["dependency:copy", f"-Dartifact=org.apache.tomcat:tomcat:{version}:tar.gz", f"-DoutputDirectory={tmp}"],
            Path(tmp))
        got = Path(tmp) / target.name
        if not got.is_file():
            raise TunepathError(f"Maven reported success but wrote no {target.name}")
        digest = _sha512(got)
        if digest != pinned:
            raise TunepathError(f"Tomcat {version} as fetched has SHA-512 {digest[:16]}…, and versions.py pins "
                                f"{pinned[:16]}…: not the pinned release, nothing kept")
        os.replace(got, target)
    return target
