"""The Ticker: one told tick per period at the injected clock's time; a target that cannot be
told costs that tick only; stop is prompt and idempotent. No test waits for a period: the
wait is injected."""

from __future__ import annotations

import threading
from typing import Any

import pykka
import pytest

from actors.balancer_messages import Tick
from actors.ticker import Ticker


class Target:
    def __init__(self, refuse: set[int] | None = None) -> None:
        self.told: list[Any] = []
        self.refuse = refuse or set()
        self.calls = 0

    def tell(self, message: Any) -> None:
        self.calls += 1
        if self.calls in self.refuse:
            raise pykka.ActorDeadError("restarting")
        self.told.append(message)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def time(self) -> float:
        return self.now


def scripted_wait(periods: int, clock: Clock, seen: list[float]) -> Any:
    """A wait that lets ``periods`` periods pass (advancing the clock), then says stop."""

    def wait(seconds: float) -> bool:
        seen.append(seconds)
        if len(seen) > periods:
            return True
        clock.now += seconds
        return False

    return wait


def run_to_end(ticker: Ticker) -> None:
    ticker.start()
    assert ticker._thread is not None
    ticker._thread.join(5)
    assert not ticker.running


def test_one_tick_per_period_at_the_clocks_time() -> None:
    target, clock, seen = Target(), Clock(), []
    ticker = Ticker(target, 5.0, clock.time, Tick, wait=scripted_wait(3, clock, seen))
    run_to_end(ticker)
    assert target.told == [Tick(105.0), Tick(110.0), Tick(115.0)]
    assert seen == [5.0, 5.0, 5.0, 5.0]
    assert (ticker.ticks_sent, ticker.ticks_missed) == (3, 0)


def test_a_target_that_cannot_be_told_misses_that_tick_only() -> None:
    target, clock, seen = Target(refuse={2}), Clock(), []
    ticker = Ticker(target, 5.0, clock.time, Tick, wait=scripted_wait(3, clock, seen))
    run_to_end(ticker)
    assert target.told == [Tick(105.0), Tick(115.0)]
    assert (ticker.ticks_sent, ticker.ticks_missed) == (2, 1)


def test_tick_tells_at_once_and_says_whether_it_was_delivered() -> None:
    target, clock = Target(refuse={1}), Clock()
    ticker = Ticker(target, 5.0, clock.time, Tick)
    assert not ticker.tick()
    clock.now = 200.0
    assert ticker.tick()
    assert target.told == [Tick(200.0)]


def test_stop_ends_the_thread_promptly_and_twice_is_harmless() -> None:
    target, clock = Target(), Clock()
    ticker = Ticker(target, 3600.0, clock.time, Tick, name="slow")
    ticker.start()
    assert ticker.running
    ticker.stop()
    assert not ticker.running
    ticker.stop()
    assert target.told == []
    with pytest.raises(RuntimeError, match="started before"):
        ticker.start()


def test_stop_before_start_is_harmless() -> None:
    Ticker(Target(), 1.0, Clock().time, Tick).stop()


@pytest.mark.parametrize("period", [0.0, -1.0], ids=["zero period", "negative period"])
def test_a_period_must_be_positive(period: float) -> None:
    with pytest.raises(ValueError, match="period must be positive"):
        Ticker(Target(), period, Clock().time, Tick, name="bad")


def test_the_ticks_reach_a_real_actor_in_order() -> None:
    received: list[float] = []
    done = threading.Event()

    class Recorder(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> None:
            received.append(message.now)
            if len(received) == 3:
                done.set()

    ref = Recorder.start()
    try:
        clock = Clock()
        ticker = Ticker(ref, 1.0, clock.time, Tick, wait=scripted_wait(3, clock, []))
        run_to_end(ticker)
        assert done.wait(5)
        assert received == [101.0, 102.0, 103.0]
    finally:
        ref.stop()
