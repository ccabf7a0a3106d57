"""wrk2 on a client: where its source comes from, the commands that build it, and the build.

wrk2 is in no package registry. The path builds upstream's newest commit
(:data:`~tunepath.versions.WRK2_COMMIT`) with the project's own patch
(``wrk2-tunepath.patch`` beside this module) against the distribution's LuaJIT 2.1, on every
architecture: the patch fixes what stops wrk2 on aarch64 (no arm64 backend in the bundled
LuaJIT 2.0, ``luaL_reg``, ``<x86intrin.h>``, getopt's result kept in a ``char``) and changes
nothing on x86_64. The binary goes to ``~/.tunepath/bin/wrk2`` with a provenance file beside
it (``wrk2.source``: source, commit, the patch's SHA-256), so Debian's ``wrk`` stays ``wrk``
and a second build of the same source and patch is skipped.

The source is upstream's git repository by default (users' hosts have internet), or what
``--wrk2-source`` names: a tarball or a directory on this machine (uploaded through Fabric),
or an http(s) URL of a tarball (fetched on the client) or of a git repository (``….git``).
The commands the build runs are :func:`blocks`, the same ones the set-up page shows.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tunepath.errors import TunepathError
from tunepath.model.plan import Block
from tunepath.model.shell import check_text, quote
from tunepath.versions import WRK2_COMMIT, WRK2_REPO

__all__ = ["Wrk2Source", "Wrk2Build", "PATCH_FILE", "PATCH_REMOTE", "BINARY", "PROVENANCE", "DEPENDENCIES",
           "blocks", "packages", "installed", "ensure", "patch_sha256"]

PATCH_FILE = Path(__file__).with_name("wrk2-tunepath.patch")
SRC_DIR = "~/.tunepath/src"
TREE = f"{SRC_DIR}/wrk2"
PATCH_REMOTE = f"{SRC_DIR}/wrk2-tunepath.patch"
BINARY = "~/.tunepath/bin/wrk2"
PROVENANCE = "~/.tunepath/bin/wrk2.source"
TARBALL_REMOTE = f"{SRC_DIR}/wrk2-source.tar.gz"
# Debian's packages the build needs (LuaJIT 2.1 and the `luajit` command that compiles wrk.lua)
DEPENDENCIES = ("build-essential", "libssl-dev", "zlib1g-dev", "libluajit-5.1-dev", "luajit", "pkg-config",
                "patch")
BUILD_TIMEOUT_S = 900


def patch_sha256() -> str:
    return hashlib.sha256(PATCH_FILE.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Wrk2Source:
    """Where wrk2's source comes from: ``git`` (a repository URL), ``url`` (a tarball fetched on
    the client), ``tarball`` or ``directory`` (on this machine, uploaded)."""

    kind: str
    location: str

    @classmethod
    def parse(cls, value: str | None) -> "Wrk2Source":
        """``--wrk2-source``'s value (None: upstream's repository), checked on this machine."""
        if value is None:
            return cls("git", WRK2_REPO)
        check_text(value, "--wrk2-source")
        if value.startswith(("http://", "https://")):
            url = urlsplit(value)
            if not url.netloc or any(c.isspace() for c in value):
                raise TunepathError(f"--wrk2-source {value}: not a usable URL")
            return cls("git" if url.path.endswith(".git") else "url", value)
        if "://" in value:
            raise TunepathError(f"--wrk2-source {value}: give a tarball or directory on this machine, or an "
                                "http(s) URL of a tarball or of a git repository (….git)")
        path = Path(value).expanduser()
        if path.is_dir():
            if not (path / "Makefile").is_file() or not (path / "src" / "wrk.c").is_file():
                raise TunepathError(f"--wrk2-source {value}: this directory holds no wrk2 source tree "
                                    "(no Makefile and src/wrk.c)")
            return cls("directory", str(path.absolute()))
        if not path.is_file():
            raise TunepathError(f"--wrk2-source {value}: no such file or directory")
        if not tarfile.is_tarfile(path):
            raise TunepathError(f"--wrk2-source {value}: not a tar archive (give wrk2's source tarball, e.g. "
                                "what `git archive` makes)")
        return cls("tarball", str(path.absolute()))

    @property
    def local(self) -> bool:
        return self.kind in ("tarball", "directory")

    @property
    def remote_tarball(self) -> str:
        """Where an uploaded or downloaded tarball lies on the client."""
        return f"{SRC_DIR}/{Path(self.location).name}" if self.kind == "tarball" else TARBALL_REMOTE

    @property
    def shown(self) -> str:
        """The source as the record, the context and the pages name it: a URL, or the name of the
        tarball on the client (never a path of this machine). :meth:`from_context` reads it back."""
        if self.kind in ("git", "url"):
            return self.location
        return Path(self.remote_tarball).name

    @classmethod
    def from_context(cls, shown: str) -> "Wrk2Source":
        """The source a recorded context names (:attr:`shown`): the same commands, on any machine."""
        if shown.startswith(("http://", "https://")):
            return cls("git" if urlsplit(shown).path.endswith(".git") else "url", shown)
        return cls("tarball", shown)

    def commit(self) -> str | None:
        """The commit the source holds, where this machine can tell before the build."""
        if self.kind == "git":
            return WRK2_COMMIT
        if self.kind == "tarball":
            return _tar_commit(Path(self.location))
        if self.kind == "directory":
            r = subprocess.run(["git", "-C", self.location, "rev-parse", "HEAD"], capture_output=True, text=True)
            return r.stdout.strip() if r.returncode == 0 else None
        return None


def _tar_commit(path: Path) -> str | None:
    """The commit ``git archive`` wrote into the tarball's pax header (``git get-tar-commit-id``)."""
    try:
        with tarfile.open(path) as tar:
            comment = tar.pax_headers.get("comment", "")
    except (OSError, tarfile.TarError):
        return None
    return comment if len(comment) == 40 and all(c in "0123456789abcdef" for c in comment) else None


