"""Tools that measure and try tunepath from outside: they use the package, the package never uses them.

Beside ``scripts/tunepath/`` as asv keeps its ``benchmarks/`` beside ``asv/``: neither installed
with tunepath nor shipped in its wheel. ``scripts/bench``, ``scripts/faults`` and ``scripts/census``
run them with ``scripts/`` on ``PYTHONPATH``:

- :mod:`harness.bench`: benchmarks of the pipeline itself (``python -m harness.bench``);
- :mod:`harness.faults`: fault injection on the lab's server, a network namespace or the VM
  guest (``python -m harness.faults [--vm]``);
- :mod:`harness.census`: the hostile-input census of the ``tunepath`` command (``python -m
  harness.census``).

``ROOT`` is the project directory they read from and write to (``build/``, ``runs/``, ``.cache/``).
"""

from __future__ import annotations

from pathlib import Path

from tunepath.project import project_dir

__all__ = ["ROOT"]

ROOT = project_dir(required=False) or Path.cwd()
