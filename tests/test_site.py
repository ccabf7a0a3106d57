"""The replay pipeline end to end: runs/ → notebooks → data + charts → Hugo pages.

Figures on the pages are checked against values parsed straight from the raw
outputs in runs/, and commands against the step plans the notebooks execute.
"""

from __future__ import annotations

import functools
import json
import re
import statistics
from pathlib import Path

import pytest

from tunepath.errors import TunepathError

from conftest import LP_PATH, PINNED_JDKS, ROOT
from htmlscan import scan
from tunepath.publish import formatting as fmt
from tunepath.analysis import stats
from tunepath.parse.reports import parse_report_file
from tunepath.evidence.store import RunStore
from tunepath.model.reader import VARIABLES, path_context
from tunepath.steps import ANALYSIS_STEPS, MEASURED_SEQUENCE, STEPS, get_step, plan, step_variants

pytestmark = pytest.mark.docs
STEP_PAGES = [s.page for s in STEPS]
STORE = RunStore(ROOT / "runs")
MACHINE_PATH = re.compile(r"/root/|/home/|/work/|site-packages|\.venv|java-runtime|127\.0\.0\.1:\d{5}")


def _weighted_avg(reports) -> float | None:
    """One client's mean, or several clients' means weighted by their requests (the mean of all)."""
    if len(reports) == 1:
        return reports[0].latency_ms.avg
    pairs = [(r.latency_ms.avg, r.requests) for r in reports if r.latency_ms.avg is not None and r.requests]
    return sum(a * n for a, n in pairs) / sum(n for _, n in pairs) if pairs else None


def _percentile(reports, key: str, uncorrected: bool = False) -> float | None:
    """One client's percentile (corrected, or wrk2 -U's uncorrected), or several clients' merged:
    the merge's estimate (exact from spectra, else within the clients' own)."""
    from tunepath.parse.merge import merge_reports, merge_uncorrected

    if len(reports) == 1:
        return ((reports[0].uncorrected_percentiles_ms if uncorrected else reports[0].percentiles_ms) or {}).get(key)
    try:
        merged = (merge_uncorrected if uncorrected else merge_reports)(reports)
    except TunepathError:
        return None
    return merged.estimate(key) if merged else None


def _left_out(run, step: str, variant: str) -> set[int]:
    """The repetitions the live run left out (disturbed from outside), as it recorded them when it
    measured (run.json: repetitions[step]["variants"][variant]["dropped_why"], "repetition N: why")."""
    precision = ((run.record.get("repetitions") or {}).get(step, {}).get("variants") or {}).get(variant) or {}
    return {int(re.match(r"repetition (\d+):", why).group(1)) for why in precision.get("dropped_why") or []}


_PARSED: dict = {}


def _reps(run, step: str, variant: str) -> list:
    """Each counted repetition of a configuration, parsed from its raw output(s) alone (once per
    session: a page shows the same configuration in many figures)."""
    key = (run.run_id, step, variant)
    if key not in _PARSED:
        _PARSED[key] = _parse_reps(run, step, variant)
    return [dict(r) for r in _PARSED[key]]


