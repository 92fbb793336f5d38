"""A wall time in a log line reads as ISO-8601 UTC, never as an epoch float."""

from __future__ import annotations

import pytest

from actors.log_text import utc


@pytest.mark.parametrize(
    ("wall", "want"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00.000Z", id="the epoch itself"),
        pytest.param(1796622242.4279864, "2026-12-07T05:44:02.427Z", id="a demo's residual time"),
        pytest.param(1796622242.9999, "2026-12-07T05:44:02.999Z", id="milliseconds truncate"),
    ],
)
def test_a_wall_time_reads_as_utc_to_the_millisecond(wall: float, want: str) -> None:
    assert utc(wall) == want
