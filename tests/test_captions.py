"""Every chart caption states only what the rows it draws say, and agrees with the tables.

For each chart on each built page, the rows it draws (``data-rows``: step/variant keys of its
run) are looked up in the results tables of the site (the same run's table on the same page
first: a step's chart also draws the run's earlier steps, whose tables are on their own pages).
The confidence level(s) and repetition counts the caption states must be those the tables give
for exactly those rows, and its highlight sentence must name the bars the SVG draws in the
highlight colour.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from htmlscan import scan
from svgboxes import read

from tunepath.publish import chartwords as words
from tunepath.publish import formatting as fmt
from tunepath.publish.chartbase import CONTEXT, HIGHLIGHT

import pytest

pytestmark = pytest.mark.docs


class _Charts(HTMLParser):
    """figure.chart elements: their attributes, image sources and caption text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.charts: list[dict] = []
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "figure" and "chart" in (a.get("class") or "").split():
            self.charts.append({"attrs": a, "srcs": [], "sources": [], "caption": ""})
        elif self.charts and tag == "img":
            self.charts[-1]["srcs"].append(a.get("src", ""))
        elif self.charts and tag == "source":
            self.charts[-1]["sources"].append(a)
        elif self.charts and tag == "figcaption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_caption:
            self.charts[-1]["caption"] += data


def _charts(page: Path) -> list[dict]:
    p = _Charts()
    p.feed(page.read_text(encoding="utf-8"))
    return p.charts


def _table_index(pages: list[Path]) -> dict[tuple[str, str, str], dict[str, str]]:
    """(run, step, variant) → {field: text} from every figure span of the site's pages."""
    index: dict[tuple[str, str, str], dict[str, str]] = {}
    for page in pages:
        for a, text in scan(page).figures:
            key = (a.get("data-run"), a.get("data-step"), a.get("data-variant"))
            index.setdefault(key, {}).setdefault(a.get("data-field"), text.strip())
    return index


def _level(interval: str) -> float | None:
    m = re.match(r"([\d.]+) % CI ", interval or "")
    return float(m.group(1)) if m else None


def expected(cells: list[dict[str, str]], fields=("rps_interval",)) -> tuple[set[float], list[int]]:
    """The levels of the intervals and the repetition counts the table cells give."""
    levels = {lv for c in cells for f in fields if (lv := _level(c.get(f, ""))) is not None}
    ns = sorted({int(c["repetitions"]) if c.get("repetitions") else 1 for c in cells})
    return levels, ns


def caption_problems(caption: str, levels: set[float], ns: list[int]) -> list[str]:
    """What the caption states about levels and repetitions that the table does not say."""
    out = []
    stated = re.search(r"the ([\d.]+)(?:–([\d.]+))? % confidence interval", caption)
    if levels:
        want = {min(levels), max(levels)}
        got = {float(v) for v in stated.groups() if v} if stated else set()
        if got != want:
            out.append(f"caption states level(s) {sorted(got)} %, the table {sorted(levels)} %")
    elif "confidence" in caption:
        out.append("caption states a confidence level for rows the table gives none")
    if "Highlighted bars" in caption:
        out.append("caption speaks of 'Highlighted bars' (the wording of a fixed note)")
    repeated = [n for n in ns if n > 1]
    count = re.search(r"medians of (\d+)(?:–(\d+))? repetitions", caption)
    if repeated:
        got_n = {int(v) for v in count.groups() if v} if count else set()
        if got_n != {min(repeated), max(repeated)}:
            out.append(f"caption states {sorted(got_n)} repetitions, the table {repeated}")
        if (1 in ns) != ("where repeated" in caption):
            out.append("caption and table disagree on whether every bar was repeated")
    elif count or "single measurements" not in caption:
        out.append(f"the table gives single measurements; the caption says otherwise: {caption!r}")
    return out


def _highlight_problems(chart: dict, svg: Path) -> list[str]:
    fills = [fill for _, _, fill in read(svg).bars]
    lit = sum(f == HIGHLIGHT for f in fills)
    mixed = lit and any(f == CONTEXT for f in fills)
    said = re.search(r"Blue bars: this step's measurements? \(([^)]*)\)", chart["caption"])
    if bool(mixed) != bool(said):
        return [f"highlight sentence {'missing' if mixed else 'present'}: {lit} of {len(fills)} bars highlighted"]
    if said and len(said.group(1).split("; ")) != lit:
        return [f"caption names {said.group(1)!r}, the chart highlights {lit} bars"]
    return []


@pytest.mark.fast
def test_caption_checker_catches_a_wrong_level_or_count():
    assert caption_problems("Bars are medians of 3 repetitions; whiskers: the 95 % confidence interval.",
                            {75.0}, [3])
    assert caption_problems("Bars are medians of 3 repetitions; whiskers: the 75 % confidence interval.",
                            {75.0, 93.8}, [3, 5])
    assert caption_problems("Bars are medians of 3 repetitions.", set(), [1])
    assert caption_problems("Highlighted bars are this step's measurements. Bars are single measurements.",
                            set(), [1])
    assert not caption_problems("Bars are medians of 3–5 repetitions; whiskers: the 75–93.8 % confidence "
                                "interval (each row's level is in the table).", {75.0, 93.8}, [3, 5])
    assert fmt.level(0.9375) == "93.8 %"     # the tables' way of writing a level, which the captions share


def _row(label, n, level=None, low=None, high=None, step="s"):
    return {"label": label, "step": step, "variant": label, "n": n, "interval_level": level,
            "rps_low": low, "rps_high": high, "requests_per_sec": 100.0}


