"""Kubelet calls that arrive together are asked as one ``CommandGroup`` (wire.call_groups):
each caller gets its own outcome, a lone call is asked as itself, and a call whose deadline
passes before its group is sent is withdrawn, never decided."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pykka
import pytest

from actors.allocator_messages import (
    Allocate,
    AllocatorUnavailable,
    CommandGroup,
    GroupOutcome,
    RemovePod,
)
from policy.cpu.commands import GetResourcePluginOptions
from policy.cpu.facade import PluginOptions
from tests.policy.decision_fixtures import request
from wire import call_groups
from wire.call_groups import CallGrouper
from wire.call_watch import KubeletCallWatch


class HeldAllocator:
    """An Allocator ref whose first ask waits until the test releases it; every ask is kept.

    It answers a call with ``("reply", call)``, a group with one such outcome per call, and a
    ``RemovePod`` of ``"refused"`` with ``AllocatorUnavailable``.
    """

    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.first_asked = threading.Event()
        self.release = threading.Event()

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        self.asked.append(message)
        if len(self.asked) == 1:
            self.first_asked.set()
            assert self.release.wait(10)
        if isinstance(message, CommandGroup):
            return tuple(self._outcome(call) for call in message.commands)
        outcome = self._outcome(message)
        if outcome.error is not None:
            raise outcome.error
        return outcome.reply

    def _outcome(self, call: Any) -> GroupOutcome:
        if call == RemovePod("refused"):
            return GroupOutcome(error=AllocatorUnavailable("refused"))
        return GroupOutcome(reply=("reply", call))


def in_thread(grouper: CallGrouper, call: Any, timeout: float = 10) -> dict[str, Any]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["reply"] = grouper.ask(call, timeout)
        except Exception as err:
            result["error"] = err

    result["thread"] = threading.Thread(target=run)
    result["thread"].start()
    return result


def wait_until_queued(grouper: CallGrouper, count: int) -> None:
    """Until ``count`` calls wait behind the group in flight (the grouper's own queue)."""
    for _ in range(10_000):
        with grouper._lock:
            if len(grouper._waiting) == count:
                return
        threading.Event().wait(0.001)
    pytest.fail(f"{count} calls never queued")


def test_a_lone_call_is_asked_as_itself() -> None:
    allocator = HeldAllocator()
    allocator.release.set()
    grouper = CallGrouper(allocator)  # type: ignore[arg-type]
    call = Allocate(request("pod-a"))
    assert grouper.ask(call, 10) == ("reply", call)
    assert allocator.asked == [call]


def test_calls_that_queue_behind_a_group_are_asked_together_and_each_gets_its_own_outcome() -> None:
    allocator = HeldAllocator()
    grouper = CallGrouper(allocator)  # type: ignore[arg-type]
    first = in_thread(grouper, Allocate(request("pod-a")))
    assert allocator.first_asked.wait(10)
    later = [Allocate(request("pod-b")), RemovePod("refused"), RemovePod("pod-c")]
    waiting = []
    for call in later:
        waiting.append(in_thread(grouper, call))
        wait_until_queued(grouper, len(waiting))
    allocator.release.set()
    for result in (first, *waiting):
        result["thread"].join(10)
    assert allocator.asked[1] == CommandGroup(tuple(later))
    assert first["reply"] == ("reply", Allocate(request("pod-a")))
    assert waiting[0]["reply"] == ("reply", later[0])
    assert isinstance(waiting[1]["error"], AllocatorUnavailable)
    assert waiting[2]["reply"] == ("reply", later[2])


def test_a_call_whose_deadline_passes_before_its_group_is_sent_is_never_decided() -> None:
    allocator = HeldAllocator()
    grouper = CallGrouper(allocator)  # type: ignore[arg-type]
    first = in_thread(grouper, Allocate(request("pod-a")))
    assert allocator.first_asked.wait(10)
    late = in_thread(grouper, Allocate(request("pod-late")), timeout=0.01)
    late["thread"].join(10)
    assert isinstance(late["error"], pykka.Timeout)
    allocator.release.set()
    first["thread"].join(10)
    assert allocator.asked == [Allocate(request("pod-a"))]


class WokenAsItGivesUp(call_groups._Waiting):
    """A caller whose wait gives up at the very moment it is woken: it waits for the wake-up,
    leaves the lock released as a timed-out wait would, and reports that it timed out."""

    def wait(self, timeout: float | None) -> bool:
        self.woken.acquire()
        self.woken.release()
        return False


def test_a_caller_handed_the_lead_as_its_wait_gives_up_leads_and_hands_the_lead_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allocator = HeldAllocator()
    grouper = CallGrouper(allocator)  # type: ignore[arg-type]
    first = in_thread(grouper, Allocate(request("pod-a")))
    assert allocator.first_asked.wait(10)
    monkeypatch.setattr(call_groups, "_Waiting", WokenAsItGivesUp)
    late = in_thread(grouper, Allocate(request("pod-late")))
    wait_until_queued(grouper, 1)
    allocator.release.set()
    for result in (first, late):
        result["thread"].join(10)
    # It led its own group, though its wait had given up ...
    assert late == {"reply": ("reply", Allocate(request("pod-late"))), "thread": late["thread"]}
    # ... and handed the lead on: a later call is served, not left waiting for a leader.
    monkeypatch.undo()
    assert grouper.ask(Allocate(request("pod-next")), 1) == ("reply", Allocate(request("pod-next")))


# -- how long the calls have gone without an answer (wire.call_watch) ---------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class ScriptedAllocator:
    """Answers every ask at once, except those the test scripts to time out (pykka's
    ``Timeout``, as an ask whose deadline passed); an ask without waiting (the grouper's read
    queued behind a group that got no answer) gets a future the test answers, or is refused
    with ``AllocatorUnavailable`` when ``unavailable`` is set."""

    def __init__(self, *, timeouts: int = 0, unavailable: bool = False) -> None:
        self.timeouts = timeouts
        self.unavailable = unavailable
        self.reads: list[tuple[Any, pykka.ThreadingFuture[Any]]] = []

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        if not block:
            if self.unavailable:
                raise AllocatorUnavailable("allocator is restarting")
            future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
            self.reads.append((message, future))
            return future
        if self.timeouts:
            self.timeouts -= 1
            raise pykka.Timeout(f"no answer within {timeout} s")
        if isinstance(message, CommandGroup):
            return tuple(GroupOutcome(reply=("reply", call)) for call in message.commands)
        return ("reply", message)


def watched(allocator: Any) -> tuple[CallGrouper, Clock, KubeletCallWatch]:
    clock = Clock()
    watch = KubeletCallWatch(clock)
    return CallGrouper(allocator, watch=watch), clock, watch


def test_an_idle_grouper_and_one_whose_calls_were_answered_have_no_stretch() -> None:
    grouper, clock, watch = watched(ScriptedAllocator())
    assert grouper.unanswered_since() is None
    assert grouper.ask(RemovePod("pod-a"), 10) == ("reply", RemovePod("pod-a"))
    clock.now += 1000
    assert (grouper.unanswered_since(), watch.health_problems()) == (None, [])


def test_a_call_with_no_answer_in_time_keeps_the_stretch_running_until_the_allocator_gets_past_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="qrmd.kubelet_calls")
    allocator = ScriptedAllocator(timeouts=1)
    grouper, clock, watch = watched(allocator)
    with pytest.raises(pykka.Timeout):
        grouper.ask(Allocate(request("pod-a")), 10)
    # Nothing waits, but the Allocator has not got past the call: a read is queued behind it.
    [(read, future)] = allocator.reads
    assert read == GetResourcePluginOptions()
    clock.now += 61
    assert grouper.unanswered_since() == 100.0
    assert watch.liveness_problems() != []
    future.set(PluginOptions())
    assert grouper.unanswered_since() is None
    assert (watch.health_problems(), watch.liveness_problems()) == ([], [])
    assert caplog.messages[-1].startswith("kubelet calls are answered again")


