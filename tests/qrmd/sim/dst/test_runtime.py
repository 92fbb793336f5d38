"""The one-thread runtime (qrmd.sim.dst.runtime): pykka actors whose inboxes a seeded scheduler
drains, futures resolved by running the scheduler, timeouts on the virtual clock."""

from __future__ import annotations

from random import Random
from typing import Any

import pykka
import pytest

from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import Scheduler, SimDeadlockError, SimFuture


class Recorder(pykka.ThreadingActor):
    """Answers each message with itself and records the order it saw them in."""

    def __init__(self, seen: list[Any], name: str) -> None:
        super().__init__()
        self.seen = seen
        self.name = name
        self.failed = False

    def on_receive(self, message: Any) -> Any:
        if message == "boom":
            raise RuntimeError("boom")
        self.seen.append((self.name, message))
        return message

    def on_failure(self, *exc_info: object) -> None:
        self.failed = True


class Asker(pykka.ThreadingActor):
    """Asks another actor while handling its own message (the Allocator's commit, in small)."""

    def __init__(self, other: Any, timeout: float | None) -> None:
        super().__init__()
        self.other = other
        self.timeout = timeout

    def on_receive(self, message: Any) -> Any:
        return ("asked", self.other.ask(message, timeout=self.timeout))


def scheduler(seed: int = 0) -> Scheduler:
    return Scheduler(Random(seed), VirtualClock())


def test_an_ask_is_answered_by_running_the_scheduler_on_the_same_thread() -> None:
    s = scheduler()
    seen: list[Any] = []
    ref = s.actor_class(Recorder).start(seen, "a")
    assert ref.ask("hello", timeout=1.0) == "hello"
    assert seen == [("a", "hello")]


def test_a_blocking_ask_inside_a_handler_delivers_the_other_actors_messages() -> None:
    s = scheduler()
    seen: list[Any] = []
    store = s.actor_class(Recorder).start(seen, "store")
    asker = s.actor_class(Asker).start(store, 5.0)
    assert asker.ask("commit", timeout=10.0) == ("asked", "commit")


def test_the_seed_picks_the_order_of_deliveries_and_the_same_seed_the_same_order() -> None:
    def order(seed: int) -> list[Any]:
        s = scheduler(seed)
        seen: list[Any] = []
        refs = [s.actor_class(Recorder).start(seen, name) for name in "abcd"]
        for i, ref in enumerate(refs):
            ref.tell(i)
        while s.step():
            pass
        return seen

    orders = {tuple(order(seed)) for seed in range(12)}
    assert len(orders) > 1
    assert order(3) == order(3)


def test_an_answer_later_than_the_timeout_is_a_timeout_on_the_virtual_clock() -> None:
    s = scheduler()
    s.message_cost_s = 2.0
    ref = s.actor_class(Recorder).start([], "slow")
    with pytest.raises(pykka.Timeout):
        ref.ask("late", timeout=1.0)


def test_a_future_already_answered_gives_its_answer_to_a_later_poll() -> None:
    # The checkers poll the Allocator's answer to a residual round with ``timeout=0`` at the
    # next round; a poll of an answered future must not read as "still with the Allocator".
    s = scheduler()
    s.message_cost_s = 2.0
    ref = s.actor_class(Recorder).start([], "slow")
    future = ref.ask("polled", block=False)
    s.run_until(future, None)
    assert future.get(timeout=0) == "polled"


def test_an_ask_nobody_can_answer_times_out_at_its_deadline() -> None:
    s = scheduler()
    ref = s.actor_class(Recorder).start([], "a")
    future = s.actor_class(Recorder)._create_future()
    assert isinstance(future, SimFuture)
    with pytest.raises(pykka.Timeout):
        future.get(timeout=3.0)
    assert s.clock.monotonic() == pytest.approx(3.0)
    assert ref.is_alive()


def test_an_ask_without_timeout_that_can_never_be_answered_is_a_deadlock() -> None:
    s = scheduler()
    future = SimFuture(s)
    with pytest.raises(SimDeadlockError):
        future.get()


def test_an_exception_in_a_told_message_stops_the_actor_and_calls_on_failure() -> None:
    s = scheduler()
    ref = s.actor_class(Recorder).start([], "a")
    actor = s.actors[0]
    ref.tell("boom")
    s.step()
    assert not ref.is_alive() and isinstance(actor, Recorder) and actor.failed
    assert s.actors == ()


def test_an_exception_in_an_asked_message_goes_to_the_asker_and_the_actor_lives() -> None:
    s = scheduler()
    ref = s.actor_class(Recorder).start([], "a")
    with pytest.raises(RuntimeError, match="boom"):
        ref.ask("boom", timeout=1.0)
    assert ref.is_alive()


def test_killing_the_process_stops_every_actor_and_answers_nothing() -> None:
    s = scheduler()
    ref = s.actor_class(Recorder).start([], "a")
    future = ref.ask("never", block=False)
    s.kill_all()
    assert not ref.is_alive() and not future.done and s.runnable() == []
