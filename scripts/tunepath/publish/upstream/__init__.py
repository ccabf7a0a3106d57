"""The learning path for Arm's learning-paths repository (ArmDeveloperEcosystem/arm-learning-paths):
``export.py`` writes it in that repository's layout from the built data, ``check.py`` checks a
directory against that repository's contributor rules (``rules.py``), ``freeze.py`` and
``tables.py`` turn our shortcodes into plain Markdown. docs/upstream.md says where the rules
come from. ``command`` is what ``tunepath export`` runs."""

from __future__ import annotations

from pathlib import Path

__all__ = ["command"]


def command(project: Path, upstream: str | None, check: str | None, run: str | None) -> int:
    """``tunepath export --upstream DIR [--run ID]`` or ``tunepath export --check DIR``."""
    from tunepath.errors import TunepathError
    from tunepath.publish.upstream.check import check_path, find_path
    from tunepath.publish.upstream.export import export_upstream

    if check is not None:
        if run is not None:
            raise TunepathError("--run goes with --upstream, not with --check")
        lp = find_path(Path(check))
        problems = check_path(lp)
        for p in problems:
            print(f"{lp}/{p}")
        if problems:
            raise TunepathError(f"{lp}: {len(problems)} problem(s) against the contributor rules")
        print(f"{lp}: passes the contributor rules of ArmDeveloperEcosystem/arm-learning-paths")
        return 0
    result = export_upstream(project, Path(upstream), run)
    for note in result.notes:
        print(f"note: {note}")
    print(f"wrote {result.path}: {result.pages} pages, {result.images} charts; "
          f"check it with `tunepath export --check {upstream}`")
    return 0
