"""Where the project's files are: the site sources, ``notebooks/`` and ``runs/``.

The package does not assume it lives inside the checkout (``pip install .`` puts it in
``site-packages``). The project directory is, in order: the ``TUNEPATH_PROJECT``
environment variable; the nearest directory at or above the current one that holds
``config.toml`` and ``notebooks/``; the checkout this package was imported from (an
editable install). Commands take ``--site-dir`` / ``--runs-dir`` to point elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from tunepath.errors import TunepathError

__all__ = ["PACKAGE_DIR", "project_dir", "is_project"]

PACKAGE_DIR = Path(__file__).resolve().parent


def is_project(path: Path) -> bool:
    return (path / "config.toml").is_file() and (path / "notebooks").is_dir()


def project_dir(required: bool = True) -> Path | None:
    """The project directory (see the module's docstring); a clear error when there is none."""
    given = os.environ.get("TUNEPATH_PROJECT")
    if given:
        path = Path(given).expanduser().resolve()
        if not is_project(path):
            raise TunepathError(f"TUNEPATH_PROJECT={given} is not a tunepath project "
                                "(no config.toml and notebooks/ there)")
        return path
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if is_project(candidate):
            return candidate
    checkout = PACKAGE_DIR.parents[1]
    if is_project(checkout):
        return checkout
    if required:
        raise TunepathError("no tunepath project here: run from a clone of the project, or set "
                            "TUNEPATH_PROJECT to it (or give --site-dir / --runs-dir)")
    return None
