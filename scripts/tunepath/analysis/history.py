"""History: each configuration's key figures across recorded runs of one host kind, against the
Tomcat release, the Java release and the run date, with change points.

**Series.** Runs are grouped by host kind (:mod:`tunepath.analysis.pairing`: the server's CPU
model and count; emulated servers are left out, their figures test commands). Within a kind, a
series follows one configuration (step and variant) and one figure:

- runs with the same Java release, in the order of their Tomcat release, then their date;
- where Java varies among runs of one Tomcat release, also those runs, in the order of Java, then date.

Runs whose versions are all alike make one series in date order. A series never mixes load
regimes either: runs whose load offered a fixed rate (open loop, wrk2) and runs whose load sent as
fast as Tomcat answered (closed loop, wrk) measure different things and follow apart.

**Figures** are read by what they measure: server CPU per request and p99 latency for every run;
requests/s only where no run of the series offered a fixed rate that Tomcat served (there
requests/s is the offered rate). Each point is one run's counted repetitions (those the noise
flags did not leave out), with their median and the 95 % interval of :mod:`tunepath.analysis.stats`.

**Change points** come from Apache Otava's E-divisive means method (``otava.analysis.compute_change_points``,
Fleming et al., ICPE 2023), run on the repetitions of the series' runs in order. A change point counts
only where it falls between two runs; one inside a run's repetitions is noise and is dropped. Its
size is the change of the mean from the segment before to the segment after, its significance
Otava's t-test p-value, kept below :data:`MAX_PVALUE`.

**False alarms.** The same detection is run on each series with its values shuffled (seeded:
:data:`SHUFFLES` per series), which keeps their spread and removes any order. The share of
shuffled series that still show a change point is the method's false-alarm rate on this data.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tunepath.analysis import stats
from tunepath.analysis.derive import rate_is_offered
from tunepath.analysis.pairing import host_kind
from tunepath.parse.java import java_major

if TYPE_CHECKING:
    import pandas as pd

    from tunepath.evidence.store import Run

__all__ = ["Figure", "FIGURES", "Point", "Change", "Series", "FalseAlarms", "History", "history",
           "MAX_PVALUE", "SHUFFLES", "MIN_RUNS"]

MAX_PVALUE = 0.001         # a change point's t-test p-value must be below this (Otava's default)
SHUFFLES = 20              # shuffled copies of each series for the false-alarm rate
MIN_RUNS = 3               # fewer runs in a series: shown, not searched for change points
SEED = 20261207


@dataclass(frozen=True)
class Figure:
    key: str                # "cpu", "p99", "rps"
    label: str
    unit: str
    column: str             # the repetition's field in a variant row's ``repetitions``
    lower_is_better: bool


FIGURES = (
    Figure("cpu", "server CPU per request", "µs", "server_cpu_us_per_req", True),
    Figure("p99", "p99 latency", "ms", "p99_ms", True),
    Figure("rps", "requests/s", "requests/s", "requests_per_sec", False),
)


@dataclass(frozen=True)
class Point:
    """One run's repetitions of one configuration and figure."""

    run_id: str
    date: str
    tomcat: str | None
    java: int | None
    values: tuple[float, ...]
    median: float           # the configuration's median, as its step's page shows it
    low: float | None       # the interval of the median, at ``level`` (none with fewer than 3 values)
    high: float | None
    level: float | None
    offered: float | None = None   # the offered rate (open loop), which differs between runs

    @property
    def label(self) -> str:
        return " · ".join(p for p in (f"Tomcat {self.tomcat}" if self.tomcat else "",
                                      f"Java {self.java}" if self.java else "", self.date[:10]) if p)


@dataclass(frozen=True)
class Change:
    """A change point between two runs of a series."""

    before: Point
    after: Point
    change_pct: float       # mean after over mean before, in %
    pvalue: float

    def what(self, axis: str) -> str:
        a, b = self.before, self.after
        if axis == "java" and a.java != b.java:
            return f"Java {a.java} → {b.java}"
        if a.tomcat != b.tomcat:
            return f"Tomcat {a.tomcat} → {b.tomcat}"
        if a.java != b.java:
            return f"Java {a.java} → {b.java}"
        return f"runs of {a.date[:10]} → {b.date[:10]}"


@dataclass(frozen=True)
class Series:
    kind: str               # the host kind, as the pages name it
    step: str
    variant: str
    axis: str               # "tomcat" (same Java, by Tomcat release then date) or "java"
    fixed: str              # what the series holds fixed, e.g. "Java 21, open-loop load"
    figure: Figure
    points: tuple[Point, ...]
    changes: tuple[Change, ...] = ()
    searched: bool = False  # enough runs to look for change points

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", f"{self.kind} {self.fixed}".casefold()).strip("-")
        return f"{slug}--{self.step}--{self.variant}--{self.figure.key}--{self.axis}"


@dataclass(frozen=True)
class FalseAlarms:
    series: int
    shuffles: int
    alarms: int             # shuffled series that showed at least one change point

    @property
    def rate(self) -> float | None:
        total = self.series * self.shuffles
        return self.alarms / total if total else None


@dataclass(frozen=True)
class History:
    series: tuple[Series, ...]
    false_alarms: FalseAlarms

    @property
    def kinds(self) -> tuple[str, ...]:
        """The host kinds followed, in the order of their first series."""
        return tuple(dict.fromkeys(s.kind for s in self.series))

    @property
    def changes(self) -> list[tuple[Series, Change]]:
        return [(s, c) for s in self.series for c in s.changes]


