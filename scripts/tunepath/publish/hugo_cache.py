"""Hugo not run again on the same input: a warm build keeps the published site as it is.

Hugo's output is a function of what it reads from the staged site (the configuration,
``content/``, ``layouts/``, ``static/``, ``data/`` and Hugo's other input directories) and of
Hugo itself: the site's templates read no clock. The build records, in
``build/cache/hugo.json`` (published with the other cache records), the SHA-256 of all of that
(every file's path and bytes, the Hugo binary's path, size and time, and the destination) and
of the output it got. A later build with the cache on whose key is the same, and whose
destination still holds exactly that output, does not run Hugo and leaves the destination as it
is (:func:`tunepath.publish.build.build_site`). Anything else runs Hugo: a changed page, data
file, chart or executed notebook, another Hugo, another destination, a file of the published
site changed or removed by hand, ``--no-cache``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tunepath.publish.cache import sha256_file, tree_digest

__all__ = ["READS", "RECORD", "key", "fresh", "record"]

# what Hugo reads from a site (besides its modules and themes, which this site has none of)
READS = ("config.toml", "hugo.toml", "config", "content", "layouts", "static", "data", "assets", "i18n",
         "archetypes", "themes")
RECORD = "hugo.json"


def key(stage: Path, dest: Path, binary: str) -> str:
    """The SHA-256 of Hugo's input: the staged site, the Hugo binary, the destination."""
    exe = Path(binary).resolve()
    st = exe.stat()
    h = hashlib.sha256(f"tunepath-hugo-1\n{exe} {st.st_size} {st.st_mtime_ns}\n{Path(dest).resolve()}\n".encode())
    for name in READS:
        path = Path(stage) / name
        if path.is_file():
            h.update(f"{name}\0file {sha256_file(path)}\n".encode())
        elif path.is_dir():
            h.update(f"{name}\0dir {tree_digest(path)}\n".encode())
    return h.hexdigest()


def _path(stage: Path) -> Path:
    return Path(stage) / "build" / "cache" / RECORD


def fresh(stage: Path, hugo_key: str, dest: Path) -> bool:
    """Whether ``dest`` holds what Hugo made of this very input (so it need not run)."""
    try:
        data = json.loads(_path(stage).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("key") != hugo_key or not Path(dest).is_dir():
        return False
    return data.get("output") == tree_digest(dest)


def record(stage: Path, hugo_key: str, output: Path) -> None:
    """Record (atomically) that Hugo made ``output`` of the input ``hugo_key``."""
    path = _path(stage)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"key": hugo_key, "output": tree_digest(output)}) + "\n", encoding="utf-8")
    os.replace(tmp, path)
