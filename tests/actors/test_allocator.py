"""The Allocator (actors.allocator): decide on the durable state, commit, adopt, reply.

Driven through ``AllocatorCore`` with an in-memory committer, and a few times through the real
pykka actor. Worked values: spec cpu-policy §16 on ``synthetic:cpus=16,sockets=2,numas=4``
with reserve ``0,2`` (start-up §6.2, shared ramp-up §7.3/§9.6, §15.6's pre-adjustment reply).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import msgpack
import pykka
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.allocator import AllocatorActor, AllocatorCore, pod_phase
from actors.allocator_messages import (
    Allocate,
    AllocatorCommand,
    AllocatorUnavailable,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PreStartContainer,
    RemovePod,
    RemoveResidualPods,
    ResidualRemoval,
    StartPolicy,
)
from actors.store_messages import Snapshot
from policy.cpu.cause import cause_of, plain
from policy.cpu.commands import PodPhase
from policy.cpu.context import PolicyContext
from policy.cpu.errors import UnknownContainerError
from policy.cpu.replies import AllocationReply, PluginOptions
from policy.cpu.request import RequestError
from policy.cpu.residual_check import listing_fingerprint
from policy.errors import PolicyError
from policy.state.sections import empty_state
from tests.actors.fakes import ApplyingCommitter, FakeClock, FakePodSource
from tests.policy.cpu.residual_fixtures import evidence
from tests.policy.decision_fixtures import dedicated, request
from tests.topologies import SYNTH_16_2_4, cpus

CTX = PolicyContext(topology=SYNTH_16_2_4, reserved=cpus("0,2"))
T0 = 1715180645.0  # any fixed instant


class Node:
    """An AllocatorCore on a fresh (16,2,4) node, with its committer and clock."""

    def __init__(self, start: bool = True) -> None:
        self.clock = FakeClock(T0)
        self.store = ApplyingCommitter(empty_state(SYNTH_16_2_4))
        self.core = AllocatorCore(self.store.latest(), CTX, self.store, self.clock.time)
        if start:
            self.core.handle(StartPolicy())

    def pools(self) -> dict[str, str]:
        return {name: str(c) for name, c in self.core.snapshot.state.cpu.pools.items()}

    def cpuset(self, reply: AllocationReply) -> str:
        assert reply.allocation is not None
        return reply.allocation.allocation_result

    def listed(self, pod: str, container: str = "app") -> str:
        listing = self.core.handle(GetResourcesAllocation())
        return str(listing.pod_resources[pod][container].allocation_result)


def rpcs(store: ApplyingCommitter) -> list[str]:
    return [cause["rpc"] for cause in store.causes]


# -- the spec's example flow -------------------------------------------------------------------


def test_spec_example_flow_start_allocate_ramp_up_ends() -> None:
    node = Node()
    # §16 item 5: start-up makes reserve and reclaim
    assert node.pools() == {"reserve": "0,2", "reclaim": "1,3,9,11"}
    # §16 items 11-12: the first shared container ramps up on every pooled CPU
    reply = node.core.handle(Allocate(request("pod-a", cpu=2)))
    assert node.cpuset(reply) == "1,3-15"
    assert node.listed("pod-a") == "1,3-15"  # within the transition period: still ramping up
    node.clock.advance(31)
    # §16 item 18: ramp-up ends here; the reply is the pre-adjustment cpuset (§15.6) ...
    assert node.listed("pod-a") == "1,3-15"
    assert node.pools() == {"reserve": "0,2", "reclaim": "7-8,10,15", "share": "1,3-6,9,11-14"}
    # ... and the next call reports the pool
    assert node.listed("pod-a") == "1,3-6,9,11-14"
    assert rpcs(node.store) == ["StartPolicy", "Allocate", "GetResourcesAllocation"]
    assert node.core.snapshot == node.store.snapshot and node.core.snapshot.seq == 3
    assert node.store.replayed() == node.core.snapshot.state


def test_start_policy_again_commits_nothing() -> None:
    node = Node()
    snapshot = node.core.snapshot
    assert node.core.handle(StartPolicy()) is None
    assert node.core.snapshot is snapshot and rpcs(node.store) == ["StartPolicy"]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(GetTopologyHints(dedicated("pod-d", cpu=2)), id="hints"),
        pytest.param(GetTopologyAwareResources("pod-a", "app"), id="topology-aware resources"),
        pytest.param(GetTopologyAwareAllocatableResources(), id="allocatable resources"),
        pytest.param(GetResourcePluginOptions(), id="plugin options"),
        pytest.param(PreStartContainer("pod-a", "default", "name-pod-a", "app"), id="pre-start"),
        pytest.param(GetResourcesAllocation(), id="allocation listing with nothing to settle"),
    ],
)
def test_read_only_commands_commit_nothing(command: AllocatorCommand) -> None:
    node = Node()
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    before = node.core.snapshot
    node.core.handle(command)
    assert node.core.snapshot is before
    assert rpcs(node.store) == ["StartPolicy", "Allocate"]


def test_read_only_replies_come_from_the_policy() -> None:
    node = Node()
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    aware = node.core.handle(GetTopologyAwareResources("pod-a", "app"))
    assert aware.resource.aggregated_quantity == 14  # §16 item 21
    allocatable = node.core.handle(GetTopologyAwareAllocatableResources())
    assert allocatable.resource.aggregated_allocatable_quantity == 14  # §16 item 22
    assert node.core.handle(GetResourcePluginOptions()) == PluginOptions(False, True, True)
    hints = node.core.handle(GetTopologyHints(dedicated("pod-d", cpu=2)))
    assert hints.hints  # some NUMA set still fits 2 dedicated CPUs


def test_remove_pod_commits_and_resizes_pools() -> None:
    node = Node()
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    node.clock.advance(31)
    node.listed("pod-a")
    assert node.core.handle(RemovePod("pod-a")) is None
    assert node.core.snapshot.state.cpu.entry("pod-a", "app") is None
    assert node.pools() == {"reserve": "0,2", "reclaim": "1,3-15"}
    assert rpcs(node.store)[-1] == "RemovePod"
    assert node.store.replayed() == node.core.snapshot.state


# -- errors ------------------------------------------------------------------------------------


def test_refused_commit_is_unavailable_and_changes_nothing_then_the_retry_succeeds() -> None:
    node = Node()
    before = node.core.snapshot
    node.store.refuse_next("disk full")
    with pytest.raises(AllocatorUnavailable, match=r"Allocate not committed \(\d+ events\): disk"):
        node.core.handle(Allocate(request("pod-a", cpu=2)))
    assert node.core.snapshot is before
    assert node.core.snapshot.state.cpu.entry("pod-a", "app") is None
    # kubelet retries: the same call now succeeds
    assert node.cpuset(node.core.handle(Allocate(request("pod-a", cpu=2)))) == "1,3-15"
    assert node.store.replayed() == node.core.snapshot.state


def test_unanswered_commit_makes_the_next_command_reread_the_durable_state() -> None:
    node = Node()
    node.store.apply_next_silently()  # the store applied it but the answer never came
    with pytest.raises(AllocatorUnavailable, match="unconfirmed"):
        node.core.handle(Allocate(request("pod-a", cpu=2)))
    assert node.core.snapshot.state.cpu.entry("pod-a", "app") is None
    # the next decision is taken on what the disk holds: pod-a is there, so a listing sees it
    assert node.listed("pod-a") == "1,3-15"
    assert node.core.snapshot == node.store.snapshot


@pytest.mark.parametrize(
    ("command", "error", "message"),
    [
        pytest.param(
            GetTopologyAwareResources("pod-a", "nope"),
            UnknownContainerError,
            "pod: pod-a, container: nope",
            id="query about an unknown container is NOT_FOUND",
        ),
        pytest.param(
            Allocate(request("pod-b", resource_requests={})),
            RequestError,
            "invalid req.ResourceRequests length: 0",
            id="allocate without resource requests",
        ),
        pytest.param(
            GetTopologyHints(request("pod-b", cpu=-1)),
            RequestError,
            "-1",
            id="hints for a negative request",
        ),
    ],
)
def test_policy_errors_propagate_and_commit_nothing(
    command: AllocatorCommand, error: type[Exception], message: str
) -> None:
    node = Node()
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    before = node.core.snapshot
    with pytest.raises(error, match=message):
        node.core.handle(command)
    assert node.core.snapshot is before


def test_unknown_command_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="the Allocator has no command str"):
        Node().core.handle("Allocate")  # type: ignore[arg-type]


# -- residual pods (§12.4, §16 item 30) --------------------------------------------------------


def test_the_due_pods_of_the_evidence_are_removed_in_one_decision_journaled_with_it() -> None:
    node = Node()
    node.core.handle(Allocate(request("pod-a", cpu=2)))
    node.core.handle(Allocate(request("pod-b", cpu=2)))
    node.clock.advance(300)
    proof = evidence("pod-b", at=T0 + 299, missing=("pod-c",))
    assert node.core.handle(RemoveResidualPods(proof)) == ResidualRemoval(("pod-b",), ())
    assert node.core.snapshot.state.cpu.entry("pod-b", "app") is None
    assert node.store.causes[-1] == {
        "rpc": "RemoveResidualPods",
        "cause_version": 3,
        "now": T0 + 300,
        "pod_uids": ["pod-b"],
        "listing": {
            "fingerprint": listing_fingerprint({"pod-a"}),
            "pods": 1,
            "fetched_at": T0 + 299,
        },
        "sightings": {
            "pod-b": {"first_at": T0 + 29, "last_at": T0 + 299, "count": 10},
            "pod-c": {"first_at": T0 + 299, "last_at": T0 + 299, "count": 1},
        },
        "advisor_refused": [],
    }
    assert node.store.replayed() == node.core.snapshot.state


def test_the_allocator_keeps_no_count_of_its_own() -> None:
    """Nine rounds of evidence with nothing due remove nothing; the Allocator decides on the
    evidence alone, so evidence that calls a pod due at its first sighting removes it."""
    node = Node()
    node.core.handle(Allocate(request("pod-b", cpu=2)))
    for _ in range(9):
        node.clock.advance(30)
        proof = evidence(at=node.clock.time(), missing=("pod-b",))
        assert node.core.handle(RemoveResidualPods(proof)) == ResidualRemoval((), ())
    proof = evidence("pod-b", at=node.clock.time(), count=1)
    assert node.core.handle(RemoveResidualPods(proof)).removed == ("pod-b",)


def test_a_due_pod_the_state_no_longer_holds_commits_nothing() -> None:
    node = Node()
    node.core.handle(Allocate(request("pod-b", cpu=2)))
    node.core.handle(RemovePod("pod-b"))  # kubelet removed it after the listing
    before = node.core.snapshot
    assert node.core.handle(RemoveResidualPods(evidence("pod-b", at=T0))) == ResidualRemoval((), ())
    assert node.core.snapshot is before


# -- the cause of a commit ---------------------------------------------------------------------


def test_allocate_cause_names_the_rpc_and_every_request_field() -> None:
    cause = cause_of(Allocate(dedicated("pod-d", cpu=2, hint=(1,))), T0)
    assert cause["rpc"] == "Allocate" and cause["now"] == T0
    req = cause["request"]
    assert req["pod_uid"] == "pod-d" and req["container_type"] == "MAIN"
    assert req["resource_requests"] == {"cpu": 2}
    assert req["hint"] == {"nodes": [1], "preferred": True}
    assert msgpack.unpackb(msgpack.packb(cause)) == cause


@pytest.mark.parametrize(
    ("command", "want"),
    [
        pytest.param(RemovePod("pod-a"), {"pod_uid": "pod-a"}, id="removal"),
        pytest.param(GetResourcesAllocation(), {}, id="listing"),
        pytest.param(StartPolicy(), {}, id="start-up"),
    ],
)
def test_cause_of(command: AllocatorCommand, want: dict[str, object]) -> None:
    cause = cause_of(command, T0)
    assert cause == {"rpc": type(command).__name__, "cause_version": 3, "now": T0, **want}
    assert msgpack.unpackb(msgpack.packb(cause)) == cause


def test_a_set_in_a_cause_becomes_a_sorted_list() -> None:
    assert plain(frozenset({"b", "a"})) == ["a", "b"]


# -- the pykka actor ---------------------------------------------------------------------------


@pytest.fixture
def actor_node() -> Iterator[tuple[pykka.ActorRef[AllocatorActor], Node]]:
    node = Node()
    ref = AllocatorActor.start(node.core)
    yield ref, node
    ref.stop()


#: One request per thread, shared and NUMA-bound dedicated mixed; all fit on the node at once.
# NUMA 3 stays free of NUMA-bound pods: a NUMA-binding container removes its whole NUMA node
# from the pooled CPUs (§5.4), so with all four taken a shared request would rightly fail in
# some orders, and the test is about ordering, not capacity.
CONCURRENT = [
    request("pod-s1", cpu=1),
    request("pod-s2", cpu=2),
    request("pod-s3", cpu=1),
    dedicated("pod-d0", cpu=1, exclusive=False, hint=(0,)),
    dedicated("pod-d1", cpu=1, exclusive=False, hint=(1,)),
    dedicated("pod-d2", cpu=2, exclusive=False, hint=(2,)),
    dedicated("pod-d3", cpu=1, exclusive=False, hint=(2,)),
    request("pod-s4", cpu=1),
]


def test_concurrent_asks_are_served_in_one_total_order(
    actor_node: tuple[pykka.ActorRef[AllocatorActor], Node],
) -> None:
    ref, node = actor_node
    replies: dict[str, AllocationReply] = {}
    barrier = threading.Barrier(len(CONCURRENT))

    def ask(req_index: int) -> None:
        req = CONCURRENT[req_index]
        barrier.wait()
        reply = ref.ask(Allocate(req), timeout=10)
        assert isinstance(reply, AllocationReply)
        replies[req.pod_uid] = reply

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(CONCURRENT))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(replies) == len(CONCURRENT)
    final: Snapshot = node.core.snapshot  # every ask has been answered: the actor is idle
    assert node.store.replayed() == final.state
    # The same requests, one by one in the order they were committed, give the same replies.
    order = [cause["request"]["pod_uid"] for cause in node.store.causes[1:]]
    by_pod = {req.pod_uid: req for req in CONCURRENT}
    serial = Node()
    for pod in order:
        assert serial.core.handle(Allocate(by_pod[pod])) == replies[pod], pod
    assert serial.core.snapshot.state == final.state


def test_actor_returns_errors_to_the_asker(
    actor_node: tuple[pykka.ActorRef[AllocatorActor], Node],
) -> None:
    ref, node = actor_node
    node.store.refuse_next()
    with pytest.raises(AllocatorUnavailable):
        ref.ask(Allocate(request("pod-a", cpu=2)), timeout=10)
    with pytest.raises(UnknownContainerError):
        ref.ask(GetTopologyAwareResources("pod-a", "app"), timeout=10)
    reply = ref.ask(Allocate(request("pod-a", cpu=2)), timeout=10)
    assert isinstance(reply, AllocationReply) and node.cpuset(reply) == "1,3-15"


# -- property: the Allocator's state is always the durable state -------------------------------

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("shared"), st.integers(0, 5), st.integers(1, 4)),
        st.tuples(st.just("dedicated"), st.integers(0, 5), st.integers(0, 3)),
        st.tuples(st.just("remove"), st.integers(0, 5), st.just(0)),
        st.tuples(st.just("list"), st.just(0), st.just(0)),
        st.tuples(st.just("advance"), st.integers(1, 40), st.just(0)),
        st.tuples(st.just("refuse"), st.just(0), st.just(0)),
        st.tuples(st.just("silent"), st.just(0), st.just(0)),
    ),
    max_size=25,
)


def command_for(kind: str, pod: int, n: int) -> AllocatorCommand | None:
    if kind == "shared":
        return Allocate(request(f"pod-s{pod}", cpu=n))
    if kind == "dedicated":
        return Allocate(dedicated(f"pod-d{pod}", cpu=1, exclusive=False, hint=(n,)))
    if kind == "remove":
        return RemovePod(f"pod-{'s' if pod % 2 else 'd'}{pod // 2}")
    if kind == "list":
        return GetResourcesAllocation()
    return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_state_is_always_the_durable_state(steps: list[tuple[str, int, int]]) -> None:
    node = Node()
    for kind, pod, n in steps:
        if kind == "advance":
            node.clock.advance(pod)
        elif kind == "refuse":
            node.store.refuse_next()
        elif kind == "silent":
            node.store.apply_next_silently()
        command = command_for(kind, pod, n)
        if command is None:
            continue
        try:
            node.core.handle(command)
        except (AllocatorUnavailable, PolicyError):
            pass
        else:
            # a served call leaves the Allocator on exactly what the store holds
            assert node.core.snapshot == node.store.snapshot
        assert node.store.replayed() == node.store.snapshot.state
    node.core.handle(GetTopologyAwareAllocatableResources())  # any command resyncs if stale
    assert node.core.snapshot == node.store.snapshot


# -- the pod source's answer is an input --------------------------------------------------------


@pytest.mark.parametrize(
    ("listed", "want"),
    [
        pytest.param(None, PodPhase("unknown", None), id="no listing: unknown, no age"),
        pytest.param({}, PodPhase("unknown", 7.0), id="a listing without the pod: unknown"),
        pytest.param({"pod-a": "Pending"}, PodPhase("Pending", 7.0), id="a pending pod"),
        pytest.param({"pod-a": "Running"}, PodPhase("Running", 7.0), id="a running pod"),
    ],
)
def test_the_pod_phase_comes_from_the_latest_listing_with_its_age(
    listed: dict[str, str] | None, want: PodPhase
) -> None:
    source = FakePodSource()
    if listed is not None:
        source.list(T0 - 7, **listed)
    assert pod_phase(source, "pod-a", T0) == want


def test_an_allocate_asks_the_pod_source_once_and_journals_its_answer() -> None:
    node = Node()
    source = FakePodSource()
    source.list(T0 - 2, **{"pod-a": "Running"})
    core = AllocatorCore(node.store.latest(), CTX, node.store, node.clock.time, source)
    core.handle(Allocate(request("pod-a", cpu=2)))
    assert source.asked == 1
    assert node.store.causes[-1]["pod"] == {"phase": "Running", "listing_age_s": 2.0}
