"""``tunepath parse FILE`` on real reports cut short: at every line boundary of their figures, at
the end of a line without its line end (the last number may be cut), and in the middle of a
number. A cut report must be refused in one line, or flagged, unless every figure is the intact
report's: a wrk report cut before ``Socket errors`` must not read as 0 errors, and an ab count
cut mid-number ("Complete requests: 20" of 2000) must not read as a count.
"""

from __future__ import annotations

from harness.census.case import FLAG, Case
from harness.census.cases.inputs import REPORTS, report_text, writes

__all__ = ["GROUP", "SWEPT", "CHOSEN", "MID_NUMBER", "OTHER_MODES", "cases"]

GROUP = "parse"
REPORT = "report.txt"
ARGV = ("parse", "{tmp}/" + REPORT)

# report → the first and last line (1-based) of the sweep: every line boundary between them
SWEPT = {"ab": (14, 42), "wrk-errors": (1, 14), "siege": (1, 17), "jmeter": (8, 13)}
# reports cut at a few chosen lines only (their long histograms are alike line after line)
CHOSEN = {"wrk2": ("  Detailed Percentile spectrum", "#[Mean", "  9982 requests in", "Requests/sec", "Transfer/sec"),
          "jmeter": ('  "Total" : {', '    "throughput"', '    "receivedKBytesPerSec"')}
# report → (the start of a line, a number on it): the line cut in the middle of that number
MID_NUMBER = {
    "ab": (("Complete requests:", "2000"), ("Requests per second:", "1929.75"), ("Total:", "1029"),
           (" 100%", "1029"), ("Time taken for tests:", "1.036")),
    "ab-404": (("Non-2xx responses:", "500"),),
    "wrk-errors": (("  75889 requests in", "75889"), ("  Socket errors:", "532429"), ("Requests/sec:", "14879.53")),
    "siege": (("Transactions:", "263398"), ("Elapsed time:", "9.98")),
    "jmeter": (("summary = ", "100576"),),
}
# report → (the last line a report of another mode of the tool prints, the first line of the section
# that mode leaves out, the warning that says so): a cut between them leaves a whole report of that
# mode (ab -d prints no percentile table; JMeter without a dashboard prints its summariser only),
# which no parser can tell from a cut one; the warning is what shows it
OTHER_MODES = {
    "ab": ("Total:", "Percentage of the requests served", "no percentile table"),
    "jmeter": ("summary = ", "{", "no dashboard statistics"),
}


def _cut(name: str, key: str, cut: int, note: str, warned: str = "") -> Case:
    return Case(name, GROUP, ARGV, FLAG, setup=writes(REPORT, lambda: report_text(key)[:cut]),
                reference=REPORTS[key], warned=warned, note=note)


def _line_of(text: str, start: str, last: bool = False) -> int:
    """The number (1-based) of the first (or ``last``) line that starts with ``start``."""
    found = [n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start)]
    if not found:
        raise ValueError(f"no line starts with {start!r}: update the census's case")
    return found[-1] if last else found[0]


def _other_mode(key: str, n: int) -> str:
    """The warning that shows a cut after line ``n`` of report ``key``, when that leaves a whole
    report of another mode of the tool (:data:`OTHER_MODES`); else ""."""
    if key not in OTHER_MODES:
        return ""
    kept, left_out, warning = OTHER_MODES[key]
    text = report_text(key)
    return warning if _line_of(text, kept, last=True) <= n < _line_of(text, left_out) else ""


def _offsets(text: str) -> list[int]:
    """The offset after each line's end (line n ends at offsets[n - 1])."""
    ends, at = [], 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        ends.append(at)
    return ends


def line_cases() -> list[Case]:
    """Every line boundary from the sweep's first line; for ab and wrk, each line's end without
    its line end too, where the line ends in a digit."""
    out = []
    for key, (first, last) in SWEPT.items():
        text = report_text(key)
        for n, end in enumerate(_offsets(text), 1):
            if not first <= n <= last:
                continue
            mode = _other_mode(key, n)
            out.append(_cut(f"{GROUP}/cut/{key}/after-line-{n:02d}", key, end,
                            f"{REPORTS[key].name}: first {n} lines" + (" (a whole report of another mode)" if mode
                                                                       else ""), warned=mode))
            bare = end - 1 if text[end - 1:end] == "\n" else end
            if key in ("ab", "wrk-errors") and text[bare - 1:bare].isdigit():
                out.append(_cut(f"{GROUP}/cut/{key}/end-of-line-{n:02d}", key, bare,
                                f"{REPORTS[key].name}: first {n} lines, the last without its line end"))
    return out


def chosen_cases() -> list[Case]:
    out = []
    for key, starts in CHOSEN.items():
        text = report_text(key)
        for start in starts:
            at = text.find("\n" + start)
            if at < 0:
                raise ValueError(f"{REPORTS[key]} no longer holds a line {start!r}: update the census's case")
            label = "".join(c if c.isalnum() else "-" for c in start.strip().lower()).strip("-")
            out.append(_cut(f"{GROUP}/cut/{key}/before-{label}", key, at + 1,
                            f"{REPORTS[key].name}: cut before {start!r}"))
    return out


def mid_number_cases() -> list[Case]:
    out = []
    for key, lines in MID_NUMBER.items():
        text = report_text(key)
        for start, number in lines:
            n = _line_of(text, start)
            at = sum(len(line) for line in text.splitlines(keepends=True)[:n - 1])
            line = text.splitlines()[n - 1]
            begin = line.find(number)
            if begin < 0:
                raise ValueError(f"{REPORTS[key]}: line {n} no longer holds {number!r}: update the census's case")
            keep = begin + max(1, len(number) // 2)
            label = "".join(c if c.isalnum() else "-" for c in start.strip().lower()).strip("-")
            out.append(_cut(f"{GROUP}/cut/{key}/mid-number-{label}", key, at + keep,
                            f"{REPORTS[key].name}: {line[:keep].strip()!r}, cut"))
    return out


def cases() -> list[Case]:
    return line_cases() + chosen_cases() + mid_number_cases()
