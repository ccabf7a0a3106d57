"""What every chart shares: matplotlib's set-up, the colours, the record of a chart, and the
writing of its two renderings (wide and narrow) as byte-identical SVGs.

Every string a run recorded (a host name, a label) goes into a chart through :func:`literal`:
matplotlib reads a text with two unescaped dollar signs as mathtext, so ``srv $\\frac{1}{$`` would
fail the build and ``$x$`` would be drawn as math (issue 30, finding 7).

The SVGs carry no date, and their element ids come from a fixed hash salt (or are the ``gid``
given to an artist: ``bar-N``, ``whisker``, ``whisker-cap-N``, ``value-label-N``, ``ref-…``, which
``tests/test_chart_layout.py`` reads), so rebuilding changes no byte unless the data changed.
matplotlib is imported when a chart is drawn, not with this module.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tunepath.publish import chartlayout as layout
from tunepath.publish import chartmemo

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Chart", "RC", "HIGHLIGHT", "CONTEXT", "OFFERED", "INK", "figure", "formatter", "locator",
           "render_svg", "emit", "chart_id", "keys", "host_title", "where", "whiskers", "literal"]

HASH_SALT = "tunepath"
HIGHLIGHT = "#0091bd"   # Arm blue
CONTEXT = "#b8c4cc"
OFFERED = "#c2185b"
INK = "#37474f"         # whiskers and marks

RC = {
    "svg.hashsalt": HASH_SALT,
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_CONFIGURED = []


@dataclass(frozen=True)
class Chart:
    id: str
    run_id: str
    src: str          # path relative to the site's static root (the wide rendering)
    alt: str
    caption: str
    narrow_src: str = ""              # the same chart drawn for narrow screens (phones)
    rows: tuple[str, ...] = ()        # the step/variant keys drawn, in order

    def to_dict(self) -> dict:
        return asdict(self)


def literal(text) -> str:
    """``text`` as matplotlib draws it literally: every dollar sign escaped (no mathtext; an
    escaped one is drawn as a plain dollar, and a backslash before it stays)."""
    return str(text).replace("$", r"\$")


def figure(**kw) -> "Figure":
    """A new matplotlib Figure; the first call imports and configures matplotlib."""
    import matplotlib

    if not _CONFIGURED:
        matplotlib.use("Agg", force=False)
        matplotlib.rcParams.update(RC)
        _CONFIGURED.append(True)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kw)
    FigureCanvasAgg(fig)     # a renderer, to measure text before placing it
    return fig


def formatter(fn):
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(fn)


def locator(size: layout.Size):
    """Fewer ticks on the narrow rendering, so that their labels stay apart."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=4 if size is layout.NARROW else 7, min_n_ticks=2)


def render_svg(fig: "Figure") -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight")
    return buf.getvalue()


def _write(data: bytes, static_dir: Path, rel: str) -> bytes:
    path = Path(static_dir) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_bytes() != data:
        tmp = path.with_suffix(".svg.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return data


def emit(static_dir: Path, name: str, inputs, draw, render=None) -> tuple[str, str]:
    """Write ``charts/NAME.svg`` and ``charts/NAME-narrow.svg``, drawn by ``draw(size)`` for
    :data:`~chartlayout.WIDE` and :data:`~chartlayout.NARROW` and rendered by ``render(fig)``
    (default :func:`render_svg`), unless each is there, drawn from the same ``inputs`` (everything
    the drawing reads); returns both paths relative to ``static_dir``."""
    out = []
    for size, suffix in ((layout.WIDE, ""), (layout.NARROW, "-narrow")):
        rel = f"charts/{name}{suffix}.svg"
        key = chartmemo.key((size.name, inputs))
        if not chartmemo.unchanged(static_dir, rel, key):
            chartmemo.remember(static_dir, rel, key, _write((render or render_svg)(draw(size)), static_dir, rel))
        out.append(rel)
    return out[0], out[1]


def chart_id(name: str) -> str:
    return name.split("-", 1)[1] if "-" in name else name


def keys(rows: list[dict]) -> tuple[str, ...]:
    """The step/variant key of each row drawn (the page's tables carry the same keys)."""
    return tuple(f"{r['step']}/{r['variant']}" for r in rows if r.get("step") and r.get("variant"))


def host_title(what: str, rows, size: layout.Size = layout.WIDE) -> str:
    """``WHAT — server (run)``, wrapped to the drawing's line length, drawn as written."""
    first = rows[0]
    where_ = " — server and client on one machine" if first["same_machine"] else ""
    return literal(layout.wrap(f"{what} — {first['server']} ({first['run_id']}){where_}", size.line))


def where(rows, run_id: str) -> str:
    return (f"on {rows[0]['server']}, run {run_id}"
            f"{' (server and client on one machine)' if rows[0]['same_machine'] else ''}")


def whiskers(ax, pos, values, lows, highs, horizontal=True, cap=4.0, gid="whisker", width=1.2):
    """Interval whiskers with caps around ``values`` at ``pos`` (y positions when ``horizontal``,
    else x positions), tagged ``gid`` and ``gid-cap-N`` in the SVG."""
    err = [[v - lo for v, lo in zip(values, lows)], [hi - v for v, hi in zip(values, highs)]]
    xy = dict(x=values, y=pos, xerr=err) if horizontal else dict(x=pos, y=values, yerr=err)
    drawn = ax.errorbar(fmt="none", ecolor=INK, elinewidth=width, capsize=cap, zorder=3, **xy)
    _, caps, lines = drawn.lines
    for c in lines:
        c.set_gid(gid)
    for i, c in enumerate(caps):
        c.set_gid(f"{gid}-cap-{i}")
