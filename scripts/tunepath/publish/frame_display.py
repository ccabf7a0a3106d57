"""How the notebooks show a pandas frame: a missing value as "—", never NaN, None or <NA>,
and a wide frame scrolling inside its own output cell, not widening the page.

:func:`install` registers :func:`frame_html` as IPython's HTML form of every DataFrame; the
notebooks' one call (:func:`tunepath.pipeline.step`) does it, so no notebook sets display options
of its own, and the executed notebooks the site publishes show the same tables.
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["MISSING", "SCROLL_CLASS", "frame_html", "readable", "install"]

MISSING = "—"
SCROLL_CLASS = "frame-scroll"


def _missing(value) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _whole(series: pd.Series) -> bool:
    """Whether a float column holds only whole numbers (a count that a missing value made float)."""
    values = series.dropna()
    return bool(((values % 1 == 0) & (values.abs() < 2**53)).all())


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every missing value as :data:`MISSING`, except in float columns, which
    keep their type (and their formatting): :func:`frame_html` gives them the same mark. A float
    column of whole numbers only (a repetition number, a count) shows them as integers, 2 not 2.0."""
    out = frame.copy()
    for i, col in enumerate(out.columns):
        series = out.iloc[:, i]
        if series.dtype.kind == "f" and _whole(series):
            series = series.astype("Int64")
            out.isetitem(i, series)
        if series.dtype.kind != "f" and series.isna().any():
            out.isetitem(i, series.astype(object).map(lambda v: MISSING if _missing(v) else v))
    return out


def frame_html(frame: pd.DataFrame) -> str:
    """The HTML of ``frame`` for a notebook: missing values as "—", inside a block that
    scrolls sideways when the frame is wider than the cell."""
    table = readable(frame).to_html(na_rep=MISSING, max_rows=pd.get_option("display.max_rows"),
                                    max_cols=pd.get_option("display.max_columns"), border=0)
    return f'<div class="{SCROLL_CLASS}" style="overflow-x:auto;max-width:100%">{table}</div>'


def install() -> bool:
    """Show every DataFrame through :func:`frame_html` in the running IPython kernel (nothing
    outside IPython); returns whether it did."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)
    pd.set_option("display.max_columns", None)     # all columns: the block scrolls
    return True
