"""The wrk/wrk2 parser against real outputs, and the `tunepath parse` contract."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REFERENCE, ROOT, TEST_DATA
from tunepath.parse.wrk import PERCENTILE_KEYS, ParseError, parse, parse_file

pytestmark = pytest.mark.fast

CONTRACT_KEYS = {
    "tool", "url", "threads", "connections", "calibration", "latency_ms", "req_per_sec_per_thread",
    "percentiles_ms", "uncorrected_percentiles_ms", "histogram", "requests", "duration_s", "bytes_read",
    "requests_per_sec", "transfer_per_sec_bytes", "socket_errors", "non_2xx_3xx", "warnings",
    # added by issue 10: the header's duration, the uncorrected histogram, the typed problems
    "header_duration_s", "uncorrected_histogram", "problems", "requests_per_sec_trusted",
    # added with wrk2's warm-up option (the project's patch, fix 6): -W's warm-up, None without it
    "warmup_s",
}


def cli(*args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tunepath.cli", *args], input=stdin,
                          capture_output=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT / "scripts"),
                                                              "PATH": "/usr/bin:/bin"})


def _reject(token):
    raise AssertionError(f"non-standard JSON constant {token}")


def report_files():
    files = sorted(TEST_DATA.glob("*/*.txt"))
    files += sorted(FIXTURES.glob("*/*.txt")) + sorted(REFERENCE.glob("*/*.txt"))
    return files


def is_report(path: Path) -> bool:
    text = path.read_text()
    return "requests in" in text or "Requests/sec" in text or "Complete requests:" in text


# --- every real output: the CLI contract -----------------------------------------------
@pytest.mark.parametrize("path", report_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_cli_contract_on_every_output(path):
    proc = cli("parse", str(path))
    if is_report(path):
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout, parse_constant=_reject)   # strict JSON: no NaN/Infinity
        assert set(data) == CONTRACT_KEYS
        assert set(data["socket_errors"]) == {"connect", "read", "write", "timeout"}
        for key in ("percentiles_ms", "uncorrected_percentiles_ms"):
            if data[key] is not None:
                assert list(data[key]) == list(PERCENTILE_KEYS)
    else:
        assert proc.returncode == 2
        assert proc.stdout == b""
        lines = proc.stderr.decode().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tunepath: "), proc.stderr
        assert b"Traceback" not in proc.stderr


def test_garbage_and_missing_file_give_one_line_and_status_2(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    for args in (("parse", str(junk)), ("parse", str(tmp_path / "absent.txt")), ("parse", str(tmp_path))):
        proc = cli(*args)
        assert proc.returncode == 2
        assert len(proc.stderr.decode().strip().splitlines()) == 1
        assert b"Traceback" not in proc.stderr


def test_stdin_and_crlf():
    text = (FIXTURES / "wrk2" / "ulatency.txt").read_bytes()
    proc = cli("parse", "-", stdin=text.replace(b"\n", b"\r\n"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(cli("parse", str(FIXTURES / "wrk2" / "ulatency.txt")).stdout)


# --- exact values from real files ----------------------------------------------------------
def test_wrk2_corrected_and_uncorrected_blocks():
    r = parse_file(FIXTURES / "wrk2" / "realistic_60s_U_latency.txt").to_dict()
    assert r["tool"] == "wrk2"
    assert (r["threads"], r["connections"], r["url"]) == (2, 20, "http://127.0.0.1:18090/")
    assert r["calibration"] == [{"mean_latency_ms": 1.013, "sampling_interval_ms": 10.0},
                                {"mean_latency_ms": 1.097, "sampling_interval_ms": 10.0}]
    assert r["latency_ms"] == {"avg": 1.30, "stdev": 3.70, "max": 96.58, "within_stdev_pct": 98.69}
    assert r["req_per_sec_per_thread"] == {"avg": 2650.0, "stdev": 409.33, "max": 19780.0, "within_stdev_pct": 94.71}
    assert r["percentiles_ms"]["99"] == 7.71 and r["percentiles_ms"]["100"] == 96.64
    assert r["uncorrected_percentiles_ms"]["50"] == 0.126 and r["uncorrected_percentiles_ms"]["99.999"] == 43.52
    h = r["histogram"]
    assert (h["mean_ms"], h["stdev_ms"], h["max_ms"], h["total_count"]) == (1.297, 3.696, 96.576, 249750)
    assert h["spectrum"][0] == [0.031, 0.0, 2] and h["spectrum"][-1] == [96.639, 1.0, 249750]
    assert r["requests"] == 299892 and r["duration_s"] == 60.0
    assert r["bytes_read"] == pytest.approx(83.23 * 1024**2)
    assert r["requests_per_sec"] == 4998.13
    assert r["transfer_per_sec_bytes"] == pytest.approx(1.39 * 1024**2)
    assert any("histogram counts 249750 of 299892" in w for w in r["warnings"])


def test_wrk_distribution_and_errors():
    r = parse_file(FIXTURES / "wrk" / "latency.txt").to_dict()
    assert r["tool"] == "wrk"
    assert r["percentiles_ms"] == {"50": 0.255, "75": 0.426, "90": 1.18, "99": 5.31,
                                   "99.9": None, "99.99": None, "99.999": None, "100": None}
    assert r["latency_ms"]["avg"] == 0.8314 and r["histogram"] is None
    r = parse_file(FIXTURES / "wrk" / "notfound_404.txt").to_dict()
    assert r["non_2xx_3xx"] == 182474 and r["socket_errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 0}


def test_published_summary_only():
    r = parse_file(REFERENCE / "published" / "c8g-1-default.txt").to_dict()
    assert r["tool"] is None and r["url"] is None and r["threads"] is None
    assert r["latency_ms"] == {"avg": 16760.0, "stdev": 6590.0, "max": 27560.0, "within_stdev_pct": 56.98}
    assert r["requests"] == 14680146 and r["duration_s"] == 60.0
    assert r["bytes_read"] == pytest.approx(7.62 * 1024**3)
    assert r["socket_errors"] == {"connect": 1264, "read": 0, "write": 0, "timeout": 1748}
    assert r["requests_per_sec"] == 244449.62


def test_short_wrk2_run_nan_rate_warns():
    r = parse_file(FIXTURES / "wrk2" / "plain.txt")
    assert r.tool == "wrk2" and not r.calibration
    assert math.isnan(r.req_per_sec_per_thread.avg)
    assert r.to_dict()["req_per_sec_per_thread"]["avg"] is None
    assert any("Req/Sec is NaN" in w for w in r.warnings)


def test_overload_minutes_and_seconds():
    r = parse_file(FIXTURES / "wrk2" / "overload_R1M.txt")
    assert r.latency_ms.avg == 12120.0 and r.percentiles_ms["50"] == 12000.0
    assert r.calibration[0]["sampling_interval_ms"] == 17317.0


def test_zero_responses_are_undefined_not_zero():
    r = parse_file(TEST_DATA / "wrk" / "zero_responses.txt").to_dict()
    assert r["requests"] == 0 and r["requests_per_sec"] == 0.0
    assert r["latency_ms"]["avg"] is None and r["percentiles_ms"]["50"] is None
    assert any("no responses" in w for w in r["warnings"])
    r = parse_file(TEST_DATA / "wrk2-synthetic" / "zero_responses.txt").to_dict()
    assert r["histogram"]["mean_ms"] is None and r["histogram"]["total_count"] == 0
    assert r["socket_errors"]["timeout"] == 40


def test_killed_server_and_trailing_script_output():
    r = parse_file(TEST_DATA / "wrk" / "killed_server.txt").to_dict()
    assert r["socket_errors"] == {"connect": 0, "read": 10, "write": 532429, "timeout": 0}
    assert any("socket errors" in w for w in r["warnings"])
    r = parse_file(TEST_DATA / "wrk" / "lua_trailing.txt").to_dict()
    assert r["requests_per_sec"] == 25054.19 and not any("unrecognised" in w for w in r["warnings"])


def test_measured_duration_far_from_header_warns():
    text = ("Running 1m test @ http://h/\n  1 threads and 1 connections\n"
            "  100 requests in 10.00s, 1.00KB read\nRequests/sec: 10.00\nTransfer/sec: 102.40B\n")
    assert any("far from the requested 60 s" in w for w in parse(text).warnings)


@pytest.mark.parametrize("text, message", [
    ("", "empty output"),
    ("   \n\r\n", "empty output"),
    ("Usage: wrk <options> <url>\n  Options:\n", "usage text"),
    ("hello world\nthis is not wrk\n", "no wrk report"),
    ("Running 5s test @ http://x/\n  2 threads and 10 connections\n", "no wrk report"),
    ("  12 requests in 1.00zz, 3.00KB read\n", "damaged"),
])
def test_non_reports_raise_parse_error(text, message):
    with pytest.raises(ParseError, match=message):
        parse(text)
