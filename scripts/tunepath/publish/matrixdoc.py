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
        axes: dict[str, list[str]] = {}
        for run in cells:
            for axis, value in run.info.matrix.cell.axes():
                axes.setdefault(axis.capitalize(), []).append(str(value))
        out.append(clean({
            "id": matrix, "server": first.server.name, "label": first.info.label, "date": first.info.date,
            "recorded": len(cells), "cells": first.info.matrix.cells,
            "versions": " × ".join(f"{name} {', '.join(dict.fromkeys(values))}" for name, values in axes.items()),
            "runs": [r.run_id for r in cells], "page": history_page,
        }))
    return out
