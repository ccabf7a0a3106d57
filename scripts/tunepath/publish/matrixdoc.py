"""The summary's line per version matrix (``tunepath run --matrix``; :class:`tunepath.model.run.MatrixCell`):
its server, how many of its cells were recorded, the versions they set, and the page that follows them.
The history page's grid of a matrix is :func:`tunepath.publish.historydoc.matrix_grids`."""

from __future__ import annotations

from tunepath.publish.display import clean

__all__ = ["matrix_entries"]


def matrix_entries(runs: list, history_page: str) -> list[dict]:
    """Each version matrix among ``runs`` in a line's worth: its server, how many of its cells were
    recorded, the versions they set, and the page that follows them (``history_page``)."""
    by_matrix: dict[str, list] = {}
    for run in runs:
        if run.info.matrix is not None:
            by_matrix.setdefault(run.info.matrix.matrix, []).append(run)
    out = []
    for matrix, cells in sorted(by_matrix.items()):
        cells.sort(key=lambda r: r.info.matrix.index)
        first = cells[0]
        axes = [(name, list(dict.fromkeys(str(v) for v in (getattr(r.info.matrix.cell, attr) for r in cells) if v is not None)))
                for name, attr in (("Tomcat", "tomcat"), ("Java", "java"))]
        out.append(clean({
            "id": matrix, "server": first.server.name, "label": first.info.label, "date": first.info.date,
            "recorded": len(cells), "cells": first.info.matrix.cells,
            "versions": " × ".join(f"{name} {', '.join(values)}" for name, values in axes if values),
            "runs": [r.run_id for r in cells], "page": history_page,
        }))
    return out
