"""ApacheBench (ab) output parser: real captured outputs, exact values, edge cases, properties."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from conftest import TEST_DATA
from tunepath.parse.ab import parse_ab, parse_ab_file
from tunepath.parse.reports import parse_report, parse_report_file
from tunepath.errors import TunepathError
from tunepath.parse.wrk import PERCENTILE_KEYS, ParseError, WrkReport

pytestmark = pytest.mark.fast

AB = TEST_DATA / "ab"
NORMAL = (AB / "normal.txt").read_text()


def _exit_status(txt: Path) -> int:
    m = re.search(r"^# exit status: (\d+)$", txt.with_suffix(".cmd").read_text(), re.M)
    assert m, f"{txt.with_suffix('.cmd')} lacks '# exit status: N'"
    return int(m.group(1))


def _reject(token):
    raise AssertionError(f"non-standard JSON constant {token}")


AB_FILES = sorted(AB.glob("*.txt"))


def test_captures_are_present():
    names = {p.stem for p in AB_FILES}
    assert {"normal", "keepalive", "timed", "not_found", "refused", "usage"} <= names
    for p in AB_FILES:
        assert p.with_suffix(".cmd").is_file()


# --- every real capture: a report when ab exited 0, ParseError otherwise --------------
@pytest.mark.parametrize("path", AB_FILES, ids=lambda p: p.name)
def test_every_capture_parses_or_raises_parse_error(path):
    if _exit_status(path) == 0:
        r = parse_ab_file(path)
        assert r.tool == "ab" and r.threads == 1
        assert r.url and r.url.startswith("http://127.0.0.1:")
        assert r.requests and r.requests > 0 and r.duration_s > 0 and r.requests_per_sec > 0
        data = json.loads(json.dumps(r.to_dict()), parse_constant=_reject)   # strict JSON
        assert set(data) == set(WrkReport().to_dict())
        assert set(data["socket_errors"]) == {"connect", "read", "write", "timeout"}
        if data["percentiles_ms"] is not None:
            assert list(data["percentiles_ms"]) == list(PERCENTILE_KEYS)
        r.to_row()
        assert parse_report_file(path).to_dict() == r.to_dict()   # sniffed from the banner
    else:
        with pytest.raises(ParseError) as exc:
            parse_ab_file(path)
        msg = str(exc.value)
        assert msg and "\n" not in msg


@pytest.mark.parametrize("path", sorted(AB.glob("*.stderr")), ids=lambda p: p.name)
def test_stderr_captures_are_no_reports(path):
    with pytest.raises(ParseError):
        parse_ab(path.read_text())


def test_normal_run_exact_values():
    r = parse_ab(NORMAL)
    assert r.tool == "ab"
    assert r.url == "http://127.0.0.1:41897/"
    assert (r.threads, r.connections) == (1, 8)
    assert r.duration_s == 1.036
    assert r.requests == 2000
    assert r.requests_per_sec == 1929.75
    assert r.bytes_read == 1530000
    assert r.transfer_per_sec_bytes == pytest.approx(1441.66 * 1024)
    assert (r.latency_ms.avg, r.latency_ms.stdev, r.latency_ms.max) == (4.146, 32.4, 1029.0)   # avg: "Time per request", to the microsecond
    assert math.isnan(r.latency_ms.within_stdev_pct)
    assert r.percentiles_ms == {"50": 3.0, "75": 4.0, "90": 4.0, "99": 5.0, "99.9": None,
                                "99.99": None, "99.999": None, "100": 1029.0}
    assert r.socket_errors == {"connect": 0, "read": 0, "write": 0, "timeout": 0}
    assert r.non_2xx_3xx == 0
    assert r.warnings == []
    assert r.header_duration_s is None and r.req_per_sec_per_thread is None
    assert r.histogram is None and r.uncorrected_percentiles_ms is None and r.calibration == []


def test_keepalive_timed_and_404():
    ka = parse_ab_file(AB / "keepalive.txt")
    assert ka.requests == 2000 and ka.connections == 8 and ka.warnings == []
    timed = parse_ab_file(AB / "timed.txt")
    assert (timed.connections, timed.requests, timed.duration_s) == (4, 3433, 2.001)
    nf = parse_ab_file(AB / "not_found.txt")
    assert nf.url.endswith("/missing") and nf.non_2xx_3xx == 500
    assert any("500 non-2xx responses" in w for w in nf.warnings)


def test_length_failures_with_keepalive_get_the_quirk_warning():
    r = parse_ab_file(AB / "keepalive_length.txt")
    assert r.socket_errors["read"] == 428
    assert "428 failed requests (Connect: 0, Receive: 0, Length: 428, Exceptions: 0)" in r.warnings
    assert any("known ab quirk" in w and "keep-alive" in w for w in r.warnings)
    assert any(w.startswith("ab: ERROR: The median and mean") and w.endswith("NOT reliable.")
               for w in r.warnings)
    assert not any("unrecognised" in w for w in r.warnings)


def test_mixed_failures_get_no_quirk_warning():
    text = NORMAL.replace("Failed requests:        0",
                          "Failed requests:        7\n   (Connect: 2, Receive: 0, Length: 5, Exceptions: 0)")
    r = parse_ab(text)
    assert r.socket_errors["read"] == 7
    assert "7 failed requests (Connect: 2, Receive: 0, Length: 5, Exceptions: 0)" in r.warnings
    assert not any("quirk" in w for w in r.warnings)


@pytest.mark.parametrize("failed, breakdown, flagged", [
    ("5000", "(Connect: 0, Receive: 0, Length: 5000, Exceptions: 0)", True),    # 5,000 responses of 2,000
    ("2001", None, True),
    ("2000", "(Connect: 0, Receive: 0, Length: 2000, Exceptions: 0)", False),   # every response failed
    ("2011", "(Connect: 11, Receive: 0, Length: 2000, Exceptions: 0)", False),  # 11 connections never opened
    ("2500", "(Connect: 0, Receive: 0, Length: 1500, Exceptions: 1000)", False),   # broke before a response
])
def test_more_failed_than_complete_requests_is_a_problem(failed, breakdown, flagged):
    text = NORMAL.replace("Failed requests:        0", f"Failed requests:        {failed}"
                          + (f"\n   {breakdown}" if breakdown else ""))
    r = parse_ab(text)
    found = [p for p in r.problems if p.field == "requests"]
    assert bool(found) == flagged, r.problems
    if flagged:
        assert found[0].code == "absurd" and "more than the 2,000 complete requests" in found[0].text
        assert found[0].line == 18 and not r.requests_per_sec_trusted


def test_failures_without_breakdown_write_errors_and_ab_warning():
    text = NORMAL.replace("Failed requests:        0",
                          "Failed requests:        3\nWrite errors:           2")
    text = text.replace("Total:          1    4  32.4      3    1029",
                        "Total:          1    4  32.4      3    1029\n"
                        "WARNING: The median and mean for the initial connection time are not within a normal deviation\n"
                        "        These results are probably not that reliable.")
    r = parse_ab(text)
    assert r.socket_errors == {"connect": 0, "read": 3, "write": 2, "timeout": 0}
    assert any(w.startswith("3 failed requests") for w in r.warnings)
    assert "2 write errors" in r.warnings
    assert any(w.startswith("ab: WARNING:") and w.endswith("not that reliable.") for w in r.warnings)
    assert not any("unrecognised" in w for w in r.warnings)


def test_latency_falls_back_to_time_per_request():
    text = re.sub(r"Connection Times \(ms\).*?\n\n", "", NORMAL, flags=re.S)
    r = parse_ab(text)
    assert r.latency_ms.avg == 4.146            # not 0.518 (across all concurrent requests)
    assert math.isnan(r.latency_ms.stdev) and math.isnan(r.latency_ms.max)
    assert r.percentiles_ms["99"] == 5.0


def test_no_confidence_columns():
    text = NORMAL.replace("min  mean[+/-sd] median   max", "min   avg   max")
    text = text.replace("Total:          1    4  32.4      3    1029", "Total:          1    4    1029")
    r = parse_ab(text)
    assert r.latency_ms.avg == 4.146 and r.latency_ms.max == 1029.0 and math.isnan(r.latency_ms.stdev)


def test_one_request_prints_no_percentiles():
    r = parse_ab_file(AB / "illegal_option.txt")
    assert r.requests == 1 and r.percentiles_ms is None and r.latency_ms.avg == 0.928


def test_url_variants():
    ipv6 = NORMAL.replace("Server Hostname:        127.0.0.1", "Server Hostname:        ::1")
    assert parse_ab(ipv6).url == "http://[::1]:41897/"
    tls = NORMAL.replace("Server Port:            41897",
                         "Server Port:            443\nSSL/TLS Protocol:       TLSv1.3,TLS_AES_256_GCM_SHA384,2048,256")
    assert parse_ab(tls).url == "https://127.0.0.1:443/"
    assert parse_ab(NORMAL.replace("\n", "\r\n")).url == "http://127.0.0.1:41897/"


def test_no_report_messages():
    with pytest.raises(ParseError, match="empty output"):
        parse_ab("")
    with pytest.raises(ParseError, match="usage text"):
        parse_ab((AB / "usage.stderr").read_text())
    with pytest.raises(ParseError, match="banner but stopped"):
        parse_ab_file(AB / "refused.txt")
    combined = (AB / "refused.txt").read_text() + (AB / "refused.stderr").read_text()
    with pytest.raises(ParseError, match=r"apr_socket_recv: Connection refused \(111\)"):
        parse_ab(combined)
    with pytest.raises(ParseError, match=r"apr_socket_connect\(\): Connection refused \(111\)"):
        parse_ab("apr_socket_connect(): Connection refused (111)\n")
    with pytest.raises(ParseError, match="no ab report"):
        parse_ab((TEST_DATA / "wrk" / "lua_trailing.txt").read_text())
    with pytest.raises(ParseError, match="damaged ab report"):
        parse_ab(NORMAL.replace("Complete requests:      2000", "Complete requests:      lots"))
    with pytest.raises(ParseError):
        parse_ab(b"bytes")   # type: ignore[arg-type]
    assert issubclass(ParseError, TunepathError)


def test_parse_report_dispatch():
    wrk_text = (TEST_DATA / "wrk" / "lua_trailing.txt").read_text()
    assert parse_report(NORMAL).tool == "ab"
    assert parse_report(NORMAL, tool="ab").tool == "ab"
    assert parse_report(wrk_text).tool != "ab"
    assert parse_report(wrk_text, tool="wrk").tool != "ab"
    with pytest.raises(ParseError):
        parse_report(wrk_text, tool="ab")
    with pytest.raises(ParseError):
        parse_report(NORMAL, tool="wrk")
    with pytest.raises(ParseError):
        parse_report("")


# --- properties: damaged ab output only ever raises ParseError -----------------------
SAMPLES = [p.read_text() for p in sorted(AB.glob("*.txt")) + sorted(AB.glob("*.stderr"))]
SAMPLES = [s for s in SAMPLES if s] or [NORMAL]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_ab_reports_never_raise_anything_else(sample, data):
    lines = sample.splitlines(keepends=True)
    op = data.draw(st.sampled_from(["truncate", "drop", "swap", "junk", "replace_token", "duplicate"]))
    i = data.draw(st.integers(0, len(lines) - 1))
    if op == "truncate":
        lines = [sample[:data.draw(st.integers(0, len(sample)))]]
    elif op == "drop":
        del lines[i]
    elif op == "swap":
        j = data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "junk":
        lines.insert(i, data.draw(st.text(max_size=40)) + "\n")
    elif op == "duplicate":
        lines.insert(i, lines[i])
    else:
        tokens = lines[i].split()
        if tokens:
            k = data.draw(st.integers(0, len(tokens) - 1))
            tokens[k] = data.draw(st.sampled_from(
                ["-nan", "inf", "1e999", "x", "", "12.3zz", "%", "-1", "١٢", "(", "[ms]", ":"]))
            lines[i] = "  ".join(tokens) + "\n"
    text = "".join(lines)
    for fn in (parse_ab, parse_report):
        try:
            r = fn(text)
        except ParseError:
            continue
        json.dumps(r.to_dict(), allow_nan=False)
        r.to_row()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises_anything_else(text):
    for candidate in (text, "This is ApacheBench\n" + text, text + "\nComplete requests: 1\n"):
        try:
            parse_ab(candidate)
        except ParseError:
            pass
