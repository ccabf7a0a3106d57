"""The parsed report: :class:`WrkReport`, the one record every load generator's parser returns.

wrk and wrk2 fill it completely; ab, siege and JMeter fill what they print (:mod:`~tunepath.parse.ab`,
:mod:`~tunepath.parse.siege`, :mod:`~tunepath.parse.jmeter`). ``problems`` lists, as typed
:class:`~tunepath.parse.problems.Problem` entries, every reason not to trust one of its figures;
their texts are also in ``warnings``, the list a person reads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from tunepath.parse.problems import Problem

__all__ = ["PERCENTILE_KEYS", "RATE_FIELDS", "Stats", "Histogram", "WrkReport", "json_safe"]

PERCENTILE_KEYS = ("50", "75", "90", "99", "99.9", "99.99", "99.999", "100")

# A problem with any of these fields makes requests per second untrustworthy: the figure itself,
# what it is checked against, or a part of the report that could not be read at all.
RATE_FIELDS = frozenset({"requests_per_sec", "requests", "duration_s", "report"})
ERROR_SHARE = 0.01     # above this share of error responses, a report measured errors, not the servlet


@dataclass
class Stats:
    """One row of ``Thread Stats``: Avg, Stdev, Max, +/- Stdev (percent)."""

    avg: float
    stdev: float
    max: float
    within_stdev_pct: float


@dataclass
class Histogram:
    """A wrk2 HdrHistogram block: footer figures and the detailed spectrum."""

    mean_ms: float | None = None
    stdev_ms: float | None = None
    max_ms: float | None = None
    total_count: int | None = None
    spectrum: list[tuple[float, float, int]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"mean_ms": self.mean_ms, "stdev_ms": self.stdev_ms, "max_ms": self.max_ms,
                "total_count": self.total_count, "spectrum": [list(row) for row in self.spectrum]}


@dataclass
class WrkReport:
    """Everything one wrk/wrk2 report says. Times in ms unless named ``_s``."""

    tool: str | None = None
    url: str | None = None
    threads: int | None = None
    connections: int | None = None
    header_duration_s: float | None = None
    warmup_s: float | None = None     # wrk2 -W (the project's patch): the uncounted warm-up before the window
    calibration: list[dict[str, float]] = field(default_factory=list)
    latency_ms: Stats | None = None
    req_per_sec_per_thread: Stats | None = None
    percentiles_ms: dict[str, float | None] | None = None
    uncorrected_percentiles_ms: dict[str, float | None] | None = None
    histogram: Histogram | None = None
    uncorrected_histogram: Histogram | None = None
    requests: int | None = None
    duration_s: float | None = None
    bytes_read: float | None = None
    requests_per_sec: float | None = None
    transfer_per_sec_bytes: float | None = None
    socket_errors: dict[str, int] = field(
        default_factory=lambda: {"connect": 0, "read": 0, "write": 0, "timeout": 0})
    non_2xx_3xx: int = 0
    warnings: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def requests_per_sec_trusted(self) -> bool:
        """False when a problem concerns requests per second (then the pages flag it)."""
        return not any(p.field in RATE_FIELDS for p in self.problems)

    @property
    def errors(self) -> bool:
        """More than :data:`ERROR_SHARE` of the responses were errors (wrk2's "Non-2xx or 3xx responses": HTTP
        4xx/5xx): the load measured an error page (a refusal), not the servlet."""
        return bool(self.requests) and self.non_2xx_3xx > ERROR_SHARE * self.requests

    def add_problem(self, problem: Problem) -> None:
        """Record a problem and its warning (once)."""
        if problem not in self.problems:
            self.problems.append(problem)
            self.warnings.append(problem.text)

    # -- views -------------------------------------------------------------
    def to_dict(self) -> dict:
        """The ``tunepath parse`` JSON contract (NaN and inf become None). Keys are only ever added."""
        out = {
            "tool": self.tool,
            "url": self.url,
            "threads": self.threads,
            "connections": self.connections,
            "header_duration_s": self.header_duration_s,
            "warmup_s": self.warmup_s,
            "calibration": [dict(c) for c in self.calibration],
            "latency_ms": asdict(self.latency_ms) if self.latency_ms else None,
            "req_per_sec_per_thread": asdict(self.req_per_sec_per_thread) if self.req_per_sec_per_thread else None,
            "percentiles_ms": dict(self.percentiles_ms) if self.percentiles_ms else None,
            "uncorrected_percentiles_ms": dict(self.uncorrected_percentiles_ms) if self.uncorrected_percentiles_ms else None,
            "histogram": self.histogram.to_dict() if self.histogram is not None else None,
            "uncorrected_histogram": (self.uncorrected_histogram.to_dict()
                                      if self.uncorrected_histogram is not None else None),
            "requests": self.requests,
            "duration_s": self.duration_s,
            "bytes_read": self.bytes_read,
            "requests_per_sec": self.requests_per_sec,
            "requests_per_sec_trusted": self.requests_per_sec_trusted,
            "transfer_per_sec_bytes": self.transfer_per_sec_bytes,
            "socket_errors": dict(self.socket_errors),
            "non_2xx_3xx": self.non_2xx_3xx,
            "warnings": list(self.warnings),
            "problems": [p.to_data() for p in self.problems],
        }
        return json_safe(out)

    def to_row(self) -> dict:
        """A flat record for one pandas row (NaN kept as NaN, absent as None)."""
        row = {
            "tool": self.tool, "url": self.url, "threads": self.threads,
            "connections": self.connections, "requests": self.requests,
            "duration_s": self.duration_s, "bytes_read": self.bytes_read,
            "requests_per_sec": self.requests_per_sec,
            "transfer_per_sec_bytes": self.transfer_per_sec_bytes,
            "non_2xx_3xx": self.non_2xx_3xx,
            "calibrated": bool(self.calibration), "warmup_s": self.warmup_s,
        }
        for stat, prefix in ((self.latency_ms, "latency"), (self.req_per_sec_per_thread, "req_per_thread")):
            for name in ("avg", "stdev", "max", "within_stdev_pct"):
                key = f"{prefix}_{name}" + ("_ms" if prefix == "latency" and name != "within_stdev_pct" else "")
                row[key] = getattr(stat, name) if stat else None
        for key in PERCENTILE_KEYS:
            row[f"p{key}_ms"] = (self.percentiles_ms or {}).get(key)
            row[f"p{key}_uncorrected_ms"] = (self.uncorrected_percentiles_ms or {}).get(key)   # wrk2 -U only
        for name, value in self.socket_errors.items():
            row[f"socket_errors_{name}"] = value
        row["socket_errors_total"] = sum(self.socket_errors.values())
        row["histogram_total_count"] = self.histogram.total_count if self.histogram else None
        row["warnings"] = "; ".join(self.warnings)
        row["requests_per_sec_trusted"] = self.requests_per_sec_trusted
        return row


def json_safe(value):
    """``value`` with every float that is not finite (NaN, inf) replaced by None: JSON has neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
