"""Hostile inputs for the report parsers (issue 30: review findings 6, 9, 10, 13 and 17).

Every input is built here from a real report (tests/data): nothing big is stored. Each one ends in a
report whose doubtful figures carry a typed problem, or in one ParseError line (exit status 2 from
`tunepath parse`), never in a traceback, and never after a long wait: no regular expression may
backtrack over a long line (finding 9), and the work per line is bounded (finding 10). Speed is not
timed here (that is for benchmarks): a generous SIGALRM deadline catches a parser that hangs, and
finding 10 counts the unit conversions, which a linear parser does a bounded number of times.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from contextlib import contextmanager

import pytest

from conftest import FIXTURES, ROOT, TEST_DATA
from tunepath.parse import units
from tunepath.parse.problems import ParseError
from tunepath.parse.reports import parse_report

pytestmark = pytest.mark.fast

AB = (TEST_DATA / "ab" / "normal.txt").read_text()              # 2000 requests in 1.036 s, 1929.75/s
AB_KEEPALIVE = (TEST_DATA / "ab" / "keepalive.txt").read_text()
SIEGE = (TEST_DATA / "siege" / "c16-t10s.out").read_text()
SIEGE_JSON = (TEST_DATA / "siege" / "c16-t10s-json.out").read_text()
JMETER = (TEST_DATA / "jmeter" / "dashboard.out").read_text()
WRK = (FIXTURES / "wrk" / "latency.txt").read_text()
WRK_ERRORS = (TEST_DATA / "wrk" / "killed_server.txt").read_text()    # prints a Socket errors line
WRK2 = (FIXTURES / "wrk2" / "plain_15s_calibrated.txt").read_text()   # 2 threads, 2 calibration lines
WRK2_HDR = (FIXTURES / "wrk2" / "ulatency.txt").read_text()
SAMPLES = {"ab": AB, "siege": SIEGE, "siege-json": SIEGE_JSON, "jmeter": JMETER, "wrk": WRK, "wrk2": WRK2_HDR}
# the figures a page shows: one that differs from the whole report's needs a problem
FIGURES = ("requests", "duration_s", "requests_per_sec", "socket_errors", "non_2xx_3xx", "transfer_per_sec_bytes",
           "bytes_read", "latency_ms", "percentiles_ms")
RATE = ("requests", "duration_s", "requests_per_sec")
# numbers no load generator prints: not finite, too large for a float, malformed, or far too long
HOSTILE = ("inf", "nan", "-inf", "1e999", "1e400", "1e-400", "1.2.3", ".", "-1", "9" * 5000)
DEADLINE_S = 20     # a hang, not a speed goal: these inputs parse in well under a second


class TooSlow(Exception):
    pass


@contextmanager
def deadline(seconds: float = DEADLINE_S):
    """Fail (TooSlow) when the block runs longer than ``seconds``; SIGALRM also stops a regex match."""
    def alarm(*_):
        raise TooSlow(f"still parsing after {seconds} s: backtracking or quadratic work")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def outcome(text: str, tool: str | None = None):
    """The report, or the ParseError's message (one line); anything else fails the test."""
    try:
        with deadline():
            report = parse_report(text, tool)
    except ParseError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message
        return message
    json.dumps(report.to_dict(), allow_nan=False)      # what `tunepath parse` prints: strict JSON
    report.to_row()
    return report


def figures(report) -> dict:
    data = report.to_dict()
    return {k: data[k] for k in FIGURES}


