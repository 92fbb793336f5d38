"""The Checkers (actors.checkers): the periodic handlers of cpu-policy §12 driven through
``CheckersCore`` with an injected clock, a fake pod source and cgroups, and the real
``AllocatorCore`` behind its ``RemoveResidualPods`` command; once through the pykka actor."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pykka
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.allocator import AllocatorCore
from actors.allocator_messages import Allocate, ResidualRemoval, StartPolicy
from actors.checkers import (
    CHECK_CPUSET,
    CLEAR_RESIDUAL_STATE,
    HEARTBEAT,
    SYNC_CPU_IDLE,
    CheckersActor,
    CheckersCore,
    CheckerSettings,
    CheckersPorts,
    CheckersView,
    CheckerTick,
    GetCheckersView,
    PodListFetched,
)
from actors.ports.cgroups import CpuIdleError, CpusetUnavailable
from actors.ports.pod_source import PodListing, PodListSnapshot
from policy.cpu.context import PolicyContext
from policy.cpu.residual_check import listing_fingerprint
from policy.state.sections import State, empty_state
from policy.topology.cpuset import CPUSet
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.decision_fixtures import request
from tests.topologies import SYNTH_16_2_4, cpus

CTX = PolicyContext(topology=SYNTH_16_2_4, reserved=cpus("0,2"))
T0 = 1715180645.0
PERIOD = 30.0


class DoneFuture:
    """A pykka future already holding the answer (the fake Allocator answers at once)."""

    def __init__(self, value: Any = None, error: Exception | None = None) -> None:
        self.value, self.error = value, error

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class PendingFuture:
    def get(self, timeout: float | None = None) -> Any:
        raise pykka.Timeout("not yet")


class SyncAllocator:
    """The real AllocatorCore, answering ``ask(block=False)`` with a finished future."""

    def __init__(self, core: AllocatorCore) -> None:
        self.core = core
        self.asked: list[Any] = []
        self.hold = False

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        assert block is False  # the Checkers never wait on the Allocator
        self.asked.append(message)
        if self.hold:
            return PendingFuture()
        return DoneFuture(self.core.handle(message))


@dataclass
class FakePods:
    snapshot: PodListSnapshot | None = None

    def latest(self) -> PodListSnapshot | None:
        return self.snapshot

    def list(self, at: float, *uids: str, ids: dict[str, str] | None = None) -> None:
        ids = ids or {}
        self.snapshot = PodListSnapshot.of(
            [PodListing(u, "default", u, "Running", {"app": ids.get(u, f"containerd://{u}")})
             for u in uids],
            at,
        )  # fmt: skip


@dataclass
class FakeCgroups:
    cpusets: dict[str, str] = field(default_factory=dict)
    idle: list[tuple[str, bool]] = field(default_factory=list)
    idle_supported: bool = True
    idle_error: str | None = None

    def cpuset(self, pod_uid: str, container_id: str) -> CPUSet:
        if container_id not in self.cpusets:
            raise CpusetUnavailable(f"no cgroup for {container_id}")
        return CPUSet.parse(self.cpusets[container_id])

    def set_idle(self, relative_path: str, idle: bool) -> bool:
        if self.idle_error:
            raise CpuIdleError(self.idle_error)
        if not self.idle_supported:
            return False
        self.idle.append((relative_path, idle))
        return True


class Node:
    """Checkers on a (16,2,4) node with pod-a and pod-b allocated (2 shared cores each)."""

    def __init__(self, settings: CheckerSettings | None = None) -> None:
        self.clock = FakeClock(T0)
        self.store = ApplyingCommitter(empty_state(SYNTH_16_2_4))
        self.allocator_core = AllocatorCore(self.store.latest(), CTX, self.store, self.clock.time)
        self.allocator_core.handle(StartPolicy())
        self.allocator_core.handle(Allocate(request("pod-a", cpu=2)))
        self.allocator_core.handle(Allocate(request("pod-b", cpu=2)))
        self.allocator = SyncAllocator(self.allocator_core)
        self.pods = FakePods()
        self.cgroups = FakeCgroups()
        self.reports: list[tuple[str, str | None]] = []
        self.fetch_error: str | None = None
        ports = CheckersPorts(
            pods=self.pods,
            state=self.state,
            allocator=self.allocator,
            cpusets=self.cgroups,
            report=lambda h, e: self.reports.append((h, e)),
            cpu_idle=self.cgroups,
            fetch_error=lambda: self.fetch_error,
        )
        self.core = CheckersCore(ports, CTX, settings or CheckerSettings())

    def state(self) -> State:
        return self.allocator_core.snapshot.state

    def residual_round(self, *listed: str, fetched: bool = True) -> str | None:
        """One residual round, ``PERIOD`` after the last; the kubelet lists ``listed``."""
        self.clock.advance(PERIOD)
        if fetched:
            self.pods.list(self.clock.time(), *listed)
        return self.core.run(CLEAR_RESIDUAL_STATE, self.clock.time())

    def has(self, pod: str) -> bool:
        return bool(self.state().cpu.pod_containers(pod))


def test_a_pod_the_kubelet_forgot_is_removed_exactly_at_the_tenth_sighting() -> None:
    node = Node()
    for _ in range(9):
        assert node.residual_round("pod-a") is None
        assert node.has("pod-b")
    node.residual_round("pod-a")  # the 10th sighting: one journaled removal
    assert not node.has("pod-b") and node.has("pod-a")
    cause = node.store.causes[-1]
    assert cause["rpc"] == "RemoveResidualPods"
    assert cause["pod_uids"] == ["pod-b"]
    # The evidence is the cause: the listing that last missed it and its sightings.
    assert cause["listing"] == {
        "fingerprint": listing_fingerprint({"pod-a"}),
        "pods": 1,
        "fetched_at": T0 + 10 * PERIOD,
    }
    assert cause["sightings"] == {
        "pod-b": {"first_at": T0 + PERIOD, "last_at": T0 + 10 * PERIOD, "count": 10}
    }
    assert len(node.allocator.asked) == 1  # only the round that made it due was sent
    assert node.store.replayed() == node.state()  # replayed state equals live state
    node.residual_round("pod-a")  # collects the answer
    view = node.core.handle(GetCheckersView())
    assert view is not None and view.residual_removed == 1


def test_the_removal_is_logged_in_words_and_utc_times_not_as_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = Node()
    for _ in range(10):
        node.residual_round("pod-a")
    with caplog.at_level("INFO", logger="qrmd.checkers"):
        node.residual_round("pod-a")  # collects the answer and logs it
    (line,) = [r.getMessage() for r in caplog.records if "residual pods removed" in r.getMessage()]
    assert line == (
        "residual pods removed: pod-b (missing from 10 pod listings in a row over 270.0 s, "
        "since 2024-05-08T15:04:35.000Z); last listing 2024-05-08T15:09:05.000Z: 1 pod, "
        f"fingerprint {listing_fingerprint({'pod-a'})}"
    )


def test_a_failed_fetch_between_sightings_neither_counts_nor_resets() -> None:
    node = Node()
    for _ in range(5):
        node.residual_round("pod-a")
    node.fetch_error = "GET http://localhost:10255/pods: HTTP 503"
    error = node.residual_round(fetched=False)  # kubelet down: no new listing
    assert error == "cannot list the node's pods: GET http://localhost:10255/pods: HTTP 503"
    node.fetch_error = None
    for _ in range(4):
        node.residual_round("pod-a")
    assert node.has("pod-b")  # nine counted sightings: not yet
    node.residual_round("pod-a")
    assert not node.has("pod-b")
    # The failed round sent nothing and counted nothing: one removal, ten sightings over the
    # eleven rounds, the first one's time kept.
    assert len(node.allocator.asked) == 1
    sighting = node.allocator.asked[0].evidence.sightings["pod-b"]
    assert (sighting.count, sighting.first_at) == (10, T0 + PERIOD)
    assert sighting.last_at == T0 + 11 * PERIOD


def test_an_empty_pod_list_removes_nothing_and_sends_nothing() -> None:
    node = Node()
    for _ in range(12):
        assert node.residual_round() is None
    assert node.has("pod-a") and node.has("pod-b") and node.allocator.asked == []


def test_no_pod_list_yet_is_not_ready() -> None:
    node = Node()
    node.fetch_error = "connection refused"
    failed = "cannot list the node's pods: connection refused"
    assert node.core.run(CLEAR_RESIDUAL_STATE, T0) == failed
    assert node.reports == [(CLEAR_RESIDUAL_STATE, failed)]
    node.fetch_error = None
    assert node.core.run(CLEAR_RESIDUAL_STATE, T0) == "no pod list yet"


def test_a_round_whose_own_fetch_failed_does_not_count_an_older_listing() -> None:
    """Fetches every 10 s, residual rounds every 30 s: the listing of 20 s is not counted by
    the round at 30 s whose fetch failed (it is not that round's listing)."""
    node = Node()
    node.residual_round("pod-a")
    node.pods.list(node.clock.time() + 20, "pod-a")  # a good fetch between two rounds
    node.fetch_error = "HTTP 503"
    assert node.residual_round(fetched=False) == "cannot list the node's pods: HTTP 503"
    assert node.allocator.asked == []  # nothing due yet, nothing sent
    view = node.core.handle(GetCheckersView())
    assert view is not None and view.residual.sightings["pod-b"].count == 1


def test_a_round_not_answered_yet_holds_back_the_next() -> None:
    node = Node(CheckerSettings(residual_sightings=1))
    node.allocator.hold = True
    node.residual_round("pod-a")
    error = node.residual_round("pod-a")
    assert error == "the previous residual round is still with the Allocator"
    assert len(node.allocator.asked) == 1


def test_an_allocator_that_refused_the_round_is_reported() -> None:
    node = Node(CheckerSettings(residual_sightings=1))

    class Refusing(SyncAllocator):
        def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
            return DoneFuture(error=RuntimeError("allocator restarting"))

    node.core._ports = CheckersPorts(  # swap one port for this case
        node.pods,
        node.state,
        Refusing(node.allocator_core),
        node.cgroups,
        lambda h, e: node.reports.append((h, e)),
    )
    node.residual_round("pod-a")
    error = node.residual_round("pod-a")
    assert error is not None and "did not take the residual round: allocator restarting" in error


def test_a_pod_the_allocator_kept_is_sent_again_at_the_next_round() -> None:
    """sys-advisor refused its removal (§12.4 step 4): the Allocator kept it; the checker's
    count goes on, so the next round's evidence calls it due again."""
    node = Node(CheckerSettings(residual_sightings=2))

    class KeepingOnce(SyncAllocator):
        def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
            self.asked.append(message)
            if len(self.asked) == 1:
                return DoneFuture(ResidualRemoval((), (), kept=("pod-b",)))
            return DoneFuture(self.core.handle(message))

    keeping = KeepingOnce(node.allocator_core)
    node.core._ports = replace(node.core._ports, allocator=keeping)  # swap one port
    node.residual_round("pod-a")
    node.residual_round("pod-a")  # due: the Allocator keeps it
    assert node.has("pod-b") and len(keeping.asked) == 1
    assert node.residual_round("pod-a") is None  # collects "kept", sends it again
    assert [m.evidence.due for m in keeping.asked] == [("pod-b",), ("pod-b",)]
    assert keeping.asked[1].evidence.sightings["pod-b"].count == 3
    assert not node.has("pod-b")


# -- checkCPUSet -------------------------------------------------------------------------------


def _cpuset_node() -> Node:
    node = Node()
    node.allocator_core.handle(
        Allocate(request("pod-d", cpu=2, qos="dedicated_cores", numa_binding=True, hint=(3,)))
    )
    return node


def test_check_cpuset_reports_drift_and_every_unreadable_container() -> None:
    node = _cpuset_node()
    dedicated = node.state().cpu.allocation_info("pod-d", "app")
    assert dedicated is not None
    want = str(dedicated.original_allocation_result)
    shared = str(node.state().cpu.pooled_cpus(CTX.reserved))
    node.pods.list(T0, "pod-a", "pod-b", "pod-d")
    node.cgroups.cpusets = {
        "containerd://pod-a": shared,
        "containerd://pod-b": shared,
        "containerd://pod-d": want,
    }
    assert node.core.run(CHECK_CPUSET, T0) is None
    node.cgroups.cpusets["containerd://pod-d"] = "15"
    error = node.core.run(CHECK_CPUSET, T0 + 10)
    assert error == f"invalid cpuset exists: default/name-pod-d/app has 15, allocated {want}"
    del node.cgroups.cpusets["containerd://pod-a"]
    del node.cgroups.cpusets["containerd://pod-b"]
    error = node.core.run(CHECK_CPUSET, T0 + 20)
    assert error is not None and error.startswith("2 containers' cpusets unreadable")
    assert "pod-a/app" in error and "pod-b/app" in error  # not only the last one
    view = node.core.handle(GetCheckersView())
    assert view is not None and view.cpuset is not None and len(view.cpuset.unreadable) == 2


def test_check_cpuset_of_a_pod_the_source_does_not_list() -> None:
    node = _cpuset_node()
    node.pods.list(T0, "pod-a")
    error = node.core.run(CHECK_CPUSET, T0)
    assert error is not None and "the pod source does not list the pod" in error


# -- syncCPUIdle and the heartbeat --------------------------------------------------------------


@pytest.mark.parametrize(
    ("enable", "supported", "failure", "want_error", "written"),
    [
        pytest.param(True, True, None, None, [("/kubepods/besteffort", True)],
                     id="enable-cpu-idle writes 1 into the reclaim cgroup"),
        pytest.param(False, True, None, None, [("/kubepods/besteffort", False)],
                     id="without enable-cpu-idle it writes 0"),
        pytest.param(True, False, None, None, [],
                     id="a kernel without cpu.idle is only a warning"),
        pytest.param(True, True, "cannot write cpu.idle: EPERM", "cannot write cpu.idle: EPERM",
                     [], id="a failed write is not ready"),
    ],
)  # fmt: skip
def test_sync_cpu_idle(
    enable: bool,
    supported: bool,
    failure: str | None,
    want_error: str | None,
    written: list[tuple[str, bool]],
) -> None:
    node = Node(CheckerSettings(sync_cpu_idle=True, enable_cpu_idle=enable))
    node.cgroups.idle_supported, node.cgroups.idle_error = supported, failure
    assert node.core.run(SYNC_CPU_IDLE, T0) == want_error
    assert node.cgroups.idle == written


def test_the_heartbeat_is_recorded_and_never_reported_as_a_check() -> None:
    node = Node()
    node.core.run(HEARTBEAT, T0 + 5)
    view = node.core.handle(GetCheckersView())
    assert view is not None and view.heartbeat_at == T0 + 5 and node.reports == []


def test_an_unknown_handler_is_refused() -> None:
    with pytest.raises(ValueError, match="no periodic handler 'gc'"):
        Node().core.run("gc", T0)


def test_a_handler_that_raises_is_not_ready_and_the_actor_keeps_running() -> None:
    node = Node()

    def broken() -> State:
        raise KeyError("state")

    node.core._ports = CheckersPorts(
        node.pods, broken, node.allocator, node.cgroups, lambda h, e: node.reports.append((h, e))
    )
    node.pods.list(T0, "pod-a")
    actor = CheckersActor.start(node.core)
    try:
        actor.tell(CheckerTick(CLEAR_RESIDUAL_STATE, T0))
        view = actor.ask(GetCheckersView(), timeout=5)
        assert isinstance(view, CheckersView)
        assert dict(view.errors)[CLEAR_RESIDUAL_STATE] == "KeyError: 'state'"
    finally:
        actor.stop()


# -- the pod handlers run on the fetches -------------------------------------------------------


def test_each_fetch_runs_the_pod_handlers_whose_period_has_passed() -> None:
    node = Node(CheckerSettings(residual_period_s=30.0, cpuset_period_s=10.0))
    ran = []
    for n in range(7):  # fetches every 10 s, the first at once
        now = T0 + 10 * n + (0.3 if n % 2 else -0.3)  # ticker jitter either way
        node.pods.list(now, "pod-a", "pod-b")
        ran.append(node.core.run_due(now))
    both, cpuset = (CLEAR_RESIDUAL_STATE, CHECK_CPUSET), (CHECK_CPUSET,)
    assert ran == [both, cpuset, cpuset, both, cpuset, cpuset, both]


def test_a_fetch_message_runs_the_handlers_through_the_dispatch() -> None:
    node = Node()
    node.pods.list(T0, "pod-a")
    assert node.core.handle(PodListFetched(T0)) is None
    assert [h for h, _ in node.reports] == [CLEAR_RESIDUAL_STATE, CHECK_CPUSET]


# -- the checker's count and the Allocator's stay in step ---------------------------------------

_ROUND = st.none() | st.frozensets(st.sampled_from(["pod-a", "pod-b", "other"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ROUND, min_size=1, max_size=14), st.integers(1, 4))
def test_the_allocator_removes_exactly_what_the_checkers_evidence_says_is_due(
    rounds: list[frozenset[str] | None], sightings: int
) -> None:
    """Each round the fetch fails (None) or lists some pods; whatever the sequence, a pod goes
    from the state exactly in the round the checker's evidence calls it due, and the journal
    replays to the live state."""
    node = Node(CheckerSettings(residual_sightings=sightings))
    node.allocator_core.ctx = replace(CTX, residual_sightings=sightings)
    removed: set[str] = set()
    for listed in rounds:
        node.fetch_error = None if listed is not None else "HTTP 503"
        node.residual_round(*(listed or ()), fetched=listed is not None)
        view = node.core.handle(GetCheckersView())
        assert view is not None
        if view.residual.counted:
            removed |= set(view.residual.due)
        held = {p for p in ("pod-a", "pod-b") if node.has(p)}
        assert held == {"pod-a", "pod-b"} - removed
    assert node.store.replayed() == node.state()
