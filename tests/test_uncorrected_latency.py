"""wrk2 -U: latency uncorrected for coordinated omission, carried from the raw report to the page.

Expected figures are read straight from the raw outputs (the parser, and the merge for several
clients); the frames, the Hugo data and the ``latency-corrections`` shortcode must agree with them.
The shortcode is rendered by Hugo in a minimal site (the project's shortcodes and partials, one
content page, the step data written by ``hugo_data``), not by a whole build.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
import subprocess

import pytest

from conftest import FIXTURES, ROOT, unavailable
from htmlscan import scan
from tunepath.analysis.frames import measurements_frame, repetitions_frame
from tunepath.evidence.recorder import RunRecorder
from tunepath.evidence.store import RunStore
from tunepath.parse.merge import merge_reports, merge_uncorrected
from tunepath.parse.reports import parse_report_file
from tunepath.publish import formatting as fmt
from tunepath.publish.hugo_data import run_block, step_document
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs")
SWEEP = "sandbox-wrk2-rate-sweep"          # recorded with wrk2 -U
KEYS = {"50": "latency_p50", "90": "latency_p90", "99": "latency_p99", "99.9": "latency_p999"}
U_FIXTURES = ["ulatency.txt", "realistic_60s_U_latency.txt"]
CMD = "wrk2 -t2 -c10 -d5 -R2000 -U --latency http://x/"


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def wrk2(name: str):
    return parse_report_file(FIXTURES / "wrk2" / name, "wrk2")


def record(tmp_path, measurements: list[tuple[str, int, list[tuple[str, str]]]], run_id: str = "u-test"):
    """A baseline run: (variant, repetition, [(tool, fixture path under fixtures/)]) each; several
    fixtures = several clients at once."""
    src = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    rec_ = {k: src[k] for k in ("kind", "status", "label", "date", "date_note", "source", "same_machine",
                                "hosts", "context")}
    rec_.update(run_id=run_id, kind="live", status="partial", measurements=[])
    rec = RunRecorder(tmp_path, rec_)
    for variant, repetition, clients in measurements:
        texts = [(FIXTURES / path).read_text() for _, path in clients]
        tool = clients[0][0]
        parts = ([{"client": f"client-{i}", "stdout": t, "exit_status": 0} for i, t in enumerate(texts, 1)]
                 if len(texts) > 1 else None)
        command = CMD if tool == "wrk2" else "wrk -c50 -t2 -d10 --latency http://x/"
        rec.measurement("baseline", variant, texts[0], "", 0, command, tool, repetition=repetition, parts=parts)
    rec.finish()
    return RunStore(tmp_path).load(run_id)


# --- frames ---------------------------------------------------------------------------------
def test_a_recorded_U_run_gets_its_uncorrected_percentiles_and_a_wrk2_run_without_U_none():
    runs = [STORE.load(SWEEP), STORE.load("reference-aws-c8g")]
    reps = repetitions_frame(runs, REGISTRY)
    sweep = reps[reps.run_id == SWEEP]
    assert len(sweep) == 10
    for row in sweep.to_dict("records"):
        report = parse_report_file(ROOT / "runs" / row["raw"], "wrk2")
        assert report.uncorrected_percentiles_ms, row["raw"]
        for key in KEYS:
            assert row[f"p{key}_uncorrected_ms"] == report.uncorrected_percentiles_ms[key], (row["raw"], key)
            assert row[f"p{key}_ms"] == report.percentiles_ms[key]
        assert row["p99_uncorrected_ms"] < row["p99_ms"]     # queueing from delayed starts is left out
    ref = reps[reps.run_id == "reference-aws-c8g"]
    assert len(ref) and all(missing(v) for k in KEYS for v in ref[f"p{k}_uncorrected_ms"])


def test_variant_rows_take_the_median_and_wrk_reports_have_none(tmp_path):
    files = ["wrk2/ulatency.txt", "wrk2/realistic_60s_U_latency.txt",
             str(ROOT / "runs" / SWEEP / "raw" / "rate-sweep-rate-2000.txt")]    # absolute: FIXTURES / keeps it
    run = record(tmp_path, [("stock", i, [("wrk2", f)]) for i, f in enumerate(files, 1)]
                 + [("access-log-off", 1, [("wrk", "wrk/latency.txt")])])
    frame = measurements_frame([run], REGISTRY).set_index("variant")
    parsed = [parse_report_file(FIXTURES / f, "wrk2") for f in files]
    stock = frame.loc["stock"]
    assert stock["n"] == 3
    for key in KEYS:
        values = [r.uncorrected_percentiles_ms[key] for r in parsed]
        assert len(set(values)) == 3, key                     # three different values: the median is one
        assert stock[f"p{key}_uncorrected_ms"] == statistics.median(values), key
    wrk = frame.loc["access-log-off"]
    assert not missing(wrk["p99_ms"])                         # wrk printed corrected-style percentiles only
    assert all(missing(wrk[f"p{k}_uncorrected_ms"]) for k in KEYS)


def test_several_clients_merge_their_uncorrected_latency_only_when_every_one_printed_it(tmp_path):
    run = record(tmp_path, [("stock", 1, [("wrk2", "wrk2/" + f) for f in U_FIXTURES]),
                            ("access-log-off", 1, [("wrk2", "wrk2/ulatency.txt"), ("wrk2", "wrk2/latency.txt")])])
    frame = measurements_frame([run], REGISTRY).set_index("variant")
    clients = [wrk2(f) for f in U_FIXTURES]
    merged = merge_uncorrected(clients)
    assert merged is not None and merged.method == "spectrum"
    stock = frame.loc["stock"]
    for key in KEYS:
        assert stock[f"p{key}_uncorrected_ms"] == pytest.approx(merged.estimate(key)), key
        own = [c.uncorrected_percentiles_ms[key] for c in clients]
        assert min(own) <= merged.percentiles[key][2] and merged.percentiles[key][1] <= max(own)
        assert stock[f"p{key}_ms"] == pytest.approx(merge_reports(clients).estimate(key))   # corrected unchanged
    assert stock["latency_merge"]["uncorrected_method"] == "spectrum"
    mixed = frame.loc["access-log-off"]                       # the second client ran without -U
    assert not missing(mixed["p99_ms"]) and all(missing(mixed[f"p{k}_uncorrected_ms"]) for k in KEYS)
    assert mixed["latency_merge"]["uncorrected_method"] is None


def test_merge_uncorrected_uses_the_uncorrected_blocks():
    one = wrk2("ulatency.txt")
    merged = merge_uncorrected([one, one])
    for key in ("50", "99"):        # a report merged with itself: its own uncorrected figures, not the corrected
        assert merged.estimate(key) == pytest.approx(one.uncorrected_percentiles_ms[key], rel=0.02)
        assert abs(merged.estimate(key) - one.percentiles_ms[key]) > 0.1
    assert merge_uncorrected([one, wrk2("latency.txt")]) is None


# --- Hugo data ------------------------------------------------------------------------------
def test_measurement_entries_carry_both_percentiles_formatted_alike(tmp_path):
    run = STORE.load(SWEEP)
    block = run_block(run, REGISTRY.get("rate-sweep"), measurements_frame([run], REGISTRY), REGISTRY)
    assert len(block["measurements"]) == 10
    for m in block["measurements"]:
        report = parse_report_file(ROOT / "runs" / m["raw"], "wrk2")
        for key, field in KEYS.items():
            assert m[f"{field}_ms"] == report.percentiles_ms[key]
            assert m[f"{field}_uncorrected_ms"] == report.uncorrected_percentiles_ms[key]
            assert m["display"][field] == fmt.latency(report.percentiles_ms[key])
            assert m["display"][f"{field}_uncorrected"] == fmt.latency(report.uncorrected_percentiles_ms[key])
    wrk = record(tmp_path, [("stock", 1, [("wrk", "wrk/latency.txt")])])
    [m] = run_block(wrk, REGISTRY.get("baseline"), measurements_frame([wrk], REGISTRY), REGISTRY)["measurements"]
    assert m["latency_p99_ms"] is not None
    for field in KEYS.values():
        assert m[f"{field}_uncorrected_ms"] is None and m["display"][f"{field}_uncorrected"] == fmt.NA
    json.dumps(m, allow_nan=False)                            # plain JSON: no NaN left


# --- the shortcode, rendered by Hugo ---------------------------------------------------------
def hugo(site, pages: dict[str, str], docs: dict[str, dict]):
    """Render ``pages`` (name → markdown body) with the project's shortcodes and ``docs`` as
    data/steps/<step>.json; returns (returncode, output)."""
    from tunepath.publish.build import hugo_binary

    try:
        binary = hugo_binary()
    except Exception as exc:           # noqa: BLE001  (TunepathError: Hugo is not installed)
        unavailable(f"{exc}")
    if site.exists():
        shutil.rmtree(site)
    for sub in ("_shortcodes", "_partials"):
        shutil.copytree(ROOT / "layouts" / sub, site / "layouts" / sub)
    (site / "layouts" / "single.html").write_text("{{ .Content }}\n")
    (site / "layouts" / "home.html").write_text("home\n")
    (site / "hugo.toml").write_text('baseURL = "/"\ndisableKinds = ["taxonomy", "term", "rss", "sitemap", '
                                    '"robotstxt", "section"]\n')
    for step, doc in docs.items():
        path = site / "data" / "steps" / f"{step}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, allow_nan=False))
    for name, body in pages.items():
        path = site / "content" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: {name}\n---\n\n{body}\n")
    proc = subprocess.run([binary, "--source", str(site), "--destination", str(site / "public"),
                           "--logLevel", "warn"], capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def document(step: str, runs) -> dict:
    frame = measurements_frame(runs, REGISTRY)
    return step_document(REGISTRY.get(step), runs, frame, [], {}, path=REGISTRY)


def sections(html: str) -> dict[str, str]:
    """run id → the HTML of that run's part of the shortcode."""
    parts = re.split(r'(?=<section class="corrections-run")', html)
    return {re.search(r'data-run="([^"]+)"', p).group(1): p for p in parts[1:]}


