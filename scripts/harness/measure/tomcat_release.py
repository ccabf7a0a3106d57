"""The newest Tomcat 11 release, pinned in ``tunepath/versions.py`` when it is newer than the pin.

``python -m harness.measure.tomcat_release`` asks Maven for the newest
``org.apache.tomcat:tomcat`` tarball in ``[11.0.0,11.1.0)`` (a version range in a throwaway POM,
resolved from Maven's default repository, so no repository address is written here), fetches it
(``--strict-checksums``: a download that does not match the repository's checksum fails), and
computes its SHA-512. If it is newer than ``TOMCAT_VERSION``, it rewrites ``TOMCAT_VERSION``
and adds the checksum to ``TOMCAT_SHA512``: the next run installs and measures that release.
It prints one line, and under GitHub Actions writes ``changed``, ``version`` and ``previous`` to
``$GITHUB_OUTPUT`` for the workflow's pull request. Exit status 1 with one line on a failure.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.live.tomcatfetch import mvn, version_key

__all__ = ["newest", "pin", "version_key", "main"]

VERSIONS = Path(__file__).resolve().parents[2] / "tunepath" / "versions.py"
RANGE = "[11.0.0,11.1.0)"
POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tunepath</groupId><artifactId>tomcat-release</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.tomcat</groupId><artifactId>tomcat</artifactId>
      <version>{range}</version><type>tar.gz</type></dependency>
  </dependencies>
</project>
"""


def pin(text: str, version: str, sha512: str) -> str:
    """``versions.py``'s text with ``TOMCAT_VERSION`` set to ``version`` and its SHA-512 added to
    ``TOMCAT_SHA512`` (the older entries stay: recorded runs name them)."""
    version_key(version)
    if not re.fullmatch(r"[0-9a-f]{128}", sha512):
        raise TunepathError(f"{sha512[:20]}…: not a SHA-512 in hex")
    text, n = re.subn(r'^TOMCAT_VERSION = "[^"]*"$', f'TOMCAT_VERSION = "{version}"', text, count=1, flags=re.M)
    table = re.search(r"^TOMCAT_SHA512 = \{\n(.*?)^\}", text, re.M | re.S)
    if n != 1 or table is None:
        raise TunepathError(f"{VERSIONS.name} has no TOMCAT_VERSION line or TOMCAT_SHA512 table to update")
    entry = f'    "{version}": "{sha512}",\n'
    body = re.sub(rf'^    "{re.escape(version)}": "[0-9a-f]*",\n', "", table.group(1), flags=re.M) + entry
    return text[:table.start(1)] + body + text[table.end(1):]


def newest(work: Path) -> tuple[str, Path]:
    """The newest Tomcat 11 release Maven resolves, and its tarball (fetched into ``work``)."""
    (work / "pom.xml").write_text(POM.format(range=RANGE))
    mvn(["dependency:list", f"-DoutputFile={work / 'list.txt'}"], work)
    found = re.findall(r"org\.apache\.tomcat:tomcat:tar\.gz:(\S+?):", (work / "list.txt").read_text())
    if len(found) != 1:
        raise TunepathError(f"Maven resolved {len(found)} Tomcat versions in {RANGE}, not one")
    version = found[0]
    mvn(["dependency:copy", f"-Dartifact=org.apache.tomcat:tomcat:{version}:tar.gz", f"-DoutputDirectory={work}"],
         work)
    return version, work / f"tomcat-{version}.tar.gz"


def _current(text: str) -> str:
    m = re.search(r'^TOMCAT_VERSION = "([^"]*)"$', text, re.M)
    if not m:
        raise TunepathError(f"{VERSIONS} has no TOMCAT_VERSION line")
    return m.group(1)


def _output(**values: str) -> None:
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in values.items())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    versions = Path(argv[0]) if argv else VERSIONS
    try:
        text = versions.read_text(encoding="utf-8")
        pinned = _current(text)
        with tempfile.TemporaryDirectory(prefix="tomcat-release-") as tmp:
            version, tarball = newest(Path(tmp))
            if version_key(version) <= version_key(pinned):
                print(f"Tomcat {pinned} is pinned, and Maven's newest 11.0 release is {version}: nothing to change")
                _output(changed="false", version=pinned, previous=pinned)
                return 0
            sha512 = hashlib.sha512(tarball.read_bytes()).hexdigest()
        versions.write_text(pin(text, version, sha512), encoding="utf-8")
    except (OSError, TunepathError) as exc:
        print(f"tomcat-release: {exc}", file=sys.stderr)
        return 1
    print(f"Tomcat {version} is newer than the pinned {pinned}: pinned it in {versions} (SHA-512 {sha512[:16]}…)")
    _output(changed="true", version=version, previous=pinned)
    return 0


if __name__ == "__main__":
    sys.exit(main())
