"""Fakes at the advisor link's edge: an AdvisorClient, a checkpoint probe, timers and a clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from actors.advisor_link import AdvisorLinkCore
from actors.ports.advisor import AdvisorRefused, AdvisorSick
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse
from policy.state.sections import State


class FakeStream:
    """A stream that yields ``responses`` and then ends with ``end`` (None: cleanly)."""

    def __init__(self, responses: list[AdvisorResponse], end: Exception | None) -> None:
        self.responses = responses
        self.end = end
        self.cancelled = False

    def __iter__(self) -> Iterator[AdvisorResponse]:
        for response in self.responses:
            if self.cancelled:
                return
            yield response
        if self.end is not None and not self.cancelled:
            raise self.end

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeAdvisor:
    """An AdvisorClient whose behaviour tests set; it records every call."""

    dial_sick: bool = False
    refuse: set[str] = field(default_factory=set)  # pod uids whose AddContainer is refused
    sick_on: set[str] = field(default_factory=set)  # pod uids whose AddContainer hangs
    streams: list[FakeStream] = field(default_factory=list)
    added: list[ContainerMetadata] = field(default_factory=list)
    closed: int = 0

    def connect(self, timeout_s: float) -> None:
        if self.dial_sick:
            raise AdvisorSick("dial", "TIMEOUT", f"no connection within {timeout_s} s")

    def add_container(self, metadata: ContainerMetadata, timeout_s: float) -> None:
        if metadata.pod_uid in self.sick_on:
            raise AdvisorSick("AddContainer", "DEADLINE_EXCEEDED", "Deadline Exceeded")
        if metadata.pod_uid in self.refuse:
            raise AdvisorRefused("AddContainer", "INVALID_ARGUMENT", "unknown qos level")
        self.added.append(metadata)

    def remove_pod(self, pod_uid: str, timeout_s: float) -> None:
        pass

    def list_and_watch(self) -> FakeStream:
        if self.streams:
            return self.streams.pop(0)
        return FakeStream([], None)

    def close(self) -> None:
        self.closed += 1


@dataclass
class FakeProbe:
    sick: bool = False

    def check(self, timeout_s: float) -> None:
        if self.sick:
            raise AdvisorSick("GetCheckpoint", "UNAVAILABLE", "connection refused")


@dataclass
class FakeTimers:
    """Records ``(due, message)``; tests deliver what is due by advancing the clock."""

    clock: FakeClock
    pending: list[tuple[float, Any]] = field(default_factory=list)

    def after(self, delay_s: float, message: Any) -> None:
        self.pending.append((self.clock.now + delay_s, message))

    def due(self) -> list[Any]:
        ready = sorted((p for p in self.pending if p[0] <= self.clock.now), key=lambda p: p[0])
        self.pending = [p for p in self.pending if p[0] > self.clock.now]
        return [m for _, m in ready]


@dataclass
class FakeClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Recorder:
    """A Teller that keeps what it was told."""

    told: list[Any] = field(default_factory=list)

    def tell(self, message: Any) -> None:
        self.told.append(message)


@dataclass
class LinkRig:
    """A core with every fake wired, and a mailbox the tests pump."""

    state: State
    advisor: FakeAdvisor = field(default_factory=FakeAdvisor)
    probe: FakeProbe = field(default_factory=FakeProbe)
    clock: FakeClock = field(default_factory=FakeClock)
    allocator: Recorder = field(default_factory=Recorder)
    mailbox: list[Any] = field(default_factory=list)
    readers: list[Callable[[], None]] = field(default_factory=list)
    enabled: bool = True

    def __post_init__(self) -> None:
        self.timers = FakeTimers(self.clock)
        self.core = AdvisorLinkCore(
            enabled=self.enabled,
            client=self.advisor,
            probe=self.probe,
            latest_state=lambda: self.state,
            allocator=self.allocator,
            timers=self.timers,
            spawn=self.readers.append,
            deliver=self.mailbox.append,
            monotonic=self.clock,
            call_timeout_s=2.0,
        )

    def pump(self) -> None:
        """Run the stream readers started so far, then every delivered message."""
        while self.readers or self.mailbox:
            while self.readers:
                self.readers.pop(0)()
            while self.mailbox:
                self.core.handle(self.mailbox.pop(0))

    def advance(self, seconds: float) -> None:
        """Move the clock and deliver the timers that came due."""
        self.clock.now += seconds
        for message in self.timers.due():
            self.core.handle(message)
        self.pump()
