"""The AdvisorLink at Katalyst v0.5.47: GetAdvice polled over a real unix socket, falling back
to the push and ListAndWatch when the advisor answers UNIMPLEMENTED (``policy_advisor_handler.go``
:377-419 and ``policy.go``:426-458 at tag v0.5.47). The real gRPC client talks to a real
``CPUAdvisorServer``; the link's timers and clock are the fakes of ``advisor_fakes``."""

from __future__ import annotations

import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from actors.advisor_link import AdvisorLinkCore
from actors.advisor_messages import AdvisorLinkChanged, ApplyAdvice, PollAdvice, StartLink, StopLink
from policy.cpu.advisor.advice import AdviceReply, AdviceRequest
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from policy.state.entries import InPool
from policy.state.events import PoolSet
from tests.actors.advisor_fakes import FakeClock, FakeProbe, FakeTimers, Recorder
from tests.policy.pool_fixtures import cpus, dedicated, fresh_state, reclaimed, shared, with_events
from wire.advisor_client import GrpcAdvisorClient
from wire.advisor_server import AdvisorStatus, CPUAdvisorServer

STATE = with_events(
    fresh_state(),
    dedicated("pod-d", "4-5"),
    PoolSet("share", cpus("6-7")),
    shared("pod-a", InPool("share"), quantity=1.5),
    reclaimed("pod-r"),
)
#: The headroom of the reference's RNB hint cases (policy_test.go:3083 at tag v0.5.47).
ADVICE = AdvisorResponse(
    {"share": {}},
    numa_headroom={0: 2.0, 1: 1.0, 2: 2.5, 3: 3.0},
    numa_headroom_sent=True,
)
INTERVAL_S = 5.0
#: What the Allocator is given: the answer with what its request asked (no SNB entry here).
APPLIED = replace(ADVICE, asked_snb_entries=frozenset())

Reply = AdviceReply | AdvisorStatus


