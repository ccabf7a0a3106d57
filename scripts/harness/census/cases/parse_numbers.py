"""``tunepath parse FILE`` on real reports whose numbers were damaged: numbers no load generator
prints (inf, NaN, 1e400, 1e999, -1, 1.2.3, ``.``, 5,000 digits) in the figures of every tool's
report, figures that contradict each other (more failures than requests, a mean above the
maximum, percentiles out of order, no time for many requests, no connections, 150 %
availability), and two reports of different tools in one file.

A damaged number must be refused in one line, or flagged (``requests_per_sec_trusted`` false or
a problem listed), unless no figure differs from the intact report's. Figures that contradict
each other make an impossible report: it must be refused or flagged, whatever its figures. Two
reports in one file must be refused.
"""

from __future__ import annotations

from harness.census.case import FLAG, REFUSE, Case
from harness.census.cases.inputs import REPORTS, replaced, report_text, writes

__all__ = ["GROUP", "HOSTILE", "NUMBERS", "CONTRADICTIONS", "PAIRS", "cases"]

GROUP = "parse"
REPORT = "report.txt"
ARGV = ("parse", "{tmp}/" + REPORT)

# numbers no load generator prints, by a name for the case
HOSTILE = (("inf", "inf"), ("nan", "NaN"), ("1e400", "1e400"), ("1e999", "1e999"), ("minus-1", "-1"),
           ("1.2.3", "1.2.3"), ("dot", "."), ("5000-digits", "9" * 5000))

# (report, name, the text as printed, the text with {} for the number, its last occurrence)
NUMBERS = (
    ("ab", "complete-requests", "Complete requests:      2000", "Complete requests:      {}", False),
    ("ab", "time-taken", "Time taken for tests:   1.036", "Time taken for tests:   {}", False),
    ("ab", "requests-per-second", "Requests per second:    1929.75", "Requests per second:    {}", False),
    ("ab", "p99", "  99%      5", "  99%      {}", False),
    ("siege", "transactions", "Transactions:\t\t      263398 hits", "Transactions:\t\t      {} hits", False),
    ("siege", "elapsed", "Elapsed time:\t\t        9.98 secs", "Elapsed time:\t\t        {} secs", False),
    ("siege", "failed", "Failed transactions:\t        2625", "Failed transactions:\t        {}", False),
    ("siege-json", "transactions", '"transactions":\t\t\t      294060,', '"transactions":\t\t\t      {},', False),
    ("siege-json", "transaction-rate", '"transaction_rate":\t\t    29464.93,', '"transaction_rate":\t\t    {},',
     False),
    ("wrk", "requests", "165134 requests in", "{} requests in", False),
    ("wrk", "requests-per-sec", "Requests/sec:  32967.31", "Requests/sec:  {}", False),
    ("wrk", "p99", "99%    5.31ms", "99%    {}ms", False),
    ("wrk2", "requests", "9982 requests in", "{} requests in", False),
    ("wrk2", "requests-per-sec", "Requests/sec:   1996.05", "Requests/sec:   {}", False),
    ("jmeter", "summary-count", "summary = 100576 in", "summary = {} in", False),
    ("jmeter", "total-samples", '"sampleCount" : 100576', '"sampleCount" : {}', True),
)

