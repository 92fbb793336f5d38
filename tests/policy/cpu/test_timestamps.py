"""The QRM time format of init_timestamp (spec cpu-policy §5.7, wire.md §12.9)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policy.cpu.timestamps import (
    format_qrm_datetime,
    format_qrm_time,
    format_qrm_time_ns,
    parse_qrm_time,
    parse_qrm_time_ns,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# 2024-05-08 01:59:26 UTC, the instant of wire.md §12.9's examples.
MAY_8 = 1_715_133_566
MIN_NS = int((datetime(1, 1, 1, tzinfo=UTC) - EPOCH).total_seconds()) * 10**9
MAX_NS = int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - EPOCH).total_seconds()) * 10**9


def ns_of(when: datetime) -> int:
    return (when - EPOCH) // timedelta(microseconds=1) * 1000


@pytest.mark.parametrize(
    ("epoch_ns", "text"),
    [
        pytest.param(0, "1970-01-01 00:00:00 +0000 UTC", id="the epoch has no fraction"),
        pytest.param(
            MAY_8 * 10**9 + 123_400_000,
            "2024-05-08 01:59:26.1234 +0000 UTC",
            id="wire.md example trims trailing zeros",
        ),
        pytest.param(
            MAY_8 * 10**9 + 123_456_789,
            "2024-05-08 01:59:26.123456789 +0000 UTC",
            id="all nine digits when they count",
        ),
        pytest.param(
            MAY_8 * 10**9 + 1, "2024-05-08 01:59:26.000000001 +0000 UTC", id="one nanosecond"
        ),
        pytest.param(-1, "1969-12-31 23:59:59.999999999 +0000 UTC", id="before the epoch"),
        pytest.param(
            ns_of(datetime(2024, 2, 29, 12, tzinfo=UTC)),
            "2024-02-29 12:00:00 +0000 UTC",
            id="a leap day",
        ),
    ],
)
def test_format_ns(epoch_ns: int, text: str) -> None:
    assert format_qrm_time_ns(epoch_ns) == text
    assert parse_qrm_time_ns(text) == epoch_ns


@pytest.mark.parametrize(
    ("epoch_s", "text"),
    [
        pytest.param(MAY_8 + 0.5, "2024-05-08 01:59:26.5 +0000 UTC", id="half a second"),
        pytest.param(float(MAY_8), "2024-05-08 01:59:26 +0000 UTC", id="whole seconds, no dot"),
        pytest.param(
            MAY_8 + 0.1234, "2024-05-08 01:59:26.1234 +0000 UTC", id="float noise is rounded away"
        ),
        pytest.param(
            MAY_8 + 0.000001, "2024-05-08 01:59:26.000001 +0000 UTC", id="to the microsecond"
        ),
    ],
)
def test_format_seconds(epoch_s: float, text: str) -> None:
    assert format_qrm_time(epoch_s) == text


def test_format_datetime_converts_to_utc() -> None:
    beijing = timezone(timedelta(hours=8))
    when = datetime(2024, 5, 8, 9, 59, 26, 123456, tzinfo=beijing)
    assert format_qrm_datetime(when) == "2024-05-08 01:59:26.123456 +0000 UTC"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: format_qrm_datetime(datetime(2024, 5, 8)), id="a naive datetime"),
        pytest.param(lambda: format_qrm_time(float("nan")), id="NaN seconds"),
        pytest.param(lambda: format_qrm_time(float("inf")), id="infinite seconds"),
        pytest.param(lambda: format_qrm_time_ns(10**21), id="past year 9999"),
    ],
)
def test_format_refuses_what_has_no_instant(call: object) -> None:
    with pytest.raises(ValueError):
        call()  # type: ignore[operator]


MAY_8_NS = MAY_8 * 10**9


@pytest.mark.parametrize(
    ("text", "epoch_ns"),
    [
        pytest.param(
            "2024-05-08 09:59:26.123456789 +0800 CST",
            MAY_8_NS + 123_456_789,
            id="the reference writes local time with its abbreviation",
        ),
        pytest.param("2024-05-08 09:59:26 +0800 +08", MAY_8_NS, id="a numeric abbreviation"),
        pytest.param("2024-05-08 09:59:26 +0800 GMT+8", MAY_8_NS, id="GMT with an offset"),
        pytest.param("2024-05-07 22:29:26 -0330 NDT", MAY_8_NS, id="a negative half-hour offset"),
        pytest.param("2024-05-08 07:44:26 +0545 +0545", MAY_8_NS, id="a four-digit abbreviation"),
        pytest.param("2024-05-08 11:59:26 +1000 AEST", MAY_8_NS, id="four letters ending in T"),
        pytest.param("2024-05-08 13:59:26 +1200 ANAST", MAY_8_NS, id="five letters ending in T"),
        pytest.param("2024-05-08 09:59:26 +0800 WITA", MAY_8_NS, id="WITA, Go's exception"),
        pytest.param("2024-05-08 11:59:26 +1000 ChST", MAY_8_NS, id="ChST, Go's other exception"),
        pytest.param(
            "2024-05-08 01:59:26.1 +0000 UTC", MAY_8_NS + 100_000_000, id="one fraction digit"
        ),
        pytest.param(
            "2024-05-08 01:59:26.123456789999 +0000 UTC",
            MAY_8_NS + 123_456_789,
            id="digits past the ninth are dropped as Go does",
        ),
        pytest.param(
            "2024-05-08 01:59:26,5 +0000 UTC", MAY_8_NS + 500_000_000, id="a comma before it"
        ),
        pytest.param("2024-05-08 1:59:26 +0000 UTC", MAY_8_NS, id="a one-digit hour"),
        pytest.param(
            "2024-05-08 09:59:26 +0800 UTC", MAY_8_NS, id="the numeric offset beats the name"
        ),
        pytest.param("2024-05-09 01:59:26 +2400 XYZ", MAY_8_NS, id="Go accepts a 24-hour offset"),
        pytest.param("0000-03-01 00:00:00 +0000 UTC", -62_162_035_200 * 10**9, id="year zero"),
    ],
)
def test_parse_layout_variants(text: str, epoch_ns: int) -> None:
    assert parse_qrm_time_ns(text) == epoch_ns
    assert parse_qrm_time(text) == epoch_ns / 10**9


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("yesterday", id="words"),
        pytest.param("2024-05-08 01:59:26", id="no offset or zone"),
        pytest.param("2024-05-08 01:59:26 +0000", id="no zone abbreviation"),
        pytest.param("2024-05-08 01:59:26 UTC", id="no numeric offset"),
        pytest.param("2024-05-08T01:59:26Z", id="RFC 3339"),
        pytest.param("2024-02-30 00:00:00 +0000 UTC", id="February 30"),
        pytest.param("2023-02-29 00:00:00 +0000 UTC", id="February 29 of a common year"),
        pytest.param("1900-02-29 00:00:00 +0000 UTC", id="February 29 of a century"),
        pytest.param("2024-13-01 00:00:00 +0000 UTC", id="month 13"),
        pytest.param("2024-00-01 00:00:00 +0000 UTC", id="month 0"),
        pytest.param("2024-5-08 01:59:26 +0000 UTC", id="a one-digit month"),
        pytest.param("2024-05-08 24:00:00 +0000 UTC", id="hour 24"),
        pytest.param("2024-05-08 01:60:00 +0000 UTC", id="minute 60"),
        pytest.param("2024-05-08 01:59:60 +0000 UTC", id="a leap second"),
        pytest.param("2024-05-08 01:59:26. +0000 UTC", id="a dot without digits"),
        pytest.param("2024-05-08 01:59:26 +2500 UTC", id="an offset past 24 hours"),
        pytest.param("2024-05-08 01:59:26 +0000 utc", id="a lower-case zone"),
        pytest.param("2024-05-08 01:59:26 +0000 ABCD", id="four letters not ending in T"),
        pytest.param("2024-05-08 01:59:26 +0000 ABCDEF", id="six letters"),
        pytest.param("2024-05-08 01:59:26 +0000 UTC ", id="a trailing space"),
        pytest.param("2024-05-08 01:59:26 +0000 UTC\n", id="a trailing newline"),
        pytest.param(" 2024-05-08 01:59:26 +0000 UTC", id="a leading space"),
        pytest.param("2024-05-08 01:59:26 +0000 UTC m=+0.000001", id="Go's monotonic suffix"),
        pytest.param("２０２４-05-08 01:59:26 +0000 UTC", id="non-ASCII digits"),
    ],
)
def test_bad_timestamps_parse_to_none(text: str) -> None:
    assert parse_qrm_time_ns(text) is None
    assert parse_qrm_time(text) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=MIN_NS, max_value=MAX_NS))
@example(0)
@example(MIN_NS)
@example(MAX_NS)
def test_round_trip_is_exact(epoch_ns: int) -> None:
    text = format_qrm_time_ns(epoch_ns)
    assert parse_qrm_time_ns(text) == epoch_ns
    assert format_qrm_time_ns(epoch_ns) == text


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(2, 1, 1),
        max_value=datetime(9998, 12, 31),
        timezones=st.integers(min_value=-1439, max_value=1439).map(
            lambda minutes: timezone(timedelta(minutes=minutes))
        ),
    )
)
def test_parse_agrees_with_datetime(when: datetime) -> None:
    fraction = f".{when.microsecond:06d}".rstrip("0") if when.microsecond else ""
    # strftime does not pad years before 1000, hence the explicit year.
    text = (
        f"{when.year:04d}" + when.strftime("-%m-%d %H:%M:%S") + fraction + when.strftime(" %z MST")
    )
    assert parse_qrm_time_ns(text) == ns_of(when)
    assert format_qrm_datetime(when) == format_qrm_time_ns(ns_of(when))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=MIN_NS // 1000, max_value=MAX_NS // 1000))
def test_format_agrees_with_datetime(epoch_us: int) -> None:
    when = EPOCH + timedelta(microseconds=epoch_us)
    fraction = f".{when.microsecond:06d}".rstrip("0") if when.microsecond else ""
    want = f"{when.year:04d}" + when.strftime("-%m-%d %H:%M:%S") + fraction + " +0000 UTC"
    assert format_qrm_time_ns(epoch_us * 1000) == want


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789-:. +,TUCSMGWAZ\n", max_size=40) | st.text(max_size=40))
def test_garbage_never_raises(text: str) -> None:
    assert parse_qrm_time_ns(text) is None or isinstance(parse_qrm_time_ns(text), int)


@pytest.mark.parametrize(
    ("epoch_ns", "want"),
    [
        (1_715_180_685 * 10**9, "2024-05-08 15:04:45 +0000 UTC"),
        (1_715_180_685 * 10**9 + 250_000_000, "2024-05-08 15:04:45.25 +0000 UTC"),
        (1_715_180_685 * 10**9 + 1, "2024-05-08 15:04:45.000000001 +0000 UTC"),
        (1_715_180_686 * 10**9 - 1, "2024-05-08 15:04:45.999999999 +0000 UTC"),
        (1_715_180_686 * 10**9, "2024-05-08 15:04:46 +0000 UTC"),
    ],
    ids=[
        "the whole second",
        "a quarter past it shares its date and keeps its own fraction",
        "a nanosecond past it",
        "the last nanosecond of it",
        "the next second has its own date text",
    ],
)
def test_instants_of_one_second_keep_their_own_fractions(epoch_ns: int, want: str) -> None:
    for _ in range(2):  # the second time from the remembered date text
        assert format_qrm_time_ns(epoch_ns) == want


def test_a_year_outside_the_layout_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="is in year 10000, outside 0-9999"):
            format_qrm_time_ns(MAX_NS + 86_400 * 10**9)