def cli(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tunepath.cli", "parse", str(path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "scripts"), "PATH": "/usr/bin:/bin"})


def one_line_or_flagged(proc: subprocess.CompletedProcess) -> dict | str:
    """`tunepath parse`: exit 2 and one line on stderr, or exit 0 and JSON; never a traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    if proc.returncode == 2:
        lines = proc.stderr.splitlines()
        assert proc.stdout == "" and len(lines) == 1 and lines[0].startswith("tunepath: "), proc.stderr
        return lines[0]
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)


# --- finding 9: no backtracking over a long line -------------------------------------------------
@pytest.mark.parametrize("value", ["x" * 200_000, "a" + " " * 199_998 + "b", "x " * 100_000, "apr_a: " * 28_572,
                                   "(" + "1) (" * 50_000 + "1)"],
                         ids=["letters", "spaces-inside", "words", "apr-words", "parentheses"])
def test_a_200000_character_server_software_parses_at_once(value):
    r = outcome(AB.replace("BaseHTTP/0.6", value))
    assert not isinstance(r, str), r
    assert r.requests == 2000 and r.requests_per_sec == 1929.75 and r.problems == []


@pytest.mark.parametrize("tail", ["apr_a: " * 40_000, "apr_socket_recv: " + "x " * 140_000 + "(104",
                                  "ab: " + " " * 280_000 + "x"], ids=["apr-words", "apr-unclosed", "ab-spaces"])
def test_an_ab_report_followed_by_a_280_kb_line(tail):
    r = outcome(AB + tail + "\n")
    assert not isinstance(r, str), r
    assert r.requests == 2000 and r.requests_per_sec_trusted


def _long_variants(line: str) -> list[str]:
    """A line made long the ways that make a backtracking pattern slow: every gap widened to 100,000
    spaces and a stray word after it, the line repeated on one line, a run of its own first character."""
    indent = line[:len(line) - len(line.lstrip())]
    body = line.strip()
    return [indent + re.sub(r"\s+", " " * 100_000, body) + " " * 100_000 + "x",
            indent + (body + " ") * max(1, 200_000 // max(1, len(body))),
            indent + body + body[:1] * 200_000]


@pytest.mark.parametrize("tool", SAMPLES)
def test_no_line_of_any_report_can_be_made_to_hang_its_parser(tool):
    lines = SAMPLES[tool].splitlines(keepends=True)
    shapes = set()
    for i, line in enumerate(lines):
        shape = re.sub(r"\d+", "0", line.strip())
        if not shape or shape in shapes:           # one spectrum row stands for all of them
            continue
        shapes.add(shape)
        for variant in _long_variants(line.rstrip("\r\n")):
            outcome("".join(lines[:i] + [variant + "\n"] + lines[i + 1:]))


# --- finding 10: linear work ----------------------------------------------------------------------
CALIBRATION = "  Thread calibration: mean lat.: 1.165ms, rate sampling interval: 10ms\n"


def _counting_conversions(monkeypatch) -> list[int]:
    """Every number the parsers read goes through units._split: count its calls."""
    calls = [0]
    split = units._split

    def counted(token):
        calls[0] += 1
        return split(token)
    monkeypatch.setattr(units, "_split", counted)
    return calls


def test_200000_calibration_lines_before_a_report_are_read_in_bounded_work(monkeypatch):
    header, rest = WRK2.split("  Thread calibration", 1)
    text = header + CALIBRATION * 200_000 + "  Thread calibration" + rest          # 13 MB
    assert len(text) > 13_000_000
    calls = _counting_conversions(monkeypatch)
    with deadline():
        r = parse_report(text)
        out = json.dumps(r.to_dict())
    assert calls[0] < 5_000, f"{calls[0]:,} numbers converted for 200,002 calibration lines"
    assert len(out) < 1_000_000            # the JSON does not repeat 200,000 junk lines
    [problem] = [p for p in r.problems if p.field == "calibration"]
    assert problem.code == "absurd" and "200,002 calibration lines" in problem.text and "2 threads" in problem.text
    whole = parse_report(WRK2)
    assert figures(r) == figures(whole) and r.requests_per_sec_trusted and r.tool == "wrk2"


def test_13_mb_of_other_lines_around_a_report_take_bounded_work(monkeypatch):
    junk = "lua: request 123456 done, status 200, latency 1.23ms\n" * 250_000
    calls = _counting_conversions(monkeypatch)
    for text in (junk + WRK2, WRK2 + junk):
        with deadline():
            r = parse_report(text)
        assert r.requests == 29983
    assert calls[0] < 1_000


# --- finding 13: numbers no tool prints, and wrong field counts ------------------------------------
def _figure_tokens(text: str):
    """(start, end, line number) of every number of a report's figure lines (not its banner)."""
    for m in re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text):
        line = text.count("\n", 0, m.start()) + 1
        row = text.splitlines()[line - 1]
        if re.search(r"ApacheBench|Copyright|Licensed|Benchmarking|Revision|SIEGE|http://|WARN |@ 20", row):
            continue
        yield m.start(), m.end(), line


