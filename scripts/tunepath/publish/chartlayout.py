"""Where a chart's words go, and in what colour: computed from what is drawn.

- Contrast is WCAG 2.x's: the relative luminance of each colour, and the ratio
  (L1 + 0.05) / (L2 + 0.05). Text on a bar takes the candidate colour with the higher
  contrast; AA asks 4.5:1 for normal text and 3:1 for large text (≥ 24 px, or ≥ 18.66 px bold).
- A bar's value label goes where nothing else is: inside the bar only if it fits between the
  bar's start and the lower end of its whisker (cap included), else to the right of everything
  drawn on that row (bar end, whisker cap, the offered-rate line it would cross); the axis is
  widened until every label fits. Extents are measured with matplotlib's renderer, in display
  pixels, so the decision is about the drawn text, not a guess.
- A chart is drawn twice: ``WIDE`` for wide screens and ``NARROW`` for phones, whose fonts
  stay at least 9–10 px high when the image is shown about 350 px wide (see
  ``layouts/_partials/chart-figure.html``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

__all__ = ["AA_NORMAL", "AA_LARGE", "luminance", "contrast", "text_on", "Size", "WIDE", "NARROW",
           "wrap", "BarLabel", "place_bar_labels"]

AA_NORMAL = 4.5
AA_LARGE = 3.0
TEXT_DARK = "#111111"
TEXT_LIGHT = "#ffffff"


def _channel(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(color: str) -> float:
    """WCAG 2.x relative luminance of ``#rrggbb``."""
    h = color.lstrip("#")
    if len(h) == 3:
        h = "".join(ch * 2 for ch in h)
    r, g, b = (_channel(int(h[i:i + 2], 16) / 255) for i in (0, 2, 4))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: str, bg: str) -> float:
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_on(fill: str, candidates=(TEXT_DARK, TEXT_LIGHT)) -> str:
    """The candidate text colour that contrasts most with ``fill``; an error if none reaches AA."""
    best = max(candidates, key=lambda c: contrast(c, fill))
    if contrast(best, fill) < AA_NORMAL:
        raise ValueError(f"no text colour reaches {AA_NORMAL}:1 on {fill} (best {best}, "
                         f"{contrast(best, fill):.2f}:1): choose a lighter or darker fill")
    return best


@dataclass(frozen=True)
class Size:
    """One rendering: figure width (inches), font sizes (points), wrap widths (characters) of
    category names and of titles and axis labels, inches per bar."""
    name: str
    width: float
    font: float
    small: float
    wrap: int
    line: int
    row: float


WIDE = Size("wide", 7.2, 10, 9, 60, 110, 0.55)
NARROW = Size("narrow", 3.9, 10, 9.5, 40, 42, 0.8)


def wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)) or text


@dataclass(frozen=True)
class BarLabel:
    y: float
    bar_end: float          # data units
    whisker: tuple[float, float] | None   # (low, high) in data units, or None
    text: str
    fill: str               # the bar's colour


def _px(ax, x: float, y: float = 0.0) -> tuple[float, float]:
    return tuple(ax.transData.transform((x, y)))


def _widths(ax, renderer, labels: list[BarLabel], fontsize: float) -> list[float]:
    """The drawn width of each label, in display pixels."""
    out = []
    for lab in labels:
        t = ax.text(0, lab.y, lab.text, fontsize=fontsize)
        out.append(t.get_window_extent(renderer).width)
        t.remove()
    return out


def _decide(ax, labels, widths, lines, pad, cap) -> list[tuple[str, float]]:
    """For each label ('inside', right edge px) or ('outside', left edge px), at the current limits:
    inside the bar if it fits left of the whisker's lower cap and of any vertical line crossing the
    bar, else right of the bar, the whisker's upper cap and any line it would cross."""
    x0 = _px(ax, 0)[0]
    xs = sorted(_px(ax, line)[0] for line in lines)
    out = []
    for lab, w in zip(labels, widths):
        end = _px(ax, lab.bar_end)[0]
        right = min(end, _px(ax, lab.whisker[0])[0] - cap if lab.whisker else end) - pad
        for lx in reversed(xs):         # a line crossing the label: the label moves left of it
            if right - w - pad <= lx <= right + pad:
                right = lx - pad
        if right - w - pad >= x0:
            out.append(("inside", right))
            continue
        left = max(end, _px(ax, lab.whisker[1])[0] + cap if lab.whisker else end) + pad
        for lx in xs:                   # a label crossing a line starts after it
            if left - pad <= lx <= left + w + pad:
                left = lx + pad
        out.append(("outside", left))
    return out


def place_bar_labels(fig, ax, labels: list[BarLabel], fontsize: float, xmax: float,
                     lines: tuple[float, ...] = (), cap_pt: float = 4.0) -> list:
    """Draw each value label clear of bars' edges, whiskers, caps, ``lines`` (x positions of
    vertical lines) and each other; widen the x axis (from ``xmax``) until all fit. Returns
    the Text artists (gid ``value-label-N``)."""
    renderer = fig.canvas.get_renderer()
    px_per_pt = fig.dpi / 72
    pad, cap = 0.7 * fontsize * px_per_pt, (cap_pt + 1.5) * px_per_pt
    widths = _widths(ax, renderer, labels, fontsize)
    ax.set_xlim(0, xmax)
    for _ in range(8):                       # widening can move a label outside: settle
        places = _decide(ax, labels, widths, lines, pad, cap)
        x0, x1 = _px(ax, 0)[0], _px(ax, ax.get_xlim()[1])[0]
        need = max([left + w + pad for (where, left), w in zip(places, widths) if where == "outside"] + [x1])
        if need <= x1 + 0.5:
            break
        ax.set_xlim(0, ax.get_xlim()[1] * (need - x0) / (x1 - x0) * 1.01)
    inv = ax.transData.inverted()
    texts = []
    for i, (lab, (where, edge)) in enumerate(zip(labels, places)):
        x = inv.transform((edge, 0))[0]
        color = text_on(lab.fill) if where == "inside" else TEXT_DARK
        texts.append(ax.text(x, lab.y, lab.text, va="center", ha="right" if where == "inside" else "left",
                             fontsize=fontsize, color=color, gid=f"value-label-{i}"))
    return texts