def _fetch_lines(source: Wrk2Source) -> list[str]:
    tree = TREE
    if source.kind == "git":
        lines = [f"rm -rf {tree} && git clone -q {quote(source.location, 'wrk2 repository')} {tree}"]
        if source.location == WRK2_REPO:
            lines.append(f"git -C {tree} checkout -q {WRK2_COMMIT}")
        return lines
    archive = quote(source.remote_tarball, "wrk2 tarball")
    lines = [f"curl -fsSL -o {archive} {quote(source.location, 'wrk2 URL')}"] if source.kind == "url" else []
    return lines + [f"rm -rf {tree} && mkdir -p {tree} && tar xzf {archive} --strip-components=1 -C {tree}"]


def _commit_line(source: Wrk2Source) -> str:
    if source.kind == "git":
        return f"commit=$(git -C {TREE} rev-parse HEAD)"
    return (f"commit=$(gzip -dc {quote(source.remote_tarball, 'wrk2 tarball')} | git get-tar-commit-id "
            "|| echo unknown)")


def packages(kind: str) -> tuple[str, ...]:
    """The Debian packages a client needs to build wrk2 from a source of ``kind``: git names the
    commit of a tarball or a checkout (``get-tar-commit-id``); curl fetches a URL's tarball."""
    return (*DEPENDENCIES, "curl" if kind == "url" else "git")


def blocks(source: Wrk2Source) -> list[Block]:
    """The client's commands: dependencies, the patch, the build (what the set-up page shows)."""
    names = " ".join(packages(source.kind))
    patch = PATCH_FILE.read_text(encoding="utf-8").rstrip("\n")
    return [
        Block("wrk2-dependencies", "client", "wrk2's build dependencies (Debian): the distribution's LuaJIT 2.1, "
              "OpenSSL and zlib headers", f"dpkg -s {names} >/dev/null 2>&1 || sudo apt-get install -y {names}"),
        Block("wrk2-patch", "client", f"tunepath's patch for wrk2: save it as {PATCH_REMOTE} on the client",
              patch, lang="diff"),
        Block("build-wrk2", "client", f"Build wrk2 ({source.shown}) with the patch and install it as {BINARY}",
              " &&\n".join([      # each line runs only if the one before it succeeded
                  f"mkdir -p {SRC_DIR} ~/.tunepath/bin", *_fetch_lines(source),
                  f"cd {TREE} && patch -p1 < {PATCH_REMOTE}", 'make -j"$(nproc)" LUAJIT=system',
                  f"install -m 0755 wrk {BINARY}", _commit_line(source),
                  f'printf "source=%s\\ncommit=%s\\npatch=%s\\n" {quote(source.shown, "wrk2 source")} "$commit" '
                  f'"$(sha256sum < {PATCH_REMOTE} | cut -c1-64)" > {PROVENANCE}'])),
    ]


