"""The Supervisor's back-off as a pure function: a crash loop is slowed down by doubling waits,
a stable child is restarted at once, failed restarts are retried ever more slowly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.restart_backoff import RestartBackoff, RestartDelay, plan_restart

BACKOFF = RestartBackoff(first_s=0.5, longest_s=30.0, stable_s=10.0)


@pytest.mark.parametrize(
    ("quick_deaths", "restarted_at", "now", "want"),
    [
        pytest.param(
            0, None, 500.0, RestartDelay(0, 0.0), id="a child never restarted restarts at once"
        ),
        pytest.param(
            3,
            100.0,
            110.0,
            RestartDelay(0, 0.0),
            id="a child up for stable_s restarts at once and its count starts again",
        ),
        pytest.param(
            0, 100.0, 101.0, RestartDelay(1, 0.5), id="the first quick death waits first_s"
        ),
        pytest.param(
            1,
            100.0,
            109.9,
            RestartDelay(2, 1.0),
            id="the second quick death in a row waits twice as long",
        ),
        pytest.param(
            4,
            100.0,
            100.0,
            RestartDelay(5, 8.0),
            id="the fifth quick death in a row waits 2^4 first_s",
        ),
        pytest.param(
            6, 100.0, 100.5, RestartDelay(7, 30.0), id="a long crash loop waits at most longest_s"
        ),
        pytest.param(
            10_000,
            100.0,
            100.5,
            RestartDelay(10_001, 30.0),
            id="an endless crash loop does not overflow",
        ),
    ],
)
def test_plan_restart(
    quick_deaths: int, restarted_at: float | None, now: float, want: RestartDelay
) -> None:
    assert (
        plan_restart(BACKOFF, quick_deaths=quick_deaths, restarted_at=restarted_at, now=now) == want
    )


@pytest.mark.parametrize(
    ("attempt", "want"),
    [
        pytest.param(0, 0.5, id="the first retry waits first_s"),
        pytest.param(1, 1.0, id="the second twice that"),
        pytest.param(5, 16.0, id="the sixth 2^5 first_s"),
        pytest.param(6, 30.0, id="the seventh is capped at longest_s"),
        pytest.param(500, 30.0, id="the five-hundredth too"),
    ],
)
def test_retry_delay(attempt: int, want: float) -> None:
    assert BACKOFF.retry_delay(attempt) == want


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param(
            (0.0, 30.0, 10.0),
            "first restart back-off must be positive, got 0.0 s",
            id="no first wait",
        ),
        pytest.param(
            (5.0, 1.0, 10.0),
            r"longest restart back-off \(1.0 s\) must be at least the first \(5.0 s\)",
            id="a longest wait shorter than the first",
        ),
        pytest.param(
            (0.5, 30.0, -1.0),
            "stable time must be positive, got -1.0 s",
            id="a negative stable time",
        ),
    ],
)
def test_out_of_range_settings_are_refused(
    settings: tuple[float, float, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RestartBackoff(*settings)


def test_a_negative_step_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be negative, got -1"):
        BACKOFF.doubled(-1)


backoffs = st.builds(
    lambda first, factor, stable: RestartBackoff(first, first * factor, stable),
    st.floats(0.001, 100.0),
    st.floats(1.0, 1000.0),
    st.floats(0.001, 1000.0),
)


@given(backoff=backoffs, deaths=st.integers(0, 200), since=st.floats(0.0, 2000.0))
def test_every_wait_is_within_the_limits_and_never_shrinks_in_a_crash_loop(
    backoff: RestartBackoff, deaths: int, since: float
) -> None:
    plan = plan_restart(backoff, quick_deaths=deaths, restarted_at=0.0, now=since)
    if since >= backoff.stable_s:
        assert plan == RestartDelay(0, 0.0)
        return
    assert plan.quick_deaths == deaths + 1
    assert backoff.first_s <= plan.wait_s <= backoff.longest_s
    after = plan_restart(backoff, quick_deaths=plan.quick_deaths, restarted_at=0.0, now=0.0)
    assert after.wait_s >= plan.wait_s


@given(backoff=backoffs, attempt=st.integers(0, 200))
def test_retries_wait_longer_each_time_up_to_the_longest(
    backoff: RestartBackoff, attempt: int
) -> None:
    delay = backoff.retry_delay(attempt)
    assert backoff.first_s <= delay <= backoff.longest_s
    assert backoff.retry_delay(attempt + 1) >= delay