@dataclass
class Advisor:
    """A sys-advisor that records what it is asked; ``replies`` are answered in turn, then
    ``ADVICE`` every time."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[AdviceRequest] = field(default_factory=list)
    added: list[ContainerMetadata] = field(default_factory=list)
    streams: int = 0

    def add_container(self, metadata: ContainerMetadata) -> None:
        self.added.append(metadata)

    def remove_pod(self, pod_uid: str) -> None:
        del pod_uid

    def list_and_watch(self, is_active: Callable[[], bool]) -> Iterator[AdvisorResponse]:
        self.streams += 1
        yield AdvisorResponse({"share": {}})

    def get_advice(self, request: AdviceRequest) -> AdviceReply:
        self.requests.append(request)
        reply = self.replies.popleft() if self.replies else AdviceReply(ADVICE)
        if isinstance(reply, AdvisorStatus):
            raise reply
        return reply


class Rig:
    """A link whose client is real, against an advisor served on a unix socket."""

    def __init__(self, directory: str, *, serves_get_advice: bool) -> None:
        socket_path = str(Path(directory) / "cpu_advisor.sock")
        self.advisor = Advisor()
        self.server = CPUAdvisorServer(
            socket_path, self.advisor, advice=self.advisor if serves_get_advice else None
        )
        self.server.start()
        self.client = GrpcAdvisorClient(socket_path, at_v0_5_47=True)
        self.clock = FakeClock()
        self.timers = FakeTimers(self.clock)
        self.allocator = Recorder()
        self.readers: list[Callable[[], None]] = []
        self.mailbox: list[Any] = []
        self.core = AdvisorLinkCore(
            enabled=True,
            client=self.client,
            probe=FakeProbe(),
            latest_state=lambda: STATE,
            allocator=self.allocator,
            timers=self.timers,
            spawn=self.readers.append,
            deliver=self.mailbox.append,
            monotonic=self.clock,
            call_timeout_s=5.0,
            advice=self.client,
            advice_interval_s=INTERVAL_S,
        )

    def advance(self, seconds: float) -> None:
        self.clock.now += seconds
        for message in self.timers.due():
            self.core.handle(message)

    def applied(self) -> list[AdvisorResponse]:
        return [m.response for m in self.allocator.told if isinstance(m, ApplyAdvice)]

    def states(self) -> list[str]:
        return [m.state for m in self.allocator.told if isinstance(m, AdvisorLinkChanged)]

    def close(self) -> None:
        self.core.handle(StopLink())
        self.client.close()
        self.server.stop()


@pytest.fixture
def directory() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="qadv", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def rig(directory: str) -> Iterator[Rig]:
    r = Rig(directory, serves_get_advice=True)
    yield r
    r.close()


@pytest.fixture
def v053_advisor(directory: str) -> Iterator[Rig]:
    r = Rig(directory, serves_get_advice=False)
    yield r
    r.close()


def test_a_v0547_advisor_is_asked_at_once_then_every_interval_without_a_push(rig: Rig):
    rig.core.handle(StartLink())
    assert rig.states() == ["dialing", "syncing", "watching"]
    assert len(rig.advisor.requests) == 1 and rig.advisor.added == []
    assert rig.applied() == [APPLIED]  # the NUMA headroom crossed the wire in extra_entries
    rig.advance(INTERVAL_S - 0.1)
    assert len(rig.advisor.requests) == 1
    rig.advance(0.1)
    rig.advance(INTERVAL_S)
    assert len(rig.advisor.requests) == 3 and rig.applied() == [APPLIED] * 3
    assert rig.advisor.streams == 0 and rig.readers == []


def test_the_request_carries_every_entry_with_v0547_metadata(rig: Rig):
    rig.core.handle(StartLink())
    request = rig.advisor.requests[0]
    assert sorted(request.entries) == ["pod-a", "pod-d", "pod-r", "reclaim", "reserve", "share"]
    main = request.entries["pod-a"]["c"].metadata
    assert (main.request_quantity, main.request_milli_quantity, main.use_milli_quantity) == (
        1,
        1500,
        True,
    )
    assert request.entries["pod-r"]["c"].allocation.topology_aware_assignments is not None
    assert request.entries["pod-a"]["c"].allocation.topology_aware_assignments is None
    assert request.wanted_feature_gates == {}


def test_a_failed_getadvice_is_logged_and_the_next_poll_still_comes(rig: Rig):
    rig.advisor.replies.append(AdvisorStatus("INTERNAL", "calculation not ready"))
    rig.core.handle(StartLink())
    assert rig.core.state == "watching" and rig.applied() == []
    assert "calculation not ready" in rig.core.status().last_error
    rig.advance(INTERVAL_S)
    assert rig.applied() == [APPLIED]


def test_an_advisor_without_getadvice_gets_the_push_and_listandwatch(v053_advisor: Rig):
    # TestSwitchBetweenAPIs, "switch from ListAndWatch to GetAdvice" (policy_test.go:7636 at
    # tag v0.5.47): GetAdvice answered Unimplemented, then ListAndWatch.
    rig = v053_advisor
    rig.core.handle(StartLink())
    assert rig.states() == ["dialing", "syncing", "watching"]
    assert [m.pod_uid for m in rig.advisor.added] == ["pod-a", "pod-d", "pod-r"]
    assert {m.use_milli_quantity for m in rig.advisor.added} == {True}
    assert len(rig.readers) == 1  # the ListAndWatch reader
    rig.advance(60.0)
    assert not any(isinstance(m, PollAdvice) for m in rig.timers.due())


def test_an_advisor_downgraded_while_polled_falls_back_after_the_backoff(rig: Rig):
    # TestSwitchBetweenAPIs, "switch from GetAdvice to ListAndWatch" (policy_test.go:7688 at
    # tag v0.5.47): Unimplemented while polling, then ListAndWatch.
    rig.core.handle(StartLink())
    rig.advisor.replies.append(AdvisorStatus("UNIMPLEMENTED", "GetAdvice not implemented"))
    rig.advisor.replies.append(AdvisorStatus("UNIMPLEMENTED", "GetAdvice not implemented"))
    rig.advance(INTERVAL_S)
    assert rig.core.state == "backing_off"
    rig.advance(0.8)
    assert rig.core.state == "watching" and len(rig.readers) == 1
    assert [m.pod_uid for m in rig.advisor.added] == ["pod-a", "pod-d", "pod-r"]


def test_an_advisor_upgraded_after_its_stream_ended_is_polled_on_the_next_attempt(
    v053_advisor: Rig,
):
    # TestSwitchBetweenAPIs, "switch from ListAndWatch to GetAdvice": the next attempt after
    # a broken stream asks GetAdvice first.
    rig = v053_advisor
    rig.core.handle(StartLink())
    rig.readers.pop()()  # the stream delivers its response, then ends
    for message in rig.mailbox:
        rig.core.handle(message)
    assert rig.core.state == "backing_off"
    rig.server.stop()
    rig.server = CPUAdvisorServer(str(rig.server.path), rig.advisor, advice=rig.advisor)
    rig.server.start()
    rig.advance(0.8)
    assert rig.core.state == "watching" and rig.applied()[-1] == APPLIED
    assert len(rig.advisor.requests) == 1
