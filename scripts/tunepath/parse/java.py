"""The Java release a ``java -version`` line names."""

from __future__ import annotations

import re

__all__ = ["java_major"]


def java_major(version_output: str) -> int | None:
    """``openjdk version "17.0.15" …`` → 17; ``"1.8.0_392"`` → 8."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_output or "")
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major
