"""Charts as SVG, byte-identical for the same input.

Every chart shows one run (one server host, one client): a run is never drawn as
the continuation of another host's series. The SVGs carry no date, and their
element ids come from a fixed hash salt, so rebuilding changes no byte unless the
data changed.
"""

from __future__ import annotations

import io
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg", force=False)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from . import formatting as fmt  # noqa: E402

__all__ = ["Chart", "throughput_chart", "latency_chart", "render_svg"]

HASH_SALT = "tunepath"
HIGHLIGHT = "#0091bd"   # Arm blue
CONTEXT = "#b8c4cc"
OFFERED = "#c2185b"

matplotlib.rcParams.update({
    "svg.hashsalt": HASH_SALT,
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
})


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


def render_svg(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    return buf.getvalue()


def _write(fig: Figure, static_dir: Path, rel: str) -> None:
    path = Path(static_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = render_svg(fig)
    if not path.exists() or path.read_bytes() != data:
        tmp = path.with_suffix(".svg.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


def _host_title(rows) -> str:
    first = rows[0]
    where = " — server and client on one machine" if first["same_machine"] else ""
    return f"{first['server']} ({first['run_id']}){where}"


def throughput_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str,
                     run_id: str, caption_note: str = "Highlighted bars are this step's measurements.") -> Chart:
    """Bars of requests/s per measurement of one run; ``highlight`` holds step/variant keys."""
    labels = [r["label"] for r in rows]
    values = [r["requests_per_sec"] if _finite(r["requests_per_sec"]) else 0.0 for r in rows]
    colors = [HIGHLIGHT if f"{r['step']}/{r['variant']}" in highlight else CONTEXT for r in rows]
    fig = Figure(figsize=(7.2, 0.55 * len(rows) + 1.6))
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    ax.barh(y, values, color=colors)
    ax.set_yticks(y, labels)
    rates = [r["offered_rate"] for r in rows if _finite(r["offered_rate"])]
    top = max(values + rates) or 1.0
    for yi, r, v in zip(y, rows, values):
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
        xlabel += f"; dashed line: offered rate, {fmt.rate(rate).removesuffix('.00')} req/s"
    ax.set_xlim(0, top * 1.08)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:,.0f}"))
    ax.set_xlabel(xlabel)
    ax.set_title(f"Throughput — {_host_title(rows)}", loc="left", fontsize=10)
    rel = f"charts/{name}.svg"
    _write(fig, static_dir, rel)
    listing = "; ".join(f"{r['label']}: {fmt.rate(r['requests_per_sec'])} req/s" for r in rows)
    return Chart(id=name.split("-", 1)[1] if "-" in name else name, run_id=run_id, src=rel,
                 alt=f"Horizontal bar chart of requests per second on {rows[0]['server']} "
                     f"({run_id}). {listing}.",
                 caption=f"Requests per second on {rows[0]['server']}, run {run_id}"
                         f"{' (server and client on one machine)' if rows[0]['same_machine'] else ''}. "
                         + caption_note)


def latency_chart(rows: list[dict], highlight: set[str], static_dir: Path, name: str,
                  run_id: str) -> Chart:
    """Average and maximum latency per measurement of one run."""
    labels = [r["label"] for r in rows]
    avg = [r["latency_avg_ms"] if _finite(r["latency_avg_ms"]) else 0.0 for r in rows]
    mx = [r["latency_max_ms"] if _finite(r["latency_max_ms"]) else 0.0 for r in rows]
    seconds = max(mx + [0.0]) >= 1000
    scale, unit = (1000.0, "s") if seconds else (1.0, "ms")
    fig = Figure(figsize=(7.2, 0.55 * len(rows) + 1.6))
    ax = fig.add_subplot()
    y = list(range(len(rows)))[::-1]
    colors = [HIGHLIGHT if f"{r['step']}/{r['variant']}" in highlight else CONTEXT for r in rows]
    ax.barh(y, [v / scale for v in avg], color=colors, label="average")
    ax.scatter([v / scale for v in mx], y, marker="|", s=200, color="#37474f", label="maximum", zorder=3)
    ax.set_yticks(y, labels)
    ax.set_xlabel(f"latency in {unit} (lower is better)")
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_title(f"Latency — {_host_title(rows)}", loc="left", fontsize=10)
    rel = f"charts/{name}.svg"
    _write(fig, static_dir, rel)
    listing = "; ".join(f"{r['label']}: average {fmt.latency(r['latency_avg_ms'])}, "
                        f"maximum {fmt.latency(r['latency_max_ms'])}" for r in rows)
    return Chart(id=name.split("-", 1)[1] if "-" in name else name, run_id=run_id, src=rel,
                 alt=f"Horizontal bar chart of average latency with maximum marks on {rows[0]['server']} "
                     f"({run_id}). {listing}.",
                 caption=f"Average (bar) and maximum (mark) latency on {rows[0]['server']}, run {run_id}.")