def test_an_answered_group_ends_a_stretch_that_calls_without_an_answer_began() -> None:
    allocator = ScriptedAllocator(timeouts=2)
    grouper, clock, _ = watched(allocator)
    for _ in range(2):
        with pytest.raises(pykka.Timeout):
            grouper.ask(Allocate(request("pod-a")), 10)
        clock.now += 10
    assert len(allocator.reads) == 1  # one read behind the first: the second is behind it
    assert grouper.unanswered_since() == 100.0
    assert grouper.ask(Allocate(request("pod-a")), 10) == ("reply", Allocate(request("pod-a")))
    assert grouper.unanswered_since() is None


def test_with_an_allocator_that_cannot_be_asked_an_idle_grouper_leaves_it_to_the_supervisor() -> (
    None
):
    grouper, _, _ = watched(ScriptedAllocator(timeouts=1, unavailable=True))
    with pytest.raises(pykka.Timeout):
        grouper.ask(Allocate(request("pod-a")), 10)
    assert grouper.unanswered_since() is None


class TurnByTurnAllocator:
    """Holds every ask until the test lets one through (``turns.release()``)."""

    def __init__(self) -> None:
        self.turns = threading.Semaphore(0)
        self.asked: list[Any] = []

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        self.asked.append(message)
        assert self.turns.acquire(timeout=10)
        return ("reply", message)