@pytest.mark.parametrize("name", ["ab", "ab-keepalive", "siege", "siege-json", "jmeter"])
def test_hostile_numbers_give_a_problem_or_one_line_never_a_traceback(name):
    text = {"ab": AB, "ab-keepalive": AB_KEEPALIVE, "siege": SIEGE, "siege-json": SIEGE_JSON, "jmeter": JMETER}[name]
    whole = parse_report(text)
    silent = []
    for start, end, line in _figure_tokens(text):
        for bad in HOSTILE:
            r = outcome(text[:start] + bad + text[end:])
            if isinstance(r, str):
                continue
            changed = [k for k, v in figures(r).items() if v != figures(whole)[k]]
            if changed and not (set(r.problems) - set(whole.problems)):
                silent.append((line, bad[:12], changed))
            elif any(k in RATE for k in changed) and r.requests_per_sec_trusted:
                silent.append((line, bad[:12], changed, "trusted"))
    assert not silent, f"{len(silent)} figures changed with no problem: {silent[:40]}"


@pytest.mark.parametrize("old, new", [
    ("Transactions:\t\t      263398 hits", "Transactions:\t\t      inf hits"),
    ("Transactions:\t\t      263398 hits", "Transactions:\t\t      nan hits"),
    ("Transactions:\t\t      263398 hits", "Transactions:\t\t      1e999 hits"),
    ("Failed transactions:\t        2625", "Failed transactions:\t        inf"),
    ("Failed transactions:\t        2625", "Failed transactions:\t        " + "9" * 5000),
    ("** Preparing 16 concurrent", "** Preparing " + "9" * 5000 + " concurrent"),
    ("Elapsed time:\t\t        9.98 secs", "Elapsed time:\t\t        1.2.3 secs"),
])
def test_siege_with_numbers_it_never_prints_through_the_cli(tmp_path, old, new):
    assert old in SIEGE
    path = tmp_path / "siege.out"
    path.write_text(SIEGE.replace(old, new))
    result = one_line_or_flagged(cli(path))
    if isinstance(result, dict):           # the users line is no figure: an unread line, said in a warning
        assert result["problems"] or "1 unrecognised line(s) ignored" in result["warnings"], result["warnings"]


@pytest.mark.parametrize("old, new", [
    ("  99%      5", "  99%      1e400"),
    ("Complete requests:      2000", "Complete requests:      " + "9" * 5000),
    ("Time taken for tests:   1.036 seconds", "Time taken for tests:   1.2.3 seconds"),
    ("Time taken for tests:   1.036 seconds", "Time taken for tests:   . seconds"),
    ("Total:          1    4  32.4      3    1029", "Total:          1    4  32.4      3"),
    ("Total:          1    4  32.4      3    1029", "Total:          1    4  32.4      3    1029   7"),
    ("Total transferred:      1530000 bytes", "Total transferred:      nan bytes"),
])
def test_ab_with_numbers_it_never_prints_through_the_cli(tmp_path, old, new):
    assert old in AB
    path = tmp_path / "ab.txt"
    path.write_text(AB.replace(old, new))
    result = one_line_or_flagged(cli(path))
    if isinstance(result, dict):
        assert result["problems"], result["warnings"]
    else:
        assert "ab.txt" in result and "digits" not in result     # Python's own int-limit text is no message


