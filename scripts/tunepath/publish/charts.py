"""Charts as SVG, byte-identical for the same input.

Every chart shows one run (one server host, one client): a run is never drawn as
the continuation of another host's series. Each chart is drawn twice, for wide screens and for
phones (:mod:`tunepath.publish.chartlayout`); its caption states only what the rows it draws say
(:mod:`tunepath.publish.chartwords`): which bars are highlighted, how many repetitions each bar
is the median of, and the confidence level of the whiskers drawn. Value labels are placed from
the drawn extents of bars, whiskers and lines, in colours that meet WCAG AA contrast.

Since the same input gives the same bytes, a chart need not be drawn again when its
input did not change: where the replay build asks for it (the environment variable
:data:`tunepath.publish.chartmemo.ENV`), :mod:`tunepath.publish.chartmemo` keeps the
SHA-256 of what each chart was drawn from, and a chart whose SVG is still there
with the recorded bytes is not redrawn. matplotlib is imported when a chart is drawn,
not with this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tunepath.publish import chartbase as base
from tunepath.publish import chartlayout as layout
from tunepath.publish import chartwords as words_
from tunepath.publish import formatting as fmt
from tunepath.publish.chartbase import RC, Chart, render_svg
from tunepath.publish.sweepcharts import rate_sweep_chart, thread_sweep_chart

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Chart", "headline_chart", "throughput_chart", "cpu_chart", "latency_chart", "thread_sweep_chart",
           "rate_sweep_chart", "ratio_chart", "render_svg", "RC"]

_finite = words_.finite


def _render(fig) -> bytes:
    return render_svg(fig)      # looked up at each call: a test may count the renderings


def _gain(r: dict) -> str:
    return fmt.speedup(r.get("speedup_vs_stock")) if _finite(r.get("requests_per_sec")) else ""


def _gain_words(r: dict, size: layout.Size) -> str:
    gain = _gain(r)
    return "" if not gain else f"  ({gain})" if size is layout.NARROW else f"  ({gain} stock)"


def _lit(rows: list[dict], highlight: set[str]) -> list[bool]:
    return [f"{r['step']}/{r['variant']}" in highlight for r in rows]


def throughput_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str,
                     run_id: str) -> Chart:
    """Bars of requests/s per measurement of one run; ``highlight`` holds step/variant keys.
    The caption's highlight, repetitions, confidence level and speed-up words come from ``rows``."""
    lit = _lit(rows, highlight)
    words = [f"Requests per second {base.where(rows, run_id)}.", words_.highlight_words(rows, lit),
             words_.stats_words(rows), words_.speedup_words(sum(bool(_gain(r)) for r in rows))]
    rel, narrow = base.emit(static_dir, name, ("throughput", rows, lit),
                            lambda size: _bar_figure(rows, lit, size, _RPS), _render)
    listing = "; ".join(f"{r['label']}: {fmt.rate(r['requests_per_sec'])} req/s" for r in rows)
    return Chart(id=base.chart_id(name), run_id=run_id, src=rel, narrow_src=narrow, rows=base.keys(rows),
                 alt=f"Horizontal bar chart of requests per second on {rows[0]['server']} ({run_id}). {listing}.",
                 caption=" ".join(w for w in words if w))


def headline_chart(rows: list[dict], highlight: set[str], static_dir: Path, prefix: str, run_id: str) -> Chart:
    """The bars a run is compared on: server CPU per request where every row served the rate its
    load offered (requests/s is then that rate for all of them, :func:`~tunepath.analysis.frames.rate_is_offered`),
    else requests per second."""
    from tunepath.analysis.frames import rate_is_offered

    if all(rate_is_offered(r) and _finite(r.get("server_cpu_us_per_req")) for r in rows):
        return cpu_chart(rows, highlight, static_dir, f"{prefix}-cpu-{run_id}", run_id)
    return throughput_chart(rows, highlight, static_dir, f"{prefix}-throughput-{run_id}", run_id)


