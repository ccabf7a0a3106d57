"""The sweep charts: throughput, CPU and p99 against the thread count; latency percentiles and
the achieved rate against the offered rate. One run per chart; the caption's repetitions and
confidence levels come from the rows drawn (:mod:`tunepath.publish.chartwords`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from tunepath.publish import chartbase as base
from tunepath.publish import chartlayout as layout
from tunepath.publish import chartwords as words_
from tunepath.publish import formatting as fmt

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["thread_sweep_chart", "rate_sweep_chart"]

_finite = words_.finite
_PAIRS = (("rps_low", "rps_high", "interval_level"), ("cpu_low", "cpu_high", "cpu_level"))


def thread_sweep_chart(rows: list[dict], static_dir: Path, name: str, run_id: str, best: str | None,
                       sweep_value, best_words: str = "highest median throughput") -> base.Chart:
    """Throughput, server CPU per request and p99 latency against maxThreads (one run);
    ``sweep_value(variant)`` is the thread count a variant stands for; ``best_words`` what made
    ``best`` the best (open loop: the least server CPU per request)."""
    rows = sorted(rows, key=lambda r: sweep_value(r["variant"]) or 0)
    xs = [sweep_value(r["variant"]) for r in rows]
    best_x = (sweep_value(best), best_words) if any(r["variant"] == best for r in rows) else None
    rel, narrow = base.emit(static_dir, name, ("thread-sweep", rows, xs, best_x),
                            lambda size: _thread_sweep_figure(rows, xs, best_x, size))
    listing = "; ".join(f"{r['label']}: {fmt.rate(r['requests_per_sec'])} req/s, "
                        f"{fmt.micros(r.get('server_cpu_us_per_req'))} server CPU per request, "
                        f"p99 {fmt.latency(r.get('p99_ms'))}" for r in rows)
    return base.Chart(id=name.split("-", 1)[1], run_id=run_id, src=rel, narrow_src=narrow, rows=base.keys(rows),
                      alt=f"Three line charts against maxThreads on {rows[0]['server']} ({run_id}): throughput, "
                          f"server CPU per request and p99 latency. {listing}.",
                      caption=f"Throughput, server CPU time per request and p99 latency against the thread count "
                              f"{base.where(rows, run_id)}. {words_.stats_words(rows, 'Points', _PAIRS)}")


def _line(ax, xs, rows, value, low, high, color, gid):
    ys = [r[value] if _finite(r.get(value)) else math.nan for r in rows]
    ax.plot(xs, ys, marker="o", color=color, linewidth=1.5, gid=f"series-{gid}")
    ci = [(x, r) for x, r in zip(xs, rows) if low and words_.has_interval(r, low, high)]
    if ci:
        base.whiskers(ax, [x for x, _ in ci], [r[value] for _, r in ci], [r[low] for _, r in ci],
                      [r[high] for _, r in ci], horizontal=False, cap=3.0, gid=f"whisker-{gid}", width=1.0)


def _thread_sweep_figure(rows: list[dict], xs: list, best_x, size: layout.Size) -> "Figure":
    """``best_x``: (the best thread count, what made it the best) for a dotted line, or None."""
    fig = base.figure(figsize=(size.width, 7.4))
    axes = fig.subplots(3, 1, sharex=True)
    _line(axes[0], xs, rows, "requests_per_sec", "rps_low", "rps_high", base.HIGHLIGHT, "rps")
    axes[0].set_ylabel("requests/s", fontsize=size.small)
    axes[0].yaxis.set_major_formatter(base.formatter(lambda v, _p: f"{v:,.0f}"))
    _line(axes[1], xs, rows, "server_cpu_us_per_req", "cpu_low", "cpu_high", "#6a1b9a", "cpu")
    axes[1].set_ylabel(layout.wrap("server CPU µs/request", 14 if size is layout.NARROW else 40), fontsize=size.small)
    _line(axes[2], xs, rows, "p99_ms", None, None, base.OFFERED, "p99")
    axes[2].set_ylabel("p99 latency, ms", fontsize=size.small)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", color="#e0e6ea", linewidth=0.6)
        ax.tick_params(labelsize=size.small)
        ax.yaxis.set_major_locator(base.locator(size))
    if best_x is not None:
        for i, ax in enumerate(axes):
            ax.axvline(best_x[0], color="#8bc34a", linestyle=":", linewidth=1.2, gid=f"ref-best-{i}")
    axes[2].set_xticks(xs, [str(x) for x in xs])
    axes[2].minorticks_off()
    axes[2].set_xlabel(base.literal(layout.wrap("maxThreads (= minSpareThreads), log scale"
                                                + (f"; dotted: the {best_x[1]}" if best_x else ""), size.line)),
                       fontsize=size.small)
    axes[0].set_title(base.host_title("Thread-count sweep", rows, size), loc="left", fontsize=size.font)
    return fig


def rate_sweep_chart(rows: list[dict], capacity, static_dir: Path, name: str, run_id: str) -> base.Chart:
    """Latency percentiles against the offered rate, the objective, and achieved vs offered."""
    rows = sorted(rows, key=lambda r: r["offered_rate"] or 0)
    rel, narrow = base.emit(static_dir, name, ("rate-sweep", rows, capacity),
                            lambda size: _rate_sweep_figure(rows, capacity, size))
    listing = "; ".join(f"{fmt.offered(r['offered_rate'])} offered: "
                        f"{fmt.rate(r['requests_per_sec'])} achieved, p99 {fmt.latency(r.get('p99_ms'))}"
                        for r in rows)
    return base.Chart(id=name.split("-", 1)[1], run_id=run_id, src=rel, narrow_src=narrow, rows=base.keys(rows),
                      alt=f"Line chart of latency percentiles against offered rate on {rows[0]['server']} ({run_id}), "
                          f"with the latency objective and the achieved rate. {listing}.",
                      caption=f"Latency percentiles (log scale) and achieved rate against the offered rate "
                              f"{base.where(rows, run_id)}. {words_.stats_words(rows, 'Points', ())} "
                              f"{capacity.sentence()}{_lines_words(capacity)}")


def _legend(ax, size: layout.Size, ncol: int):
    """A legend above the plot, outside it: it covers no line."""
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=ncol, fontsize=size.small, frameon=False,
              borderaxespad=0.2, handlelength=1.6, columnspacing=1.0)


def _lines_words(capacity) -> str:
    """What the vertical lines mark (as :func:`_capacity_lines` draws them)."""
    if not capacity.optimistic_rate:
        return ""
    if capacity.optimistic_rate == capacity.conservative_rate:
        return " Dotted line: the capacity at the objective."
    if not capacity.conservative_rate:
        return " Dash-dotted line: the optimistic figure (there is no conservative capacity)."
    return " Dotted line: the conservative capacity, the figure to quote; dash-dotted line: the optimistic figure."


def _capacity_lines(top, bottom, capacity) -> None:
    """Vertical lines at the capacity to quote (the conservative one) and, where it differs, at
    the optimistic figure, each named in the legend above the plot."""
    lines = []
    if capacity.conservative_rate:
        same = capacity.conservative_rate == capacity.optimistic_rate
        lines.append((capacity.conservative_rate, "conservative", ":", "#2e7d32",
                      "capacity at the objective" if same else "conservative capacity"))
    if capacity.optimistic_rate and capacity.optimistic_rate != capacity.conservative_rate:
        lines.append((capacity.optimistic_rate, "optimistic", "-.", "#8bc34a",
                      "optimistic capacity"))
    for rate, gid, style, color, label in lines:
        for ax in (top, bottom):
            ax.axvline(rate, color=color, linestyle=style, linewidth=1.6,
                       gid=f"ref-{gid}-{'top' if ax is top else 'bottom'}", label=label if ax is top else None)


def _rate_sweep_figure(rows: list[dict], capacity, size: layout.Size) -> "Figure":
    xs = [r["offered_rate"] for r in rows]
    fig = base.figure(figsize=(size.width, 7.0))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.2, 1], "hspace": 0.45})
    styles = (("p50_ms", "p50", "#90a4ae"), ("p90_ms", "p90", "#4f83a3"), ("p99_ms", "p99", base.HIGHLIGHT),
              ("p99.9_ms", "p99.9", base.INK))
    for key, label, color in styles:
        ys = [r[key] if _finite(r.get(key)) else math.nan for r in rows]
        if any(_finite(v) for v in ys):
            top.plot(xs, ys, marker="o", label=label, color=color, linewidth=1.4, gid=f"series-{label}")
    top.set_yscale("log")
    top.axhline(capacity.slo_ms, color=base.OFFERED, linestyle="--", linewidth=1, gid="ref-objective",
                label=base.literal(f"objective p{capacity.percentile} ≤ {capacity.slo_ms:g} ms"))
    _capacity_lines(top, bottom, capacity)
    for r, ok in zip(rows, capacity.meets):
        if not ok and _finite(r.get("p99_ms")):
            top.scatter([r["offered_rate"]], [r["p99_ms"]], s=90, facecolors="none", edgecolors=base.OFFERED, zorder=4)
    top.set_ylabel("latency, ms (log scale)", fontsize=size.small)
    entries = len(top.get_legend_handles_labels()[1])
    ncol = (3 if entries <= 6 else 2) if size is layout.NARROW else (5 if entries <= 5 else 4)
    _legend(top, size, ncol)
    top.set_title(base.host_title("Rate sweep", rows, size), loc="left", fontsize=size.font,
                  pad=8 + 16 * math.ceil(entries / ncol))
    bottom.plot(xs, xs, color=base.CONTEXT, linestyle="--", linewidth=1, label="offered")
    bottom.plot(xs, [r["requests_per_sec"] for r in rows], marker="o", color=base.HIGHLIGHT, label="achieved")
    bottom.set_ylabel("requests/s", fontsize=size.small)
    bottom.set_xlabel(layout.wrap("offered rate, requests/s (circled: misses the objective)",
                                  size.line), fontsize=size.small)
    _legend(bottom, size, 2)
    for ax in (top, bottom):
        ax.xaxis.set_major_formatter(base.formatter(lambda v, _p: f"{v:,.0f}"))
        ax.xaxis.set_major_locator(base.locator(size))
        ax.grid(color="#e0e6ea", linewidth=0.6)
        ax.tick_params(labelsize=size.small)
    bottom.yaxis.set_major_formatter(base.formatter(lambda v, _p: f"{v:,.0f}"))
    bottom.yaxis.set_major_locator(base.locator(size))
    return fig