def expected(run_id: str, variant: str, field: str) -> str:
    """What a figure must read, from the raw output alone (single client, one repetition)."""
    m = next(m for m in STORE.load(run_id).measurements if m.variant == variant)
    report = parse_report_file(m.stdout, m.tool)
    key = next(k for k, f in KEYS.items() if field.startswith(f + "_") or field == f)
    table = report.uncorrected_percentiles_ms if field.endswith("_uncorrected") else report.percentiles_ms
    return fmt.latency(table[key])


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    live = next(r for r in sorted(STORE.run_ids()) if r.startswith("live-") and not STORE.load(r).context.uncorrected)
    # the sandbox sweep (one client, one repetition: each figure is one raw report's) and the runs
    # recorded without -U; the lab's wrk2 runs (medians of repetitions) are checked by test_site
    runs = [r for r in STORE.load_all() if r.run_id == SWEEP or not r.context.uncorrected]
    docs = {"rate-sweep": document("rate-sweep", runs),
            "baseline": document("baseline", [STORE.load("reference-aws-c8g"), STORE.load(live)])}
    site = tmp_path_factory.mktemp("corrections") / "site"
    pages = {"all": '{{< latency-corrections step="rate-sweep" >}}',
             "one": '{{< latency-corrections step="rate-sweep" variant="rate-11000" >}}',
             "run": f'{{{{< latency-corrections step="rate-sweep" run="{SWEEP}" >}}}}',
             "none": '{{< latency-corrections step="baseline" >}}'}
    code, out = hugo(site, pages, docs)
    assert code == 0, out
    return site, docs


