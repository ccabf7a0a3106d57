"""Each comparison a step's page makes, as data: :class:`Verdict` and :func:`step_verdicts`.

A page compares configurations within one run only. In the tuning sequence each measurement is
compared with the previous one (``change_*`` of :mod:`tunepath.analysis.frames`); only two of the
same step, measured in the same interleaved rounds, can get a verdict: across steps drift over time
would pass for an effect. In a step that compares variants (``Step.compares_variants``: connectors,
JVM, load generators, proxy, thread sweep) each variant is compared with the step's first. Each
comparison is a test of its own at 95 % (:func:`tunepath.analysis.stats.compare`); the thread
sweep's reading of its best (Holm over every pair of counts) is the step's ``analysis``, not one of
these.

The figure a verdict is reached on can differ from pair to pair. Where the load offered a fixed
rate and served it, requests per second is the offered rate and says nothing: the pair is judged on
Tomcat's CPU time per request (lower is less CPU; the sign says which way, not "better"), with both
sides' median p99 latency beside it. Requests per second decides only where neither side served a
fixed offered rate (closed loop: wrk, ab, siege, JMeter; or wrk2 offered far more than Tomcat
served, as in the original's reference runs), so a pair of an open- and a closed-loop variant (the
load-generators step) is judged on CPU per request. The rule is :func:`tunepath.analysis.derive.on_rps`,
the one the derived ratios follow. Nothing here reads the frames'
``*_significant`` columns: each verdict is computed from the values of its own figure.

No verdict where it would mean nothing: an emulated server (its figures test the commands), a
reference run (a single measurement), two configurations from different steps' rounds, responses that
were mostly HTTP errors (an error page measured, not the servlet), a figure not recorded, repetitions left out as disturbed, or too few repetitions to reach 95 % (3 + 3 cannot;
4 + 4 can). ``Verdict.why`` names the reason as a code (:data:`WHY`), ``reason`` in words.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from tunepath.analysis import derive, stats
from tunepath.parse.record import ERROR_SHARE
from tunepath.publish import formatting as fmt

__all__ = ["Verdict", "step_verdicts", "figure_for", "host_words", "RPS", "CPU", "LEVEL", "WHY"]

RPS, CPU = "requests_per_sec", "server_cpu_us_per_req"
WORDS = {RPS: "requests/s", CPU: "server CPU per request"}
_VALUES = {RPS: "rps_values", CPU: "cpu_values"}
LEVEL = 0.95
_ALPHA = 1 - LEVEL

# why a comparison has no verdict: code → what the codes of one kind have in common
WHY = {
    "emulated": "emulated server",
    "reference": "a reference run's single measurement",
    "other-rounds": "measured in different steps' rounds",
    "no-figure": "figure not recorded",
    "errors": "its responses were errors",
    "disturbed": "repetitions left out as disturbed",
    "too-few": "too few repetitions to test at 95 %",
    "no-interval": "the interval did not reach 95 %",
}


@dataclass(frozen=True)
class Verdict:
    """One comparison a step's page makes: B (``change``, its ``variant``) against A (``against``).

    ``figure`` is what it is judged on (``requests_per_sec`` or ``server_cpu_us_per_req``);
    ``change_pct`` is B's median over A's, minus 1, in %; ``low_pct``/``high_pct`` its interval at
    ``level`` (the level the interval really reaches; None without one); ``significant`` True,
    False, or None without a verdict (``why``: a code of :data:`WHY`; ``reason``: the words).
    ``n_a``/``n_b`` count the values on each side; ``p99_a_ms``/``p99_b_ms`` are each side's median
    p99 latency. ``sentence`` says it all in one sentence."""

    change: str
    against: str
    variant: str
    figure: str
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    level: float | None
    significant: bool | None
    n_a: int
    n_b: int
    p99_a_ms: float | None
    p99_b_ms: float | None
    sentence: str
    reason: str = ""
    why: str | None = None

    @property
    def decided(self) -> bool:
        """Whether the comparison carries a verdict at 95 % (significant or not)."""
        return self.significant is not None

    def to_data(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Side:
    """One configuration of a pair, on the pair's figure."""

    label: str
    values: tuple[float, ...]      # its counted repetitions' values (positive and finite only)
    dropped: int                   # repetitions left out as disturbed
    repetitions: int               # counted repetitions (a reference run's: 1)
    p99_ms: float | None

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None


