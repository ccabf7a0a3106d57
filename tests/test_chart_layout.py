"""The charts' words are readable: no label collides with a bar's edge, a whisker, a line or
another label; text on a bar meets WCAG AA contrast; the narrow drawing's text stays at least
10 px high on a 390 px phone. Read back from every SVG the site build wrote (tests/svgboxes.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from svgboxes import background, problems, read

from tunepath.publish import chartbase as base
from tunepath.publish import chartlayout as layout
from tunepath.publish.chartlayout import AA_LARGE, AA_NORMAL, contrast

pytestmark = pytest.mark.docs

PHONE_PX = 350          # a chart's width on a 390 px screen (the page's side padding taken off)
WIDE_PX = 760           # at most, on a wide screen (the content column)
MIN_PX = {True: 10.0, False: 9.0}     # narrow (phone), wide


def _width_pt(svg: Path) -> float:
    return float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg.read_text()[:2000]).group(1))


def _charts(built_site) -> list[Path]:
    found = sorted((built_site.site_dir / "static" / "charts").glob("*.svg"))
    assert len(found) > 40
    return found


@pytest.mark.fast
def test_contrast_is_wcag_2():
    assert contrast("#ffffff", "#000000") == pytest.approx(21.0)
    assert contrast("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)     # the well-known AA grey
    assert contrast("#ffffff", base.CONTEXT) < 2.0          # the old white labels on grey bars
    for fill in (base.CONTEXT, base.HIGHLIGHT):
        assert contrast(layout.text_on(fill), fill) >= AA_NORMAL
    with pytest.raises(ValueError, match="no text colour"):
        layout.text_on("#777777")                            # neither dark nor white reaches 4.5:1


def _bar_with_whisker(tmp_path: Path, place: bool) -> Path:
    fig = base.figure(figsize=(5, 2))
    ax = fig.add_subplot()
    bars = ax.barh([0], [8000], color=base.CONTEXT)
    bars.patches[0].set_gid("bar-0")
    base.whiskers(ax, [0], [8000], [7600], [8300])
    if place:
        layout.place_bar_labels(fig, ax, [layout.BarLabel(0, 8000, (7600, 8300), "8,229.11", base.CONTEXT)], 9, 8600)
    else:       # the old placement: right-aligned at the bar's end, in white
        ax.set_xlim(0, 8600)
        ax.text(8000 - 80, 0, "8,229.11", ha="right", va="center", fontsize=9, color="white")
    path = tmp_path / f"{place}.svg"
    path.write_bytes(base.render_svg(fig))
    return path


@pytest.mark.fast
def test_the_checks_catch_a_label_struck_by_a_whisker(tmp_path):
    old = read(_bar_with_whisker(tmp_path, place=False))
    assert any("whisker" in p for p in problems(old))
    label = next(t for t in old.texts if t.words == "8,229.11")
    assert contrast(label.color, background(old, label.boxes[0])) < AA_NORMAL
    new = read(_bar_with_whisker(tmp_path, place=True))
    assert problems(new) == []
    label = next(t for t in new.texts if t.words == "8,229.11")
    assert contrast(label.color, background(new, label.boxes[0])) >= AA_NORMAL


def test_no_chart_label_collides(built_site):
    found = [f"{svg.name}: {p}" for svg in _charts(built_site) for p in problems(read(svg))]
    assert not found, "\n".join(found)


def test_every_text_meets_aa_contrast(built_site):
    low = []
    for svg in _charts(built_site):
        d = read(svg)
        for t in d.texts:
            for box in t.boxes:
                need = AA_LARGE if t.size * 4 / 3 >= 24 else AA_NORMAL
                ratio = contrast(t.color, background(d, box))
                if ratio < need:
                    low.append(f"{svg.name}: {t.words!r} {t.color} on {background(d, box)}: {ratio:.2f}:1")
    assert not low, "\n".join(low)


def test_text_is_readable_on_a_phone_and_on_a_wide_screen(built_site):
    small = []
    for svg in _charts(built_site):
        narrow = svg.stem.endswith("-narrow")
        shown = PHONE_PX if narrow else WIDE_PX
        width_px = _width_pt(svg) * 4 / 3
        scale = min(1.0, shown / width_px)
        for t in read(svg).texts:
            px = t.size * 4 / 3 * scale
            if px < MIN_PX[narrow] - 0.05:
                small.append(f"{svg.name}: {t.words!r} at {px:.1f} px")
        if not narrow:
            assert svg.with_name(f"{svg.stem}-narrow.svg").is_file(), f"{svg.name} has no narrow drawing"
    assert not small, "\n".join(small[:20])
