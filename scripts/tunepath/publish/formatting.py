"""How figures are written on the pages (one place, so every page agrees).

It imports nothing from tunepath, so the analysis layer may use it too (``analysis/compare.py`` and
``analysis/modes.py`` word their findings with it) without depending on the rest of ``publish``.
"""

from __future__ import annotations

import math

NA = "n/a"
MINUS = "\u2212"


def _missing(value) -> bool:
    if value is None:
        return True
    try:
        return not math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def rate(value) -> str:
    """Requests per second: ``244,449.62``."""
    return NA if _missing(value) else f"{value:,.2f}"


def offered(value) -> str:
    """An offered rate (``-R``), whole when it is: ``25000`` → ``25,000``; absent → ``n/a``."""
    return NA if _missing(value) or not value else rate(value).removesuffix(".00")


def count(value) -> str:
    return NA if _missing(value) else f"{int(value):,}"


def latency(ms) -> str:
    """``16760.0`` → ``16.76 s``; ``1.02`` → ``1.02 ms``; ``0.3988`` → ``398.80 µs``."""
    if _missing(ms):
        return NA
    if ms >= 1000:
        return f"{ms / 1000:,.2f} s"
    if ms >= 1:
        return f"{ms:.2f} ms"
    return f"{ms * 1000:.2f} µs"


def seconds(s) -> str:
    return NA if _missing(s) else f"{s:,.2f} s"


def speedup(x) -> str:
    return "" if _missing(x) else f"{x:.2f}×"


def percent_change(pct) -> str:
    """``-3.97`` → ``−3.97 %``; ``5.85`` → ``+5.85 %``; absent → empty."""
    if _missing(pct):
        return ""
    sign = "+" if pct >= 0 else MINUS
    return f"{sign}{abs(pct):.2f} %"


def bytes_per_sec(b) -> str:
    """wrk's MB are MiB: shown as such."""
    if _missing(b):
        return NA
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if b >= scale:
            return f"{b / scale:,.2f} {unit}/s"
    return f"{b:,.0f} B/s"


def micros(us) -> str:
    """CPU time per request: ``12.345`` → ``12.3 µs``."""
    return NA if _missing(us) else f"{us:,.1f} µs"


def _range(lo: str, hi: str) -> str:
    return f"{lo} – {hi}" if lo and hi else ""


def level(value) -> str:
    """A confidence level: ``0.95`` → ``95 %``; ``0.9375`` → ``93.8 %``."""
    if _missing(value):
        return ""
    pct = value * 100
    return f"{pct:.0f} %" if abs(pct - round(pct)) < 0.05 else f"{pct:.1f} %"


def _ci(text: str, lvl) -> str:
    return f"{level(lvl)} CI {text}" if text and level(lvl) else text


def rate_interval(low, high, lvl=None) -> str:
    """A confidence interval of requests per second: ``93.8 % CI 45,100 – 49,800``."""
    return "" if _missing(low) or _missing(high) else _ci(_range(f"{low:,.0f}", f"{high:,.0f}"), lvl)


def micros_interval(low, high, lvl=None) -> str:
    return "" if _missing(low) or _missing(high) else _ci(_range(f"{low:,.1f}", f"{high:,.1f} µs"), lvl)


def latency_interval(low, high, lvl=None) -> str:
    return _ci(_range(latency(low), latency(high)), lvl)


def ratio_interval(low, high, lvl=None) -> str:
    """``95 % CI 0.982× – 1.104×`` (three decimals: an interval just off 1× stays visible)."""
    return "" if _missing(low) or _missing(high) else _ci(_range(f"{low:.3f}×", f"{high:.3f}×"), lvl)


def pct_interval(low, high, lvl=None) -> str:
    """``95 % CI −3.10 % to +5.20 %``."""
    if _missing(low) or _missing(high):
        return ""
    return _ci(f"{percent_change(low)} to {percent_change(high)}", lvl)


def cv(value) -> str:
    """Coefficient of variation as a percentage: ``0.0321`` → ``3.2 %``."""
    return "" if _missing(value) else f"{value * 100:.1f} %"


def significance(flag, has_interval: bool = False) -> str:
    """``True`` → ``significant``; ``False`` → ``not significant``; unknown → empty, or, where an
    interval exists but too few repetitions could reach 95 %, ``too few runs to test at 95 %``."""
    if flag is None or (isinstance(flag, float) and math.isnan(flag)):
        return "too few runs to test at 95 %" if has_interval else ""
    return "significant" if flag else "not significant"


def repetitions(n) -> str:
    return "" if _missing(n) or int(n) <= 1 else f"{int(n)}"


def plus_minus_pct(pct) -> str:
    """An interval's half-width in % of its median: ``2.314`` → ``±2.3 %``; absent → ``n/a``."""
    return NA if _missing(pct) else f"±{pct:.1f} %"


def percent(pct) -> str:
    """A value already in %: ``1.804`` → ``1.8 %``; absent → ``n/a``."""
    return NA if _missing(pct) else f"{pct:.1f} %"


def of(part, whole) -> str:
    """``1 of 6``; ``n/a`` without a whole."""
    return NA if _missing(part) or _missing(whole) or not whole else f"{int(part):,} of {int(whole):,}"


def cpu_set(cpus: str) -> str:
    """A CPU list as a sentence names it: ``0`` → ``CPU 0``; ``0-3,8`` → ``CPUs 0-3,8``."""
    return f"CPU {cpus}" if cpus.isdigit() else f"CPUs {cpus}"