@dataclass(frozen=True)
class _Pair:
    a: dict | None                 # A's frame row (None: not among the rows given)
    b: dict
    a_label: str
    same_rounds: bool              # measured in the same interleaved rounds


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def figure_for(a: dict | None, b: dict) -> str:
    """What a pair is judged on: the same rule as the derived figures (analysis/derive.py):
    requests/s unless either side served a fixed offered rate, whose requests/s is that rate."""
    return RPS if derive.on_rps(a, b) else CPU


def host_words(run) -> str:
    """Where a run measured, as a sentence ends: "the lab" (the lab's namespaces or VM) or the server."""
    texts = [run.info.label, *(note.text for note in run.info.notes)]
    return "the lab" if any("Lab:" in text for text in texts) else run.server.name


def _side(row: dict, figure: str) -> _Side:
    values = tuple(v for v in (_number(x) for x in row.get(_VALUES[figure]) or ()) if v is not None and v > 0)
    return _Side(str(row.get("label") or row.get("variant")), values, int(_number(row.get("dropped")) or 0),
                 int(_number(row.get("n")) or 1), _number(row.get("p99_ms")))


def _pairs(step, run, rows: list[dict], run_rows: list[dict]) -> list[_Pair]:
    """The comparisons the step's page makes, in the page's order."""
    if step.compares_variants:
        mine = sorted(rows, key=lambda r: step.sort_key(r["variant"], run.context))
        return [_Pair(mine[0], r, mine[0]["label"], True) for r in mine[1:]]
    by_key = {f"{r['step']}/{r['variant']}": r for r in run_rows}
    out = []
    for r in rows:
        previous = r.get("previous_variant")
        if isinstance(previous, str) and previous:
            label = r.get("previous_label")
            out.append(_Pair(by_key.get(previous), r, label if isinstance(label, str) else previous,
                             previous.partition("/")[0] == r["step"]))
    return out


def _errors(row: dict) -> bool:
    """More than :data:`ERROR_SHARE` of the configuration's responses were errors (medians of its repetitions)."""
    bad, total = _number(row.get("non_2xx_3xx")), _number(row.get("requests"))
    return bool(bad and total and bad > ERROR_SHARE * total)


def _needed() -> int:
    return next(k for k in range(stats.MIN_FOR_VERDICT, 64) if stats.testable(k, k, _ALPHA))


def _no_verdict(pair: _Pair, run, a: _Side | None, b: _Side, figure: str) -> tuple[str | None, str]:
    """(code, words) of why the pair gets no verdict; (None, "") when it can be tested."""
    if run.emulated:
        return "emulated", "emulated server: checks that commands work, not performance"
    if run.kind == "reference" and (a is None or min(a.repetitions, b.repetitions) <= 1):
        return "reference", "a reference run is a single measurement"
    if not pair.same_rounds:
        return "other-rounds", "measured in a different step's rounds, so drift over time would pass for an effect"
    failed = [row for row in (pair.a, pair.b) if row is not None and _errors(row)]
    if failed:
        return "errors", (f"{' and '.join(str(r.get('label') or r.get('variant')) for r in failed)}: over "
                          f"{ERROR_SHARE:.0%} of the responses were HTTP errors, so it measured an error page, not "
                          "the servlet")
    missing = [s.label for s in (a, b) if s is not None and not s.values]
    if a is None or missing:
        return "no-figure", f"{WORDS[figure]} was not recorded for {' or '.join(missing) or pair.a_label}"
    n_a, n_b = len(a.values), len(b.values)
    if stats.testable(n_a, n_b, _ALPHA):
        return None, ""
    if (a.dropped or b.dropped) and stats.testable(n_a + a.dropped, n_b + b.dropped, _ALPHA):
        return "disturbed", (f"repetitions left out as disturbed ({a.dropped} and {b.dropped}); {n_a} and {n_b} "
                             f"remain, too few to test at {fmt.level(LEVEL)}")
    return "too-few", (f"{n_a} and {n_b} repetitions cannot be tested at {fmt.level(LEVEL)}; "
                       f"{_needed()} each are needed")