@pytest.mark.parametrize("text", [
    AB.replace("Total:          1    4  32.4      3    1029", "Total:          1    4  32.4"),
    AB.replace("  50%      3", "  50%      3    4"),
    AB.replace("(longest request)", "(longest request) 7"),
    SIEGE.replace("Concurrency:\t\t       15.71", "Concurrency:\t\t       15.71 16.00 17"),
    SIEGE_JSON.replace('"concurrency":\t\t\t       15.69,', '"concurrency":\t\t\t       15.69, 16,'),
    WRK_ERRORS.replace("Socket errors: connect 0, read 10, write 532429, timeout 0", "Socket errors: connect 0, read 10"),
    WRK.replace("Requests/sec:", "Requests/sec: 1 2"),
    JMETER.replace("Avg:", "Avg: 1 2"),
], ids=["ab-row", "ab-percentile", "ab-longest", "siege", "siege-json", "wrk-socket", "wrk-rate", "jmeter"])
def test_wrong_field_counts_give_a_problem_or_one_line(text):
    outcome(text)


def test_numbers_with_more_digits_than_any_count_give_a_sentence():
    """Python's own message for such an int ("Exceeds the limit (4300 digits)…") is no sentence for people."""
    for text in (WRK.replace("165134 requests in", "9" * 5000 + " requests in"),
                 WRK_ERRORS.replace("write 532429", "write " + "9" * 5000),
                 WRK.replace("2 threads and", "9" * 5000 + " threads and"),
                 AB.replace("Concurrency Level:      8", "Concurrency Level:      " + "8" * 5000)):
        r = outcome(text)
        said = r if isinstance(r, str) else " ".join(r.warnings)
        assert "4300" not in said and "set_int_max_str_digits" not in said and len(said) < 1000
        if not isinstance(r, str):     # the line is not read: a problem, or (the header) an unread line
            assert r.problems or (r.threads is None and "1 unrecognised line(s) ignored" in r.warnings)


# --- finding 17: ab and siege get wrk's consistency checks ---------------------------------------------
def _problems(text: str) -> set[tuple[str, str]]:
    r = outcome(text)
    assert not isinstance(r, str), r
    return {(p.code, p.field) for p in r.problems}


@pytest.mark.parametrize("old, new, problem", [
    ("  99%      5", "  99%      1e400", None),                                     # refused, or flagged
    ("  50%      3", "  50%     30", ("absurd", "percentiles_ms")),                  # out of order
    ("  66%      3", "  66%     30", ("absurd", "percentiles_ms")),                  # a row ab prints, not kept
    (" 100%   1029", " 100%   2029", ("inconsistent", "percentiles_ms")),            # not the Total row's max
    ("Total:          1    4  32.4      3    1029", "Total:          9    4  32.4      3    1029",
     ("absurd", "latency_ms")),                                                      # min above the mean
    ("Time per request:       4.146 [ms] (mean)", "Time per request:       9.146 [ms] (mean)",
     ("inconsistent", "latency_ms")),                                                # not 8 × 1.036 s ÷ 2000
    ("Concurrency Level:      8", "Concurrency Level:      80", ("inconsistent", "latency_ms")),
    ("Transfer rate:          1441.66", "Transfer rate:          2441.66", ("inconsistent", "transfer_per_sec_bytes")),
    ("Total transferred:      1530000", "Total transferred:      9530000", ("inconsistent", "transfer_per_sec_bytes")),
    ("Requests per second:    1929.75", "Requests per second:    2929.75", ("inconsistent", "requests_per_sec")),
    ("Time taken for tests:   1.036", "Time taken for tests:   1.036e0", None),
    ("Time taken for tests:   1.036", "Time taken for tests:   0.000", ("inconsistent", "requests_per_sec")),
    ("Failed requests:        0", "Failed requests:        5000\n   (Connect: 0, Receive: 0, Length: 5000, "
     "Exceptions: 0)", ("absurd", "requests")),                                      # more failed than complete
    ("Failed requests:        0", "Failed requests:        2001", ("absurd", "requests")),   # no breakdown
    ("Concurrency Level:      8", "Concurrency Level:      0", ("absurd", "connections")),
])
def test_ab_figures_that_contradict_each_other_are_flagged(old, new, problem):
    assert old in AB
    r = outcome(AB.replace(old, new))
    if problem is None:
        assert isinstance(r, str) or r.problems, r.warnings
        return
    assert not isinstance(r, str), r
    assert problem in {(p.code, p.field) for p in r.problems}, r.problems
    if problem[1] in RATE or problem[1] == "requests_per_sec":
        assert not r.requests_per_sec_trusted


