"""What a chart's caption says about its statistics, computed from the rows it draws.

Every level, repetition count and highlight named in a caption comes from those rows: the
confidence level of the whiskers actually drawn (a distribution-free interval of a median from
few repetitions reaches less than 95 %, e.g. 75 % from 3), the number of repetitions behind each
bar, which bars are highlighted, and whether the bars carry a speed-up over a stock
configuration. Where the rows differ, the caption gives the range and says the table has each.
"""

from __future__ import annotations

import math

from tunepath.publish import formatting as fmt

__all__ = ["finite", "has_interval", "levels", "repetitions", "highlight_words", "stats_words",
           "speedup_words", "whisker_words"]


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def has_interval(row: dict, low: str, high: str) -> bool:
    return finite(row.get(low)) and finite(row.get(high))


def _n(row: dict) -> int:
    n = row.get("n")
    return int(n) if isinstance(n, (int, float)) and math.isfinite(n) and n >= 1 else 1


def levels(rows: list[dict], low: str = "rps_low", high: str = "rps_high",
           level: str = "interval_level") -> list[str]:
    """The distinct confidence levels (as the tables write them) of the intervals drawn."""
    found = {float(r[level]) for r in rows if has_interval(r, low, high) and finite(r.get(level))}
    return [fmt.level(v) for v in sorted(found)]


def repetitions(rows: list[dict]) -> list[int]:
    return sorted({_n(r) for r in rows})


def _span(values: list[str], unit: str = "") -> str:
    """``75 %`` or ``75–93.8 %`` (``unit`` stripped from the lower end)."""
    if len(values) == 1:
        return values[0]
    lo, hi = values[0], values[-1]
    return f"{lo.removesuffix(unit).strip()}–{hi}" if unit else f"{lo}–{hi}"


def highlight_words(rows: list[dict], highlighted: list[bool], noun: str = "bars") -> str:
    """A sentence on the highlight, only when some (not all, not none) rows are highlighted."""
    k = sum(highlighted)
    if k == 0 or k == len(rows):
        return ""
    mine = "; ".join(r["label"] for r, h in zip(rows, highlighted) if h)
    return (f"Blue {noun}: this step's measurement{'s' if k > 1 else ''} ({mine}); gray {noun}: "
            f"the same run's earlier steps, for context.")


def whisker_words(rows: list[dict], pairs=(("rps_low", "rps_high", "interval_level"),)) -> str:
    """``75 % confidence interval`` or ``75–93.8 % confidence interval (each row's in the table)``,
    from the intervals drawn (each ``(low, high, level)`` field triple)."""
    found = sorted({lv for low, high, level in pairs for lv in levels(rows, low, high, level)},
                   key=lambda s: float(s.removesuffix(" %")))
    if not found:
        return ""
    if len(found) == 1:
        return f"{found[0]} confidence interval"
    return f"{_span(found, ' %')} confidence interval (each row's level is in the table)"


def stats_words(rows: list[dict], what: str = "Bars", pairs=(("rps_low", "rps_high", "interval_level"),)) -> str:
    """What each bar (point) is and what its whisker is, from ``n`` and the intervals drawn;
    ``pairs`` names the (low, high, level) fields of the whiskers drawn (none: no whiskers)."""
    ns = repetitions(rows)
    repeated = [n for n in ns if n > 1]
    if not repeated:
        return f"{what} are single measurements (no repetitions){', without whiskers' if pairs else ''}."
    text = f"{what} are medians of {_span([str(n) for n in repeated])} repetitions"
    if 1 in ns:
        text += " where repeated, single measurements elsewhere"
    if not pairs:
        return text + "."
    whiskers = whisker_words(rows, pairs)
    if not whiskers:
        return text + "; no whiskers (too few repetitions for an interval)."
    drawn = sum(any(has_interval(r, lo, hi) for lo, hi, _ in pairs) for r in rows)
    text += f"; whiskers: the {whiskers}"
    return text + (f", drawn for {drawn} of {len(rows)}." if drawn < len(rows) else ".")


def speedup_words(labels_with_gain: int) -> str:
    if not labels_with_gain:
        return ""
    return "In brackets: the speed-up over this run's stock configuration."
