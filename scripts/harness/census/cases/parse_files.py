"""``tunepath parse`` on inputs that are big, odd or no report: a 200,000-character ``Server
Software:``, 280 KB of ``apr_a: `` after an ab report, 200,000 ``Thread calibration:`` lines before
a wrk2 report, a file over 16 MiB (sparse), a FIFO, a directory, a binary file, invalid UTF-8, a
symbolic-link loop; and ``parse -`` with stdin closed, empty, or an intact report.

Each must end in one line (refused) or a report, within the timeout; a FIFO must not block.
"""

from __future__ import annotations

from harness.census.case import ACCEPT, CLOSED, FLAG, REFUSE, Case
from harness.census.cases.inputs import REPORTS, directory, fifo, replaced, report_text, sparse, writes

__all__ = ["GROUP", "MIB", "cases"]

GROUP = "parse"
REPORT = "report.txt"
ARGV = ("parse", "{tmp}/" + REPORT)
MIB = 1 << 20
CALIBRATION = "  Thread calibration: mean lat.: 1.165ms, rate sampling interval: 10ms\n"


def _calibrated() -> str:
    head, rest = report_text("wrk2-calibrated").split("  Thread calibration", 1)
    return head + CALIBRATION * 200_000 + "  Thread calibration" + rest


def _binary() -> bytes:
    return bytes((i * 131 + 7) % 256 for i in range(64 * 1024))


def _symlink_loop(tmp) -> None:
    (tmp / "loop-a").symlink_to(tmp / "loop-b")
    (tmp / "loop-b").symlink_to(tmp / "loop-a")


def big_cases() -> list[Case]:
    ab = REPORTS["ab"]
    return [
        Case(f"{GROUP}/big/ab-server-software-200k", GROUP, ARGV, ACCEPT, reference=ab,
             setup=writes(REPORT, lambda: replaced("ab", "BaseHTTP/0.6", "x" * 200_000)),
             note="ab: a 200,000-character Server Software: value"),
        Case(f"{GROUP}/big/ab-server-software-200k-words", GROUP, ARGV, ACCEPT, reference=ab,
             setup=writes(REPORT, lambda: replaced("ab", "BaseHTTP/0.6", "apr_a: " * 28_572)),
             note="ab: a Server Software: value of 28,572 'apr_a: ' words"),
        Case(f"{GROUP}/big/ab-then-280kb-apr", GROUP, ARGV, FLAG, reference=ab,
             setup=writes(REPORT, lambda: report_text("ab") + "apr_a: " * 40_000 + "\n"),
             note="ab's report followed by one line of 280 KB of 'apr_a: '"),
        Case(f"{GROUP}/big/wrk2-200000-calibration-lines", GROUP, ARGV, FLAG, reference=REPORTS["wrk2-calibrated"],
             setup=writes(REPORT, _calibrated), note="200,000 Thread calibration: lines before a wrk2 report (13 MB)"),
        Case(f"{GROUP}/big/over-16-mib", GROUP, ARGV, REFUSE, setup=sparse(REPORT, 16 * MIB + 1),
             note="a sparse file of 16 MiB and one byte"),
        Case(f"{GROUP}/big/200-mib", GROUP, ARGV, REFUSE, setup=sparse(REPORT, 200 * MIB),
             note="a sparse file of 200 MiB"),
        Case(f"{GROUP}/big/stdin-over-16-mib", GROUP, ("parse", "-"), REFUSE, stdin=b"x" * (16 * MIB + 1),
             note="16 MiB and one byte on stdin"),
    ]


