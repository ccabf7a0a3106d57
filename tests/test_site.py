"""The replay pipeline end to end: runs/ → notebooks → data + charts → Hugo pages.

Figures on the pages are checked against values parsed straight from the raw
outputs in runs/, and commands against the step plans the notebooks execute.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import LP_PATH, ROOT
from htmlscan import scan
from tunepath import formatting as fmt
from tunepath.reports import parse_report_file
from tunepath.runstore import RunStore
from tunepath.steps import MEASURED_SEQUENCE, STEPS, get_step, plan

pytestmark = pytest.mark.site
STEP_PAGES = [s.page for s in STEPS]
STORE = RunStore(ROOT / "runs")


def expected_display(run_id: str, step: str, variant: str, field: str) -> str:
    """What a figure must read, computed from the raw output alone."""
    run = STORE.load(run_id)
    m = run.measurement(step, variant)
    assert m is not None, f"page shows {run_id}/{step}/{variant}, which the run did not record"
    r = parse_report_file(m.stdout, m.tool)
    seq = [(s, v) for s, v in MEASURED_SEQUENCE if run.measurement(s, v)]
    rps = lambda s, v: parse_report_file(run.measurement(s, v).stdout, run.measurement(s, v).tool).requests_per_sec  # noqa: E731
    prev = seq[seq.index((step, variant)) - 1] if (step, variant) in seq and seq.index((step, variant)) > 0 else None
    if field == "requests_per_sec":
        return fmt.rate(r.requests_per_sec)
    if field in ("latency_avg", "latency_max"):
        return fmt.latency(getattr(r.latency_ms, field.split("_")[1]))
    if field == "latency_p99":
        return fmt.latency((r.percentiles_ms or {}).get("99"))
    if field == "errors":
        return fmt.count(sum(r.socket_errors.values()))
    if field == "non_2xx_3xx":
        return fmt.count(r.non_2xx_3xx)
    if field == "requests":
        return fmt.count(r.requests)
    if field == "speedup_vs_stock":
        has_stock = run.measurement("baseline", "stock") and (step, variant) in seq
        return fmt.speedup(r.requests_per_sec / rps("baseline", "stock")) if has_stock else ""
    if field == "change_vs_previous_pct":
        return fmt.percent_change((r.requests_per_sec / rps(*prev) - 1) * 100) if prev else ""
    if field == "previous_requests_per_sec":
        return fmt.rate(rps(*prev)) if prev else ""
    if field == "previous_label":
        return next(v.label for v in get_step(prev[0]).variants if v.name == prev[1]) if prev else ""
    if field in ("vs_step_first", "step_first_label"):
        if step == "setup" or any(step == s for s, _ in MEASURED_SEQUENCE):
            return ""
        order = [v.name for v in get_step(step).variants]
        first = next(v for v in order if run.measurement(step, v))
        if field == "step_first_label":
            return next(v.label for v in get_step(step).variants if v.name == first)
        return fmt.speedup(r.requests_per_sec / rps(step, first))
    if field in ("client_cpu_per_req", "server_cpu_per_req"):
        cpu = run.record_measurement(step, variant).get("client_cpu_s" if field.startswith("client") else "tomcat_cpu_s")
        return fmt.micros(cpu / r.requests * 1e6) if cpu is not None and r.requests else fmt.NA
    if field == "cpus_online":
        return m.cpus_online or fmt.NA
    raise AssertionError(f"figure field {field!r} has no independent check yet: add one here")


def test_every_page_exists(built_site):
    assert (built_site.public / "index.html").is_file()
    assert built_site.page().is_file()
    for page in STEP_PAGES:
        assert built_site.page(page).is_file(), page


def test_stock_baseline_figure_is_data_bound(built_site):
    html = built_site.page("2-baseline").read_text()
    assert "244,449.62" in html
    offenders = [p for p in (ROOT / "content").rglob("*") if p.is_file() and re.search(r"244[,.]?449", p.read_text())]
    assert offenders == []


@pytest.mark.parametrize("page", [""] + STEP_PAGES)
def test_figures_on_pages_equal_parsed_values(built_site, page):
    figures = scan(built_site.page(page)).figures
    if page:
        assert figures, f"{page}: no data-bound figure at all"
    for attrs, text in figures:
        want = expected_display(attrs["data-run"], attrs["data-step"], attrs["data-variant"], attrs["data-field"])
        assert text == want, f"{page}: {attrs} shows {text!r}, raw output says {want!r}"


def test_no_benchmark_figure_is_typed_into_content():
    shown = set()
    for run in STORE.load_all():
        for m in run.measurements:
            r = parse_report_file(m.stdout, m.tool)
            shown |= {fmt.rate(r.requests_per_sec), f"{r.requests_per_sec:.2f}", fmt.count(r.requests)}
    text = "\n".join(p.read_text() for p in (ROOT / "content").rglob("*.md"))
    assert [s for s in shown if s in text] == []


@pytest.mark.parametrize("step", [s.name for s in STEPS if s.name != "summary"])
def test_page_commands_are_the_notebook_plan(built_site, step):
    blocks = scan(built_site.page(get_step(step).page)).commands
    assert blocks, f"{step}: the page shows no command block"
    for attrs, text in blocks:
        run = STORE.load(attrs["data-run"])
        planned = {b.id: b for b in plan(step, run.context)}
        assert attrs["data-block"] in planned, attrs
        assert text == planned[attrs["data-block"]].text
        assert attrs["data-host"] == planned[attrs["data-block"]].host
    # and every block of the plan appears on the page (the reader sees the whole step)
    shown = {a["data-block"] for a, _ in blocks}
    assert set(b.id for b in plan(step, STORE.load("reference-aws-c8g").context)) <= shown


def test_executed_notebooks_are_kept_and_published(built_site):
    for s in STEPS:
        nb = json.loads((built_site.public / "notebooks" / s.notebook).read_text())
        assert nb["metadata"]["papermill"]["parameters"]["mode"] == "replay"
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert errors == []
        assert (built_site.public / "notebooks" / s.notebook.replace(".ipynb", ".html")).is_file()


def test_every_step_page_has_charts_with_alt_text_per_run(built_site):
    for s in STEPS:
        images = [i for i in scan(built_site.page(s.page)).images if "charts/" in i.get("src", "")]
        assert images, s.page
        for img in images:
            assert img.get("alt", "").strip(), img
            assert (built_site.public / img["src"].lstrip("/")).is_file(), img["src"]


def test_hosts_are_never_one_series(built_site):
    for path in (built_site.site_dir / "data" / "steps").glob("*.json"):
        data = json.loads(path.read_text())
        for chart in data["charts"]:
            others = [r["server"] for r in data["runs"] if r["run_id"] != chart["run_id"]]
            assert not any(o in chart["alt"] for o in others), chart
    summary = json.loads((built_site.site_dir / "data" / "summary.json").read_text())
    assert [h["server"] for h in summary["hosts"]][:2] == ["aws-c8g", "grace"]   # references first, then live runs
    assert len({h["run_id"] for h in summary["hosts"]}) == len(summary["hosts"])  # one section per run
    grace = summary["hosts"][1]
    assert [r["display"]["speedup_vs_stock"] for r in grace["rows"]] == [""]   # no stock on grace: no speed-up


def test_summary_says_what_the_numa_step_did(built_site):
    html = built_site.page(STEP_PAGES[-1]).read_text()
    numa = [t for a, t in scan(built_site.page(STEP_PAGES[-1])).figures
            if a["data-step"] == "numa" and a["data-run"] == "reference-aws-c8g" and a["data-field"] == "change_vs_previous_pct"]
    assert numa and numa[0].startswith(fmt.MINUS), "the NUMA step lowered throughput on aws-c8g"
    assert "queueing" in html.lower() or "queue" in html.lower()


def test_charts_are_byte_identical_when_rebuilt(built_site, tmp_path):
    from tunepath import pipeline

    for step in ("baseline", "summary"):
        result = (pipeline.replay_summary(ROOT / "runs") if step == "summary"
                  else pipeline.replay_step(step, ROOT / "runs"))
        for chart in pipeline.draw_charts(result, tmp_path):
            assert (tmp_path / "static" / chart.src).read_bytes() == (built_site.site_dir / "static" / chart.src).read_bytes()
