"""Parse siege's summary (4.0.x) into the same :class:`WrkReport` as wrk.

siege prints its summary on **stderr** (the load-generators step runs it with ``2>&1``)::

    ** SIEGE 4.0.7
    ** Preparing 16 concurrent users for battle.
    The server is now under siege...
    Lifting the server siege...
    Transactions:                 263398 hits
    Availability:                  99.01 %
    Elapsed time:                   9.98 secs
    Data transferred:              97.21 MB
    Response time:                  0.00 secs
    Transaction rate:           26392.59 trans/sec
    Throughput:                     9.74 MB/sec
    Concurrency:                   15.71
    Successful transactions:      263398
    Failed transactions:            2625
    Longest transaction:            0.02
    Shortest transaction:           0.00

With ``-j`` (``json_output = true``) it prints the same twelve figures, with the same decimals,
as a JSON object on stdout; both forms are read. Where the figures land:

* ``requests`` = Transactions (every answered transaction, whatever its status code);
  ``duration_s`` = Elapsed time (siege counts it in clock ticks: 10 ms); ``requests_per_sec`` =
  Transaction rate, checked against Transactions ÷ Elapsed time like every tool's rate;
* ``latency_ms.avg``: siege keeps one sum of response times and derives three figures from it
  (Response time = sum ÷ Transactions, Concurrency = sum ÷ Elapsed time, Transaction rate =
  Transactions ÷ Elapsed time), but prints Response time in seconds with two decimals: any mean
  under 5 ms prints ``0.00``. The mean is therefore Concurrency ÷ Transaction rate, which is the
  same quantity to a few tenths of a percent, checked against the printed Response time;
* ``latency_ms.max`` and percentile ``100`` = Longest transaction (10 ms resolution); siege prints
  no other percentile and no deviation: those stay None (NaN);
* ``threads`` = ``connections`` = the users of ``** Preparing N concurrent users`` (siege runs one
  thread per simulated user; the JSON form does not say);
* Failed transactions (socket failures, timeouts; siege prints ``[error] socket: unable to connect``
  for refused connections) go to ``socket_errors`` (``connect`` for those, ``read`` for the rest);
  Transactions − Successful transactions (answers with a status of 400 or more) to ``non_2xx_3xx``.

Anything that is no siege summary raises :class:`~tunepath.parse.problems.ParseError`; a summary
that parses is checked (:mod:`~tunepath.parse.problems`, the checks every parser shares): the rate,
lines with NUL bytes or invalid UTF-8, a summary cut before its last figure (the last figure read is
then not trusted either), a figure not printed as siege prints it (``inf``, ``1e400``, ``-1``, 5,000
digits: not used), figures siege computes from others (Throughput = Data transferred ÷ Elapsed time,
Availability = Transactions ÷ (Transactions + Failed transactions)), latencies out of order (Shortest,
mean, Longest), impossible values, transactions in an Elapsed time of 0.00 (siege prints it only for a
run that answered nothing: the rate is not trusted). When Concurrency and Response time both print
0.00 for a run that answered transactions, the mean is below what they resolve: it is left unknown
(NaN), not 0, and a bound below a microsecond is flagged as impossible.
"""

from __future__ import annotations

import math
import re

from tunepath.parse.problems import (ParseError, Problem, absurd_values, check_derived, damaged, judge_rate, shown,
                                     unread_problems)
from tunepath.parse.record import PERCENTILE_KEYS, Stats, WrkReport
from tunepath.parse.units import UnitError, half_digit, parse_fixed, parse_number

__all__ = ["parse_siege", "looks_like_siege", "SIEGE_FIELDS"]

