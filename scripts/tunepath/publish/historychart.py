"""The history page's chart: one configuration's figure across the runs of one host kind, in the
series' order (Tomcat release, Java release, date), each run's median with its interval, and a
dashed line where a change point falls between two runs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from tunepath.publish import chartbase as base
from tunepath.publish import chartlayout as layout
from tunepath.publish import formatting as fmt
from tunepath.publish.chartbase import Chart

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tunepath.analysis.history import Point, Series

__all__ = ["history_chart", "shown"]


def shown(figure_key: str, value) -> str:
    """A history figure as the step pages print it."""
    return {"cpu": fmt.micros, "p99": fmt.latency, "rps": fmt.rate}[figure_key](value)


def _tick(p: "Point", narrow: bool) -> str:
    parts = [p.tomcat or "?", f"Java {p.java}" if p.java else "Java ?", p.date[5:10]]
    return "\n".join(parts) if narrow else " · ".join(parts[:2]) + "\n" + parts[2]


def history_chart(series: "Series", title: str, static_dir: Path, name: str) -> Chart:
    points = series.points
    inputs = ("history", title, series.figure.key, [(p.run_id, p.median, p.low, p.high, p.tomcat, p.java, p.date)
                                                     for p in points],
              [(c.before.run_id, c.after.run_id, round(c.change_pct, 6)) for c in series.changes])
    rel, narrow = base.emit(static_dir, name, inputs, lambda size: _figure(series, title, size))
    listing = "; ".join(f"{p.label}: {shown(series.figure.key, p.median)}" for p in points)
    marks = "; ".join(f"between {c.before.label} and {c.after.label} ({fmt.percent_change(c.change_pct)} in the "
                      "mean)" for c in series.changes) or "none"
    alt = (f"Dot chart of {series.figure.label} per run, {series.kind}, {series.fixed}: {listing}. "
           f"Change points: {marks}.")
    label = series.figure.label[0].upper() + series.figure.label[1:]
    caption = (f"{label} of each run (median, with its interval where the run repeated "
               f"the measurement three times or more), in the order of the Tomcat and Java releases, then the date. "
               f"A dashed line marks a change point between two runs.")
    return Chart(id=name, run_id=points[-1].run_id, src=rel, narrow_src=narrow, alt=alt, caption=caption)


def _figure(series: "Series", title: str, size: layout.Size) -> "Figure":
    points = series.points
    narrow = size is layout.NARROW
    fig = base.figure(figsize=(size.width, 3.6 if narrow else 3.2))
    ax = fig.add_subplot()
    x = list(range(len(points)))
    y = [p.median for p in points]
    ax.plot(x, y, color=base.CONTEXT, linewidth=0.8, zorder=2, gid="history-line")
    ax.scatter(x, y, color=base.HIGHLIGHT, zorder=3, gid="history-mark")
    ci = [(i, p) for i, p in enumerate(points) if p.low is not None and p.high is not None]
    if ci:
        base.whiskers(ax, [i for i, _ in ci], [p.median for _, p in ci], [p.low for _, p in ci],
                      [p.high for _, p in ci], horizontal=False, cap=3.0, width=1.0)
    index = {p.run_id: i for i, p in enumerate(points)}
    top = max([v for v in y if math.isfinite(v)] + [p.high for _, p in ci])
    for c in series.changes:
        at = (index[c.before.run_id] + index[c.after.run_id]) / 2
        ax.axvline(at, color=base.INK, linestyle="--", linewidth=1.0, gid="change-point")
        ax.annotate(fmt.percent_change(c.change_pct), (at, top * 1.28), xytext=(3, 0), textcoords="offset points",
                    fontsize=size.small, va="top", ha="left")
    ax.set_ylim(0, top * 1.3)          # the changes' labels above the highest point
    ax.set_xticks(x, [_tick(p, narrow) for p in points], fontsize=size.small * (0.85 if narrow else 1.0))
    ax.set_ylabel(f"{series.figure.label} ({series.figure.unit})", fontsize=size.small)
    ax.yaxis.set_major_locator(base.locator(size))
    ax.set_title(base.literal(layout.wrap(title, size.line)), loc="left", fontsize=size.font)
    return fig
