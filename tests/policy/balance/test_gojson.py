"""Go-identical JSON text and timestamps (spec memory-balancer §5.5, §5.6)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.balance import BalanceError
from policy.balance.gojson import MAX_TIME_S, encode, format_float, format_time, parse_time


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(0.0, "0", id="zero"),
        pytest.param(-0.0, "-0", id="negative zero keeps its sign as in Go"),
        pytest.param(0.7, "0.7", id="the advice threshold"),
        pytest.param(3221225472.0, "3221225472", id="integral floats have no .0"),
        pytest.param(9126805504.0, "9126805504", id="example 2 total RSS"),
        pytest.param(100.5, "100.5", id="a plain fraction"),
        pytest.param(0.1 + 0.2, "0.30000000000000004", id="shortest round-trip digits"),
        pytest.param(1e16, "10000000000000000", id="1e16 is plain, not exponent as in repr"),
        pytest.param(1e20, "100000000000000000000", id="1e20 is the last plain power"),
        pytest.param(1e21, "1e+21", id="1e21 switches to exponent form"),
        pytest.param(1.5e21, "1.5e+21", id="mantissa digits in exponent form"),
        pytest.param(1e100, "1e+100", id="three exponent digits"),
        pytest.param(1e-6, "0.000001", id="1e-6 is still plain"),
        pytest.param(1e-7, "1e-7", id="below 1e-6 the exponent loses its leading zero"),
        pytest.param(1.5e-7, "1.5e-7", id="small with mantissa"),
        pytest.param(1e-10, "1e-10", id="two-digit negative exponent"),
        pytest.param(5e-324, "5e-324", id="smallest subnormal"),
        pytest.param(-2.5, "-2.5", id="negative"),
    ],
)
def test_format_float_like_go(value: float, want: str) -> None:
    assert format_float(value) == want


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_an_error_as_in_go(value: float) -> None:
    with pytest.raises(BalanceError, match="unsupported value"):
        format_float(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_formatted_floats_read_back_exactly(value: float) -> None:
    text = format_float(value)
    assert float(text) == value
    assert not text.endswith(".0")


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param("plain", '"plain"', id="plain text"),
        pytest.param("<a&b>", '"\\u003ca\\u0026b\\u003e"', id="HTML characters are escaped"),
        pytest.param('q"b\\', '"q\\"b\\\\"', id="quote and backslash"),
        pytest.param("t\tn\nr\r", '"t\\tn\\nr\\r"', id="short escapes"),
        pytest.param("\x01\x1f", '"\\u0001\\u001f"', id="other control characters"),
        pytest.param("\u2028\u2029", '"\\u2028\\u2029"', id="line and paragraph separators"),
        pytest.param("né", '"né"', id="other non-ASCII text as is"),
    ],
)
def test_strings_like_go(value: str, want: str) -> None:
    assert encode(value) == want


def test_encode_keeps_key_order_and_is_compact() -> None:
    value = {"b": [1, 2.0, None], "a": {"x": True, "y": False}, "c": "s"}
    assert encode(value) == '{"b":[1,2,null],"a":{"x":true,"y":false},"c":"s"}'


def test_encode_refuses_non_json() -> None:
    with pytest.raises(BalanceError, match="unsupported type"):
        encode({"a": {1, 2}})
    with pytest.raises(BalanceError, match="not a string"):
        encode({1: "a"})


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00Z", id="the epoch"),
        pytest.param(30.5, "1970-01-01T00:00:30.5Z", id="trailing zeros of the fraction trimmed"),
        pytest.param(1795994721.0, "2026-11-29T23:25:21Z", id="no fraction, no dot"),
        pytest.param(1795994721.123456, "2026-11-29T23:25:21.123456Z", id="microseconds"),
        pytest.param(1.000000001, "1970-01-01T00:00:01.000000001Z", id="one nanosecond"),
    ],
)
def test_format_time_like_go_rfc3339nano(seconds: float, want: str) -> None:
    assert format_time(seconds) == want
    assert parse_time(want, "t") == seconds


def test_parse_time_accepts_offsets() -> None:
    assert parse_time("2026-11-30T07:25:21.5+08:00", "t") == 1795994721.5
    assert parse_time("2026-11-29T22:25:21.5-01:00", "t") == 1795994721.5


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("yesterday", id="not a timestamp"),
        pytest.param("2026-02-30T00:00:00Z", id="no such day"),
        pytest.param("2026-11-29T23:25:21.1234567890Z", id="more than nine fraction digits"),
        pytest.param("1969-12-31T23:59:59Z", id="before 1970"),
        pytest.param(12, id="not a string"),
    ],
)
def test_parse_time_refuses(text: object) -> None:
    with pytest.raises(BalanceError, match="detectTime"):
        parse_time(text, "detectTime")


@pytest.mark.parametrize("seconds", [-1.0, MAX_TIME_S, math.nan])
def test_format_time_refuses_times_go_cannot_marshal(seconds: float) -> None:
    with pytest.raises(BalanceError, match="outside"):
        format_time(seconds)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=int(MAX_TIME_S) - 2), st.integers(0, 999_999))
def test_times_read_back_exactly(whole: int, micros: int) -> None:
    # A clock's float, as time.time() gives it: the double nearest a microsecond reading.
    seconds = float(f"{whole}.{micros:06d}")
    assert parse_time(format_time(seconds), "t") == seconds
