"""What a chart SVG draws, read back from the file: the box of every text, the bars, and the
lines and marks (whiskers, caps, reference lines, series), in the SVG's own units (pt).

The charts draw text as glyph outlines (``svg.fonttype: path``): each text is a ``<g>`` holding
a comment (the text) and one ``<g transform="translate(…) [rotate(…)] scale(s -s)">`` per line,
whose ``<use>`` elements place glyphs defined once as ``<path id="DejaVuSans-…">``. A text's box
is the union of its glyphs' outline boxes (control points included: a little larger than the
ink, never smaller). Bars, whiskers and the rest carry the ``gid`` the chart code gave them
(``bar-N``, ``whisker…``, ``ref-…``, ``series-…``, ``max-mark``, ``ratio-mark``).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}href"
LINE_GIDS = ("whisker", "ref-", "series-", "max-mark", "ratio-mark")
_NUM = r"-?[\d.]+(?:e-?\d+)?"


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, o: "Box") -> bool:
        return self.x0 < o.x1 and o.x0 < self.x1 and self.y0 < o.y1 and o.y0 < self.y1

    def inside(self, o: "Box") -> bool:
        return o.x0 <= self.x0 and self.x1 <= o.x1 and o.y0 <= self.y0 and self.y1 <= o.y1

    def grow(self, d: float) -> "Box":
        return Box(self.x0 - d, self.y0 - d, self.x1 + d, self.y1 + d)


@dataclass
class Text:
    words: str
    gid: str
    size: float             # font size, pt
    color: str
    boxes: list[Box]        # one per line


@dataclass
class Drawing:
    texts: list[Text] = field(default_factory=list)
    bars: list[tuple[str, Box, str]] = field(default_factory=list)       # gid, box, fill
    # gid, segment (x0, y0, x1, y1), half the stroke width
    lines: list[tuple[str, tuple[float, float, float, float], float]] = field(default_factory=list)


def _points(d: str) -> list[tuple[float, float]]:
    nums = [float(v) for v in re.findall(_NUM, d)]
    return list(zip(nums[0::2], nums[1::2]))


def _affine(transform: str):
    """The matrix (a, b, c, d, e, f) of an SVG transform list of translate/rotate/scale."""
    m = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    for op, args in re.findall(r"(translate|rotate|scale)\(([^)]*)\)", transform):
        v = [float(x) for x in re.findall(_NUM, args)]
        if op == "translate":
            n = (1, 0, 0, 1, v[0], v[1] if len(v) > 1 else 0.0)
        elif op == "scale":
            n = (v[0], 0, 0, v[1] if len(v) > 1 else v[0], 0, 0)
        else:
            t = math.radians(v[0])
            n = (math.cos(t), math.sin(t), -math.sin(t), math.cos(t), 0, 0)
        a, b, c, d, e, f = m
        m = (a * n[0] + c * n[1], b * n[0] + d * n[1], a * n[2] + c * n[3], b * n[2] + d * n[3],
             a * n[4] + c * n[5] + e, b * n[4] + d * n[5] + f)
    return m


def _apply(m, x, y):
    return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]


def _bbox(pts) -> Box:
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    return Box(min(xs), min(ys), max(xs), max(ys))


def _style(el, key: str, default: str = "") -> str:
    found = re.search(rf"(?:^|;)\s*{key}:\s*([^;]+)", el.get("style", ""))
    return found.group(1).strip() if found else default


def _defs(root) -> dict[str, tuple[list[tuple[float, float]], str]]:
    """Every defined path by id: its points (glyph outlines scaled by their own transform)."""
    out = {}
    for p in root.iter(f"{SVG}path"):
        if p.get("id"):
            m = _affine(p.get("transform", ""))
            out[p.get("id")] = ([_apply(m, x, y) for x, y in _points(p.get("d", ""))], p.get("style", ""))
    return out


def _text(g, comment: str, defs) -> Text | None:
    lines = [c for c in g if c.tag == f"{SVG}g" and "scale(" in c.get("transform", "")]
    if not lines:
        return None
    boxes, size, color = [], 0.0, "#000000"
    for line in lines:
        m = _affine(line.get("transform"))
        size = max(size, abs(float(re.search(rf"scale\(({_NUM})", line.get("transform")).group(1))) * 100)
        color = _style(line, "fill", color)
        pts = []
        for use in line.iter(f"{SVG}use"):
            glyph = defs.get(use.get(XLINK, "").lstrip("#"), ([], ""))[0]
            dx = _affine(use.get("transform", ""))
            pts += [_apply(m, *_apply(dx, x, y)) for x, y in glyph]
        if pts:
            boxes.append(_bbox(pts))
    return Text(comment, g.get("id", ""), size, color, boxes) if boxes else None


def _lines(g, gid: str, defs, out: Drawing) -> None:
    for p in g.iter(f"{SVG}path"):
        if p.get("id"):
            continue
        pts, half = _points(p.get("d", "")), float(_style(p, "stroke-width", "1") or 1) / 2
        out.lines += [(gid, (*a, *b), half) for a, b in zip(pts, pts[1:])]
    for use in g.iter(f"{SVG}use"):
        pts, style = defs.get(use.get(XLINK, "").lstrip("#"), ([], ""))
        x, y = float(use.get("x", 0)), float(use.get("y", 0))
        if pts:
            b = _bbox([(x + px, y + py) for px, py in pts])
            out.lines.append((gid, (b.x0, b.y0, b.x1, b.y1), 0.75))


def read(path: Path) -> Drawing:
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.fromstring(Path(path).read_bytes(), parser=parser)
    defs, out = _defs(root), Drawing()
    for g in root.iter(f"{SVG}g"):
        gid = g.get("id", "")
        comments = [c.text.strip() for c in g if c.tag is ET.Comment and c.text]
        if comments:
            found = _text(g, comments[0], defs)
            if found:
                out.texts.append(found)
        elif gid.startswith("bar-"):
            p = g.find(f"{SVG}path")
            out.bars.append((gid, _bbox(_points(p.get("d"))), _style(p, "fill")))
        elif gid.startswith(LINE_GIDS):
            _lines(g, gid, defs, out)
    return out


def segment_hits(seg: tuple[float, float, float, float], half: float, box: Box) -> bool:
    """Whether a segment (stroke half-width ``half``) crosses ``box`` (Liang–Barsky clipping)."""
    b = box.grow(half)
    x0, y0, x1, y1 = seg
    dx, dy = x1 - x0, y1 - y0
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, x0 - b.x0), (dx, b.x1 - x0), (-dy, y0 - b.y0), (dy, b.y1 - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            lo = max(lo, t)
        else:
            hi = min(hi, t)
        if lo > hi:
            return False
    return True


def problems(d: Drawing) -> list[str]:
    """Every collision: text on text, text across a bar's edge, text on a line or mark."""
    out = []
    flat = [(t, b) for t in d.texts for b in t.boxes]
    for i, (t, b) in enumerate(flat):
        for u, c in flat[i + 1:]:
            if t is not u and b.overlaps(c):
                out.append(f"text {t.words!r} overlaps text {u.words!r}")
        for gid, bar, _ in d.bars:
            if b.overlaps(bar) and not b.inside(bar):
                out.append(f"text {t.words!r} crosses the edge of {gid}")
        for gid, seg, half in d.lines:
            if segment_hits(seg, half, b):
                out.append(f"text {t.words!r} is struck by {gid}")
                break
    return out


def background(d: Drawing, box: Box) -> str:
    """The fill behind a text box: the bar holding its centre, else the white figure."""
    cx, cy = (box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2
    for _, bar, fill in d.bars:
        if bar.x0 <= cx <= bar.x1 and bar.y0 <= cy <= bar.y1:
            return fill
    return "#ffffff"
