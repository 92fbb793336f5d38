"""Group commit at the simulated plugin socket (qrmd.sim.dst.plugin_socket): the rules of
wire.call_groups on one thread, and a run that serves kubelet's calls in groups."""

from __future__ import annotations

from random import Random
from typing import Any

import pykka
import pytest

from actors.allocator_messages import CommandGroup, GroupOutcome
from policy.cpu.commands import GetResourcesAllocation, RemovePod
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.plugin_socket import SimPluginSocket
from qrmd.sim.dst.runtime import Scheduler
from qrmd.sim.dst.simulation import run


class Allocator(pykka.ThreadingActor):
    """Answers each call with its pod, a group with one outcome per call, and records what
    it was sent; a group's witnesses are the per-call states the node would record."""

    def __init__(self, seen: list[Any], witnesses: dict[int, Any]) -> None:
        super().__init__()
        self.seen = seen
        self.witnesses = witnesses

    def on_receive(self, message: Any) -> Any:
        self.seen.append(message)
        if isinstance(message, CommandGroup):
            states = [(n, f"state {n}") for n in range(len(message.commands))]
            self.witnesses[id(message)] = (message, states)
            return tuple(GroupOutcome(reply=c.pod_uid) for c in message.commands)
        if isinstance(message, RemovePod):
            return message.pod_uid
        return "listing"


def socket_for(timeout_s: float = 10.0) -> tuple[SimPluginSocket, list[Any], Scheduler]:
    scheduler = Scheduler(Random(0), VirtualClock())
    seen: list[Any] = []
    witnesses: dict[int, Any] = {}
    allocator = scheduler.actor_class(Allocator).start(seen, witnesses)
    return SimPluginSocket(allocator, scheduler, timeout_s, witnesses), seen, scheduler


def test_calls_that_arrive_while_one_is_in_flight_are_sent_as_one_group() -> None:
    socket, seen, scheduler = socket_for()
    first = socket.ask(RemovePod("a"))
    second, third = socket.ask(RemovePod("b")), socket.ask(RemovePod("c"))
    while scheduler.step():
        pass
    assert seen == [RemovePod("a"), CommandGroup((RemovePod("b"), RemovePod("c")))]
    assert [f.value for f in (first, second, third)] == ["a", "b", "c"]
    # Each grouped call is witnessed from the state after its own command.
    assert [second.witness, third.witness] == [(0, "state 0"), (1, "state 1")]
    assert (socket.groups, socket.grouped_calls) == (1, 2)


@pytest.mark.parametrize(
    ("late", "expected"),
    [
        pytest.param(False, [RemovePod("b")], id="a waiting call is sent alone after the first"),
        pytest.param(True, [], id="a call whose deadline passed while waiting is withdrawn"),
    ],
)
def test_a_waiting_call_is_sent_unless_its_deadline_passed(late: bool, expected: list[Any]) -> None:
    socket, seen, scheduler = socket_for(timeout_s=5.0)
    socket.ask(RemovePod("a"))
    waiting = socket.ask(RemovePod("b"))
    if late:
        scheduler.clock.advance(6.0)
    while scheduler.step():
        pass
    assert seen[1:] == expected
    assert waiting.done is not late


def test_a_call_that_is_not_grouped_goes_as_itself() -> None:
    socket, seen, scheduler = socket_for()
    socket.ask(RemovePod("a"))
    listing = socket.ask(GetResourcesAllocation())
    while scheduler.step():
        pass
    assert listing.get() == "listing" and GetResourcesAllocation() in seen


def test_a_run_serves_kubelet_in_groups_and_stays_clean() -> None:
    outcome = run(5, 400)
    assert outcome.group_commits > 0 and not outcome.failures