def test_ab_percentiles_that_are_not_finite_are_never_silent():
    for bad in ("1e400", "inf", "nan", "1e999"):
        r = outcome(AB.replace("  90%      4", f"  90%      {bad}"))
        assert isinstance(r, str) or ("absurd", "percentiles_ms") in {(p.code, p.field) for p in r.problems}


@pytest.mark.parametrize("old, new, problem", [
    ("Throughput:\t\t        9.74", "Throughput:\t\t       19.74", ("inconsistent", "transfer_per_sec_bytes")),
    ("Data transferred:\t       97.21", "Data transferred:\t      197.21", ("inconsistent", "transfer_per_sec_bytes")),
    ("Availability:\t\t       99.01", "Availability:\t\t       89.01", ("inconsistent", "socket_errors")),
    ("Response time:\t\t        0.00", "Response time:\t\t        0.09", ("absurd", "latency_ms")),  # above Longest
    ("Shortest transaction:\t        0.00", "Shortest transaction:\t        0.05", ("absurd", "latency_ms")),
])
def test_siege_figures_that_contradict_each_other_are_flagged(old, new, problem):
    assert old in SIEGE
    assert problem in _problems(SIEGE.replace(old, new))


def test_a_percentile_of_wrk_that_is_not_finite_is_flagged():
    assert "99%    5.31ms" in WRK
    assert ("absurd", "percentiles_ms") in _problems(WRK.replace("99%    5.31ms", "99%    1e400ms"))
    assert ("absurd", "percentiles_ms") in _problems(WRK.replace("99%    5.31ms", "99%    infms"))


@pytest.mark.parametrize("old, new, problem", [
    ("Latency   831.40us    4.59ms  89.88ms", "Latency   890.00ms    4.59ms  89.88ms", ("absurd", "latency_ms")),
    ("2 threads and 10 connections", "2 threads and 0 connections", ("absurd", "connections")),
    ("2 threads and 10 connections", "2 threads and 1 connections", ("absurd", "connections")),  # wrk refuses
])
def test_wrk_figures_that_contradict_each_other_are_flagged(old, new, problem):
    assert old in WRK
    assert problem in _problems(WRK.replace(old, new))
    # the boundary is no problem: a mean equal to the maximum, or as many connections as threads
    assert _problems(WRK.replace(old, old.replace("831.40us", "89.88ms").replace("10 conn", "2 conn"))) == set()


def test_a_hdrhistogram_footer_with_its_mean_above_its_max_is_flagged():
    footer = re.search(r"#\[Mean\s*=\s*([0-9.]+),", WRK2_HDR)
    assert footer
    edited = WRK2_HDR[:footer.start(1)] + "999.000" + WRK2_HDR[footer.end(1):]
    assert ("absurd", "histogram") in _problems(edited)


# two reports of different tools in one text: refused in one line, whichever comes first and whatever the
# tool given (the census's parse/two-reports cases: some were read as one tool, others the second alone)
PAIRS = [(a, b) for a in ("ab", "siege", "siege-json", "jmeter", "wrk", "wrk2")
         for b in ("ab", "siege", "jmeter", "wrk") if a.split("-")[0].rstrip("2") != b]