def _parse_reps(run, step: str, variant: str) -> list:
    out = []
    left_out = _left_out(run, step, variant)
    for m in run.measurements:
        if (m.step, m.variant) != (step, variant) or m.repetition in left_out:
            continue
        paths = [p for _, p in m.parts] or [m.stdout]
        reports = [parse_report_file(p, m.tool) for p in paths]
        entry = next(e for e in run.record["measurements"]     # run.json as recorded, read independently
                     if (e["step"], e["variant"], e.get("repetition", 1)) == (step, variant, m.repetition))
        rps = sum(r.requests_per_sec for r in reports)
        requests = sum(r.requests for r in reports)
        client = (sum(p.get("client_cpu_s") or 0 for p in entry.get("parts", [])) if m.parts
                  else entry.get("client_cpu_s"))
        out.append({
            "rps": rps, "requests": requests,
            "avg": _weighted_avg(reports),
            "max": max(r.latency_ms.max for r in reports),
            **{f"p{k}{u}": _percentile(reports, k, bool(u)) for k in ("50", "90", "99", "99.9")
               for u in ("", "_uncorrected")},
            "errors": sum(sum(r.socket_errors.values()) for r in reports),
            "non2xx": sum(r.non_2xx_3xx for r in reports),
            "server_cpu": entry["tomcat_cpu_s"] / requests * 1e6 if entry.get("tomcat_cpu_s") is not None and requests else None,
            "client_cpu": client / requests * 1e6 if client is not None and requests else None,
            # wrk2's -R is per client; every client of the measurement offered it
            "offered": (float(rate[1]) * max(1, len(entry.get("parts") or []))
                        if (rate := re.search(r"\s-R\s*(\d+)\s", entry.get("command") or "")) else None),
        })
    return out


def _compare(a, b):
    """stats.compare on the repetitions that have a ratio (positive figures)."""
    return stats.compare([v for v in a if v and v > 0], [v for v in b if v and v > 0])


def _median(values):
    values = [v for v in values if v is not None and v == v]
    return statistics.median(values) if values else None


@functools.lru_cache(maxsize=None)
def _load(run_id: str):
    return STORE.load(run_id)