def wait_until_asked(allocator: TurnByTurnAllocator, count: int) -> None:
    for _ in range(10_000):
        if len(allocator.asked) == count:
            return
        threading.Event().wait(0.001)
    pytest.fail(f"the allocator was never asked {count} times")


def test_a_call_queued_behind_an_answered_group_counts_from_that_answer() -> None:
    allocator = TurnByTurnAllocator()
    clock = Clock()
    grouper = CallGrouper(allocator, watch=KubeletCallWatch(clock))  # type: ignore[arg-type]
    first = in_thread(grouper, RemovePod("pod-a"))
    wait_until_asked(allocator, 1)
    clock.now = 103.0
    queued = in_thread(grouper, RemovePod("pod-b"))
    wait_until_queued(grouper, 1)
    # The first call's arrival began the stretch; the queued one joined it.
    assert (grouper.unanswered_since(), grouper.queued()) == (100.0, 1)
    clock.now = 107.0
    allocator.turns.release()  # the first group is answered at 107, pod-b still waiting
    wait_until_asked(allocator, 2)
    assert grouper.unanswered_since() == 107.0
    allocator.turns.release()
    for result in (first, queued):
        result["thread"].join(10)
    assert queued["reply"] == ("reply", RemovePod("pod-b"))
    assert grouper.unanswered_since() is None


def test_a_lead_that_never_comes_back_keeps_the_stretch_running_while_callers_give_up() -> None:
    allocator = HeldAllocator()
    clock = Clock()
    watch = KubeletCallWatch(clock)
    grouper = CallGrouper(allocator, watch=watch)  # type: ignore[arg-type]
    first = in_thread(grouper, Allocate(request("pod-a")), timeout=None)  # type: ignore[arg-type]
    assert allocator.first_asked.wait(10)
    late = in_thread(grouper, Allocate(request("pod-late")), timeout=0.01)
    late["thread"].join(10)
    assert isinstance(late["error"], pykka.Timeout)
    clock.now += 61
    assert (grouper.queued(), grouper.unanswered_since()) == (0, 100.0)
    assert len(watch.liveness_problems()) == 1
    allocator.release.set()
    first["thread"].join(10)
    assert watch.liveness_problems() == []
