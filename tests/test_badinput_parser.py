"""Bad input never wins, for the report parser and `tunepath parse` (issue 10, items 1 and 9).

Every hostile input ends either in ONE line on stderr and exit status 2 (nothing on stdout,
no traceback), or in a report whose doubtful figures carry a typed problem and a warning
that names it. The inputs: files that cannot be read (missing, a directory, a FIFO, a
device, no permission, a name too long, a symlink loop), inputs above the size limit,
reports cut at any offset, NUL bytes and invalid UTF-8, two reports in one file, and
impossible values. The truncation and corruption properties run over every real report.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import FIXTURES, REFERENCE, ROOT, TEST_DATA
from tunepath.analysis.noise import flags_for
from tunepath.parse.reports import ParseError, ReportReadError, parse_report, parse_report_file
from tunepath.parse.source import MAX_REPORT_BYTES, decode

pytestmark = pytest.mark.fast

C8G = ROOT / "runs" / "reference-aws-c8g" / "raw" / "baseline-stock.txt"   # 14680146 requests in 1.00m


def cli(*args: str, stdin: bytes | None = None, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "tunepath.cli", "parse", *args], input=stdin,
                          capture_output=True, cwd=ROOT, timeout=60,
                          env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"})


def refused(proc: subprocess.CompletedProcess, *words: str) -> str:
    """Exit 2, nothing on stdout, exactly one line on stderr, no traceback; returns the line."""
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2, err
    assert proc.stdout == b""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tunepath: "), err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def parsed(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    return json.loads(proc.stdout)


def wrk_reports() -> list[Path]:
    """Every real wrk/wrk2 report (not the usage texts or empty outputs)."""
    files = sorted(TEST_DATA.glob("wrk*/*.txt")) + sorted((ROOT / "runs").glob("*/raw/*.txt"))
    files += sorted(FIXTURES.glob("wrk*/*.txt")) + sorted(REFERENCE.glob("*/*.txt"))
    texts = {f: f.read_text(errors="replace") for f in files}
    return [f for f, text in texts.items() if "requests in" in text and "This is ApacheBench" not in text]


REPORTS = wrk_reports()
AB_REPORTS = [p for p in sorted(TEST_DATA.glob("ab/*.txt")) + sorted((ROOT / "runs").glob("*/raw/*-ab*.txt"))
              if "Complete requests" in p.read_text()]
TEXTS = {p: p.read_text() for p in REPORTS + AB_REPORTS}
FULL = {p: parse_report(t) for p, t in TEXTS.items()}
FIGURES = ("requests", "duration_s", "requests_per_sec", "socket_errors", "non_2xx_3xx", "transfer_per_sec_bytes",
           "latency_ms", "percentiles_ms", "histogram", "uncorrected_histogram")


def figures(report) -> dict:
    data = report.to_dict()
    return {k: data[k] for k in FIGURES}


# --- files that cannot be read --------------------------------------------------------------
def test_unreadable_paths_give_one_line(tmp_path):
    report = tmp_path / "report.txt"
    report.write_text("  10 requests in 1.00s, 1.00KB read\nRequests/sec: 10.00\nTransfer/sec: 1.00KB\n")
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "loop-a", tmp_path / "loop-b")
    os.symlink(tmp_path / "loop-b", tmp_path / "loop-a")
    cases = {
        str(tmp_path / "absent.txt"): "no such file",
        str(tmp_path): "is a directory",
        str(report / "x"): "not a directory",
        str(tmp_path / ("a" * 300)): "file name is too long",
        "/tmp/" + "d/" * 2100 + "r.txt": "file name is too long",
        str(tmp_path / "fifo"): "FIFO",
        "/dev/zero": "character device",
        str(tmp_path / "loop-a"): "symbolic links",
        str(tmp_path / "new\nline.txt"): "no such file",
    }
    for path, words in cases.items():
        line = refused(cli(path), words)
        assert len(line) < 300                     # long names are shortened, not pasted whole


def test_a_file_without_read_permission_gives_one_line(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("Requests/sec: 1.00\n")
    secret.chmod(0)
    prefix: tuple[str, ...] = ()
    if os.geteuid() == 0:                          # root reads anything: drop the capabilities that allow it
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: cannot take away read permission")
        prefix = ("setpriv", "--bounding-set=-dac_override,-dac_read_search",
                  "--inh-caps=-dac_override,-dac_read_search", "--")
    refused(cli(str(secret), prefix=prefix), "permission denied")


def test_inputs_above_the_size_limit_are_refused_before_reading(tmp_path):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as fh:                   # sparse: 200 MB that were never written
        fh.truncate(200 * 1024 * 1024)
    refused(cli(str(huge)), "209,715,200 bytes", "16 MiB")
    with pytest.raises(ReportReadError, match="larger than"):
        parse_report_file(huge)
    refused(cli("-", stdin=b"x" * (MAX_REPORT_BYTES + 1)), "stdin", "16 MiB")
    with pytest.raises(ParseError, match="more than a report can be"):
        parse_report("x" * (MAX_REPORT_BYTES + 1))


def test_a_report_in_utf16_or_with_a_bom_is_read():
    text = (FIXTURES / "wrk2" / "ulatency.txt").read_text()
    want = parse_report(text).to_dict()
    assert parse_report(decode(b"\xff\xfe" + text.encode("utf-16-le"))).to_dict() == want
    assert parse_report(decode(b"\xef\xbb\xbf" + text.encode())).to_dict() == want


# --- Requests/sec against requests ÷ duration ----------------------------------------------
def _cut_in_rps(text: str, keep: int) -> str:
    start = text.index("Requests/sec:")
    return text[:start + len("Requests/sec:") + keep]


def test_the_issues_reproduction_cut_requests_per_sec_is_derived_and_flagged(tmp_path):
    text = C8G.read_text()
    for keep in range(1, 10):                      # "Requests/sec: 2", "… 24", … "244449."
        cut = tmp_path / "cut.txt"
        cut.write_text(_cut_in_rps(text, keep))
        data = parsed(cli(str(cut)))
        assert not data["requests_per_sec_trusted"]
        [problem] = [p for p in data["problems"] if p["code"] in ("derived", "cut")]
        assert problem["line"] == 6 and problem["text"] in data["warnings"]
        assert problem["field"] == "requests_per_sec"
        rps = data["requests_per_sec"]
        if problem["code"] == "derived":           # a fragment that disagrees: requests ÷ duration
            assert rps == pytest.approx(14680146 / 60) and "14,680,146 requests" in problem["text"]
        else:                                      # "244449." agrees to its digits: kept, still flagged
            assert problem["code"] == "cut" and abs(rps - 244449.62) < 1


def test_a_cut_requests_per_sec_with_nothing_to_check_it_against_is_refused(tmp_path):
    text = "".join(ln for ln in C8G.read_text().splitlines(keepends=True) if "requests in" not in ln)
    cut = tmp_path / "cut.txt"
    cut.write_text(_cut_in_rps(text, 3))
    refused(cli(str(cut)), "nothing trustworthy", "'Requests/sec: 24'")


@pytest.mark.parametrize("token, code", [("2444496.20", "inconsistent"), ("nan", "derived"),
                                         ("-244449.62", "derived"), ("1e5x", "derived")])
def test_a_disagreeing_or_impossible_rate_names_both_figures(token, code):
    r = parse_report(C8G.read_text().replace("244449.62", token))
    [problem] = r.problems
    assert problem.code == code and not r.requests_per_sec_trusted
    assert token in problem.text and "14,680,146 requests in 60 s" in problem.text
    assert r.requests_per_sec == pytest.approx(14680146 / 60)   # requests ÷ duration, whatever the line says


def test_the_tolerance_comes_from_the_printed_precision():
    # 193268 requests in 11.82s: 11.815 s … 11.825 s allows 16344.0 … 16357.8 req/s
    text = (FIXTURES / "wrk2" / "t128_c1280_R500k_d12.txt").read_text()
    assert parse_report(text).problems == []                       # printed 16356.40: inside
    assert parse_report(text.replace("16356.40", "16357.70")).problems == []
    assert parse_report(text.replace("16356.40", "16358.00")).problems[0].code == "inconsistent"
    assert parse_report(text.replace("16356.40", "16343.80")).problems[0].code == "inconsistent"


def test_every_recorded_report_is_consistent_and_free_of_problems():
    """No false alarm: every real report parses without a problem (and plain wrk is told apart)."""
    assert len(REPORTS) > 100
    for path, report in FULL.items():
        assert report.problems == [], (path, report.problems)
        assert report.requests_per_sec_trusted


# --- truncation at any offset -------------------------------------------------------------
def _judge_truncated(path: Path, cut: int) -> None:
    text, full = TEXTS[path], FULL[path]
    try:
        r = parse_report(text[:cut])
    except ParseError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    # either the rate is the one the whole report prints, or it is flagged (or absent)
    assert (r.requests_per_sec is None or not r.requests_per_sec_trusted
            or r.requests_per_sec == full.requests_per_sec), (path.name, cut, text[max(0, cut - 40):cut])
    # and whatever figure differs from the whole report's comes with a warning the whole one lacks
    if figures(r) != figures(full):
        assert set(r.warnings) - set(full.warnings), (path.name, cut, text[max(0, cut - 40):cut])


def test_truncation_at_every_offset_of_the_reports_last_lines():
    """Cutting before the summary leaves no report (ParseError); the last lines are where a
    cut can leave a report, so every offset of them is tried, for every real report."""
    tried = 0
    # every shape once: the live run's reports all have one shape (the sampled test below tries them)
    for path, text in ((p, TEXTS[p]) for p in REPORTS if not p.parent.parent.name.startswith("live-")):
        start = max(0, text.rfind("\n", 0, text.rfind("requests in")) - 40)   # from the line before the summary
        for cut in range(start, len(text) + 1):
            _judge_truncated(path, cut)
            tried += 1
    assert tried > 2000


def test_truncation_of_ab_reports_at_every_offset():
    assert AB_REPORTS
    for path in AB_REPORTS:
        for cut in range(len(TEXTS[path]) + 1):
            _judge_truncated(path, cut)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REPORTS), st.floats(0, 1))
def test_truncation_anywhere(path, where):
    _judge_truncated(path, int(where * len(TEXTS[path])))


# --- NUL bytes and invalid UTF-8 ----------------------------------------------------------
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REPORTS), st.floats(0, 1), st.sampled_from([b"\x00", b"\xff", b"\xc3", b"\x00" * 40]))
def test_nul_bytes_and_invalid_utf8_are_named(path, where, bad):
    data = TEXTS[path].encode()
    pos = int(where * len(data))
    line = data[:pos].count(b"\n") + 1
    try:
        r = parse_report(decode(data[:pos] + bad + data[pos:]))
    except ParseError as exc:
        assert "\n" not in str(exc)
        return
    named = [w for w in r.warnings if ("NUL" in w or "UTF-8" in w)
             and line in [int(n) for group in re.findall(r"\blines? ([\d, ]+)", w) for n in re.findall(r"\d+", group)]]
    assert named, (path.name, pos, r.warnings)
    full = FULL[path]
    assert r.requests_per_sec == full.requests_per_sec or not r.requests_per_sec_trusted


def test_a_nul_byte_in_the_spectrum_no_longer_cuts_the_histogram():
    text = (FIXTURES / "wrk2" / "realistic_60s_U_latency.txt").read_text()
    full = parse_report(text)
    lines = text.splitlines(keepends=True)
    row = next(i for i, ln in enumerate(lines) if ln.strip().startswith("0.540 "))   # the 3rd spectrum row
    lines[row] = lines[row].replace("0.540", "0.5\x0040")
    r = parse_report("".join(lines))
    assert len(r.histogram.spectrum) == len(full.histogram.spectrum) - 1   # only the damaged row is missing
    assert len(r.uncorrected_histogram.spectrum) == len(full.uncorrected_histogram.spectrum)
    [problem] = r.problems
    assert (problem.code, problem.field, problem.line) == ("damaged", "histogram", row + 1)
    assert f"line {row + 1}" in problem.text and "NUL" in problem.text
    # the pages flag the latency figures it concerns, the rate stays trusted
    assert r.requests_per_sec_trusted
    assert [(f.code, f.field) for f in _flags(r) if f.code.startswith("report-")] == [("report-damaged", "latency_p99")]


def test_a_section_cut_short_is_reported():
    text = (FIXTURES / "wrk2" / "ulatency.txt").read_text()
    lines = text.splitlines(keepends=True)
    footer = next(i for i, ln in enumerate(lines) if ln.startswith("#[Mean"))
    r = parse_report("".join(lines[:footer - 5] + lines[footer + 4:]))     # footer and rule gone
    assert any(p.code == "cut" and p.field == "histogram" for p in r.problems), r.problems


# --- two reports in one file ---------------------------------------------------------------
def test_two_reports_in_one_file_are_refused(tmp_path):
    pairs = [(a, b) for a in REPORTS[::7] for b in REPORTS[::11]]
    for a, b in pairs:
        with pytest.raises(ParseError, match="more than one report: line"):
            parse_report(TEXTS[a] + TEXTS[b])
    both = tmp_path / "two.txt"
    both.write_text(TEXTS[C8G] + (FIXTURES / "wrk" / "plain.txt").read_text())
    refused(cli(str(both)), "more than one report", "line 8")
    ab = (TEST_DATA / "ab" / "normal.txt").read_text()
    for text in (ab + ab, ab + TEXTS[C8G], TEXTS[C8G] + ab):
        with pytest.raises(ParseError, match="more than one report"):
            parse_report(text)
    with pytest.raises(ParseError, match="more than one report"):
        parse_report(TEXTS[C8G] + ab, "wrk2")


def test_a_lua_script_printing_after_the_report_is_not_a_second_report():
    r = parse_report((TEST_DATA / "wrk" / "lua_trailing.txt").read_text())
    assert r.problems == [] and r.requests_per_sec == 25054.19


def test_ab_rate_and_completeness_are_checked():
    ab = (TEST_DATA / "ab" / "normal.txt").read_text()            # 2000 requests in 1.036 s, 1929.75/s
    assert parse_report(ab).problems == []
    r = parse_report(ab.replace("1929.75", "2929.75"))
    assert [p.code for p in r.problems] == ["inconsistent"] and "1929" not in r.problems[0].text
    r = parse_report(ab[:ab.index("(longest request)")])
    assert ("cut", "percentiles_ms") in [(p.code, p.field) for p in r.problems]


# --- impossible values ------------------------------------------------------------------------
@pytest.mark.parametrize("old, new, field", [
    ("in 1.00m", "in 0.00us", "requests_per_sec"),
    ("in 1.00m", "in nans", "requests_per_sec"),
    ("7.62GB read", "-7.62GB read", "transfer_per_sec_bytes"),
    ("Latency    16.76s", "Latency   -16.76s", "latency_ms"),
    ("Requests/sec", "  Non-2xx or 3xx responses: 99999999\nRequests/sec", "non_2xx_3xx"),
    ("14680146 requests", "-14680146 requests", "requests"),
])
def test_impossible_values_are_flagged(old, new, field):
    text = C8G.read_text()
    assert old in text
    r = parse_report(text.replace(old, new))
    assert any(p.field == field for p in r.problems), r.problems
    assert all(p.text in r.warnings for p in r.problems)


def test_decreasing_percentiles_and_a_spectrum_that_is_not_cumulative():
    wrk = (FIXTURES / "wrk" / "latency.txt").read_text()
    r = parse_report(wrk.replace("99%    5.31ms", "99%    0.01ms"))
    assert [(p.code, p.field) for p in r.problems] == [("absurd", "percentiles_ms")]
    wrk2 = (FIXTURES / "wrk2" / "realistic_60s_U_latency.txt").read_text()
    r = parse_report(wrk2.replace("0.540     0.200000        50056", "0.540     0.200000        10056"))
    assert [(p.code, p.field) for p in r.problems] == [("absurd", "histogram")]


# --- the shape and the contract ----------------------------------------------------------------
def test_plain_wrk_is_wrk_and_excerpts_keep_no_tool():
    for name in ("plain.txt", "notfound_404.txt", "latency.txt"):
        assert parse_report((FIXTURES / "wrk" / name).read_text()).tool == "wrk"
    for name in ("plain.txt", "plain_15s_calibrated.txt", "notfound_404.txt"):
        assert parse_report((FIXTURES / "wrk2" / name).read_text()).tool == "wrk2"
    for path in sorted((REFERENCE / "published").glob("*.txt")):       # no header: cannot tell
        text = path.read_text()
        assert parse_report(text).tool == ("wrk2" if "calibration" in text else None)


def test_zero_responses_leave_the_histogram_max_undefined_too():
    data = parsed(cli(str(TEST_DATA / "wrk2-synthetic" / "zero_responses.txt")))
    assert data["histogram"]["max_ms"] is None and data["histogram"]["mean_ms"] is None
    assert data["latency_ms"]["max"] is None


def test_the_json_carries_the_header_duration_and_the_uncorrected_histogram():
    data = parsed(cli(str(FIXTURES / "wrk2" / "realistic_60s_U_latency.txt")))
    assert data["header_duration_s"] == 60.0 and data["duration_s"] == 60.0
    u = data["uncorrected_histogram"]
    assert (u["max_ms"], u["total_count"]) == (43.52, 249750) and len(u["spectrum"]) > 50
    assert data["problems"] == [] and data["requests_per_sec_trusted"] is True


# --- the pages flag what the parser doubts ------------------------------------------------------
def _flags(report):
    return flags_for(report, {}, tool=report.tool, command="", offered_rate=None, server_cpus=2,
                     client_cpus=2, same_machine=True)


def test_noise_flags_carry_the_parsers_problems():
    r = parse_report(_cut_in_rps(C8G.read_text(), 3))
    flags = [f for f in _flags(r) if f.code.startswith("report-")]
    assert [(f.code, f.field) for f in flags] == [("report-derived", "requests_per_sec")]
    assert "Requests/sec: 24" in flags[0].text
    assert not any(f.code.startswith("report-") for f in _flags(parse_report(C8G.read_text())))


def test_a_cut_raw_file_is_flagged_on_the_page(tmp_path):
    from tunepath.analysis.frames import measurements_frame
    from tunepath.evidence.recorder import RunRecorder
    from tunepath.evidence.store import RunStore
    from tunepath.publish.hugo_data import run_block
    from tunepath.steps import REGISTRY

    src = json.loads((ROOT / "runs" / "reference-aws-c8g" / "run.json").read_text())
    record = {k: src[k] for k in ("kind", "status", "label", "date", "date_note", "source", "same_machine",
                                  "hosts", "context")}
    record.update(run_id="cut-test", kind="live", status="partial", measurements=[])
    rec = RunRecorder(tmp_path, record)
    rec.measurement("baseline", "stock", _cut_in_rps(C8G.read_text(), 2), "", 0,
                    "wrk -c1280 -t128 -R500000 -d60 http://x/", "wrk2")
    rec.finish()
    run = RunStore(tmp_path).load("cut-test")
    block = run_block(run, REGISTRY.get("baseline"), measurements_frame([run], REGISTRY), REGISTRY)
    [m] = block["measurements"]
    assert m["requests_per_sec"] == pytest.approx(14680146 / 60)          # not 24
    assert any(f["code"] == "report-derived" and f["field"] == "requests_per_sec" for f in m["flags"])
    assert math.isfinite(m["requests_per_sec"])
