"""``MailboxActor`` and its ``ReplyFuture`` answer as pykka's ``ThreadingActor`` and
``ThreadingFuture`` do: the same replies, exceptions, timeouts, stops and refusals."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import pykka
import pytest

from actors.threads import MailboxActor, ReplyFuture


class BoomError(Exception):
    """What the echo actor raises when asked to."""


def _echo(message: Any) -> Any:
    if isinstance(message, BaseException):
        raise message
    if message == "wait":
        GATE.wait(timeout=10)
    return message


#: Holds the echo actors' "wait" messages until set (never waited on by the tests themselves).
GATE = threading.Event()


class ThreadingEcho(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> Any:
        return _echo(message)


class MailboxEcho(MailboxActor):
    def on_receive(self, message: Any) -> Any:
        return _echo(message)


ECHOES = pytest.mark.parametrize(
    "actor_class", [ThreadingEcho, MailboxEcho], ids=["pykka's threading actor", "MailboxActor"]
)


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("reply", call())
    except Exception as err:
        return ("raised", (type(err), str(err)))


@ECHOES
@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("hello", ("reply", "hello")),
        (None, ("reply", None)),
        (BoomError("the pod is unknown"), ("raised", (BoomError, "the pod is unknown"))),
        (ValueError("bad cpuset"), ("raised", (ValueError, "bad cpuset"))),
    ],
    ids=[
        "a value comes back as it was sent",
        "None comes back as None",
        "an exception the actor raises is raised in the asker",
        "any exception type keeps its type and message",
    ],
)
def test_an_ask_answers_as_pykka_threading_actor(
    actor_class: type[pykka.Actor], message: Any, expected: tuple[str, Any]
) -> None:
    ref = actor_class.start()
    try:
        assert _outcome(lambda: ref.ask(message, timeout=10)) == expected
    finally:
        ref.stop()


@ECHOES
def test_asks_from_many_threads_each_get_their_own_reply(actor_class: type[pykka.Actor]) -> None:
    ref = actor_class.start()
    replies: dict[int, list[Any]] = {}

    def asker(n: int) -> None:
        replies[n] = [ref.ask((n, i), timeout=10) for i in range(50)]

    threads = [threading.Thread(target=asker, args=(n,)) for n in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        ref.stop()
    assert replies == {n: [(n, i) for i in range(50)] for n in range(8)}


@ECHOES
def test_a_late_reply_times_out_then_the_mailbox_goes_on(actor_class: type[pykka.Actor]) -> None:
    GATE.clear()
    ref = actor_class.start()
    try:
        with pytest.raises(pykka.Timeout):
            ref.ask("wait", timeout=0.01)
        GATE.set()
        assert ref.ask("next", timeout=10) == "next"
    finally:
        GATE.set()
        ref.stop()


@ECHOES
def test_stop_answers_and_a_stopped_actor_refuses_asks(actor_class: type[pykka.Actor]) -> None:
    ref = actor_class.start()
    assert ref.stop(timeout=10) is True
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("after", timeout=10)


def test_a_future_answers_every_get_with_the_same_value() -> None:
    future = ReplyFuture()
    future.set(42)
    assert [future.get(timeout=0), future.get(), future.get(timeout=1)] == [42, 42, 42]


def test_a_future_raises_its_exception_itself_on_every_get() -> None:
    future = ReplyFuture()
    original = BoomError("refused")
    try:
        raise original
    except BoomError:
        future.set_exception()
    for _ in range(2):
        with pytest.raises(BoomError) as raised:
            future.get(timeout=0)
        assert raised.value is original


def test_an_exception_answered_as_a_type_only_is_raised_as_an_instance() -> None:
    future = ReplyFuture()
    future.set_exception((BoomError, None, None))  # type: ignore[arg-type]
    with pytest.raises(BoomError):
        future.get(timeout=0)


@pytest.mark.parametrize(
    "timeout", [0, 0.001, -1.0], ids=["no wait", "a short wait", "a negative timeout as none"]
)
def test_an_unanswered_future_times_out(timeout: float) -> None:
    with pytest.raises(pykka.Timeout):
        ReplyFuture().get(timeout=timeout)


@pytest.mark.parametrize(
    "second",
    [
        lambda f: f.set(2),
        lambda f: f.set_exception((BoomError, BoomError(), None)),
        lambda f: f.set_get_hook(lambda timeout: 3),
    ],
    ids=["a second set", "a set_exception after set", "a get hook after set"],
)
def test_a_future_is_answered_once(second: Callable[[ReplyFuture], None]) -> None:
    future = ReplyFuture()
    future.set(1)
    with pytest.raises(queue.Full):
        second(future)
    assert future.get(timeout=0) == 1


def test_a_get_hook_answers_get_and_refuses_a_later_set() -> None:
    future = ReplyFuture()
    future.set_get_hook(lambda timeout: ("hooked", timeout))
    assert future.get(timeout=5) == ("hooked", 5)
    with pytest.raises(queue.Full):
        future.set(1)


def test_map_and_join_work_on_top_of_get() -> None:
    first, second = ReplyFuture(), ReplyFuture()
    first.set(2)
    second.set(3)
    assert first.map(lambda v: v * 10).get(timeout=1) == 20
    assert first.join(second).get(timeout=1) == [2, 3]