# (report, name, old, new, last occurrence): figures that contradict each other
CONTRADICTIONS = (
    ("ab", "failed-over-complete", "Failed requests:        0",
     "Failed requests:        5000\n   (Connect: 0, Receive: 0, Length: 5000, Exceptions: 0)", False),
    ("ab", "mean-over-max", "Total:          1    4  32.4      3    1029",
     "Total:          1 5000  32.4      3    1029", False),
    ("ab", "percentiles-out-of-order", "  50%      3", "  50%     30", False),
    ("ab", "elapsed-zero", "Time taken for tests:   1.036", "Time taken for tests:   0.000", False),
    ("ab", "concurrency-zero", "Concurrency Level:      8", "Concurrency Level:      0", False),
    ("siege", "failed-over-complete", "Failed transactions:\t        2625", "Failed transactions:\t        999999",
     False),
    ("siege", "mean-over-max", "Response time:\t\t        0.00 secs", "Response time:\t\t        0.09 secs", False),
    ("siege", "elapsed-zero", "Elapsed time:\t\t        9.98 secs", "Elapsed time:\t\t        0.00 secs", False),
    ("siege", "concurrency-zero", "Concurrency:\t\t       15.71", "Concurrency:\t\t        0.00", False),
    ("siege", "availability-150", "Availability:\t\t       99.01 %", "Availability:\t\t      150.00 %", False),
    ("siege-json", "availability-150", '"availability":\t\t\t       99.01,', '"availability":\t\t\t      150.00,',
     False),
    ("siege-json", "elapsed-zero", '"elapsed_time":\t\t\t        9.98,', '"elapsed_time":\t\t\t        0.00,', False),
    ("wrk", "mean-over-max", "Latency   831.40us    4.59ms  89.88ms", "Latency   890.00ms    4.59ms  89.88ms", False),
    ("wrk", "percentiles-out-of-order", "50%  255.00us", "50%   55.00ms", False),
    ("wrk", "elapsed-zero", "165134 requests in 5.01s", "165134 requests in 0.00s", False),
    ("wrk", "connections-zero", "2 threads and 10 connections", "2 threads and 0 connections", False),
    ("wrk2", "percentiles-out-of-order", " 50.000%    0.86ms", " 50.000%   86.00ms", False),
    ("jmeter", "failed-over-complete", '"errorCount" : 0,', '"errorCount" : 200000,', True),
    ("jmeter", "mean-over-max", '"meanResTime" : 0.7377704422526282', '"meanResTime" : 500.0', True),
    ("jmeter", "percentiles-out-of-order", '"pct1ResTime" : 1.0', '"pct1ResTime" : 50.0', True),
    ("jmeter", "elapsed-zero", "summary = 100576 in 00:00:10", "summary = 100576 in 00:00:00", False),
    ("jmeter", "error-percent-150", '"errorPct" : 0.0', '"errorPct" : 150.0', True),
)

# two reports in one file (the first, then the second)
PAIRS = (("ab", "siege"), ("ab", "jmeter"), ("siege", "jmeter"), ("jmeter", "ab"), ("wrk", "ab"), ("ab", "ab"),
         ("wrk", "wrk2"), ("siege-json", "siege"))


def _damaged(name: str, key: str, old: str, new: str, last: bool, note: str, impossible: bool = False) -> Case:
    """A report with ``old`` replaced by ``new``. A number no tool prints may sit where no figure is
    read (then the intact report vouches for the figures); an ``impossible`` report (figures that
    contradict each other) must show it whatever its figures."""
    return Case(name, GROUP, ARGV, FLAG, setup=writes(REPORT, lambda: replaced(key, old, new, last)),
                reference=None if impossible else REPORTS[key], note=note)


def number_cases() -> list[Case]:
    out = []
    for key, field, old, template, last in NUMBERS:
        replaced(key, old, old, last)                    # the line is still there, or the census stops here
        for label, value in HOSTILE:
            out.append(_damaged(f"{GROUP}/number/{key}/{field}/{label}", key, old, template.format(value), last,
                                f"{REPORTS[key].name}: {field} is {value[:12]}"))
    return out


def contradiction_cases() -> list[Case]:
    out = []
    for key, label, old, new, last in CONTRADICTIONS:
        replaced(key, old, new, last)
        out.append(_damaged(f"{GROUP}/contradiction/{key}/{label}", key, old, new, last,
                            f"{REPORTS[key].name}: {label}", impossible=True))
    return out


def pair_cases() -> list[Case]:
    return [Case(f"{GROUP}/two-reports/{a}+{b}", GROUP, ARGV, REFUSE,
                 setup=writes(REPORT, lambda a=a, b=b: report_text(a) + report_text(b)),
                 note=f"{REPORTS[a].name} then {REPORTS[b].name} in one file") for a, b in PAIRS]


def cases() -> list[Case]:
    return number_cases() + contradiction_cases() + pair_cases()