def cpu_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str, run_id: str) -> Chart:
    """Bars of Tomcat's CPU time per request per measurement of one run (lower is better), for a
    run whose load offered a fixed rate that every configuration served."""
    lit = _lit(rows, highlight)
    stock = sum(bool(fmt.speedup(r.get("cpu_vs_stock"))) for r in rows)
    words = [f"Server CPU time per request {base.where(rows, run_id)}, at a fixed offered rate that every "
             "configuration served.", words_.highlight_words(rows, lit),
             words_.stats_words(rows, pairs=(("cpu_low", "cpu_high", "cpu_level"),)),
             "In brackets: the ratio to this run's stock configuration (below 1: less CPU per request)." if stock else ""]
    rel, narrow = base.emit(static_dir, name, ("cpu", rows, lit), lambda size: _bar_figure(rows, lit, size, _CPU), _render)
    listing = "; ".join(f"{r['label']}: {fmt.micros(r['server_cpu_us_per_req'])}" for r in rows)
    return Chart(id=base.chart_id(name), run_id=run_id, src=rel, narrow_src=narrow, rows=base.keys(rows),
                 alt=f"Horizontal bar chart of server CPU time per request on {rows[0]['server']} ({run_id}). "
                     f"{listing}.", caption=" ".join(w for w in words if w))


def _categories(ax, y: list[float], labels: list[str], size: layout.Size, fontsize: float) -> None:
    """Name each row: on the y axis (wide), or above its bar (narrow: the full width then goes
    to the bars); each name drawn as written."""
    labels = [base.literal(layout.wrap(label, size.wrap)) for label in labels]
    if size is layout.NARROW:
        ax.set_yticks([])
        ax.set_ylim(-0.55, len(y) - 0.1)
        for i, (yi, label) in enumerate(zip(y, labels)):
            ax.text(0, yi + 0.3, label, va="bottom", ha="left", fontsize=fontsize, linespacing=1.1,
                    gid=f"category-{i}")
    else:
        ax.set_yticks(y, labels, fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=size.small)
    ax.xaxis.set_major_locator(base.locator(size))


def _height(rows, size: layout.Size, wide_row: float | None = None, extra: float = 1.8) -> float:
    """The figure's height (inches): a row per bar; on the narrow drawing, a row whose name
    wraps onto more lines is taller."""
    if size is not layout.NARROW:
        return (wide_row or size.row) * len(rows) + extra
    lines = max(layout.wrap(r["label"], size.wrap).count("\n") for r in rows)
    return (size.row + 0.2 * lines) * len(rows) + extra


def _bars(ax, rows, values, lit, size: layout.Size) -> list[float]:
    """Horizontal bars, top to bottom, tagged ``bar-N``; returns their y positions."""
    y = list(range(len(rows)))[::-1]
    bars = ax.barh(y, values, height=0.5 if size is layout.NARROW else 0.8,
                   color=[base.HIGHLIGHT if h else base.CONTEXT for h in lit])
    for i, patch in enumerate(bars.patches):
        patch.set_gid(f"bar-{i}")
    _categories(ax, y, [r["label"] for r in rows], size, size.font)
    return y


@dataclass(frozen=True)
class _Bars:
    """What one kind of bar chart draws: the figure (``key``), its interval's bounds, the words
    beside each bar, the axis label and the title; ``offered`` marks a single offered rate."""

    key: str
    low: str
    high: str
    words: Callable[[dict, layout.Size], str]
    xlabel: str
    title: str
    offered: bool = False


def _cpu_words(r: dict, size: layout.Size) -> str:
    ratio = fmt.speedup(r.get("cpu_vs_stock"))
    return fmt.micros(r["server_cpu_us_per_req"]) + ("" if not ratio else f"  ({ratio})" if size is layout.NARROW
                                                     else f"  ({ratio} stock)")


_CPU = _Bars("server_cpu_us_per_req", "cpu_low", "cpu_high", _cpu_words,
             "server CPU µs per request (lower is better)", "Server CPU per request")