def history(runs: list["Run"], rows: "pd.DataFrame", skip_steps: frozenset[str] = frozenset(),
            shuffles: int = SHUFFLES) -> History:
    """The history of ``runs`` (their variant rows ``rows``: :func:`~tunepath.analysis.frames.measurements_frame`),
    leaving out the steps ``skip_steps`` (a smoke test measures nothing worth following)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    series, searched, alarms = [], 0, 0
    for s in _series(runs, rows[~rows.step.isin(list(skip_steps))]):
        if len(s.points) >= MIN_RUNS:
            s = _with_changes(s)
            searched += 1
            alarms += sum(bool(_changes(_shuffled(s.points, rng))) for _ in range(shuffles))
        series.append(s)
    return History(tuple(series), FalseAlarms(searched, shuffles, alarms))


def _versions(run: "Run") -> tuple[str | None, int | None]:
    facts = run.server.facts
    tomcat = facts.get("tomcat_version") if isinstance(facts.get("tomcat_version"), str) else None
    return tomcat, java_major(facts.get("java_version") or "")


def _tomcat_key(version: str | None) -> tuple:
    return tuple(int(p) for p in version.split(".") if p.isdigit()) if version else ()


def _series(runs: list["Run"], rows: "pd.DataFrame") -> list[Series]:
    by_id = {r.run_id: r for r in runs if not r.emulated and r.kind == "live" and host_kind(r) is not None}
    mine = rows[rows.run_id.isin(list(by_id))]
    out = []
    for (step, variant), group in mine.groupby(["step", "variant"], sort=False):
        kinds: dict[tuple[str, str], list] = {}
        for row in group.to_dict("records"):
            run = by_id[row["run_id"]]
            kinds.setdefault((str(host_kind(run)), _load(row)), []).append((run, row))
        for (kind, load), members in kinds.items():
            out += _kind_series(kind, load, step, variant, members)
    return out


def _load(row: dict) -> str:
    """The load regime of a variant row: a fixed offered rate (open loop) or none (closed loop)."""
    offered = row.get("offered_rate")
    return "open-loop load" if isinstance(offered, (int, float)) and math.isfinite(offered) and offered > 0 \
        else "closed-loop load"


def _kind_series(kind: str, load: str, step: str, variant: str, members: list) -> list[Series]:
    """The series of one host kind, load regime and configuration: by Java release, then by Tomcat release."""
    out = []
    versions = {run.run_id: _versions(run) for run, _ in members}
    for axis in ("tomcat", "java"):
        other = 1 if axis == "tomcat" else 0           # the version held fixed
        groups: dict = {}
        for run, row in members:
            groups.setdefault(versions[run.run_id][other], []).append((run, row))
        for fixed, group in groups.items():
            if axis == "java" and len({versions[r.run_id][1] for r, _ in group}) < 2:
                continue                               # Java does not vary here: the tomcat series has it
            order = sorted(group, key=lambda m: (_tomcat_key(versions[m[0].run_id][0]) if axis == "tomcat"
                                                 else (versions[m[0].run_id][1] or 0),
                                                 m[0].info.date or "", m[0].run_id))
            if len(order) < 2:
                continue
            named = (f"Java {fixed}" if axis == "tomcat" else f"Tomcat {fixed}") if fixed else "versions not recorded"
            named = f"{named}, {load}"
            for figure in FIGURES:
                if figure.key == "rps" and any(rate_is_offered(row) for _, row in order):
                    continue                           # requests/s is the offered rate there
                points = [p for run, row in order if (p := _point(run, row, figure, versions[run.run_id]))]
                if len(points) >= 2:
                    out.append(Series(kind, step, variant, axis, named, figure, tuple(points)))
    return out


def _point(run: "Run", row: dict, figure: Figure, versions) -> Point | None:
    values = [r[figure.column] for r in row["repetitions"] if not r.get("dropped")]
    values = tuple(float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0)
    if not values:
        return None
    summary = stats.summarise(list(values))
    median = row.get(figure.column)
    median = float(median) if isinstance(median, (int, float)) and math.isfinite(median) else summary.median
    offered = row.get("offered_rate")
    offered = float(offered) if isinstance(offered, (int, float)) and math.isfinite(offered) else None
    return Point(run.run_id, run.info.date or "", versions[0], versions[1], values, median,
                 summary.low, summary.high, summary.level, offered)


def _changes(points) -> list[Change]:
    """Otava's change points in the repetitions of ``points``, kept where they fall between runs."""
    from otava.analysis import compute_change_points

    values, bounds = [], {}
    for i, p in enumerate(points):
        values += p.values
        bounds[len(values)] = i                        # a change here: between point i and i+1
    found, _ = compute_change_points(values, window_len=max(len(values), 8), max_pvalue=MAX_PVALUE)
    out = []
    for cp in found:
        i = bounds.get(cp.index)
        if i is None or i + 1 >= len(points) or not cp.stats.mean_1:
            continue
        out.append(Change(points[i], points[i + 1], (cp.stats.mean_2 / cp.stats.mean_1 - 1) * 100,
                          float(cp.stats.pvalue)))
    return [c for c in out if c.pvalue < MAX_PVALUE]


def _with_changes(series: Series) -> Series:
    return replace(series, changes=tuple(_changes(series.points)), searched=True)


def _shuffled(points, rng) -> list[Point]:
    """``points`` with all their values shuffled across them (each keeps its count)."""
    pool = [v for p in points for v in p.values]
    rng.shuffle(pool)
    out, at = [], 0
    for p in points:
        out.append(replace(p, values=tuple(pool[at:at + len(p.values)])))
        at += len(p.values)
    return out
