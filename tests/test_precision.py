"""Precision, placement and the warm-up rule, from the run record to the page.

A small synthetic live run (recorded through ``RunRecorder`` from raw wrk2 outputs kept in
``runs/``) carries what the live flow records: each variant's precision under
``repetitions[step]["variants"]``, each measurement's steady-state ``warmup`` and
``placement``, and the context's pinning and warm-up rule. The step data (``hugo_data``) must
carry them as recorded, formatted once; a reference run has none, and the ``precision``
shortcode then says so. The shortcodes are rendered by Hugo in a minimal site (the project's
shortcodes and partials, one content page per case, the step data written by ``hugo_data``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape

import pytest

from conftest import ROOT, unavailable
from tunepath.analysis.frames import measurements_frame
from tunepath.analysis.steady import WarmUp
from tunepath.evidence.recorder import RunRecorder
from tunepath.evidence.store import RunStore
from tunepath.publish.display import placement_text, precision_display, warmup_text
from tunepath.publish.hugo_data import step_document
from tunepath.steps import REGISTRY

pytestmark = pytest.mark.fast

STORE = RunStore(ROOT / "runs")
RAW = ROOT / "runs" / "sandbox-wrk2-rate-sweep" / "raw"
RUN_ID = "live-20990101-000000-precision"
CMD = "taskset -c 1 wrk2 -t2 -c16 -d20 -R2000 -U --latency http://127.0.0.1:18180/"
STEAL = "CPU steal 12.0 % on the server while measured"
PLACEMENT = {"shared_kernel": True, "server_cpus": "0", "client_cpus": "1"}
CONTEXT = {"shared_kernel": True, "server_pin_cpus": "0", "client_pin_cpus": "1", "warmup_window_s": 5,
           "steady_windows": 3, "steady_pct": 5, "warmup_s": 60}
# variant → the warm-up of each repetition: seconds until steady (None: never steady in the 60 s cap)
WARMUPS = {"stock": [30.0, 35.0, 40.0, 55.0], "access-log-off": [25.0, None, 45.0]}
PRECISION = {
    "stock": {"n": 3, "dropped": 1, "dropped_why": [f"repetition 2: {STEAL}"], "halfwidth_pct": 2.31,
              "level": 0.75, "cv_pct": 1.8, "steady_state_s": 35.0},
    "access-log-off": {"n": 3, "dropped": 0, "dropped_why": [], "halfwidth_pct": 12.46, "level": 0.75,
                       "cv_pct": 6.04, "steady_state_s": 35.0},
}


def warmup(steady_after: float | None) -> dict:
    rates = [1500.0, 1900.0, 1990.0, 2000.0, 2010.0] if steady_after is not None else [1500.0, 1800, 2100, 1700]
    return WarmUp(5, tuple(rates), 60.0 if steady_after is None else steady_after + 5, steady_after,
                  3, 5.0, "wrk").to_dict()


def synthetic_run(tmp_path, context: dict = CONTEXT, precision: dict | None = PRECISION):
    """A live baseline run with the steady-state warm-up, CPU pinning and recorded precision."""
    src = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record = {k: src[k] for k in ("label", "date", "date_note", "source", "same_machine", "hosts")}
    record.update(run_id=RUN_ID, kind="live", status="complete", measurements=[],
                  context=dict(src["context"], **context))
    rec = RunRecorder(tmp_path, record)
    raws = sorted(RAW.glob("rate-sweep-rate-*.txt"))
    for variant, steadies in WARMUPS.items():
        for repetition, steady_after in enumerate(steadies, 1):
            text = raws[(repetition - 1) % len(raws)].read_text()
            rec.measurement("baseline", variant, text, "", 0, CMD, "wrk2", repetition=repetition,
                            warmup=warmup(steady_after), placement=PLACEMENT)
    rec.repetitions("baseline", rounds=3, reason="minimum of 3 repetitions reached",
                    rule={"min_repetitions": 3, "max_repetitions": 5, "ci_target_pct": 5.0, "time_budget_s": 900},
                    order=list(WARMUPS), variants=precision)
    rec.finish()
    return RunStore(tmp_path).load(RUN_ID)


def document(runs) -> dict:
    frame = measurements_frame(runs, REGISTRY)
    return step_document(REGISTRY.get("baseline"), runs, frame, [], {}, path=REGISTRY)


def block(doc: dict, run_id: str) -> dict:
    return next(r for r in doc["runs"] if r["run_id"] == run_id)


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    run = synthetic_run(tmp_path_factory.mktemp("precision-run"))
    return document([STORE.load("reference-aws-c8g"), run])


# --- the step data ----------------------------------------------------------------------------
def test_precision_per_variant_as_the_run_recorded_it(doc):
    entries = block(doc, RUN_ID)["precision"]
    assert [p["variant"] for p in entries] == ["stock", "access-log-off"]      # the measurements' order
    stock, off = entries
    labels = {m["variant"]: m["label"] for m in block(doc, RUN_ID)["measurements"]}
    assert (stock["label"], off["label"]) == (labels["stock"], labels["access-log-off"])
    assert (stock["n"], stock["dropped"], stock["dropped_why"]) == (3, 1, [f"repetition 2: {STEAL}"])
    assert (stock["halfwidth_pct"], stock["level"], stock["cv_pct"], stock["steady_state_s"]) == (2.31, 0.75, 1.8, 35.0)
    assert (stock["warmups"], stock["not_steady"]) == (4, 0)       # every repetition, the dropped one too
    assert (off["warmups"], off["not_steady"], off["dropped"], off["dropped_why"]) == (3, 1, 0, [])
    assert stock["display"] == {"n": "3", "dropped": "1", "halfwidth": "±2.3 %", "level": "75 %",
                                "halfwidth_level": "±2.3 % (75 %)", "cv": "1.8 %", "steady_state": "35.0",
                                "not_steady": "0 of 4"}
    assert off["display"]["halfwidth_level"] == "±12.5 % (75 %)" and off["display"]["not_steady"] == "1 of 3"
    json.dumps(doc, allow_nan=False)                                 # plain JSON


def test_placement_and_warmup_rule_of_a_pinned_steady_state_run(doc):
    run = block(doc, RUN_ID)
    assert run["placement"] == {
        "recorded": True, "pinned": True, "shared_kernel": True, "server_cpus": "0", "client_cpus": "1",
        "text": "Tomcat ran on CPU 0 and the load generator on CPU 1 (taskset), as they share one kernel."}
    assert run["warmup_rule"] == {
        "recorded": True, "steady_state": True, "window_s": 5, "windows": 3, "pct": 5, "cap_s": 60,
        "text": "Each measurement started once 3 warm-up windows of 5 s in a row served within ±5 % of "
                "their median, or after at most 60 s of warm-up (then marked not steady)."}


def test_a_reference_run_and_an_older_live_run_record_no_precision(doc):
    ref = block(doc, "reference-aws-c8g")
    assert ref["precision"] is None
    assert ref["placement"] == {"recorded": False, "pinned": None, "shared_kernel": None, "server_cpus": "",
                                "client_cpus": "", "text": "This run recorded no CPU placement."}
    assert ref["warmup_rule"]["recorded"] is False and ref["warmup_rule"]["text"] == "The run recorded no warm-up rule."
    older = next(r for r in STORE.load_all() if r.kind == "live" and "baseline" in r.info.repetitions)
    assert not older.info.repetitions["baseline"].variants     # rounds recorded, precision not yet
    live = block(document([older]), older.run_id)
    assert live["precision"] is None and live["repetitions_info"] is not None
    assert live["warmup_rule"]["steady_state"] is False and live["warmup_rule"]["cap_s"] == older.context.warmup_s


def test_measurement_placement_stands_in_for_a_context_without_it(tmp_path):
    run = synthetic_run(tmp_path, context={"warmup_s": 10}, precision=None)
    b = block(document([run]), RUN_ID)
    assert b["precision"] is None                                    # rounds without per-variant precision
    assert b["placement"]["recorded"] is True and b["placement"]["server_cpus"] == "0"
    assert b["warmup_rule"]["text"] == ("Each measurement followed one warm-up run of 10 s "
                                        "(a fixed time, not a test for steady state).")


@pytest.mark.parametrize("kwargs, text", [
    (dict(recorded=True, pinned=False, shared_kernel=True, server_cpus="", client_cpus=""),
     "Tomcat and the load generator shared one kernel and ran unpinned, taking turns on the same CPUs."),
    (dict(recorded=True, pinned=False, shared_kernel=False, server_cpus="", client_cpus=""),
     "Tomcat and the load generator ran unpinned on separate hosts, each on its own CPUs."),
    (dict(recorded=True, pinned=True, shared_kernel=True, server_cpus="0-3", client_cpus="4-7"),
     "Tomcat ran on CPUs 0-3 and the load generator on CPUs 4-7 (taskset), as they share one kernel."),
    (dict(recorded=False, pinned=None, shared_kernel=None, server_cpus="", client_cpus="", same_machine=True),
     "This run recorded no CPU placement (server and client on one machine)."),
])
def test_placement_sentences(kwargs, text):
    assert placement_text(**{"same_machine": False, **kwargs}) == text


def test_steady_state_never_reached_or_not_tested():
    never = precision_display(3, 0, None, None, 4.2, None, warmups=3, not_steady=3)
    assert (never.steady_state, never.not_steady, never.halfwidth_level, never.level) == ("never", "3 of 3", "n/a", "")
    untested = precision_display(2, 0, None, None, None, None, warmups=0, not_steady=None)
    assert (untested.steady_state, untested.not_steady, untested.cv) == ("n/a", "n/a", "n/a")


def test_no_warmup():
    assert warmup_text(recorded=True, steady_state=False, window_s=0, windows=3, pct=5, cap_s=0) == \
        "No warm-up ran before a measurement."


# --- the shortcodes, rendered by Hugo -----------------------------------------------------------
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
    for step, d in docs.items():
        path = site / "data" / "steps" / f"{step}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(d, allow_nan=False))
    for name, body in pages.items():
        path = site / "content" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntitle: {name}\n---\n\n{body}\n")
    proc = subprocess.run([binary, "--source", str(site), "--destination", str(site / "public"),
                           "--logLevel", "warn"], capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def rendered(doc, tmp_path_factory):
    site = tmp_path_factory.mktemp("precision-site") / "site"
    pages = {"live": f'{{{{< precision step="baseline" run="{RUN_ID}" >}}}}',
             "ref": '{{< precision step="baseline" >}}',                     # the primary run: the reference
             "where": f'{{{{< placement step="baseline" run="{RUN_ID}" >}}}}',
             "where-ref": '{{< placement step="baseline" run="reference-aws-c8g" >}}'}
    code, out = hugo(site, pages, {"baseline": doc})
    assert code == 0, out
    return lambda name: unescape((site / "public" / name / "index.html").read_text())


def cells(html: str) -> dict[tuple[str, str], str]:
    """Each shown figure, its non-breaking spaces (which keep a "%" with its number) read as spaces."""
    return {(v, f): t.replace("\xa0", " ") for v, f, t in re.findall(
        r'<span class="precision-figure" data-variant="([^"]+)" data-field="([^"]+)">([^<]*)</span>', html)}


def test_the_precision_table_shows_the_recorded_figures(rendered, doc):
    html = rendered("live")
    shown = cells(html)
    for p in block(doc, RUN_ID)["precision"]:
        for field in ("n", "dropped", "halfwidth_level", "cv", "steady_state", "not_steady"):
            assert shown[(p["variant"], field)] == p["display"][field], (p["variant"], field)
    assert shown[("stock", "halfwidth_level")] == "±2.3 % (75 %)" and shown[("stock", "steady_state")] == "35.0"
    assert shown[("access-log-off", "not_steady")] == "1 of 3"
    why = re.findall(r'<details class="dropped-why">(.*?)</details>', html, re.S)
    assert len(why) == 1 and f"<li>repetition 2: {STEAL}</li>" in why[0]      # only the variant that dropped one
    assert re.findall(r"<th scope=\"col\"[^>]*>([^<]+)</th>", html) == [
        "Variant", "Counted n", "Dropped", "± half-width (level)", "CV", "Steady after (s)", "Not steady"]
    assert '<div class="table-wrap">' in html


def test_a_reference_run_says_it_recorded_no_precision(rendered):
    html = rendered("ref")
    assert 'data-run="reference-aws-c8g"' in html and "<table" not in html
    assert "This run recorded no precision figures" in html


def test_the_placement_sentence(rendered, doc):
    run = block(doc, RUN_ID)
    html = rendered("where")
    assert f'<span class="placement-text">{run["placement"]["text"]}</span>' in html
    assert f'<span class="warmup-rule">{run["warmup_rule"]["text"]}</span>' in html
    assert "This run recorded no CPU placement." in rendered("where-ref")


def test_step_data_without_the_fields_fails_the_build(doc, tmp_path):
    old = json.loads(json.dumps(doc))
    for run in old["runs"]:
        del run["precision"], run["placement"]
    for shortcode in ("precision", "placement"):
        code, out = hugo(tmp_path / "site", {"p": f'{{{{< {shortcode} step="baseline" run="{RUN_ID}" >}}}}'},
                         {"baseline": old})
        assert code != 0 and "rebuild the step data" in out, out


@pytest.mark.parametrize("shortcode", ["precision", "placement"])
def test_an_unknown_run_fails_the_build(doc, tmp_path, shortcode):
    code, out = hugo(tmp_path / "site", {"p": f'{{{{< {shortcode} step="baseline" run="no-such-run" >}}}}'},
                     {"baseline": doc})
    assert code != 0 and 'has no run "no-such-run"' in out, out