@dataclass(frozen=True)
class Wrk2Build:
    """wrk2 on one client after :func:`ensure`: what it is and whether this run built it."""

    host: str
    source: str
    commit: str | None
    patch_sha256: str | None
    version: str | None
    built: bool
    seconds: float | None = None

    def note(self) -> str:
        """One sentence for the run's notes."""
        what = f"wrk2 ({self.version or 'version unknown'}, commit {(self.commit or 'unknown')[:12]}, the project's patch)"
        if self.built:
            return f"{what} was built on {self.host} from {self.source} in {self.seconds:.0f} s when the run started."
        return f"{what} from {self.source} was already installed on {self.host} as {BINARY}; not rebuilt."

    def fact(self) -> dict:
        return {"name": "wrk2", "version": self.version, "binary": BINARY, "source": self.source,
                "commit": self.commit, "patch_sha256": self.patch_sha256,
                **({"built_in_s": round(self.seconds, 1)} if self.seconds is not None else {})}


def installed(host) -> dict[str, str]:
    """The client's ``wrk2.source`` (empty when ``~/.tunepath/bin/wrk2`` is absent or does not run)."""
    r = host.run(f"{BINARY} -v >/dev/null 2>&1; [ $? -le 1 ] && [ -x {BINARY} ] && cat {PROVENANCE}",
                 check=False, timeout=30)
    if r.exited != 0:
        return {}
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def _version(host) -> str | None:
    r = host.run(f"{BINARY} -v 2>&1 | head -1", check=False, timeout=30)
    return r.stdout.split(" Copyright")[0].strip() or None


def ensure(host, source: Wrk2Source, progress=print) -> tuple[Wrk2Build, list[Block]]:
    """wrk2 built from ``source`` with the patch on ``host``, unless that build is installed.
    Returns the build and the blocks it ran (none when it was installed)."""
    have, sha = installed(host), patch_sha256()
    if have.get("source") == source.shown and have.get("patch") == sha and have.get("commit") != "unknown":
        return Wrk2Build(host.name, source.shown, have.get("commit"), sha, _version(host), built=False), []
    progress(f"wrk2: building {source.shown} on {host.name} (seconds with the system LuaJIT)")
    ran = blocks(source)
    t0 = time.monotonic()
    host.run(ran[0].text, timeout=BUILD_TIMEOUT_S, as_written=True,
             hint="wrk2's build dependencies are missing and could not be installed; install them "
                  f"(sudo apt-get install {' '.join(DEPENDENCIES)}) and run again")
    # a read-only copy left by an earlier upload (put keeps the local mode) is replaced, not rewritten
    host.run(f"mkdir -p {SRC_DIR} && rm -f {PATCH_REMOTE} {quote(source.remote_tarball, 'wrk2 tarball')}",
             timeout=30)
    host.put(PATCH_FILE, PATCH_REMOTE)
    if source.local:
        _upload(host, source)
    r = host.run(ran[2].text, timeout=BUILD_TIMEOUT_S, check=False, as_written=True)
    if not r.ok:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-12:])
        raise TunepathError(f"on {host.name}: building wrk2 from {source.shown} failed (exit {r.exited}):\n{tail}\n"
                            "Check the source (--wrk2-source: a wrk2 tarball, directory or URL) and the "
                            "build dependencies; Debian's wrk still measures without --build-wrk2/--wrk2-source")
    seconds = time.monotonic() - t0
    have = installed(host)
    return Wrk2Build(host.name, source.shown, have.get("commit"), have.get("patch"), _version(host), built=True,
                     seconds=seconds), ran


def _upload(host, source: Wrk2Source) -> None:
    """The tarball, or a directory packed into one (with its git commit where it has one)."""
    if source.kind == "tarball":
        host.put(Path(source.location), source.remote_tarball)
        return
    fd, name = tempfile.mkstemp(suffix=".tar.gz")
    os.close(fd)
    try:
        commit = source.commit()
        with tarfile.open(name, "w:gz", format=tarfile.PAX_FORMAT,
                          pax_headers={"comment": commit} if commit else None) as tar:
            tar.add(source.location, arcname="wrk2", filter=_no_build_output)
        host.put(Path(name), source.remote_tarball)
    finally:
        Path(name).unlink(missing_ok=True)


def _no_build_output(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = info.name.split("/")
    return None if len(parts) > 1 and parts[1] in (".git", "obj") or info.name == "wrk2/wrk" else info