_RPS = _Bars("requests_per_sec", "rps_low", "rps_high", lambda r, size: fmt.rate(r["requests_per_sec"]) + _gain_words(r, size),
             "requests per second (higher is better)", "Throughput", offered=True)


def _bar_figure(rows: list[dict], lit: list[bool], size: layout.Size, spec: _Bars) -> "Figure":
    """Horizontal bars of ``spec.key`` per measurement, with the interval of each median as whiskers
    and, for requests/s, the offered rate as a dashed line where the rows share one."""
    values = [r[spec.key] if _finite(r[spec.key]) else 0.0 for r in rows]
    fig = base.figure(figsize=(size.width, _height(rows, size)))
    ax = fig.add_subplot()
    y = _bars(ax, rows, values, lit, size)
    ci = [(yi, r) for yi, r in zip(y, rows) if words_.has_interval(r, spec.low, spec.high)]
    if ci:   # whiskers: the interval of the median over the repetitions
        base.whiskers(ax, [yi for yi, _ in ci], [r[spec.key] for _, r in ci],
                      [r[spec.low] for _, r in ci], [r[spec.high] for _, r in ci])
    rates = sorted({r["offered_rate"] for r in rows if _finite(r["offered_rate"])}) if spec.offered else []
    xlabel = spec.xlabel
    if len(rates) == 1 and size is layout.NARROW:   # beside the bars only: the names above them stay clear
        ax.vlines([rates[0]] * len(y), [yi - 0.32 for yi in y], [yi + 0.27 for yi in y], color=base.OFFERED,
                  linestyle="--", linewidth=1, gid="ref-offered")
    elif len(rates) == 1:
        ax.axvline(rates[0], color=base.OFFERED, linestyle="--", linewidth=1, gid="ref-offered")
    if len(rates) == 1:
        xlabel += f"; dashed line: offered rate, {fmt.offered(rates[0])} req/s"
    labels = [layout.BarLabel(yi, v, (r[spec.low], r[spec.high]) if words_.has_interval(r, spec.low, spec.high)
                              else None, base.literal(spec.words(r, size)), base.HIGHLIGHT if h else base.CONTEXT)
              for yi, r, v, h in zip(y, rows, values, lit)]
    top = max(values + rates + [r[spec.high] for _, r in ci]) or 1.0
    ax.xaxis.set_major_formatter(base.formatter(lambda x, _pos: f"{x:,.0f}"))
    layout.place_bar_labels(fig, ax, labels, size.small, top * 1.04, tuple(rates[:1]) if len(rates) == 1 else ())
    ax.set_xlabel(base.literal(layout.wrap(xlabel, size.line)), fontsize=size.small)
    ax.set_title(base.host_title(spec.title, rows, size), loc="left", fontsize=size.font)
    return fig


def latency_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str,
                  run_id: str) -> Chart:
    """Average and maximum latency per measurement of one run."""
    lit = _lit(rows, highlight)
    rel, narrow = base.emit(static_dir, name, ("latency", rows, lit),
                            lambda size: _latency_figure(rows, lit, size), _render)
    listing = "; ".join(f"{r['label']}: average {fmt.latency(r['latency_avg_ms'])}, "
                        f"maximum {fmt.latency(r['latency_max_ms'])}" for r in rows)
    words = [f"Average (bar) and maximum (mark) latency {base.where(rows, run_id)}.",
             words_.highlight_words(rows, lit), words_.stats_words(rows, "Averages and maxima", ())]
    return Chart(id=base.chart_id(name), run_id=run_id, src=rel, narrow_src=narrow, rows=base.keys(rows),
                 alt=f"Horizontal bar chart of average latency with maximum marks on {rows[0]['server']} "
                     f"({run_id}). {listing}.",
                 caption=" ".join(w for w in words if w))