def test_the_shortcode_shows_both_percentiles_per_variant_from_the_raw_reports(rendered):
    site, docs = rendered
    page = site / "public" / "all" / "index.html"
    figures = scan(page).figures
    assert len(figures) == 10 * 4 * 2                         # 10 rates × p50/p90/p99/p99.9 × both
    for attrs, text in figures:
        assert attrs["data-run"] == SWEEP and attrs["data-step"] == "rate-sweep"
        assert text == expected(SWEEP, attrs["data-variant"], attrs["data-field"]), attrs
    html = page.read_text()
    runs = sections(html)
    [sweep] = [r for r in docs["rate-sweep"]["runs"] if r["run_id"] == SWEEP]
    labels = [m["label"] for m in sweep["measurements"]]
    assert re.findall(r'<th scope="colgroup" colspan="3">([^<]+)</th>', runs[SWEEP]) == labels
    assert "<strong>sandbox</strong>" in runs[SWEEP] and "server and client on one machine" in runs[SWEEP]
    assert re.findall(r'<th scope="row">([^<]+)</th>', runs[SWEEP])[:4] == ["p50", "p90", "p99", "p99.9"]
    for run_id, part in runs.items():                         # a run without -U says so, and shows no table
        if run_id != SWEEP:
            assert "No wrk2 -U measurement in this run." in part and "<table" not in part