def expected_display(run_id: str, step: str, variant: str, field: str) -> str:
    """What a figure must read, computed from the raw outputs alone (medians over repetitions)."""
    run = _load(run_id)
    reps = _reps(run, step, variant)
    assert reps, f"page shows {run_id}/{step}/{variant}, which the run did not record"
    med = lambda key, s=step, v=variant: _median([r[key] for r in _reps(run, s, v)])  # noqa: E731
    seq = [(s, v) for s, v in MEASURED_SEQUENCE if run.measurement(s, v)]
    prev = seq[seq.index((step, variant)) - 1] if (step, variant) in seq and seq.index((step, variant)) > 0 else None
    order = [v.name for v in step_variants(step, run.context)]
    first = next((v for v in order if run.measurement(step, v)), None)
    comparing = step not in ("setup", "rate-sweep") and not any(step == s for s, _ in MEASURED_SEQUENCE)
    comparing = comparing and not run.emulated          # an emulated server's figures are never compared

    def served(s=step, v=variant) -> bool:     # a fixed offered rate, served: requests/s compares nothing
        offered = med("offered", s, v)
        return bool(offered) and med("rps", s, v) >= offered * 0.95

    def on_cpu(other) -> bool:                 # the pair is read on server CPU per request
        return served() or (other is not None and served(*other))
    stock = ("baseline", "stock") if run.measurement("baseline", "stock") and (step, variant) in seq else None
    if run.emulated:
        stock = prev = None
    if field == "requests_per_sec":
        return fmt.rate(med("rps"))
    if field in ("latency_avg", "latency_max"):
        return fmt.latency(med(field.split("_")[1]))
    if pct := re.fullmatch(r"latency_p(50|90|99|999)(_uncorrected)?", field):
        return fmt.latency(med("p" + {"999": "99.9"}.get(pct[1], pct[1]) + (pct[2] or "")))
    if field == "offered_rate":
        return fmt.offered(med("offered"))
    if field == "errors":
        return fmt.count(med("errors"))
    if field == "non_2xx_3xx":
        return fmt.count(med("non2xx"))
    if field == "requests":
        return fmt.count(med("requests"))
    if field == "repetitions":
        return fmt.repetitions(len(reps))
    if field in ("rps_interval", "rps_cv", "cpu_interval"):
        key = "rps" if field.startswith("rps") else "server_cpu"
        summary = stats.summarise([r[key] for r in reps if r[key] is not None])
        if field == "rps_cv":
            return fmt.cv(summary.cv)
        return (fmt.rate_interval if key == "rps" else fmt.micros_interval)(summary.low, summary.high, summary.level)
    if field == "speedup_vs_stock":
        return fmt.speedup(med("rps") / med("rps", *stock)) if stock and not on_cpu(stock) else ""
    if field == "cpu_vs_stock":
        return fmt.speedup(med("server_cpu") / med("server_cpu", *stock)) if stock and on_cpu(stock) else ""
    if field in ("change_vs_previous_pct", "cpu_change_vs_previous_pct"):
        key = "server_cpu" if field.startswith("cpu") else "rps"
        if not prev or on_cpu(prev) != (key == "server_cpu"):
            return ""
        return fmt.percent_change((med(key) / med(key, *prev) - 1) * 100)
    if field in ("change_interval", "change_significance", "cpu_change_interval", "cpu_change_significance"):
        key = "server_cpu" if field.startswith("cpu") else "rps"
        if not prev or prev[0] != step or on_cpu(prev) != (key == "server_cpu"):   # across steps: no interval
            return ""
        d = _compare([r[key] for r in _reps(run, *prev)], [r[key] for r in reps])
        if field.endswith("significance"):
            return fmt.significance(d.significant, d.low is not None)
        return fmt.pct_interval(None if d.low is None else (d.low - 1) * 100,
                                None if d.high is None else (d.high - 1) * 100, d.level)
    if field == "previous_requests_per_sec":
        return fmt.rate(med("rps", *prev)) if prev else ""
    if field == "previous_label":
        return get_step(prev[0]).label(prev[1], run.context) if prev else ""     # e.g. "1 thread, …" on a 1-CPU run
    if field in ("vs_step_first", "step_first_label", "vs_first_interval", "vs_first_significance"):
        if not comparing:
            return ""
        if field == "step_first_label":
            return next(v.label for v in step_variants(step, run.context) if v.name == first)
        if on_cpu((step, first)):
            return ""                          # read on CPU per request: cpu_vs_first
        if field == "vs_step_first":
            return fmt.speedup(med("rps") / med("rps", step, first))
        if variant == first:
            return ""
        d = _compare([r["rps"] for r in _reps(run, step, first)], [r["rps"] for r in reps])
        return (fmt.significance(d.significant, d.low is not None) if field.endswith("significance")
                else fmt.ratio_interval(d.low, d.high, d.level))
    if field in ("cpu_vs_first", "cpu_vs_first_significance"):
        if not comparing:
            return ""
        a, b = med("server_cpu", step, first), med("server_cpu")
        if field == "cpu_vs_first":
            return fmt.speedup(b / a) if a and b else ""
        if variant == first or not a or not b:
            return ""
        d = _compare([r["server_cpu"] for r in _reps(run, step, first)], [r["server_cpu"] for r in reps])
        return fmt.significance(d.significant, d.low is not None)
    if field in ("client_cpu_per_req", "server_cpu_per_req"):
        return fmt.micros(med("client_cpu" if field.startswith("client") else "server_cpu"))
    if field == "cpus_online":
        return run.measurement(step, variant).cpus_online or fmt.NA
    raise AssertionError(f"figure field {field!r} has no independent check yet: add one here")


def _no_history_yet(built_site, page: str) -> bool:
    """The history page, while no configuration has two runs of one host kind: it says so."""
    return page == "history" and "there is no history to show" in built_site.page(page).read_text()


def test_every_page_exists(built_site):
    assert (built_site.public / "index.html").is_file()
    assert built_site.page().is_file()
    for page in STEP_PAGES:
        assert built_site.page(page).is_file(), page


def test_stock_baseline_figure_is_data_bound(built_site):
    html = built_site.page("baseline").read_text()
    assert "244,449.62" in html
    offenders = [p for p in (ROOT / "content").rglob("*") if p.is_file() and re.search(r"244[,.]?449", p.read_text())]
    assert offenders == []


