"""The simulated sys-advisor (qrmd.sim.dst.advisor) and the link's simulated timers: each mode
answers as the port says a real advisor's outcome reaches qrmd."""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from actors.advisor_messages import RetryLink, StreamEnded, StreamReceived
from actors.ports.advisor import AdvisorClient, AdvisorRefused, AdvisorSick
from policy.cpu.advisor.push import ContainerMetadata
from policy.state.sections import State
from qrmd.sim.dst.advisor import SimAdvisor
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.invariants import recovered_view
from qrmd.sim.dst.node import SimTimers
from qrmd.sim.dst.simulation import Simulation

METADATA = ContainerMetadata("p1", "sim", "pod-p1", "app", "MAIN", 0, qos_level="shared_cores")


def advisor(mode: str, state: State | None = None) -> tuple[SimAdvisor, VirtualClock]:
    clock = VirtualClock()
    peer = SimAdvisor(Random(3), clock, {0: 8, 1: 8}, lambda: state)
    peer.mode = mode
    return peer, clock


def test_the_simulated_advisor_keeps_the_port() -> None:
    assert isinstance(advisor("healthy")[0], AdvisorClient)


@pytest.mark.parametrize(
    ("mode", "error", "code", "waits"),
    [
        pytest.param("healthy", None, None, False, id="a healthy advisor answers at once"),
        pytest.param("slow", None, None, True, id="a slow advisor answers within the timeout"),
        pytest.param("stalled", AdvisorSick, "DEADLINE_EXCEEDED", True, id="a stall times out"),
        pytest.param(
            "disconnecting", AdvisorSick, "UNAVAILABLE", False, id="a disconnect is sickness"
        ),
        pytest.param(
            "refused", AdvisorRefused, "INVALID_ARGUMENT", False, id="a refusal is no sickness"
        ),
    ],
)
def test_add_container_in_each_mode(
    mode: str, error: type[Exception] | None, code: str | None, waits: bool
) -> None:
    peer, clock = advisor(mode)
    if error is None:
        peer.add_container(METADATA, 2.0)
        assert ("p1", "app") in peer.containers
    else:
        with pytest.raises(error) as raised:
            peer.add_container(METADATA, 2.0)
        assert getattr(raised.value, "code", None) == code
        assert peer.containers == {}
    assert (clock.monotonic() > 0) is waits
    assert clock.monotonic() <= 2.0


def test_a_refusing_advisor_still_accepts_the_dial() -> None:
    peer, _ = advisor("refused")
    peer.connect(5.0)


def speak(peer: SimAdvisor) -> tuple[str, list[Any]]:
    told: list[Any] = []
    return peer.speak(4, told.append), told


def booted_state() -> State:
    """The state a short fault-free run left on its disk (pools made, a few pods)."""
    sim = Simulation(1, faults=())
    sim.run(60)
    _, state, _ = recovered_view(sim.disk, sim.node)
    assert state.cpu.pools
    return state


@pytest.mark.parametrize(
    ("mode", "told", "stream_left"),
    [
        pytest.param("healthy", StreamReceived, True, id="a healthy advisor sends a plan"),
        pytest.param("garbage", None, None, id="a garbage advisor sends what qrmd must refuse"),
        pytest.param("disconnecting", StreamEnded, False, id="a disconnect breaks the stream"),
        pytest.param("stalled", type(None), True, id="a stalled advisor says nothing"),
    ],
)
def test_the_stream_in_each_mode(mode: str, told: type | None, stream_left: bool | None) -> None:
    peer, _ = advisor(mode, booted_state())
    stream = peer.list_and_watch()
    _, messages = speak(peer)
    if told is type(None):
        assert messages == []
    elif told is not None:
        assert [type(m) for m in messages] == [told]
        assert messages[0].attempt == 4
    else:  # garbage: an invalid response, or unreadable bytes that end the stream
        assert len(messages) == 1 and isinstance(messages[0], StreamReceived | StreamEnded)
    if stream_left is not None:
        assert (not stream.cancelled) is stream_left


def test_no_stream_no_words() -> None:
    peer, _ = advisor("healthy", booted_state())
    assert speak(peer) == ("advisor: no stream open", [])


def test_timers_fire_when_due_in_the_order_set() -> None:
    clock = VirtualClock()
    timers = SimTimers(clock)
    timers.after(5.0, RetryLink(2))
    timers.after(1.0, RetryLink(1))
    timers.after(1.0, RetryLink(3))
    assert timers.due() == []
    clock.advance(1.0)
    assert timers.due() == [RetryLink(1), RetryLink(3)]
    clock.advance(10.0)
    assert timers.due() == [RetryLink(2)]
    timers.after(1.0, RetryLink(4))
    timers.cancel_all()
    clock.advance(2.0)
    assert timers.due() == []


def test_a_run_speaks_to_the_link_and_applies_advice() -> None:
    # The figures are the last process's (a boot starts them again): a seed whose last
    # process runs long enough to hear sys-advisor.
    sim = Simulation(1, cpu_advisor=True)
    outcome = sim.run(400)
    assert not outcome.failures
    figures = sim.node.link_stats.read()
    assert figures["responses_forwarded"] > 0 and figures["applied"] > 0