@pytest.mark.fast
def test_caption_words_follow_the_rows():
    same = [_row("a", 3, 0.75, 90, 110), _row("b", 3, 0.75, 95, 105)]
    mixed = [_row("a", 3, 0.75, 90, 110), _row("b", 5, 0.9375, 95, 105), _row("c", 1)]
    assert "the 75 % confidence interval" in words.stats_words(same)
    text = words.stats_words(mixed)
    assert "medians of 3–5 repetitions where repeated" in text and "75–93.8 % confidence" in text
    assert "drawn for 2 of 3" in text
    for rows in (same, mixed):                 # what the caption says, the checker accepts
        levels = {float(fmt.level(r["interval_level"]).removesuffix(" %")) for r in rows if r["rps_low"]}
        assert caption_problems(words.stats_words(rows), levels, sorted({r["n"] for r in rows})) == []
    assert words.highlight_words(same, [True, True]) == ""          # all highlighted: the colour says nothing
    assert words.highlight_words(same, [False, False]) == ""
    assert "Blue bars: this step's measurement (b)" in words.highlight_words(same, [False, True])
    assert words.speedup_words(0) == ""                              # no stock run (Grace): no speed-up words


def test_every_chart_caption_agrees_with_the_tables(built_site):
    pages = sorted(built_site.lp.rglob("index.html"))
    index = _table_index(pages)
    checked, problems = 0, []
    for page in pages:
        on_page = {(a.get("data-run"), a.get("data-step"), a.get("data-variant")) for a, _ in scan(page).figures}
        for chart in _charts(page):
            a = chart["attrs"]
            where = f"{page.parent.name}: {a.get('data-chart')}"
            if chart["sources"]:
                assert all("narrow" in s.get("srcset", "") and s.get("media") for s in chart["sources"]), where
            if not a.get("data-rows"):       # the comparison chart: two runs, its own table
                assert not re.search(r"\d+ % confidence", chart["caption"]) or "ratio" in chart["caption"], where
                continue
            run = a["data-run"]
            keys = [(run, *k.split("/", 1)) for k in a["data-rows"].split()]
            missing = [k for k in keys if "requests_per_sec" not in index.get(k, {})]
            assert not missing, f"{where}: rows drawn but in no table: {missing}"
            assert any(k in on_page for k in keys), f"{where}: none of its rows is in a table of its page"
            fields = ("rps_interval", "cpu_interval") if any("thread-sweep" in s for s in chart["srcs"]) \
                else ("rps_interval",)
            svg = built_site.site_dir / "static" / "charts" / chart["srcs"][0].rsplit("/charts/", 1)[1]
            levels, ns = expected([index[k] for k in keys], fields)
            if not any(gid.startswith("whisker") for gid, _, _ in read(svg).lines):
                levels = set()              # no whiskers drawn: the caption states no level
            problems += [f"{where}: {p}" for p in caption_problems(chart["caption"], levels, ns)]
            if chart["caption"].startswith(("Requests per second", "Average (bar)")):
                problems += [f"{where}: {p}" for p in _highlight_problems(chart, svg)]
            checked += 1
    assert checked > 20
    assert not problems, "\n".join(problems)


# --- the rate sweep's capacity lines ----------------------------------------------------------------------
def _sweep_rows(points) -> list[dict]:
    return [{"offered_rate": p.offered_rate, "requests_per_sec": p.achieved_rate, "p99_ms": p.latency("99"),
             "server": "sandbox", "run_id": "sweep", "same_machine": True, "step": "rate-sweep",
             "variant": f"rate-{p.offered_rate:.0f}", "label": f"{p.offered_rate:.0f}", "n": 1} for p in points]


def _capacity_lines(points, tmp_path):
    from tunepath.analysis.sweep import capacity
    from tunepath.publish import chartlayout as layout
    from tunepath.publish.sweepcharts import _rate_sweep_figure, rate_sweep_chart
    cap = capacity(points, slo_ms=10)
    fig = _rate_sweep_figure(_sweep_rows(cap.points), cap, layout.WIDE)
    top = fig.axes[0]
    drawn = {line.get_gid(): (line.get_xdata()[0], line.get_label()) for line in top.get_lines()
             if (line.get_gid() or "").startswith(("ref-conservative", "ref-optimistic"))}
    chart = rate_sweep_chart(_sweep_rows(cap.points), cap, tmp_path, "rate-sweep-test", "sweep")
    return cap, drawn, chart.caption


@pytest.mark.fast
def test_the_rate_sweep_chart_marks_the_conservative_capacity_and_the_optimistic_apart(tmp_path):
    """A miss below a rate that met the objective: the dotted line stands at the capacity to quote
    (the conservative one), a dash-dotted line at the optimistic figure, each named in the legend
    and the caption."""
    from tunepath.analysis.sweep import SweepPoint
    p = [SweepPoint(r, r, {"99": ms}) for r, ms in ((1000, 2.0), (2000, 3.0), (3000, 30.0), (4000, 5.0),
                                                   (5000, 50.0))]
    cap, drawn, caption = _capacity_lines(p, tmp_path)
    assert (cap.conservative_rate, cap.optimistic_rate) == (2000, 4000)
    assert drawn == {"ref-conservative-top": (2000, "conservative capacity"),
                     "ref-optimistic-top": (4000, "optimistic capacity")}
    assert "Dotted line: the conservative capacity, the figure to quote; dash-dotted line: the optimistic" in caption
    same = [SweepPoint(r, r, {"99": ms}) for r, ms in ((1000, 2.0), (2000, 3.0), (3000, 30.0))]
    cap, drawn, caption = _capacity_lines(same, tmp_path)
    assert drawn == {"ref-conservative-top": (2000, "capacity at the objective")}
    assert caption.endswith("Dotted line: the capacity at the objective.")
