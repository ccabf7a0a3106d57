"""Property-based tests: units round-trip, and malformed input only ever raises ParseError."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from conftest import FIXTURES, REFERENCE, TEST_DATA
from tunepath.parse.wrk import ParseError, parse
from tunepath.parse.units import UnitError, parse_bytes, parse_count, parse_time_ms

import pytest

pytestmark = pytest.mark.fast

TIME = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
COUNT = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
values = st.floats(min_value=0, max_value=1e6, allow_nan=False).map(lambda v: round(v, 2))


@given(values, st.sampled_from(sorted(TIME)))
def test_time_units(value, unit):
    assert math.isclose(parse_time_ms(f"{value:.2f}{unit}"), value * TIME[unit], rel_tol=1e-9, abs_tol=1e-12)


@given(values, st.sampled_from(sorted(COUNT)))
def test_count_units(value, unit):
    assert math.isclose(parse_count(f"{value:.2f}{unit}"), value * COUNT[unit], rel_tol=1e-9, abs_tol=1e-12)


@given(values, st.sampled_from(sorted(BYTES)))
def test_byte_units_are_binary(value, unit):
    assert math.isclose(parse_bytes(f"{value:.2f}{unit}"), value * BYTES[unit], rel_tol=1e-9, abs_tol=1e-12)


@given(st.sampled_from(["nan", "-nan", "inf", "-nanus", "nanms", "infs"]))
def test_special_values(token):
    v = parse_time_ms(token)
    assert math.isnan(v) or math.isinf(v)


@given(st.text(max_size=12))
def test_unit_parsers_raise_only_unit_error(token):
    for fn in (parse_time_ms, parse_count, parse_bytes):
        try:
            fn(token)
        except UnitError:
            pass


def _samples() -> list[str]:
    files = list(TEST_DATA.glob("*/*.txt"))
    files += list(FIXTURES.glob("wrk*/*.txt")) + list(REFERENCE.glob("published/*.txt"))
    return [f.read_text() for f in files] or ["Requests/sec: 1.00\n"]


SAMPLES = _samples()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_reports_never_raise_anything_else(sample, data):
    lines = sample.splitlines(keepends=True)
    op = data.draw(st.sampled_from(["truncate", "drop", "swap", "junk", "replace_token"]))
    if lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        if op == "truncate":
            cut = data.draw(st.integers(0, len(sample)))
            lines = [sample[:cut]]
        elif op == "drop":
            del lines[i]
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "junk":
            lines.insert(i, data.draw(st.text(max_size=40)) + "\n")
        else:
            tokens = lines[i].split()
            if tokens:
                k = data.draw(st.integers(0, len(tokens) - 1))
                tokens[k] = data.draw(st.sampled_from(["-nan", "inf", "1e999", "x", "", "12.3zz", "%", "-1"]))
                lines[i] = "  ".join(tokens) + "\n"
    try:
        parse("".join(lines))
    except ParseError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises_anything_else(text):
    try:
        parse(text)
    except ParseError:
        pass