# the twelve figures, in siege's order: text label → (JSON key, unit printed after it, decimals)
SIEGE_FIELDS = {
    "Transactions": ("transactions", "hits", 0),
    "Availability": ("availability", "%", 2),
    "Elapsed time": ("elapsed_time", "secs", 2),
    "Data transferred": ("data_transferred", "MB", 2),
    "Response time": ("response_time", "secs", 2),
    "Transaction rate": ("transaction_rate", "trans/sec", 2),
    "Throughput": ("throughput", "MB/sec", 2),
    "Concurrency": ("concurrency", None, 2),
    "Successful transactions": ("successful_transactions", None, 0),
    "Failed transactions": ("failed_transactions", None, 0),
    "Longest transaction": ("longest_transaction", None, 2),
    "Shortest transaction": ("shortest_transaction", None, 2),
}
_BY_KEY = {key: label for label, (key, _, _) in SIEGE_FIELDS.items()}
# the least mean latency of an HTTP transaction, in ms (a round trip on loopback takes tens of microseconds)
MIN_MEAN_MS = 0.001
# the WrkReport field a siege figure feeds: a problem with the figure concerns that field
_REPORT_FIELD = {"Transactions": "requests", "Elapsed time": "duration_s", "Transaction rate": "requests_per_sec",
                 "Data transferred": "transfer_per_sec_bytes", "Throughput": "transfer_per_sec_bytes",
                 "Response time": "latency_ms", "Concurrency": "latency_ms", "Longest transaction": "latency_ms",
                 "Shortest transaction": "latency_ms", "Availability": "socket_errors",
                 "Failed transactions": "socket_errors", "Successful transactions": "non_2xx_3xx"}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TEXT_LINE = re.compile(r"^(%s):\s+(\S+)(?:\s+(\S+))?$" % "|".join(re.escape(k) for k in SIEGE_FIELDS), re.ASCII)
# one value, then an optional comma: never two adjacent \s* (a long gap would backtrack quadratically)
_JSON_LINE = re.compile(r'^\{?\s*"(\w{1,40})"\s*:\s*([^\s,{}]+)\s*(?:,\s*)?\}?$', re.ASCII)
_BANNER = re.compile(r"^\*\* SIEGE (\S+)$", re.ASCII)
_USERS = re.compile(r"^\*\* Preparing (\d{1,9}) concurrent users for battle\.$", re.ASCII)
_CAPPED = re.compile(r"^WARNING: The number of users is capped at (\d{1,9})\.", re.ASCII)
_FRAGMENT = re.compile(r"[0-9]{1,15}(?:\.[0-9]*)?", re.ASCII)     # what a cut leaves of a siege figure
_ERROR = re.compile(r"^(?:The server is now under siege\.\.\.)?\[(?:error|fatal|alert)\]\s*(.*)$", re.ASCII)
_ABORTED = "aborted due to excessive socket failure"
_NOISE = re.compile(r"^(The server is now under siege\.\.\.|Lifting the server siege\.\.\.|=+|[{}]|"
                    r"New configuration template added to .*|Run siege -C to view the current settings in that file|"
                    r"\s*limit, search your \.siegerc file .*|\s*its value\. Make sure you read .*|"
                    r"can change the failure threshold in .*)$", re.ASCII)


def looks_like_siege(text: str) -> bool:
    """True when the text holds a siege summary line or siege's JSON summary."""
    if not any(mark in text for mark in ("Transaction rate:", "** SIEGE ", '"transaction_rate"')):
        return False        # a wrk report of 13 MB is not searched line by line
    return bool(re.search(r"^(Transaction rate:\s|\*\* SIEGE )|\"transaction_rate\"\s*:", text, re.M))


def parse_siege(text: str) -> WrkReport:
    """Parse one siege summary (text or ``-j`` JSON). Raises :class:`ParseError` for anything else."""
    if not isinstance(text, str):
        raise ParseError("expected the report as text")
    reader = _Reader()
    try:
        for number, raw in enumerate(text.splitlines(), 1):
            reader.line(number, _ANSI.sub("", raw).strip())
        return reader.finish()
    except (UnitError, ValueError, OverflowError, IndexError) as exc:
        if isinstance(exc, ParseError):
            raise
        raise ParseError(f"damaged siege report: {exc}") from None