def _latency_figure(rows: list[dict], lit: list[bool], size: layout.Size) -> "Figure":
    avg = [r["latency_avg_ms"] if _finite(r["latency_avg_ms"]) else 0.0 for r in rows]
    mx = [r["latency_max_ms"] if _finite(r["latency_max_ms"]) else 0.0 for r in rows]
    scale, unit = (1000.0, "s") if max(mx + [0.0]) >= 1000 else (1.0, "ms")
    fig = base.figure(figsize=(size.width, _height(rows, size)))
    ax = fig.add_subplot()
    y = _bars(ax, rows, [v / scale for v in avg], lit, size)
    ax.scatter([v / scale for v in mx], y, marker="|", s=200, color=base.INK, zorder=3, gid="max-mark")
    ax.set_xlim(0, max(mx + avg + [1e-9]) / scale * 1.05)
    ax.set_xlabel(layout.wrap(f"latency in {unit} (lower is better); bar: average, mark: maximum", size.line),
                  fontsize=size.small)
    ax.set_title(base.host_title("Latency", rows, size), loc="left", fontsize=size.font)
    return fig


def _ratio_levels(rows: list[dict]) -> str:
    """The whiskers' level, as the comparison table writes it (``95 % CI …``)."""
    found = sorted({r["display"]["interval"].split(" CI ")[0] for r in rows
                    if words_.has_interval(r, "low", "high") and " CI " in r.get("display", {}).get("interval", "")},
                   key=lambda s: float(s.removesuffix(" %")))
    if not found:
        return ""
    level = found[0] if len(found) == 1 else f"{found[0].removesuffix(' %')}–{found[-1]}"
    return f"Whiskers: the {level} confidence interval of the ratio, where both runs repeated the measurement."


def ratio_chart(rows: list[dict], static_dir: Path, name: str, title: str, alt_prefix: str,
                caption: str) -> Chart:
    """Ratios B/A per measurement (1.0 = the same), with intervals where known; the caption
    gains the whiskers' confidence level from the rows."""
    rel, narrow = base.emit(static_dir, name, ("ratio", rows, title),
                            lambda size: _ratio_figure(rows, title, size), _render)
    listing = "; ".join(f"{r['label']}: {fmt.speedup(r.get('ratio')) or 'n/a'}" for r in rows)
    return Chart(id=name, run_id=rows[0].get("run_id", "") if rows else "", src=rel, narrow_src=narrow,
                 alt=f"{alt_prefix}. {listing}.", caption=" ".join(w for w in (caption, _ratio_levels(rows)) if w))


def _ratio_figure(rows: list[dict], title: str, size: layout.Size) -> "Figure":
    fig = base.figure(figsize=(size.width, _height(rows, size, 0.45, 1.6)))
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    vals = [r["ratio"] if _finite(r.get("ratio")) else math.nan for r in rows]
    ax.scatter(vals, y, color=base.HIGHLIGHT, zorder=3, gid="ratio-mark")
    ci = [(yi, r) for yi, r in zip(y, rows) if words_.has_interval(r, "low", "high")]
    if ci:
        base.whiskers(ax, [yi for yi, _ in ci], [r["ratio"] for _, r in ci], [r["low"] for _, r in ci],
                      [r["high"] for _, r in ci], cap=3.0, width=1.0)
    if size is layout.NARROW:    # the row names sit above the marks there: the line stops short of them
        ax.vlines([1.0] * len(y), [yi - 0.4 for yi in y], [yi + 0.25 for yi in y], color=base.CONTEXT,
                  linestyle="--", gid="ref-same")
    else:
        ax.axvline(1.0, color=base.CONTEXT, linestyle="--", gid="ref-same")
    top = max([v for v in vals if _finite(v)] + [r["high"] for _, r in ci] + [1.0])
    ax.set_xlim(0, top * 1.1)
    ax.xaxis.set_major_formatter(base.formatter(lambda v, _p: f"{v:g}×"))
    _categories(ax, y, [r["label"] for r in rows], size, size.small)
    ax.set_xlabel(layout.wrap("ratio of requests per second (1× = the same; dashed line)", size.line),
                  fontsize=size.small)
    ax.set_title(base.literal(layout.wrap(title, size.line)), loc="left", fontsize=size.font)
    return fig
