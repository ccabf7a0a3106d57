"""Issue 30 (hostile-input review, finding 7): matplotlib mathtext injection.

matplotlib reads a text with two unescaped dollar signs as mathtext: a host name such as
``srv $\\frac{1}{$ costs`` failed the build with a parse error, and a label ``cost $x$ up`` was
drawn as math (an italic x, no dollars). Every chart that draws a host name or a label must draw
it as written. The project's SVGs draw text as paths (``svg.fonttype`` path), so each figure is
taken before it is saved and written again with ``svg.fonttype`` none, whose ``<text>`` elements
hold the strings drawn."""

from __future__ import annotations

import html
import re

import pytest

from tunepath.publish import chartbase, charts
from tunepath.publish import sweepcharts

pytestmark = pytest.mark.fast

HOST = r"srv $\frac{1}{$ costs"
LABELS = ("cost $x$ up", "a_b^c 50% $", r"pre \$ set $y_2$")


def _row(i: int, label: str, **extra) -> dict:
    r = {"label": label, "step": "s", "variant": f"v{i}", "server": HOST, "run_id": "r1", "same_machine": False,
         "requests_per_sec": 1000.0 * (i + 1), "rps_low": None, "rps_high": None, "interval_level": None, "n": 1,
         "offered_rate": None, "speedup_vs_stock": 1.0 + i, "latency_avg_ms": 5.0 + i, "latency_max_ms": 9.0 + i,
         "server_cpu_us_per_req": 20.0 - i, "cpu_low": None, "cpu_high": None, "cpu_level": None,
         "cpu_vs_stock": 1.0 - 0.1 * i, "p99_ms": 4.0 + i, "ratio": 1.0 + 0.1 * i, "low": None, "high": None}
    return {**r, **extra}


@pytest.fixture
def drawn(monkeypatch):
    """Every figure a chart renders, written as SVG with its text as text: [svg text, …]."""
    import matplotlib

    out: list[str] = []
    real = chartbase.render_svg

    def render(fig):
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            out.append(real(fig).decode())
        return real(fig)

    monkeypatch.setattr(chartbase, "render_svg", render)
    monkeypatch.setattr(charts, "render_svg", render)
    return out


def _texts(svg: str) -> str:
    """The text the SVG draws (its <text> elements, wrapped lines joined by spaces)."""
    return " ".join(" ".join(html.unescape(re.sub(r"<[^>]+>", " ", t)).split())
                    for t in re.findall(r"<text\b.*?</text>", svg, re.S))


def _check(chart, drawn: list[str], *strings: str) -> None:
    assert len(drawn) == 2                      # the wide and the narrow drawing
    for svg in drawn:
        text = _texts(svg)
        for s in strings:
            assert s in text, (s, text)
        assert r"\$" not in text.replace(r"pre \$", ""), text      # the escape is not drawn
    assert HOST in chart.alt and HOST in chart.caption          # the page's words keep the string as it is
    drawn.clear()


@pytest.mark.parametrize("kind", ["throughput", "cpu", "latency"])
def test_bar_charts_draw_host_names_and_labels_as_written(kind, drawn, tmp_path):
    rows = [_row(i, label, offered_rate=5000.0, requests_per_sec=5000.0) if kind == "cpu" else _row(i, label)
            for i, label in enumerate(LABELS)]
    draw = {"throughput": charts.throughput_chart, "cpu": charts.cpu_chart, "latency": charts.latency_chart}[kind]
    chart = draw(rows, {"s/v0"}, tmp_path, f"s-{kind}-r1", "r1")
    _check(chart, drawn, HOST, *LABELS)


def test_the_headline_chart_draws_them_as_written(drawn, tmp_path):
    chart = charts.headline_chart([_row(i, label) for i, label in enumerate(LABELS)], set(), tmp_path, "s", "r1")
    _check(chart, drawn, HOST, *LABELS)


def test_the_ratio_chart_draws_its_title_and_labels_as_written(drawn, tmp_path):
    rows = [_row(i, label) for i, label in enumerate(LABELS)]
    chart = charts.ratio_chart(rows, tmp_path, "compare-x", f"B over A — {HOST}", f"Ratios on {HOST}",
                               f"Ratios on {HOST}.")
    _check(chart, drawn, HOST, *LABELS)


def test_the_sweep_charts_draw_the_host_name_as_written(drawn, tmp_path):
    from tunepath.analysis.sweep import SweepPoint, capacity

    rows = [_row(i, str(t), variant=f"threads-{t}") for i, t in enumerate((4, 8, 16))]
    chart = sweepcharts.thread_sweep_chart(rows, tmp_path, "thread-sweep-r1", "r1", "threads-8",
                                           lambda v: int(v.split("-")[1]), best_words="least $cost$ per request")
    _check(chart, drawn, HOST, "least $cost$ per request")
    cap = capacity([SweepPoint(r, r, {"99": ms}) for r, ms in ((1000, 2.0), (2000, 3.0), (3000, 30.0))], slo_ms=10)
    rows = [_row(i, f"{p.offered_rate:.0f}", offered_rate=p.offered_rate, requests_per_sec=p.achieved_rate,
                 p99_ms=p.latency("99"), variant=f"rate-{p.offered_rate:.0f}") for i, p in enumerate(cap.points)]
    chart = sweepcharts.rate_sweep_chart(rows, cap, tmp_path, "rate-sweep-r1", "r1")
    _check(chart, drawn, HOST)


def test_literal_escapes_every_dollar():
    assert chartbase.literal(HOST) == r"srv \$\frac{1}{\$ costs"
    assert chartbase.literal("no dollars") == "no dollars"
