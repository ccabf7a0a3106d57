"""Numbers with units as wrk and wrk2 print them.

wrk formats times with a base of microseconds (us, ms, s) and then sexagesimal
minutes and hours (m, h); counts with metric suffixes (k, M, G, T, P, base 1000);
bytes with binary suffixes (B, KB, MB, GB, TB, PB, base 1024). Any number may be
``nan``, ``-nan`` or ``inf`` when a statistic is undefined (no responses, a run too
short to calibrate). Counts are whole numbers of at most 18 digits (:func:`parse_int`), and ab and siege
print each figure in one fixed-point format (:func:`parse_fixed`): a token that is neither (``1e400``,
``1.2.3``, 5,000 digits) is no figure of theirs. Messages quote a token shortened (:func:`quoted`).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "UnitError",
    "parse_number",
    "parse_time_ms",
    "parse_time_s",
    "parse_count",
    "parse_bytes",
    "parse_percent",
    "decimals",
    "half_digit",
    "parse_int",
    "parse_fixed",
    "quoted",
]


class UnitError(ValueError):
    """A token is not a number with a unit of the expected kind."""


_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_SPECIAL = {"nan": math.nan, "-nan": math.nan, "+nan": math.nan,
            "inf": math.inf, "+inf": math.inf, "-inf": -math.inf}

_TIME_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_COUNT = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "PB": 1024**5}

_TOKEN = re.compile(rf"^(?P<num>{_NUMBER}|[-+]?nan|[-+]?inf)(?P<unit>[A-Za-z%]*)$", re.IGNORECASE)
# a count: what C prints with %d or %llu (a uint64 has 20 digits; no run counts 10^18 of anything)
_INT = re.compile(r"[0-9]{1,18}", re.ASCII)
_FIXED: dict[int | None, re.Pattern] = {
    places: re.compile(r"-?[0-9]{1,15}" + (rf"\.[0-9]{{{places}}}" if places else ""), re.ASCII) for places in range(4)}
_FIXED[None] = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,3})?", re.ASCII)      # a plain number, up to 3 decimals


def quoted(token: str, width: int = 40) -> str:
    """A token quoted for a message, shortened: a 5,000-digit number must not make a 5,000-character line."""
    return repr(token if len(token) <= width else token[:width] + "…")


def parse_int(token: str) -> int:
    """A count as the tools print it: 1 to 18 ASCII digits (``1e3``, ``-1``, ``١٢`` and 5,000 digits are not)."""
    text = token.strip()
    if not _INT.fullmatch(text):
        raise UnitError(f"{quoted(token)} is not a count")
    return int(text)


def parse_fixed(token: str, places: int | None, *, signed: bool = True) -> float:
    """A figure printed with C's ``%.Nf`` (``places`` = N, at most 3; None: any of 0 to 3): ``1.036`` for N = 3,
    ``2000`` for N = 0; with a minus sign only when ``signed``. Anything else (``1e-400``, ``inf``, ``1.2.3``,
    ``.``, another number of decimals, more than 15 digits before the point) raises UnitError."""
    text = token.strip()
    if not _FIXED[places].fullmatch(text) or (not signed and text.startswith("-")):
        how = "a plain number" if places is None else f"{places} decimals" if places else "a whole number"
        raise UnitError(f"{quoted(token)} is not printed as {how}")
    return float(token)


def _split(token: str) -> tuple[float, str]:
    text = token.strip()
    m = _TOKEN.match(text)
    if not m:
        raise UnitError(f"not a number: {quoted(token)}")
    num = m.group("num")
    special = _SPECIAL.get(num.lower())
    value = special if special is not None else float(num)
    return value, m.group("unit")


def parse_number(token: str) -> float:
    """A plain number, or nan/-nan/inf."""
    value, unit = _split(token)
    if unit:
        raise UnitError(f"unexpected unit in {quoted(token)}")
    return value


def _scaled(token: str, table: dict[str, float], kind: str, default_unit: str | None) -> float:
    value, unit = _split(token)
    if unit == "" and default_unit is not None:
        unit = default_unit
    if unit not in table:
        raise UnitError(f"{quoted(token)} is not a {kind} (units: {', '.join(u for u in table if u)})")
    return _tidy(value * table[unit])


def _tidy(value: float) -> float:
    """Drop binary noise from scaling (0.346 rather than 0.34600000000000003)."""
    return float(f"{value:.12g}") if math.isfinite(value) else value


def parse_time_ms(token: str) -> float:
    """``831.40us`` → 0.8314; ``1.00m`` → 60000.0; ``-nan`` → nan. A bare number is ms."""
    return _scaled(token, _TIME_MS, "time", "ms")


def parse_time_s(token: str) -> float:
    """A duration in seconds: ``1.00m`` → 60.0, ``5s`` → 5.0, ``12`` → 12.0."""
    value, unit = _split(token)
    if unit == "":
        return value
    if unit not in _TIME_MS:
        raise UnitError(f"{quoted(token)} is not a time")
    return _tidy(value * _TIME_MS[unit] / 1e3)


def parse_count(token: str) -> float:
    """``1.97k`` → 1970.0; ``165.05`` → 165.05; ``-nan`` → nan."""
    return _scaled(token, _COUNT, "count", None)


def parse_bytes(token: str) -> float:
    """``7.62GB`` → 7.62 × 1024³ bytes; ``514.03KB`` → 514.03 × 1024."""
    return _scaled(token, _BYTES, "byte size", None)


def parse_percent(token: str) -> float:
    """``56.98%`` → 56.98."""
    text = token.strip()
    if not text.endswith("%"):
        raise UnitError(f"not a percentage: {quoted(token)}")
    return parse_number(text[:-1])


def decimals(token: str) -> int:
    """How many digits ``token`` prints after its decimal point (``244449.62`` → 2, ``24`` → 0)."""
    m = _TOKEN.match(token.strip())
    if not m:
        raise UnitError(f"not a number: {quoted(token)}")
    mantissa = re.split(r"[eE]", m.group("num"))[0]
    return len(mantissa.split(".")[1]) if "." in mantissa else 0


def half_digit(token: str, to_value) -> float:
    """Half the last printed digit of ``token``, in the units ``to_value`` gives: how far the true
    figure may lie from a rounded print. ``half_digit("1.00m", parse_time_s)`` → 0.3 (seconds);
    ``half_digit("1994.50", parse_number)`` → 0.005."""
    _, unit = _split(token)
    return abs(to_value(f"1{unit}")) * 0.5 * 10.0 ** -decimals(token)
