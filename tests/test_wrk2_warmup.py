"""wrk2's warm-up option (the project's patch, fix 6: ``-W, --warmup <T>``) and its report.

With ``-W T`` wrk2 offers the rate for T, then counts only the ``-d`` window: each thread
calibrates when the warm-up ends and resets its histograms, request, byte and error counts and
its rate sampling then, so "N requests in", Requests/sec and the histograms cover one window.
The real build is test_wrk2_build's (its ``built`` fixture: the vendored tarball, the patch,
Debian's LuaJIT 2.1, a client home of its own); it measures a small keep-alive server on
127.0.0.1 that notes when each request arrives. The recorded reports under
``tests/data/wrk2/`` come from that build.
"""

from __future__ import annotations

import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import FIXTURES, TEST_DATA, serving
from test_wrk2_build import built, client  # noqa: F401  (the real build's fixtures)
from tunepath.analysis.noise import flags_for
from tunepath.parse.wrk import ParseError, parse, parse_file

pytestmark = pytest.mark.fast

WARMUP_T1 = TEST_DATA / "wrk2" / "warmup-t1-c4-R500-W2-d3.txt"       # -t1 -c4 -R500 -W2 -d3 --latency -U
WARMUP_T2 = TEST_DATA / "wrk2" / "warmup-t2-c8-R1000-W2s-d3s.txt"    # -t2 -c8 -R1000 -W2s -d3s --latency
STOCK = FIXTURES / "wrk2" / "realistic_60s_U_latency.txt"             # upstream's wrk2, -d60: calibrated at 10 s
LINE = "  Warm-up: 2s at the offered rate, not counted"


def histogram_warnings(report) -> list[str]:
    return [w for w in report.warnings if "histogram" in w]


# --- the report of a run with a warm-up (recorded from the patched build) ---------------------
@pytest.mark.parametrize("path, threads", [(WARMUP_T1, 1), (WARMUP_T2, 2)], ids=["t1", "t2"])
def test_a_warm_up_report_covers_one_window_and_raises_no_histogram_warning(path, threads):
    text = path.read_text()
    assert text.splitlines()[2] == LINE                  # right after the threads line
    r = parse(text)
    assert r.tool == "wrk2" and r.warmup_s == 2.0 and r.header_duration_s == 3.0
    assert len(r.calibration) == r.threads == threads
    assert r.histogram.total_count == r.requests        # the histogram and the count: the same window
    if r.uncorrected_histogram is not None:
        assert r.uncorrected_histogram.total_count == r.requests
    assert r.duration_s == 3.0 and r.requests_per_sec_trusted
    assert histogram_warnings(r) == [] and r.problems == [] and r.warnings == []
    assert r.to_dict()["warmup_s"] == 2.0 and r.to_row()["warmup_s"] == 2.0


def test_a_stock_report_has_no_warm_up_and_still_warns_of_its_shorter_histogram():
    r = parse_file(STOCK)
    assert r.warmup_s is None and r.to_dict()["warmup_s"] is None and r.to_row()["warmup_s"] is None
    assert histogram_warnings(r) == ["the latency histogram counts 249750 of 299892 requests (wrk2 resets its "
                                     "histograms after calibration)"]


def test_after_a_warm_up_a_histogram_short_of_the_count_is_not_blamed_on_the_calibration():
    """Only -B (one latency per pipelined batch) records fewer latencies than requests after a
    warm-up; the stock explanation (the reset at calibration) would be wrong."""
    text = WARMUP_T1.read_text()
    r = parse(text)
    short = text.replace(f"Total count    = {r.requests:12d}]", f"Total count    = {r.requests - 10:12d}]", 1)
    assert short != text
    (warning,) = histogram_warnings(parse(short))
    assert warning.startswith(f"the latency histogram holds {r.requests - 10} latencies for the {r.requests} "
                              "requests counted after the warm-up")
    assert "calibration" not in warning and "-B" in warning


def test_a_warm_up_report_missing_a_threads_calibration_line_is_still_flagged():
    text = WARMUP_T2.read_text()
    first = next(line for line in text.splitlines() if "Thread calibration" in line)
    r = parse(text.replace(first + "\n", "", 1))
    assert r.warmup_s == 2.0 and len(r.calibration) == 1 and r.threads == 2
    found = flags_for(r, {}, tool="wrk2", command="", offered_rate=None, server_cpus=2, client_cpus=2,
                      same_machine=True)
    assert "calibration" in [f.code for f in found]
    complete = flags_for(parse(text), {}, tool="wrk2", command="", offered_rate=None, server_cpus=2,
                         client_cpus=2, same_machine=True)
    assert "calibration" not in [f.code for f in complete]


def test_two_warm_up_lines_are_two_reports():
    lines = WARMUP_T1.read_text().splitlines(keepends=True)
    with pytest.raises(ParseError, match="more than one report"):
        parse("".join(lines[:3] + [lines[2]] + lines[3:]))