def test_one_variant_and_one_run(rendered):
    site, _ = rendered
    one = scan(site / "public" / "one" / "index.html").figures
    assert {a["data-variant"] for a, _ in one} == {"rate-11000"} and len(one) == 8
    fields = [a["data-field"] for a, _ in one]
    assert fields[:2] == ["latency_p50", "latency_p50_uncorrected"]
    html = (site / "public" / "one" / "index.html").read_text()
    assert list(sections(html)) == [SWEEP]                   # runs without the variant are left out
    assert list(sections((site / "public" / "run" / "index.html").read_text())) == [SWEEP]


def test_a_step_without_U_renders_only_notes(rendered):
    site, _ = rendered
    html = (site / "public" / "none" / "index.html").read_text()
    runs = sections(html)
    assert set(runs) >= {"reference-aws-c8g"} and len(runs) == 2
    assert all("No wrk2 -U measurement in this run." in p for p in runs.values())
    assert scan(site / "public" / "none" / "index.html").figures == [] and "<table" not in html


def test_several_clients_are_noted_under_the_table(tmp_path):
    run = record(tmp_path / "runs", [("stock", 1, [("wrk2", "wrk2/" + f) for f in U_FIXTURES])])
    doc = document("baseline", [run])
    code, out = hugo(tmp_path / "site", {"p": '{{< latency-corrections step="baseline" >}}'}, {"baseline": doc})
    assert code == 0, out
    html = (tmp_path / "site" / "public" / "p" / "index.html").read_text()
    merged = merge_uncorrected([wrk2(f) for f in U_FIXTURES])
    shown = {a["data-field"]: t for a, t in scan(tmp_path / "site" / "public" / "p" / "index.html").figures}
    assert shown["latency_p99_uncorrected"] == fmt.latency(merged.estimate("99"))
    assert "Several clients drove the load (Stock configuration)" in html


@pytest.mark.parametrize("args, message", [
    ('step="rate-sweep" variant="rate-9"', 'no run shown has variant "rate-9"'),
    ('step="rate-sweep" run="no-such-run"', 'has no run "no-such-run"'),
    ('step="no-such-step"', 'step "no-such-step" not found'),
])
def test_unknown_names_fail_the_build(rendered, tmp_path, args, message):
    _, docs = rendered
    code, out = hugo(tmp_path / "site", {"p": f"{{{{< latency-corrections {args} >}}}}"}, docs)
    assert code != 0 and message in out, out