@pytest.mark.parametrize("first, second", PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_two_reports_of_different_tools_are_refused(first, second):
    text = SAMPLES[first] + SAMPLES[second]
    for tool in (None, first.split("-")[0], second):
        message = outcome(text, tool)
        assert isinstance(message, str), f"{first}+{second} read as one {message.tool} report (tool {tool})"
        assert message.startswith("more than one report: ") and "split the file" in message, message
        names = [first.split("-")[0].rstrip("2"), second]
        assert message.index(f" {names[0]} report") < message.index(f" {names[1]} report"), message


def test_the_real_reports_have_no_problem():
    """No false alarm from the new checks on the captured reports of every tool."""
    paths = [*sorted((TEST_DATA / "ab").glob("*.txt")), *sorted((TEST_DATA / "siege").glob("*.out")),
             *sorted((TEST_DATA / "jmeter").glob("*.out")), *sorted(FIXTURES.glob("wrk*/*.txt")),
             *sorted((ROOT / "runs").glob("*/raw/*.txt"))[::25]]
    for path in paths:
        text = path.read_text(errors="replace")
        try:
            r = parse_report(text)
        except ParseError:
            continue
        assert r.problems == [], (path, r.problems)


# --- item 6: a cut report is never read as complete -------------------------------------------------
def test_a_wrk_report_cut_before_its_socket_errors_is_not_read_as_0_errors():
    cut = WRK_ERRORS[:WRK_ERRORS.index("  Socket errors")]
    r = outcome(cut)
    assert not isinstance(r, str), r
    assert not r.requests_per_sec_trusted
    [problem] = [p for p in r.problems if p.field == "socket_errors"]
    assert problem.code == "cut" and "cut" in problem.text and "Requests/sec" in problem.text


def test_a_wrk_report_cut_before_its_transfer_line_says_so():
    cut = WRK[:WRK.index("Transfer/sec")]
    assert ("cut", "transfer_per_sec_bytes") in _problems(cut)


@pytest.mark.parametrize("line, keep, field", [
    ("Complete requests:      2000", "Complete requests:      20", "requests"),
    ("Failed requests:        0", "Failed requests:        0", "socket_errors"),
    ("Non-2xx responses:      500", "Non-2xx responses:      50", "non_2xx_3xx"),
    ("Total:          1    4  32.4      3    1029", "Total:          1    4  32.4      3    10", "latency_ms"),
])
def test_an_ab_count_on_the_line_the_report_is_cut_at_is_not_trusted(line, keep, field):
    text = AB if line in AB else (TEST_DATA / "ab" / "not_found.txt").read_text()
    assert line in text
    cut = text[:text.index(line)] + keep             # no line end: the count may be cut
    r = outcome(cut)
    if isinstance(r, str):
        assert "cut" in r
        return
    assert any(p.code == "cut" and p.field == field for p in r.problems), r.problems
    if field == "requests":
        assert not r.requests_per_sec_trusted


SUMMARY_ONLY = (TEST_DATA / "jmeter" / "summary-only.out").read_text()


@pytest.mark.parametrize("change", [("in 00:00:05 =", f"in {d} =") for d in ("00:05", "1.2.3s", "00:00:05:01", ".")]
                         + [("2140 in", "9" * 5000 + " in")])
def test_a_damaged_jmeter_summary_is_one_line_never_a_traceback(change):
    """Issue 34, item 6: durations JMeter never prints and a 5,000-digit count."""
    with pytest.raises(ParseError) as caught, deadline():
        parse_report(SUMMARY_ONLY.replace(*change), "jmeter")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("value", ["1e999", '"nan"', "[" * 100_000 + "]" * 100_000])
def test_a_damaged_jmeter_dashboard_is_a_problem_flag_and_the_summary_stays(value):
    """Issue 34, item 6: a dashboard with an infinite or non-numeric sampleCount, or nested 100,000 deep."""
    with deadline():
        report = parse_report(JMETER.replace('"sampleCount" : 100576', f'"sampleCount" : {value}'), "jmeter")
    assert report.requests == 100576 and report.problems
