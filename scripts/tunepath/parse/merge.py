"""Several load-generator clients against one server: merged latency.

When one client cannot saturate the server, several run at once. Their
throughputs add up; their latency distributions must be *merged*, not averaged
(the mean of two p99s is not the p99 of all requests).

wrk2 with ``-U`` also prints the latency *uncorrected* for coordinated omission (measured
from when each request was actually sent): :func:`merge_uncorrected` merges those blocks by the
same method, when every client printed one.

Two methods, chosen by what the reports contain:

``"spectrum"``
    Every report is wrk2's with a "Detailed Percentile spectrum". Each row's
    TotalCount minus the previous row's is the number of requests whose latency
    lies between the previous row's value and this row's value. Those buckets
    from all clients are recorded into one HdrHistogram (1 µs … 1 h, three
    significant digits, like wrk2's own) and the merged percentiles read from it.
    The estimate spreads each bucket's requests evenly over its value range
    (linear interpolation of the distribution, which reproduces wrk2's own
    printed percentiles closely); the bounds put every request at the bottom
    (low) or the top (high) of its range, so the true merged percentile lies
    between them, whatever the distribution within a row.

``"bounds"``
    Some report has no spectrum (Debian's wrk prints only 50/75/90/99 %). The
    q-quantile of a mixture lies between the smallest and the largest of its
    components' q-quantiles: those are the bounds; the estimate is the mean of
    the clients' quantiles weighted by their requests. This is a bound, not a merge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tunepath.errors import TunepathError
from tunepath.parse.wrk import WrkReport

__all__ = [
    "MERGE_KEYS",
    "MergedLatency",
    "merge_reports",
    "merge_uncorrected",
    "spectrum_buckets",
]

MERGE_KEYS = ("50", "75", "90", "99", "99.9")

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_DIGITS = 3
# A bucket's requests are spread over at most this many evenly spaced values.
_SPREAD_POINTS = 32


@dataclass(frozen=True)
class MergedLatency:
    """Latency of all clients together, with bounds on each merged percentile."""

    method: str                                          # "spectrum" or "bounds"
    percentiles: dict[str, tuple[float, float, float]]   # key → (estimate, low, high), ms
    total_count: int                                     # requests behind the merged figures
    exactness: str                                       # how exact, in one or two sentences
    clients: list[dict[str, float | None]] = field(default_factory=list)  # each client's own percentiles
    requests_per_sec: float | None = None                # summed throughput (None if any is unknown)

    def estimate(self, key: str) -> float | None:
        """The merged estimate at ``key`` (e.g. ``"99"``) in ms, None when unavailable."""
        entry = self.percentiles.get(key)
        return entry[0] if entry else None


def spectrum_buckets(spectrum: Sequence[tuple[float, float, int]]) -> list[tuple[float, float, int]]:
    """``(low_ms, high_ms, count)`` buckets from wrk2's spectrum rows ``(value_ms, percentile, total_count)``.

    ``count`` requests lie between ``low_ms`` (the previous row's value) and
    ``high_ms`` (this row's value); the first row's requests sit at its own value
    (it is the smallest recorded latency). Rows adding no requests are dropped.
    """
    buckets: list[tuple[float, float, int]] = []
    prev_value: float | None = None
    prev_total = 0
    for row in spectrum:
        try:
            value, _pct, total = float(row[0]), float(row[1]), int(row[2])
        except (TypeError, ValueError, IndexError):
            raise TunepathError(f"a spectrum row must be (value_ms, percentile, total_count), "
                                f"got {row!r}") from None
        if not math.isfinite(value) or value < 0:
            raise TunepathError(f"a spectrum value must be a finite latency ≥ 0 ms, got {value!r}")
        if total < prev_total or (prev_value is not None and value < prev_value):
            raise TunepathError("the spectrum is not cumulative: its values and TotalCounts must not "
                                "decrease from row to row (a damaged or edited report?)")
        delta = total - prev_total
        if delta:
            buckets.append((value if prev_value is None else prev_value, value, delta))
        prev_value, prev_total = value, total
    return buckets


def merge_reports(reports: Sequence[WrkReport]) -> MergedLatency:
    """Merge the latency of clients that ran at the same time against one server."""
    reports = _checked(reports)
    clients = [dict(r.percentiles_ms) if r.percentiles_ms else {} for r in reports]
    rates = [r.requests_per_sec for r in reports]
    total_rps = None if any(x is None or math.isnan(x) for x in rates) else float(sum(rates))
    if all(r.histogram is not None and r.histogram.spectrum for r in reports):
        return _merge_spectra(reports, clients, total_rps)
    return _merge_bounds(reports, clients, total_rps)


def merge_uncorrected(reports: Sequence[WrkReport]) -> MergedLatency | None:
    """Merge the clients' *uncorrected* latency (wrk2 ``-U``) as :func:`merge_reports` merges the
    corrected one (from the uncorrected spectra, else bounds); None unless every client printed it."""
    reports = _checked(reports)
    if not all(r.uncorrected_percentiles_ms for r in reports):
        return None
    return merge_reports([replace(r, percentiles_ms=r.uncorrected_percentiles_ms, histogram=r.uncorrected_histogram)
                          for r in reports])


def _checked(reports: Sequence[WrkReport]) -> list[WrkReport]:
    reports = list(reports)
    if not reports:
        raise TunepathError("no reports to merge")
    for i, report in enumerate(reports, 1):
        if not isinstance(report, WrkReport):
            raise TunepathError(f"client {i}: expected a parsed wrk/wrk2 report, got {type(report).__name__}")
    return reports


# --- spectrum ------------------------------------------------------------------
def _us(value_ms: float) -> int:
    us = int(round(value_ms * 1000))
    if us > HIGHEST_US:
        raise TunepathError(f"a latency of {value_ms} ms is beyond the one-hour range of the merged histogram")
    return us


def _new_histogram():
    from hdrh.histogram import HdrHistogram

    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def _record(hist, value_us: int, count: int) -> None:
    if count and not hist.record_value(value_us, count):
        raise TunepathError(f"could not record {value_us} µs in the merged histogram")


def _spread(hist, low_us: int, high_us: int, count: int) -> None:
    """Record ``count`` requests evenly over ``low_us … high_us``."""
    span = high_us - low_us
    points = min(count, span, _SPREAD_POINTS)
    if points <= 1:
        _record(hist, high_us if span == 0 else round(low_us + span / 2), count)
        return
    for j in range(points):
        share = (j + 1) * count // points - j * count // points
        _record(hist, round(low_us + (j + 0.5) * span / points), share)


class _Reader:
    """Percentiles of an HdrHistogram, read as hdrh's ``get_value_at_percentile`` would, but fast."""

    def __init__(self, hist):
        self.hist = hist
        self.cumulative = np.cumsum(np.ctypeslib.as_array(hist.counts).astype(np.int64))
        self.total = int(self.cumulative[-1])

    def value_ms(self, percentile: float) -> float:
        target = max(int(min(percentile, 100.0) * self.total / 100 + 0.5), 1)
        index = int(np.searchsorted(self.cumulative, target, side="left"))
        value = self.hist.get_value_from_index(index)
        if percentile:
            value = self.hist.get_highest_equivalent_value(value)
        else:
            value = self.hist.get_lowest_equivalent_value(value)
        return value / 1000


def _merge_spectra(reports, clients, total_rps) -> MergedLatency:
    low_h, est_h, high_h = _new_histogram(), _new_histogram(), _new_histogram()
    for i, report in enumerate(reports, 1):
        try:
            buckets = spectrum_buckets(report.histogram.spectrum)
        except TunepathError as exc:
            raise TunepathError(f"client {i}: {exc}") from None
        for low_ms, high_ms, count in buckets:
            low_us, high_us = _us(low_ms), _us(high_ms)
            _record(low_h, low_us, count)
            _record(high_h, high_us, count)
            _spread(est_h, low_us, high_us, count)
    readers = [_Reader(h) for h in (est_h, low_h, high_h)]
    total = readers[0].total
    if total == 0:
        raise TunepathError("no latency was recorded by any client (every spectrum is empty): "
                            "nothing to merge")
    percentiles = {}
    for key in MERGE_KEYS:
        est, low, high = (r.value_ms(float(key)) for r in readers)
        percentiles[key] = (est, low, high)
    at = percentiles["99"]
    exactness = (f"Merged from {len(reports)} clients' HdrHistogram spectra ({total:,} requests): exact to "
                 f"within the gap between neighboring rows of each client's printed spectrum (at p99: "
                 f"{at[0]:.3f} ms, certainly between {at[1]:.3f} and {at[2]:.3f} ms), then to HdrHistogram's "
                 f"three significant digits.")
    return MergedLatency(method="spectrum", percentiles=percentiles, total_count=total,
                         exactness=exactness, clients=clients, requests_per_sec=total_rps)


# --- bounds --------------------------------------------------------------------
def _merge_bounds(reports, clients, total_rps) -> MergedLatency:
    active = []
    for i, report in enumerate(reports, 1):
        if report.requests is None:
            raise TunepathError(f"client {i}: the report has no 'N requests in T' line, so its share "
                                "of the requests is unknown")
        if report.requests == 0:
            continue  # no response: contributes nothing to the mixture
        if not report.percentiles_ms or all(v is None for v in report.percentiles_ms.values()):
            raise TunepathError(f"client {i}: the report has no latency percentiles; run wrk with "
                                "--latency (wrk2: --latency or -U)")
        active.append(report)
    if not active:
        raise TunepathError("no client got any response: nothing to merge")
    weights = np.array([r.requests for r in active], dtype=float)
    percentiles = {}
    for key in MERGE_KEYS:
        values = [r.percentiles_ms.get(key) for r in active]
        if any(v is None or math.isnan(v) for v in values):
            continue
        arr = np.array(values, dtype=float)
        est = float(np.dot(weights, arr) / weights.sum())
        low, high = float(arr.min()), float(arr.max())
        percentiles[key] = (min(max(est, low), high), low, high)
    if not percentiles:
        raise TunepathError("the clients report no percentile in common; nothing to merge")
    total = int(weights.sum())
    shown = "99" if "99" in percentiles else next(iter(percentiles))
    est, low, high = percentiles[shown]
    available = "/".join(percentiles)
    exactness = (f"A bound, not a merge: not every client printed a detailed spectrum, so each merged "
                 f"percentile is only known to lie between the clients' smallest and largest ones "
                 f"(at p{shown}: between {low:.3f} and {high:.3f} ms); the estimate, {est:.3f} ms, is their "
                 f"request-weighted mean. Available: {available} %.")
    return MergedLatency(method="bounds", percentiles=percentiles, total_count=total,
                         exactness=exactness, clients=clients, requests_per_sec=total_rps)
