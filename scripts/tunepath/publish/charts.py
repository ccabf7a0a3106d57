"""Charts as SVG, byte-identical for the same input.

Every chart shows one run (one server host, one client): a run is never drawn as
the continuation of another host's series. The SVGs carry no date, and their
element ids come from a fixed hash salt, so rebuilding changes no byte unless the
data changed.

Since the same input gives the same bytes, a chart need not be drawn again when its
input did not change: where the replay build asks for it (the environment variable
:data:`tunepath.publish.chartmemo.ENV`), :mod:`tunepath.publish.chartmemo` keeps the
SHA-256 of what each chart was drawn from, and a chart whose SVG is still there
with the recorded bytes is not redrawn. matplotlib is imported when a chart is drawn,
not with this module.
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tunepath.publish import chartmemo
from tunepath.publish import formatting as fmt

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Chart", "throughput_chart", "latency_chart", "thread_sweep_chart", "rate_sweep_chart",
           "ratio_chart", "render_svg", "RC"]

HASH_SALT = "tunepath"
HIGHLIGHT = "#0091bd"   # Arm blue
CONTEXT = "#b8c4cc"
OFFERED = "#c2185b"

RC = {
    "svg.hashsalt": HASH_SALT,
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_CONFIGURED = []


def _figure(**kw) -> "Figure":
    """A new matplotlib Figure; the first call imports and configures matplotlib."""
    import matplotlib

    if not _CONFIGURED:
        matplotlib.use("Agg", force=False)
        matplotlib.rcParams.update(RC)
        _CONFIGURED.append(True)
    from matplotlib.figure import Figure

    return Figure(**kw)


def _formatter(fn):
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(fn)


@dataclass(frozen=True)
class Chart:
    id: str
    run_id: str
    src: str          # path relative to the site's static root
    alt: str
    caption: str

    def to_dict(self) -> dict:
        return asdict(self)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def render_svg(fig: "Figure") -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    return buf.getvalue()


def _write(fig: "Figure", static_dir: Path, rel: str) -> bytes:
    path = Path(static_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = render_svg(fig)
    if not path.exists() or path.read_bytes() != data:
        tmp = path.with_suffix(".svg.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return data


def _emit(static_dir: Path, name: str, inputs, draw) -> str:
    """Write ``charts/NAME.svg`` drawn by ``draw()`` unless it is there, drawn from the same
    ``inputs`` (everything the drawing reads); returns its path relative to ``static_dir``."""
    rel = f"charts/{name}.svg"
    key = chartmemo.key(inputs)
    if not chartmemo.unchanged(static_dir, rel, key):
        chartmemo.remember(static_dir, rel, key, _write(draw(), static_dir, rel))
    return rel


def _host_title(rows) -> str:
    first = rows[0]
    where = " — server and client on one machine" if first["same_machine"] else ""
    return f"{first['server']} ({first['run_id']}){where}"


def _has_interval(rows: list[dict], low: str, high: str) -> bool:
    return any(_finite(r.get(low)) and _finite(r.get(high)) for r in rows)


def _interval_words(rows: list[dict], low: str = "rps_low", high: str = "rps_high") -> str:
    """What the whiskers are, at the level they really have: a distribution-free interval of a
    median from few repetitions reaches less than 95 % (its level is in ``interval_level``)."""
    levels = sorted({round(float(r["interval_level"]) * 100) for r in rows
                     if _finite(r.get(low)) and _finite(r.get(high)) and _finite(r.get("interval_level"))})
    if len(levels) == 1:
        return f"its {levels[0]} % confidence interval"
    if levels:
        return f"its confidence interval ({'–'.join(f'{lv} %' for lv in (levels[0], levels[-1]))}, as the table gives per row)"
    return "its confidence interval"


def throughput_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str,
                     run_id: str, caption_note: str = "Highlighted bars are this step's measurements.") -> Chart:
    """Bars of requests/s per measurement of one run; ``highlight`` holds step/variant keys."""
    if _has_interval(rows, "rps_low", "rps_high"):
        caption_note += f" Bars show the median of the repetitions; whiskers {_interval_words(rows)}."
    rel = _emit(static_dir, name, ("throughput", rows, highlight), lambda: _throughput_figure(rows, highlight))
    listing = "; ".join(f"{r['label']}: {fmt.rate(r['requests_per_sec'])} req/s" for r in rows)
    return Chart(id=name.split("-", 1)[1] if "-" in name else name, run_id=run_id, src=rel,
                 alt=f"Horizontal bar chart of requests per second on {rows[0]['server']} "
                     f"({run_id}). {listing}.",
                 caption=f"Requests per second on {rows[0]['server']}, run {run_id}"
                         f"{' (server and client on one machine)' if rows[0]['same_machine'] else ''}. "
                         + caption_note)


def _throughput_figure(rows: list[dict], highlight: set[str]) -> "Figure":
    labels = [r["label"] for r in rows]
    values = [r["requests_per_sec"] if _finite(r["requests_per_sec"]) else 0.0 for r in rows]
    colors = [HIGHLIGHT if f"{r['step']}/{r['variant']}" in highlight else CONTEXT for r in rows]
    fig = _figure(figsize=(7.2, 0.55 * len(rows) + 1.6))
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, labels)
    rates = [r["offered_rate"] for r in rows if _finite(r["offered_rate"])]
    ci = [(yi, r) for yi, r in zip(y, rows) if _finite(r.get("rps_low")) and _finite(r.get("rps_high"))]
    if ci:   # whiskers: the interval of the median over the repetitions
        ax.errorbar([r["requests_per_sec"] for _, r in ci], [yi for yi, _ in ci],
                    xerr=[[r["requests_per_sec"] - r["rps_low"] for _, r in ci],
                          [r["rps_high"] - r["requests_per_sec"] for _, r in ci]],
                    fmt="none", ecolor="#37474f", elinewidth=1.2, capsize=4, zorder=3)
        values = [max(v, r.get("rps_high") or 0) for v, r in zip(values, rows)]
    top = max(values + rates) or 1.0
    for yi, r, v in zip(y, rows, values):
        v = r["requests_per_sec"] if _finite(r["requests_per_sec"]) else 0.0
        text = fmt.rate(r["requests_per_sec"])
        gain = fmt.speedup(r.get("speedup_vs_stock"))
        if gain:
            text += f"  ({gain} stock)"
        if v > top * 0.45:   # inside the bar, clear of the offered-rate line
            ax.text(v - top * 0.01, yi, text, va="center", ha="right", fontsize=9, color="white")
        else:
            ax.text(v + top * 0.01, yi, text, va="center", fontsize=9)
    offered = set(rates)
    xlabel = "requests per second (higher is better)"
    if len(offered) == 1:
        rate = offered.pop()
        ax.axvline(rate, color=OFFERED, linestyle="--", linewidth=1)
        xlabel += f"; dashed line: offered rate, {fmt.offered(rate)} req/s"
    ax.set_xlim(0, top * 1.08)
    ax.xaxis.set_major_formatter(_formatter(lambda x, _pos: f"{x:,.0f}"))
    ax.set_xlabel(xlabel)
    ax.set_title(f"Throughput — {_host_title(rows)}", loc="left", fontsize=10)
    return fig


def latency_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str,
                  run_id: str) -> Chart:
    """Average and maximum latency per measurement of one run."""
    rel = _emit(static_dir, name, ("latency", rows, highlight), lambda: _latency_figure(rows, highlight))
    listing = "; ".join(f"{r['label']}: average {fmt.latency(r['latency_avg_ms'])}, "
                        f"maximum {fmt.latency(r['latency_max_ms'])}" for r in rows)
    return Chart(id=name.split("-", 1)[1] if "-" in name else name, run_id=run_id, src=rel,
                 alt=f"Horizontal bar chart of average latency with maximum marks on {rows[0]['server']} "
                     f"({run_id}). {listing}.",
                 caption=f"Average (bar) and maximum (mark) latency on {rows[0]['server']}, run {run_id}.")


def _latency_figure(rows: list[dict], highlight: set[str]) -> "Figure":
    labels = [r["label"] for r in rows]
    avg = [r["latency_avg_ms"] if _finite(r["latency_avg_ms"]) else 0.0 for r in rows]
    mx = [r["latency_max_ms"] if _finite(r["latency_max_ms"]) else 0.0 for r in rows]
    seconds = max(mx + [0.0]) >= 1000
    scale, unit = (1000.0, "s") if seconds else (1.0, "ms")
    fig = _figure(figsize=(7.2, 0.55 * len(rows) + 1.6))
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    colors = [HIGHLIGHT if f"{r['step']}/{r['variant']}" in highlight else CONTEXT for r in rows]
    ax.barh(y, [v / scale for v in avg], color=colors, label="average")
    ax.scatter([v / scale for v in mx], y, marker="|", s=200, color="#37474f", label="maximum", zorder=3)
    ax.set_yticks(y, labels)
    ax.set_xlabel(f"latency in {unit} (lower is better)")
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_title(f"Latency — {_host_title(rows)}", loc="left", fontsize=10)
    return fig


def _errorbars(ax, xs, rows, value, low, high, color):
    ys = [r[value] if _finite(r.get(value)) else math.nan for r in rows]
    ax.plot(xs, ys, marker="o", color=color, linewidth=1.5)
    ci = [(x, r) for x, r in zip(xs, rows) if _finite(r.get(low)) and _finite(r.get(high))]
    if ci:
        ax.errorbar([x for x, _ in ci], [r[value] for _, r in ci],
                    yerr=[[r[value] - r[low] for _, r in ci], [r[high] - r[value] for _, r in ci]],
                    fmt="none", ecolor="#37474f", elinewidth=1, capsize=3)


def thread_sweep_chart(rows: list[dict], static_dir: Path, name: str, run_id: str, best: str | None,
                       sweep_value) -> Chart:
    """Throughput, server CPU per request and p99 latency against maxThreads (one run);
    ``sweep_value(variant)`` is the thread count a variant stands for."""
    rows = sorted(rows, key=lambda r: sweep_value(r["variant"]) or 0)
    xs = [sweep_value(r["variant"]) for r in rows]
    best_x = (sweep_value(best),) if any(r["variant"] == best for r in rows) else None
    rel = _emit(static_dir, name, ("thread-sweep", rows, xs, best_x),
                lambda: _thread_sweep_figure(rows, xs, best_x))
    listing = "; ".join(f"{r['label']}: {fmt.rate(r['requests_per_sec'])} req/s, "
                        f"{fmt.micros(r.get('server_cpu_us_per_req'))} server CPU per request, "
                        f"p99 {fmt.latency(r.get('p99_ms'))}" for r in rows)
    return Chart(id=name.split("-", 1)[1], run_id=run_id, src=rel,
                 alt=f"Three line charts against maxThreads on {rows[0]['server']} ({run_id}): throughput, "
                     f"server CPU per request and p99 latency. {listing}.",
                 caption=f"Throughput, server CPU time per request and p99 latency against the thread count on "
                         f"{rows[0]['server']}, run {run_id}. Points are medians of the repetitions; whiskers "
                         f"{_interval_words(rows).replace('its ', 'their ', 1)} where there were at least three.")


def _thread_sweep_figure(rows: list[dict], xs: list, best_x) -> "Figure":
    """``best_x``: (the thread count of the highest median throughput,) for a dotted line, or None."""
    fig = _figure(figsize=(7.2, 7.4))
    axes = fig.subplots(3, 1, sharex=True)
    _errorbars(axes[0], xs, rows, "requests_per_sec", "rps_low", "rps_high", HIGHLIGHT)
    axes[0].set_ylabel("requests/s")
    axes[0].yaxis.set_major_formatter(_formatter(lambda v, _p: f"{v:,.0f}"))
    _errorbars(axes[1], xs, rows, "server_cpu_us_per_req", "cpu_low", "cpu_high", "#6a1b9a")
    axes[1].set_ylabel("server CPU µs/request")
    axes[2].plot(xs, [r["p99_ms"] if _finite(r.get("p99_ms")) else math.nan for r in rows], marker="o",
                 color=OFFERED)
    axes[2].set_ylabel("p99 latency, ms")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", color="#e0e6ea", linewidth=0.6)
    if best_x is not None:
        for ax in axes:
            ax.axvline(best_x[0], color="#8bc34a", linestyle=":", linewidth=1.2)
    axes[2].set_xticks(xs, [str(x) for x in xs])
    axes[2].set_xlabel("maxThreads (= minSpareThreads), log scale; dotted: the highest median throughput")
    axes[0].set_title(f"Thread-count sweep — {_host_title(rows)}", loc="left", fontsize=10)
    return fig


def rate_sweep_chart(rows: list[dict], capacity, static_dir: Path, name: str, run_id: str) -> Chart:
    """Latency percentiles against the offered rate, the objective, and achieved vs offered."""
    rows = sorted(rows, key=lambda r: r["offered_rate"] or 0)
    rel = _emit(static_dir, name, ("rate-sweep", rows, capacity), lambda: _rate_sweep_figure(rows, capacity))
    listing = "; ".join(f"{fmt.offered(r['offered_rate'])} offered: "
                        f"{fmt.rate(r['requests_per_sec'])} achieved, p99 {fmt.latency(r.get('p99_ms'))}"
                        for r in rows)
    return Chart(id=name.split("-", 1)[1], run_id=run_id, src=rel,
                 alt=f"Line chart of latency percentiles against offered rate on {rows[0]['server']} ({run_id}), "
                     f"with the latency objective and the achieved rate. {listing}.",
                 caption=f"Latency percentiles (log scale) and achieved rate against the offered rate on "
                         f"{rows[0]['server']}, run {run_id}. {capacity.sentence()}")


def _rate_sweep_figure(rows: list[dict], capacity) -> "Figure":
    xs = [r["offered_rate"] for r in rows]
    fig = _figure(figsize=(7.2, 6.4))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2.2, 1]})
    styles = (("p50_ms", "p50", "#90a4ae"), ("p90_ms", "p90", "#4f83a3"), ("p99_ms", "p99", HIGHLIGHT),
              ("p99.9_ms", "p99.9", "#37474f"))
    for key, label, color in styles:
        ys = [r[key] if _finite(r.get(key)) else math.nan for r in rows]
        if any(_finite(v) for v in ys):
            top.plot(xs, ys, marker="o", label=label, color=color, linewidth=1.4)
    top.set_yscale("log")
    top.axhline(capacity.slo_ms, color=OFFERED, linestyle="--", linewidth=1)
    top.text(xs[0], capacity.slo_ms * 1.15, f"objective: p{capacity.percentile} ≤ {capacity.slo_ms:g} ms",
             color=OFFERED, fontsize=8)
    if capacity.capacity_rate:
        for ax in (top, bottom):
            ax.axvline(capacity.capacity_rate, color="#8bc34a", linestyle=":", linewidth=1.4)
    for r, ok in zip(rows, capacity.meets):
        if not ok and _finite(r.get("p99_ms")):
            top.scatter([r["offered_rate"]], [r["p99_ms"]], s=90, facecolors="none", edgecolors=OFFERED, zorder=4)
    top.set_ylabel("latency, ms (log scale)")
    top.legend(loc="upper left", fontsize=8, frameon=False)
    top.set_title(f"Rate sweep — {_host_title(rows)}", loc="left", fontsize=10)
    bottom.plot(xs, xs, color=CONTEXT, linestyle="--", linewidth=1, label="offered")
    bottom.plot(xs, [r["requests_per_sec"] for r in rows], marker="o", color=HIGHLIGHT, label="achieved")
    bottom.set_ylabel("requests/s")
    bottom.set_xlabel("offered rate, requests/s (dotted: capacity at the objective; circled: misses it)")
    bottom.legend(loc="upper left", fontsize=8, frameon=False)
    for ax in (top, bottom):
        ax.xaxis.set_major_formatter(_formatter(lambda v, _p: f"{v:,.0f}"))
        ax.grid(color="#e0e6ea", linewidth=0.6)
    bottom.yaxis.set_major_formatter(_formatter(lambda v, _p: f"{v:,.0f}"))
    return fig


def ratio_chart(rows: list[dict], static_dir: Path, name: str, title: str, alt_prefix: str,
                caption: str) -> Chart:
    """Ratios B/A per measurement (1.0 = the same), with intervals where known."""
    rel = _emit(static_dir, name, ("ratio", rows, title), lambda: _ratio_figure(rows, title))
    listing = "; ".join(f"{r['label']}: {fmt.speedup(r.get('ratio')) or 'n/a'}" for r in rows)
    return Chart(id=name, run_id=rows[0].get("run_id", "") if rows else "", src=rel,
                 alt=f"{alt_prefix}. {listing}.", caption=caption)


def _ratio_figure(rows: list[dict], title: str) -> "Figure":
    labels = [r["label"] for r in rows]
    fig = _figure(figsize=(7.2, 0.45 * len(rows) + 1.6))
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    vals = [r["ratio"] if _finite(r.get("ratio")) else math.nan for r in rows]
    ax.scatter(vals, y, color=HIGHLIGHT, zorder=3)
    ci = [(yi, r) for yi, r in zip(y, rows) if _finite(r.get("low")) and _finite(r.get("high"))]
    if ci:
        ax.errorbar([r["ratio"] for _, r in ci], [yi for yi, _ in ci],
                    xerr=[[r["ratio"] - r["low"] for _, r in ci], [r["high"] - r["ratio"] for _, r in ci]],
                    fmt="none", ecolor="#37474f", capsize=3)
    ax.axvline(1.0, color=CONTEXT, linestyle="--")
    top = max([v for v in vals if _finite(v)] + [r["high"] for _, r in ci] + [1.0])
    ax.set_xlim(0, top * 1.1)
    ax.xaxis.set_major_formatter(_formatter(lambda v, _p: f"{v:g}×"))
    ax.set_yticks(y, labels)
    ax.set_xlabel("ratio of requests per second (1× = the same; dashed line)")
    ax.set_title(title, loc="left", fontsize=10)
    return fig