@pytest.mark.parametrize("page", [""] + STEP_PAGES)
def test_figures_on_pages_equal_parsed_values(built_site, page):
    figures = scan(built_site.page(page)).figures
    if page and not _no_history_yet(built_site, page):
        assert figures, f"{page}: no data-bound figure at all"
    for attrs, text in figures:
        want = expected_display(attrs["data-run"], attrs["data-step"], attrs["data-variant"], attrs["data-field"])
        assert text == want, f"{page}: {attrs} shows {text!r}, raw output says {want!r}"


@pytest.mark.fast
def test_no_benchmark_figure_is_typed_into_content():
    shown = set()
    for run in STORE.load_all():
        for m in run.measurements:
            r = parse_report_file(m.stdout, m.tool)
            if r.requests_per_sec >= 100:       # a two-digit figure (an emulated server's) is any prose number
                shown |= {fmt.rate(r.requests_per_sec), f"{r.requests_per_sec:.2f}"}
            if r.requests >= 100:
                shown.add(fmt.count(r.requests))
    text = "\n".join(p.read_text() for p in (ROOT / "content").rglob("*.md"))
    assert [s for s in shown if re.search(rf"(?<![\d.,]){re.escape(s)}(?![\d.,]*\d)", text)] == []


@pytest.mark.parametrize("step", [s.name for s in STEPS if s.name not in ANALYSIS_STEPS])
def test_page_commands_are_the_readers_and_the_run_as_it_ran(built_site, step):
    """Each block shows the reader's command (the step's template for the path's context: the
    path's variables, CPUs and load, never a run's pinning or probed rate), then, folded, the text
    the run executed (its record, else its plan); tests/test_reader_commands.py checks that the
    reader's template, bound to a run's values, gives back every command that run executed."""
    page = scan(built_site.page(get_step(step).page))
    assert page.commands, f"{step}: the page shows no command block"
    folded = {(a["data-run"], a["data-block"]): text for a, text in page.as_run}
    for attrs, text in page.commands:
        run, block = STORE.load(attrs["data-run"]), attrs["data-block"]
        reader = {b.id: b for b in plan(step, path_context(run.context))}
        planned = {b.id: b for b in plan(step, run.context)}
        assert block in reader, attrs
        assert text == reader[block].text                           # the reader's command
        assert "taskset" not in text, (step, block)
        assert attrs["data-host"] == reader[block].host
        assert not MACHINE_PATH.search(PINNED_JDKS.sub("", text)), (step, block, text)
        ran = {b["block"]: b["text"] for b in run.record.get("blocks", []) if b.get("step") == step}
        if block not in planned and block not in ran:               # the run's host did not need it
            continue
        literal = ran.get(block, planned[block].text)              # what the run ran
        if literal != text:
            assert folded[run.run_id, block] == literal, (step, block)
        else:
            assert (run.run_id, block) not in folded                # nothing differs: nothing folded
    # and every block of the plan appears on the page (the reader sees the whole step), for
    # the run the page's commands are rendered for
    shown = {a["data-block"] for a, _ in page.commands}
    primary = STORE.load(json.loads((built_site.site_dir / "data" / "steps" / f"{step}.json").read_text())["primary_run"])
    assert set(b.id for b in plan(step, primary.context)) <= shown


def test_setup_page_defines_every_variable_once(built_site):
    html = built_site.page("setup").read_text()
    for v in VARIABLES:
        assert html.count(f'data-variable="{v.name}"') == 1, v.name
        assert f"export {v.name}=" in html, v.name


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
        if s.name == "compare" and not images:     # no pair of one host kind: none drawn (never two machines)
            assert "No two runs of the same host kind" in built_site.page(s.page).read_text()
            continue
        if _no_history_yet(built_site, s.page):    # no configuration has two runs of one host kind yet
            continue
        assert images, s.page
        for img in images:
            assert img.get("alt", "").strip(), img
            assert (built_site.public / img["src"].lstrip("/")).is_file(), img["src"]