def _verdict(pair: _Pair, run) -> Verdict:
    figure = figure_for(pair.a, pair.b)
    a, b = (_side(pair.a, figure) if pair.a is not None else None), _side(pair.b, figure)
    change = (b.median / a.median - 1) * 100 if a is not None and a.median and b.median else None
    why, reason = _no_verdict(pair, run, a, b, figure)
    low = high = level = significant = None
    if why in (None, "disturbed", "too-few") and min(len(a.values), len(b.values)) >= stats.MIN_FOR_INTERVAL:
        # the interval at the level it reaches, as the page shows it; a verdict only where it can be tested
        d = stats.compare(a.values, b.values, LEVEL)
        (low, high), level = d.change_interval_pct() or (None, None), d.level
        significant = d.significant if why is None else None
    if why is None and significant is None:
        why, reason = "no-interval", f"the interval did not reach {fmt.level(LEVEL)}"
    p99_a, p99_b = (a.p99_ms if a is not None else None), b.p99_ms
    sentence = _sentence(b.label, pair.a_label, figure, change, (low, high, level), significant, reason,
                         host_words(run), (p99_a, p99_b))
    return Verdict(change=b.label, against=pair.a_label, variant=str(pair.b["variant"]), figure=figure,
                   change_pct=change, low_pct=low, high_pct=high, level=level, significant=significant,
                   n_a=len(a.values) if a is not None else 0, n_b=len(b.values), p99_a_ms=p99_a, p99_b_ms=p99_b,
                   sentence=sentence, reason=reason, why=why)


def _sentence(label: str, against: str, figure: str, change, interval: tuple, significant, reason: str,
              host: str, p99: tuple) -> str:
    """"B against A: −3.10 % server CPU per request (95 % CI …; p99 latency …), significant on the lab"."""
    extra = [fmt.pct_interval(*interval)]
    if figure == CPU and None not in p99:
        extra.append(f"p99 latency {fmt.latency(p99[0])} → {fmt.latency(p99[1])}")
    extra = "; ".join(e for e in extra if e)
    said = f"{label} against {against}: " + (f"{fmt.percent_change(change)} {WORDS[figure]}" if change is not None
                                             else WORDS[figure])
    said += f" ({extra})" if extra else ""
    if significant is None:
        return f"{said}, no verdict: {reason}"
    return f"{said}, {'significant' if significant else 'not significant'} on {host}"


def _records(rows) -> list[dict]:
    return rows.to_dict("records") if hasattr(rows, "to_dict") else list(rows)


def step_verdicts(step, run, rows, run_rows=None) -> list[Verdict]:
    """Every comparison ``step``'s page makes for ``run``, in the page's order.

    ``rows``: the frame rows of ``run`` and ``step`` (a DataFrame or a list of its records);
    ``run_rows``: every row of ``run``, where the previous measurement of the tuning sequence lies
    in another step (without them such a comparison has no change figure, and no verdict either
    way). A step that compares nothing (set-up, the rate sweep, the analysis steps) gives []."""
    mine = _records(rows)
    if not mine:
        return []
    every = _records(run_rows) if run_rows is not None else mine
    return [_verdict(pair, run) for pair in _pairs(step, run, mine, every)]