class _Reader:
    def __init__(self):
        self.figures: dict[str, tuple[str, int]] = {}      # label → (token, line)
        self.r = WrkReport(tool="siege")
        self.errors: list[str] = []
        self.unread: dict[str, list[tuple[int, str]]] = {}
        self.unknown = 0
        self.version: str | None = None
        self.aborted = False
        self.capped: int | None = None
        self.cut_units: list[tuple[str, int]] = []          # a figure printed without its unit
        self.json = False                                   # the -j form: no units to show a cut
        self.rate_cut: tuple[str, int] | None = None        # a rate token on the line the report ends on
        self.mean_unknown = False                           # Concurrency and Response time both print 0.00

    def line(self, number: int, line: str) -> None:
        if not line:
            return
        if damaged(line):
            self.unread.setdefault("report", []).append((number, line))
        elif m := _TEXT_LINE.match(line):
            self.figure(m.group(1), m.group(2), number, m.group(3))
        elif (m := _JSON_LINE.match(line)) and m.group(1) in _BY_KEY:
            self.json = True
            self.figure(_BY_KEY[m.group(1)], m.group(2), number, None)
        elif m := _BANNER.match(line):
            self.version = m.group(1)
        elif m := _USERS.match(line):
            self.r.threads = self.r.connections = int(m.group(1))
        elif m := _CAPPED.match(line):
            self.capped = int(m.group(1))
        elif m := _ERROR.match(line):
            self.errors.append(m.group(1).strip())
        elif _ABORTED in line:
            self.aborted = True
        elif not _NOISE.match(line):
            self.unknown += 1

    def figure(self, label: str, token: str, number: int, unit: str | None) -> None:
        if label in self.figures:
            raise ParseError(f"more than one report: line {number} ({label}) repeats line "
                             f"{self.figures[label][1]}; split the file and parse each report")
        wanted = SIEGE_FIELDS[label][1]
        if not self.json and wanted is not None and unit != wanted:
            self.cut_units.append((label, number))
        self.figures[label] = (token, number)

    # -- the whole summary -------------------------------------------------------------
    def finish(self) -> WrkReport:
        if "Transactions" not in self.figures:
            raise ParseError(_no_summary(self.errors, self.aborted, self.version))
        missing = [label for label in SIEGE_FIELDS if label not in self.figures]
        if missing:
            self._cut(missing)
        for label, number in self.cut_units:
            if label in self.figures and self.figures[label][1] == number:
                self._drop(label, f"line {number}: {label!r} lacks its unit {SIEGE_FIELDS[label][1]!r}: "
                                  "the line is cut, its figure is not used")
        values = {label: self._value(label) for label in list(self.figures)}
        self._fill(values)
        self._rate()
        self._latency(values)
        self._consistency(values)
        self._warn(values)
        # siege prints an Elapsed time of 0.00 only for a run that answered nothing (or under 5 ms)
        for problem in unread_problems(self.unread) + absurd_values(self.r, zero_duration=not self.r.requests,
                                                                    unknown_mean=self.mean_unknown):
            self.r.add_problem(problem)
        return self.r

    def _cut(self, missing: list[str]) -> None:
        """The summary stops early: say so, and drop the last figure when a cut could have shortened it
        unseen (a count with no unit after it: 2633 may be the start of 263398)."""
        order = list(SIEGE_FIELDS)
        last = max(self.figures, key=lambda k: self.figures[k][1])
        names = ", ".join(repr(m) for m in missing)
        if any(order.index(m) < order.index(last) for m in missing):      # a gap: a line was lost, not cut
            why = "a line of it could not be read" if self.unread else "it is not siege's"
            self.r.add_problem(Problem("damaged", _REPORT_FIELD[missing[0]], f"the summary lacks {names}: {why}"))
            return
        self.r.add_problem(Problem("cut", _REPORT_FIELD[missing[0]],
                                   f"the summary ends before {names}: the report is cut"))
        places, unit = SIEGE_FIELDS[last][2], SIEGE_FIELDS[last][1]
        if places == 0 and (self.json or unit is None):
            self._drop(last, f"line {self.figures[last][1]}: the report ends on {last!r}, whose count may be "
                             "cut: it is not used")

    def _drop(self, label: str, text: str) -> None:
        token, number = self.figures.pop(label)
        if label == "Transaction rate":          # the rate check names a cut rate itself
            self.rate_cut = (token, number)
        else:
            self.r.add_problem(Problem("cut", _REPORT_FIELD[label], text, number))

    def _value(self, label: str) -> float | None:
        """The figure as siege prints it (``%.Nf``, never negative), else None and a problem."""
        token, number = self.figures[label]
        try:
            return parse_fixed(token, SIEGE_FIELDS[label][2], signed=False)
        except UnitError:
            pass
        if label != "Transaction rate":          # the rate check judges its own token
            last = number == max(n for _, n in self.figures.values())
            code, what = ("cut", "is cut") if last and _FRAGMENT.fullmatch(token) else ("damaged", "is not a siege figure")
            self.r.add_problem(Problem(code, _REPORT_FIELD[label], f"line {number}: {label!r} {what}: "
                                                                  f"{shown(token)}; it is not used", number))
        return None

    def _fill(self, v: dict) -> None:
        r, mb = self.r, 1024.0 * 1024.0
        transactions = v.get("Transactions")
        r.requests = int(transactions) if transactions is not None else None
        r.duration_s = v.get("Elapsed time")
        r.bytes_read = _scaled(v.get("Data transferred"), mb)
        r.transfer_per_sec_bytes = _scaled(v.get("Throughput"), mb)
        failed = v.get("Failed transactions")
        if failed is not None:
            refused = sum("unable to connect" in e for e in self.errors)
            connect = min(int(failed), refused)
            r.socket_errors = {"connect": connect, "read": int(failed) - connect, "write": 0, "timeout": 0}
        ok = v.get("Successful transactions")
        if ok is not None and r.requests is not None and ok <= r.requests:
            r.non_2xx_3xx = r.requests - int(ok)

    def _rate(self) -> None:
        r = self.r
        token = self.figures.get("Transaction rate") or self.rate_cut
        elapsed = self.figures.get("Elapsed time")
        duration = (r.duration_s, half_digit(elapsed[0], parse_number)) if elapsed and r.duration_s else None
        unreadable = self.unread["report"][0][0] if self.unread else None
        r.requests_per_sec, problem = judge_rate(r.requests, duration, token, 2, unreadable=unreadable,
                                                 label="Transaction rate")
        if problem is not None:
            r.add_problem(problem)

    def _latency(self, v: dict) -> None:
        r, nan = self.r, math.nan
        longest = v.get("Longest transaction")
        top = longest * 1000 if longest is not None else nan
        r.percentiles_ms = {k: None for k in PERCENTILE_KEYS}
        if not r.requests:
            r.latency_ms = Stats(nan, nan, nan, nan)
            return
        r.percentiles_ms["100"] = top if longest is not None else None
        printed, concurrency, rate = v.get("Response time"), v.get("Concurrency"), r.requests_per_sec
        if concurrency == 0 and not printed:
            r.latency_ms = Stats(nan, nan, top, nan)
            self._zero_mean(rate)
            return
        mean = concurrency / rate * 1000 if concurrency is not None and rate else None
        if mean is not None and printed is not None:
            low, high = (concurrency - 0.005) / rate, (concurrency + 0.005) / rate
            if high < printed - 0.005 - 1e-9 or low > printed + 0.005 + 1e-9:
                number = self.figures["Response time"][1]
                r.add_problem(Problem("inconsistent", "latency_ms",
                                      f"line {number}: 'Response time: {printed:.2f} secs' disagrees with "
                                      f"Concurrency ÷ Transaction rate = {mean / 1000:.4f} s; siege derives both "
                                      "from one sum, so the printed figure is kept", number))
                mean = printed * 1000
        elif mean is None and printed is not None:
            mean = printed * 1000
            r.warnings.append("no Concurrency figure: the mean latency is siege's Response time, "
                              "printed to 10 ms")
        r.latency_ms = Stats(mean if mean is not None else nan, nan, top, nan)

    def _zero_mean(self, rate: float | None) -> None:
        """Concurrency (sum of response times ÷ Elapsed time) and Response time (sum ÷ Transactions) both
        print 0.00: the mean latency is below what they resolve, not 0; it is left unknown. Below a
        microsecond (:data:`MIN_MEAN_MS`) no HTTP transaction is answered: the figures are impossible."""
        self.mean_unknown = True
        bound = min(0.005, 0.005 / rate) * 1000 if rate and rate > 0 else 5.0
        number = self.figures["Concurrency"][1]
        said = (f"line {number}: 'Concurrency: 0.00' and 'Response time: 0.00 secs' with {self.r.requests:,} "
                f"transactions put the mean latency below {bound:.2g} ms")
        if bound < MIN_MEAN_MS:
            self.r.add_problem(Problem("absurd", "latency_ms", f"{said}, which no HTTP transaction is answered in: "
                                                               "one of the figures was damaged or edited; the mean "
                                                               "latency is not known", number))
        else:
            self.r.warnings.append(f"{said}: siege prints neither finer, so the mean latency is not known")

    def _consistency(self, v: dict) -> None:
        """Figures siege computes from others it prints, checked as the rate is (problems.check_derived), and
        its latencies in order: Shortest ≤ mean ≤ Longest, the mean from Concurrency ÷ Transaction rate."""
        r, found = self.r, []
        data, elapsed, throughput = v.get("Data transferred"), v.get("Elapsed time"), v.get("Throughput")
        if None not in (data, elapsed, throughput) and elapsed > 0.005:
            bounds = ((data - 0.005) / (elapsed + 0.005), (data + 0.005) / (elapsed - 0.005))
            found.append(check_derived("transfer_per_sec_bytes", f"'Throughput: {throughput:.2f} MB/sec'",
                                       (throughput, 0.005), bounds, f"Data transferred ÷ Elapsed time "
                                       f"({data:.2f} MB ÷ {elapsed:.2f} s)", self.figures["Throughput"][1]))
        count, failed, availability = v.get("Transactions"), v.get("Failed transactions"), v.get("Availability")
        if None not in (count, failed, availability) and count + failed > 0:
            share = count / (count + failed) * 100
            found.append(check_derived("socket_errors", f"'Availability: {availability:.2f} %'", (availability, 0.005),
                                       (share, share), f"Transactions ÷ (Transactions + Failed transactions) "
                                       f"({count:,.0f} ÷ {count + failed:,.0f})", self.figures["Availability"][1]))
        shortest, longest = v.get("Shortest transaction"), v.get("Longest transaction")
        mean = r.latency_ms.avg / 1000 if r.latency_ms is not None and r.requests else math.nan
        order = [x for x in (shortest, mean, longest) if x is not None and not math.isnan(x)]
        if any(b < a - 0.01 for a, b in zip(order, order[1:])):      # each printed to 10 ms, rounded
            found.append(Problem("absurd", "latency_ms", "the latencies are out of order: Shortest transaction, "
                                                         "the mean and Longest transaction are "
                                                         f"{', '.join(f'{x:.3f}' for x in order)} s"))
        for problem in filter(None, found):
            r.add_problem(problem)

    def _warn(self, v: dict) -> None:
        r, w = self.r, self.r.warnings
        if r.requests == 0:
            w.append("no transactions at all: every latency figure is undefined")
        refused, other = r.socket_errors["connect"], r.socket_errors["read"]
        if refused:
            w.append(f"{refused} failed transactions could not connect")
        if other:
            w.append(f"{other} failed transactions (socket failures, timeouts). siege 4.0.7 also counts as failed, "
                     "and does not retry, a request it sends on a keep-alive connection the server has just "
                     "closed: Tomcat closes one after maxKeepAliveRequests (100 by default) responses")
        if r.non_2xx_3xx:
            w.append(f"{r.non_2xx_3xx} transactions answered with a status of 400 or more")
        if self.errors:
            w.append(f"siege printed {len(self.errors)} error line(s), the first: {self.errors[0]!r}")
        if self.aborted:
            w.append("siege aborted the run: its failed transactions reached the rc file's 'failures' limit")
        if self.capped is not None:
            w.append(f"siege capped the users at {self.capped} (its rc file's 'limit') after a 10 s pause")
        if self.unknown:
            w.append(f"{self.unknown} unrecognised line(s) ignored")


def _scaled(value: float | None, factor: float) -> float | None:
    return float(f"{value * factor:.12g}") if value is not None else None


def _no_summary(errors: list[str], aborted: bool, version: str | None) -> str:
    if errors:
        return (f"no siege summary: siege printed {errors[0]!r} and no 'Transactions:' line (it prints its "
                "summary on stderr: run it with 2>&1)")
    if version:
        return "no siege summary: siege started but printed no 'Transactions:' line (it was stopped or cut)"
    return "no siege summary found: no 'Transactions:' line (siege prints its summary on stderr: run it with 2>&1)"
