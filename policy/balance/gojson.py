"""JSON text and timestamps exactly as the reference's Go ``encoding/json`` writes them (§5.5).

The balance record is logged, and the advice sent, as compact JSON produced by Go. Three things
differ from Python's ``json.dumps`` and are reproduced here:

* **floats**: the shortest decimal that round-trips, never a trailing ``.0`` (``3221225472``,
  ``0.7``); plain notation unless the magnitude is below ``1e-6`` or at least ``1e21``, where Go
  switches to exponent form and trims one leading zero of a negative exponent (``1e-7``,
  ``1e+21``). NaN and infinities are an error, as in Go;
* **strings**: ``<``, ``>``, ``&``, U+2028 and U+2029 are escaped (``\\u003c``), control characters
  other than ``\\n``, ``\\r``, ``\\t`` become ``\\u00XX``, other non-ASCII text is written as is;
* **timestamps**: ``time.Time`` marshals as RFC 3339 with nanoseconds and the trailing zeros of
  the fraction trimmed (``2026-11-29T23:25:21.5Z``). The reference writes the node's local zone;
  qrmd writes UTC (``Z``).

Time in ``policy/`` is a float of Unix seconds. It is mapped to whole nanoseconds through its
shortest decimal form (``repr``), so a timestamp written here reads back as the same float, and
elapsed-time comparisons (cool-down, ping-pong window) are exact integer comparisons like Go's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

from policy.balance.errors import BalanceError

__all__ = [
    "MAX_TIME_S",
    "check_time",
    "encode",
    "format_float",
    "format_time",
    "parse_time",
    "to_nanos",
]

NANOS_PER_SECOND = 1_000_000_000
#: First instant Go cannot marshal (year 10000); times are kept in [0, MAX_TIME_S).
MAX_TIME_S = 253_402_300_800.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})\Z"
)
# Characters a JSON string may carry verbatim in Go's encoder (its "htmlSafeSet").
_PLAIN = re.compile(r'[^"\\<>&\x00-\x1f\u2028\u2029\ud800-\udfff]*\Z')
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def format_float(value: float) -> str:
    """Format a float as Go's ``encoding/json`` does.

    Args:
        value: any float.

    Returns:
        The shortest round-tripping decimal, e.g. ``"9126805504"``, ``"0.7"``, ``"1e-7"``.

    Raises:
        BalanceError: ``value`` is NaN or infinite (Go's ``UnsupportedValueError``).
    """
    if not math.isfinite(value):
        raise BalanceError(f"json: unsupported value: {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    text = repr(value)
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        # Python's repr already uses exponent form in this range, with the same mantissa digits
        # and at least two exponent digits; Go then trims "e-07" to "e-7".
        mantissa, _, exponent = text.partition("e")
        sign, digits = exponent[0], exponent[1:]
        if sign == "-" and len(digits) == 2 and digits[0] == "0":
            digits = digits[1]
        return f"{mantissa}e{sign}{digits}"
    plain = format(Decimal(text), "f")
    if "." in plain:
        plain = plain.rstrip("0").rstrip(".")
    return plain


def _format_string(text: str) -> str:
    if _PLAIN.match(text):
        return f'"{text}"'
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or ch in "<>&\u2028\u2029":
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            # A lone surrogate is not valid UTF-8; Go writes the replacement character.
            out.append("\\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def encode(value: object) -> str:
    """Encode a plain JSON value (dicts keep their order) as Go's ``json.Marshal`` would.

    Args:
        value: ``None``, bool, int, float, str, a sequence or a string-keyed mapping of these.

    Returns:
        Compact JSON text.

    Raises:
        BalanceError: a float is not finite, or the value is not plain JSON.
    """
    parts: list[str] = []
    _encode_into(value, parts)
    return "".join(parts)


def _encode_into(value: object, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(str(value))
    elif isinstance(value, float):
        parts.append(format_float(value))
    elif isinstance(value, str):
        parts.append(_format_string(value))
    elif isinstance(value, Mapping):
        parts.append("{")
        for i, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):
                raise BalanceError(f"json: object key {key!r} is not a string")
            if i:
                parts.append(",")
            parts.append(_format_string(key))
            parts.append(":")
            _encode_into(item, parts)
        parts.append("}")
    elif isinstance(value, Sequence):
        parts.append("[")
        for i, item in enumerate(value):
            if i:
                parts.append(",")
            _encode_into(item, parts)
        parts.append("]")
    else:
        raise BalanceError(f"json: unsupported type {type(value).__name__}")


def to_nanos(time_s: float) -> int:
    """Whole nanoseconds of a Unix time given in seconds, through its shortest decimal form.

    Args:
        time_s: finite Unix seconds.

    Returns:
        Nanoseconds since the epoch, rounded half-even when the float has more than nine
        decimals.
    """
    scaled = Decimal(repr(time_s)) * NANOS_PER_SECOND
    return int(scaled.to_integral_value(rounding=ROUND_HALF_EVEN))


def check_time(time_s: float, what: str) -> float:
    """Validate a Unix time in seconds: finite, from 1970 up to (not including) year 10000.

    Raises:
        BalanceError: names ``what`` and the value.
    """
    if isinstance(time_s, bool) or not isinstance(time_s, int | float):
        raise BalanceError(f"{what}: expected Unix seconds as a number, got {time_s!r}")
    value = float(time_s) if abs(time_s) < MAX_TIME_S else math.inf
    if not math.isfinite(value) or not 0.0 <= value < MAX_TIME_S:
        raise BalanceError(f"{what}: Unix time {time_s!r:.40} is outside [0, {MAX_TIME_S:.0f})")
    return value


def format_time(time_s: float) -> str:
    """RFC 3339 with trimmed nanoseconds in UTC, as Go marshals a ``time.Time``.

    Args:
        time_s: Unix seconds in [0, MAX_TIME_S).

    Returns:
        e.g. ``"1970-01-01T00:00:30Z"`` or ``"2026-11-29T23:25:21.25Z"``.

    Raises:
        BalanceError: the time is outside the range Go can marshal.
    """
    seconds, nanos = divmod(to_nanos(check_time(time_s, "time")), NANOS_PER_SECOND)
    stamp = (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        stamp += "." + f"{nanos:09d}".rstrip("0")
    return stamp + "Z"


def parse_time(text: object, what: str) -> float:
    """Read an RFC 3339 timestamp (any zone offset, up to nine fraction digits) as Unix seconds.

    Args:
        text: the JSON value.
        what: the field path, for the error message.

    Returns:
        Unix seconds; a time written by ``format_time`` reads back as the same float.

    Raises:
        BalanceError: not a string, not RFC 3339, or outside [1970, 10000).
    """
    if not isinstance(text, str):
        raise BalanceError(f"{what}: expected an RFC 3339 timestamp string, got {text!r}")
    match = _RFC3339.match(text)
    if match is None:
        raise BalanceError(f"{what}: {text!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8)
    try:
        stamp = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as exc:
        raise BalanceError(f"{what}: {text!r} is not a valid date and time: {exc}") from None
    offset_s = 0
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        offset_s = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    whole = (stamp - _EPOCH) // timedelta(seconds=1) - offset_s
    value = float(Decimal(whole) + Decimal(f"0.{fraction or '0'}"))
    if not 0.0 <= value < MAX_TIME_S:
        raise BalanceError(f"{what}: {text!r} is before 1970 or after year 9999")
    return value
