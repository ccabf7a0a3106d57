"""The facts table a step shows beside its figures: per measured variant of one run, what the
hosts reported (the collector the JVM ran, the cipher a client negotiated, the listen queue the
kernel gave …). Steps build one :class:`FactsTable` in ``Step.analysis``; the page's
``{{< facts-table >}}`` shortcode and the upstream export read its :meth:`FactsTable.data`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

__all__ = ["Column", "FactsRow", "FactsTable"]


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    text: bool = True
    """Words (left-aligned), not a figure (right-aligned)."""


@dataclass(frozen=True)
class FactsRow:
    variant: str
    label: str
    cells: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FactsTable:
    columns: tuple[Column, ...]
    rows: tuple[FactsRow, ...]
    note: str

    def __post_init__(self):
        keys = {c.key for c in self.columns}
        for row in self.rows:
            missing = keys - set(row.cells)
            if missing:
                raise ValueError(f"facts row {row.variant!r} has no cell for {sorted(missing)}")

    def prepend(self, column: Column, cells: Mapping[str, str], note: str) -> "FactsTable":
        """The table with ``column`` first (its cell per variant from ``cells``) and ``note`` before
        the table's own."""
        rows = tuple(replace(r, cells={column.key: cells[r.variant], **r.cells}) for r in self.rows)
        return FactsTable((column, *self.columns), rows, f"{note} {self.note}")

    def analysis(self) -> dict | None:
        """What ``Step.analysis`` returns for this table: None when no variant was measured."""
        return {"facts_table": self.data()} if self.rows else None

    def data(self) -> dict:
        """The table as the step's Hugo data holds it (docs/data-schema.md, ``analysis.facts_table``)."""
        return {"columns": [{"key": c.key, "label": c.label} for c in self.columns],
                "rows": [{"variant": r.variant, "label": r.label, "cells": dict(r.cells)} for r in self.rows],
                "text_columns": [c.key for c in self.columns if c.text],
                "note": self.note}