# --- the real build ---------------------------------------------------------------------------
RATE, WARMUP_S, DURATION_S = 500, 2, 3


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    arrivals: list[float]
    failing_until: float | None = None     # answer 503 before this time.monotonic()

    def handle_error(self, request, client_address):
        pass                # wrk2 closes its connections mid-request when the run ends


class _Handler(BaseHTTPRequestHandler):
    """Keep-alive HTTP/1.1, one write per response, no Nagle; notes each request's arrival."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        now = time.monotonic()
        self.server.arrivals.append(now)
        failing = self.server.failing_until is not None and now < self.server.failing_until
        status = b"503 Service Unavailable" if failing else b"200 OK"
        self.wfile.write(b"HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n" % status)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.arrivals = []
    with serving(srv, "wrk2-warmup-server") as (_, port):
        yield srv, f"http://127.0.0.1:{port}/"


def wrk2(built, *args, timeout=60) -> subprocess.CompletedProcess:  # noqa: F811
    _, _, home = built
    return subprocess.run([str(home / ".tunepath/bin/wrk2"), *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.system
def test_the_warm_up_is_offered_but_not_counted(built, server):  # noqa: F811
    srv, url = server
    t0 = time.monotonic()
    r = wrk2(built, "-t1", "-c4", f"-R{RATE}", f"-W{WARMUP_S}", f"-d{DURATION_S}", "--latency", "-U", url)
    elapsed = time.monotonic() - t0
    assert r.returncode == 0, r.stdout + r.stderr
    report = parse(r.stdout)
    arrivals = list(srv.arrivals)
    # the run lasts warm-up + duration, offering the rate all along
    assert WARMUP_S + DURATION_S <= elapsed < WARMUP_S + DURATION_S + 1.5, elapsed
    assert arrivals[-1] - arrivals[0] == pytest.approx(WARMUP_S + DURATION_S, abs=0.2)
    assert len(arrivals) == pytest.approx(RATE * (WARMUP_S + DURATION_S), rel=0.05)
    # the report counts what arrived after the warm-up (the first request opens it), not the rest
    after = sum(1 for t in arrivals if t >= arrivals[0] + WARMUP_S)
    assert abs(report.requests - after) <= max(10, 0.01 * after), (report.requests, after, len(arrivals))
    assert len(arrivals) - report.requests >= 0.8 * RATE * WARMUP_S
    # both histograms hold exactly the counted requests; rate and duration are the window's
    assert report.histogram.total_count == report.requests == report.uncorrected_histogram.total_count
    assert report.requests_per_sec == pytest.approx(RATE, rel=0.03)
    assert report.duration_s == pytest.approx(DURATION_S, abs=0.05)
    assert report.warmup_s == WARMUP_S and r.stdout.splitlines()[2] == LINE
    assert r.stdout.count("Thread calibration:") == 1 and len(report.calibration) == 1
    assert report.problems == [] and histogram_warnings(report) == [] and report.requests_per_sec_trusted


@pytest.mark.system
def test_errors_during_the_warm_up_are_not_counted(built, server):  # noqa: F811
    """The server answers 503 for the first second of a 2 s warm-up: the report counts none."""
    srv, url = server
    srv.failing_until = time.monotonic() + 1.0
    r = wrk2(built, "-t1", "-c2", "-R200", "-W2", "-d2", url)
    assert r.returncode == 0, r.stdout + r.stderr
    report = parse(r.stdout)
    assert sum(1 for t in srv.arrivals if t < srv.failing_until) > 100        # the server did fail
    assert report.non_2xx_3xx == 0 and "Non-2xx" not in r.stdout
    assert report.requests == pytest.approx(200 * 2, rel=0.05)


@pytest.mark.system
def test_without_w_the_report_has_no_warm_up_and_counts_the_whole_run(built, server):  # noqa: F811
    srv, url = server
    r = wrk2(built, "-t1", "-c2", "-R200", "-d2", url)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Warm-up" not in r.stdout
    report = parse(r.stdout)
    assert report.warmup_s is None and not report.calibration        # upstream calibrates at 10 s
    assert abs(report.requests - len(srv.arrivals)) <= 5


@pytest.mark.system
@pytest.mark.parametrize("given", ["0", "0s", "500ms", "soon"])
def test_a_warm_up_under_one_second_or_no_time_is_refused_in_words(built, given):  # noqa: F811
    r = wrk2(built, "-t1", "-c1", "-R10", f"-W{given}", "-d1", "http://127.0.0.1:9/", timeout=30)
    assert r.returncode == 1 and "Usage: wrk" in r.stdout
    assert f"-W/--warmup {given}: give a time of at least 1s" in r.stderr
    assert "-W, --warmup      <T>" in r.stdout                        # the usage lists the option