def test_compare_page_ratios_come_from_the_raw_outputs(built_site):
    """Every B ÷ A on the comparison page equals the ratio of the two runs' medians, each
    parsed from its raw outputs; the open (default) pair is the most comparable pair
    (analysis/pairing)."""
    html = built_site.page("compare").read_text()
    ratios = re.findall(r'<span class="ratio" data-step="([^"]+)" data-a="([^"]+)" data-b="([^"]+)" '
                        r'data-variant="([^"]+)">([^<]*)</span>', html)
    assert ratios
    for step, a, b, variant, text in ratios:
        med = lambda run_id: _median([r["rps"] for r in _reps(STORE.load(run_id), step, variant)])  # noqa: E731
        assert text == fmt.speedup(med(b) / med(a)), (step, a, b, variant)
    from tunepath.analysis.compare import default_pair
    from tunepath.analysis.frames import measurements_frame
    from tunepath.steps import REGISTRY

    runs = [r for r in STORE.load_all() if r.info.status != "failed" and not r.info.superseded_by]
    pair = default_pair(runs, measurements_frame(runs, REGISTRY))
    if pair:
        a, b = pair
        assert f'id="compare-{a.run_id}--{b.run_id}" data-a="{a.run_id}" data-b="{b.run_id}" open' in html
    else:       # no two runs of one host kind: nothing opens first (never two different machines)
        assert not re.search(r'<details class="compare-pair"[^>]* open>', html)
        assert "No two runs of the same host kind" in html


def test_hosts_are_never_one_series(built_site):
    for path in (built_site.site_dir / "data" / "steps").glob("*.json"):
        if path.stem == "compare":      # a labelled comparison of two runs, by design (its own test above)
            continue
        if path.stem == "history":      # one configuration across the runs of one host kind, by design
            for kind in json.loads(path.read_text())["kinds"]:
                assert kind["chart"] is None or kind["kind"] in kind["chart"]["alt"], kind["kind"]
            continue
        data = json.loads(path.read_text())
        for chart in data["charts"]:
            mine = next(r["server"] for r in data["runs"] if r["run_id"] == chart["run_id"])
            others = [r for r in data["runs"] if r["run_id"] != chart["run_id"]]
            assert chart["run_id"] in chart["alt"], chart            # every chart names its one run
            assert not any(o["run_id"] in chart["alt"] for o in others), chart
            assert not any(re.search(rf"(?<![\w-]){re.escape(o['server'])}(?![\w-])", chart["alt"])
                           for o in others if o["server"] != mine), chart
    summary = json.loads((built_site.site_dir / "data" / "summary.json").read_text())
    assert [h["server"] for h in summary["hosts"]][:2] == ["aws-c8g", "grace"]   # references first, then live runs
    assert len({h["run_id"] for h in summary["hosts"]}) == len(summary["hosts"])  # one section per run
    grace = summary["hosts"][1]
    assert [r["display"]["speedup_vs_stock"] for r in grace["rows"]] == [""]   # no stock on grace: no speed-up


def test_summary_says_what_the_numa_step_did(built_site):
    html = built_site.page("summary").read_text()
    row = re.search(r'<tr data-step="numa">(.*?)</tr>', html, re.S)
    assert row, "the summary's what-to-change table has no NUMA row"
    ref = re.search(r'data-run="reference-aws-c8g"><strong>[^<]*</strong>: ([^<]*)</p>', row.group(1))
    assert ref and re.search(rf"{fmt.MINUS}\d", ref.group(1)), "the NUMA step lowered throughput on aws-c8g"
    assert "queueing" in html.lower() or "queue" in html.lower()


def test_charts_are_byte_identical_when_rebuilt(built_site, tmp_path):
    from tunepath import pipeline

    for step in ("baseline", "summary"):
        result = pipeline.replay_step(step, ROOT / "runs")
        for chart in pipeline.draw_charts(result, tmp_path):
            assert (tmp_path / "static" / chart.src).read_bytes() == (built_site.site_dir / "static" / chart.src).read_bytes()