def odd_file_cases() -> list[Case]:
    ab_bytes = lambda: report_text("ab").encode()          # noqa: E731
    return [
        Case(f"{GROUP}/file/fifo", GROUP, ARGV, REFUSE, setup=fifo(REPORT), note="a FIFO nobody writes to"),
        Case(f"{GROUP}/file/directory", GROUP, ARGV, REFUSE, setup=directory(REPORT), note="a directory"),
        Case(f"{GROUP}/file/binary", GROUP, ARGV, REFUSE, setup=writes(REPORT, _binary), note="64 KiB of binary"),
        Case(f"{GROUP}/file/empty", GROUP, ARGV, REFUSE, setup=writes(REPORT, lambda: b""), note="an empty file"),
        Case(f"{GROUP}/file/nul-bytes", GROUP, ARGV, REFUSE, setup=writes(REPORT, lambda: b"\0" * 4096),
             note="4 KiB of NUL bytes"),
        Case(f"{GROUP}/file/invalid-utf8-garbage", GROUP, ARGV, REFUSE,
             setup=writes(REPORT, lambda: b"\xff\xfe\xc3(" * 2000), note="invalid UTF-8 and nothing else"),
        Case(f"{GROUP}/file/invalid-utf8-in-banner", GROUP, ARGV, FLAG, reference=REPORTS["ab"],
             setup=writes(REPORT, lambda: ab_bytes().replace(b"BaseHTTP/0.6", b"Base\xff\xfeHTTP", 1)),
             note="ab: invalid UTF-8 in Server Software:"),
        Case(f"{GROUP}/file/invalid-utf8-in-rate", GROUP, ARGV, FLAG, reference=REPORTS["ab"],
             setup=writes(REPORT, lambda: ab_bytes().replace(b"1929.75", b"19\xff9.75", 1)),
             note="ab: invalid UTF-8 inside Requests per second:"),
        Case(f"{GROUP}/file/nul-in-count", GROUP, ARGV, FLAG, reference=REPORTS["wrk"],
             setup=writes(REPORT, lambda: report_text("wrk").replace("165134 requests", "165\x00134 requests")),
             note="wrk: a NUL byte inside the request count"),
        Case(f"{GROUP}/file/crlf", GROUP, ARGV, ACCEPT, reference=REPORTS["ab"],
             setup=writes(REPORT, lambda: report_text("ab").replace("\n", "\r\n")), note="ab with CRLF line ends"),
        Case(f"{GROUP}/file/utf16-bom", GROUP, ARGV, ACCEPT, reference=REPORTS["wrk"],
             setup=writes(REPORT, lambda: b"\xff\xfe" + report_text("wrk").encode("utf-16-le")),
             note="wrk in UTF-16 with a byte-order mark"),
        Case(f"{GROUP}/file/missing", GROUP, ARGV, REFUSE, note="no such file"),
        Case(f"{GROUP}/file/symlink-loop", GROUP, ("parse", "{tmp}/loop-a"), REFUSE, setup=_symlink_loop,
             note="a loop of symbolic links"),
        Case(f"{GROUP}/file/dev-zero", GROUP, ("parse", "/dev/zero"), REFUSE, note="a character device"),
        Case(f"{GROUP}/file/wrong-tool", GROUP, (*ARGV, "--tool", "wrk"), FLAG, reference=REPORTS["ab"],
             setup=writes(REPORT, lambda: report_text("ab")), note="ab's report read as wrk's"),
        Case(f"{GROUP}/file/jmeter-as-siege", GROUP, (*ARGV, "--tool", "siege"), FLAG, reference=REPORTS["jmeter"],
             setup=writes(REPORT, lambda: report_text("jmeter")), note="JMeter's output read as siege's"),
    ]


def stdin_cases() -> list[Case]:
    # stdin a directory (`parse - < DIR`) is no case: CPython stops before any code of tunepath runs
    # ("Fatal Python error: init_sys_streams"), as it does for every Python program (docs/census.md)
    return [
        Case(f"{GROUP}/stdin/closed", GROUP, ("parse", "-"), REFUSE, stdin=CLOSED, note="parse - <&-"),
        Case(f"{GROUP}/stdin/empty", GROUP, ("parse", "-"), REFUSE, note="parse - < /dev/null"),
        Case(f"{GROUP}/stdin/ab-report", GROUP, ("parse", "-"), ACCEPT, reference=REPORTS["ab"],
             stdin=report_text("ab").encode(), note="an intact ab report on stdin"),
    ]


def cases() -> list[Case]:
    return big_cases() + odd_file_cases() + stdin_cases()
