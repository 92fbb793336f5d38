"""The AdvisorLink core with a fake advisor, fake timers and an injected clock (§11.2–§11.5)."""

from __future__ import annotations

from actors.advisor_messages import (
    AdvisorLinkChanged,
    ApplyAdvice,
    GetLinkStatus,
    ReportSickAdvisor,
    StartLink,
    StopLink,
)
from actors.ports.advisor import AdvisorSick
from policy.cpu.advisor.response import AdvisorResponse
from policy.state.entries import InPool
from policy.state.events import PoolSet
from tests.actors.advisor_fakes import FakeStream, LinkRig
from tests.policy.pool_fixtures import cpus, fresh_state, reclaimed, shared, with_events

STATE = with_events(
    fresh_state(),
    PoolSet("share", cpus("4-7")),
    shared("pod-a", InPool("share")),
    shared("pod-b", InPool("share")),
    reclaimed("pod-c"),
)
R1 = AdvisorResponse({"share": {}})
R2 = AdvisorResponse({"reclaim": {}})


def sick_stream() -> AdvisorSick:
    return AdvisorSick("ListAndWatch", "UNAVAILABLE", "Socket closed")


def started(rig: LinkRig) -> LinkRig:
    rig.core.handle(StartLink())
    rig.pump()
    return rig


def states(rig: LinkRig) -> list[str]:
    return [m.state for m in rig.allocator.told if isinstance(m, AdvisorLinkChanged)]


def test_connect_pushes_every_container_then_forwards_each_response_in_order():
    rig = LinkRig(STATE)
    rig.advisor.streams.append(FakeStream([R1, R2], None))
    rig.core.handle(StartLink())
    assert [m.pod_uid for m in rig.advisor.added] == ["pod-a", "pod-b", "pod-c"]
    assert rig.core.state == "watching"
    rig.readers.pop(0)()  # the reader delivers both, then the clean end
    for message in list(rig.mailbox[:2]):
        rig.core.handle(message)
    forwarded = [m.response for m in rig.allocator.told if isinstance(m, ApplyAdvice)]
    assert forwarded == [R1, R2]
    assert states(rig) == ["dialing", "syncing", "watching"]


def test_a_refused_container_is_skipped_and_the_push_goes_on():
    rig = LinkRig(STATE)
    rig.advisor.refuse.add("pod-b")
    started(rig)
    assert [m.pod_uid for m in rig.advisor.added] == ["pod-a", "pod-c"]
    assert rig.core.status().push_refused == 1


def test_a_sick_advisor_during_the_push_backs_off_and_the_retry_pushes_again():
    rig = LinkRig(STATE)
    rig.advisor.sick_on.add("pod-b")
    started(rig)
    assert rig.core.state == "backing_off"
    assert "sync pod: default/name-pod-b, container: c to cpu advisor failed" in (
        rig.core.status().last_error
    )
    rig.advisor.sick_on.clear()
    rig.advisor.added.clear()
    rig.advance(0.7)
    assert rig.core.state == "backing_off"
    rig.advance(0.1)
    assert [m.pod_uid for m in rig.advisor.added] == ["pod-a", "pod-b", "pod-c"]


def test_reconnect_after_a_broken_stream_re_pushes_every_container():
    rig = LinkRig(STATE)
    rig.advisor.streams.append(FakeStream([R1], sick_stream()))
    started(rig)
    assert rig.core.state == "backing_off"
    assert rig.core.status().stream_failures == 1
    assert rig.core.status().last_error == (
        "receive ListAndWatch response of CPUAdvisorServer failed with error: Socket closed, "
        "grpc code: UNAVAILABLE"
    )
    rig.advisor.added.clear()
    rig.advisor.streams.append(FakeStream([], None))
    rig.advance(0.8)
    assert len(rig.advisor.added) == 3


def test_the_backoff_doubles_over_failed_dials_and_resets_after_two_minutes():
    rig = LinkRig(STATE)
    rig.advisor.dial_sick = True
    started(rig)
    retries = []
    for _ in range(7):
        due, _message = rig.timers.pending[-1]
        retries.append(round(due - rig.clock.now, 3))
        rig.advance(due - rig.clock.now)
    assert retries == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    rig.clock.now += 121  # a long quiet spell (as if the retry timer were late)
    rig.advance(0)
    due, _ = rig.timers.pending[-1]
    assert round(due - rig.clock.now, 3) == 0.8


def test_a_failing_self_dial_is_a_failed_dial():
    rig = LinkRig(STATE)
    rig.probe.sick = True
    started(rig)
    assert rig.core.state == "backing_off"
    assert rig.advisor.added == []
    assert "GetCheckpoint" in rig.core.status().last_error


def test_a_sick_advisor_reported_by_the_allocator_ends_the_watch():
    rig = LinkRig(STATE)
    stream = FakeStream([], None)
    rig.advisor.streams.append(stream)
    rig.core.handle(StartLink())
    rig.core.handle(ReportSickAdvisor("AddContainer: DEADLINE_EXCEEDED"))
    assert rig.core.state == "backing_off" and stream.cancelled
    rig.pump()  # the cancelled stream's end is stale: ignored
    assert rig.core.status().stream_failures == 0


def test_the_stuck_monitor_first_checks_one_period_after_the_stream_opens():
    rig = LinkRig(STATE)
    rig.advisor.streams.append(FakeStream([], None))
    rig.core.handle(StartLink())
    rig.readers.clear()  # the reader never delivers: a stalled stream
    rig.advance(29.9)
    assert rig.core.status().recv_stuck_checks == 0
    rig.advance(0.1)
    assert rig.core.status().recv_stuck_checks == 1
    rig.advance(30.0)
    assert rig.core.status().recv_stuck_checks == 2


def test_stop_disables_the_link_and_closes_the_connection():
    rig = LinkRig(STATE)
    rig.advisor.streams.append(FakeStream([], None))
    rig.core.handle(StartLink())
    rig.core.handle(StopLink())
    assert rig.core.state == "disabled" and rig.advisor.closed == 1
    assert rig.core.handle(GetLinkStatus()).state == "disabled"


def test_a_disabled_link_never_dials():
    rig = LinkRig(STATE, enabled=False)
    started(rig)
    assert rig.core.state == "disabled" and rig.advisor.added == []
