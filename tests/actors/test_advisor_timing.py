"""The advisor link's back-off and receive-stuck monitor on timelines (cpu-policy §11.2)."""

from __future__ import annotations

import pytest

from actors.advisor_timing import Backoff, ReceiveMonitor


def waits(ends: list[float]) -> list[float]:
    """The wait after each attempt that ended at these times, as the link takes them."""
    backoff = Backoff()
    out = []
    for now in ends:
        delay, backoff = backoff.start(now, reset=backoff.reset_due(now))
        out.append(round(delay, 3))
    return out


@pytest.mark.parametrize(
    ("ends", "want"),
    [
        pytest.param(
            [0, 1, 3, 6, 12, 24, 50, 80, 110],
            [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0],
            id="doubles from 0.8 s and caps at 30 s",
        ),
        pytest.param(
            [0, 1, 3, 124, 125],
            [0.8, 1.6, 3.2, 0.8, 1.6],
            id="more than 2 minutes after the previous wait started it resets",
        ),
        pytest.param(
            [0, 1, 121], [0.8, 1.6, 3.2], id="exactly 2 minutes is not more than 2 minutes"
        ),
        pytest.param([1000.0], [0.8], id="the first wait is 0.8 s at any time"),
    ],
)
def test_backoff_timeline(ends: list[float], want: list[float]) -> None:
    assert waits(ends) == want


def test_no_check_before_a_stream_opens() -> None:
    monitor = ReceiveMonitor()
    stuck, monitor = monitor.check(10_000.0)
    assert stuck is None


def test_the_first_check_is_one_period_after_the_stream_opens() -> None:
    monitor = ReceiveMonitor().stream_opened(100.0)
    assert monitor.check(129.9)[0] is None
    stuck, monitor = monitor.check(130.0)
    assert stuck is True  # nothing received in 30 s
    assert monitor.next_check == 160.0


def test_receives_within_the_threshold_are_not_stuck() -> None:
    monitor = ReceiveMonitor().stream_opened(0.0)
    timeline = [(5.0, None), (30.0, False), (45.0, None), (60.0, False), (90.0, True)]
    for now, want in timeline:
        if want is None:
            monitor = monitor.received(now)
            continue
        stuck, monitor = monitor.check(now)
        assert stuck is want, now


def test_a_late_tick_runs_one_check_and_keeps_the_period() -> None:
    monitor = ReceiveMonitor().stream_opened(0.0)
    stuck, monitor = monitor.check(95.0)
    assert stuck is True and monitor.next_check == 120.0


def test_a_closed_stream_stops_the_checks() -> None:
    monitor = ReceiveMonitor().stream_opened(0.0).stream_closed()
    assert monitor.check(60.0)[0] is None
