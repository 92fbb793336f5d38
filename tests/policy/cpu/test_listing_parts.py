"""GetResourcesAllocation with the parts of an earlier listing equals one built from nothing
(cpu-policy §10.1; policy/cpu/listing_parts.py).

A hypothesis state machine drives random kubelet histories on the spec's (16,2,4) node —
Allocate of every level, RemovePod, the passing of time with listings that end ramp-ups, an
unreadable timestamp to repair, a listing whose commit is refused — and after every listing
made with a previous listing (the last one answered, or any older one) checks that its events,
its reply (pod order included) and its warnings are those of a listing made with none, and
that it keeps no part of a pod the state no longer holds.
"""

from __future__ import annotations

import contextlib
import dataclasses

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from policy.cpu import facade as cpu_policy
from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.commands import GetResourcesAllocation
from policy.cpu.context import PolicyContext
from policy.cpu.listing_parts import list_pods
from policy.cpu.request import ResourceRequest
from policy.cpu.timestamps import format_qrm_time
from policy.decision import Decision
from policy.errors import PolicyError
from policy.state.events import ContainerAllocated, RampUpFinished
from policy.state.sections import State, apply_all
from tests.policy.cpu.listing_oracle import OracleListing, walk_every_container
from tests.policy.decision_fixtures import CTX, T0, Node, dedicated, request

LISTING = GetResourcesAllocation()
SHARED_PODS = st.sampled_from([f"web-{i}" for i in range(6)])
RECLAIMED_PODS = st.sampled_from(["batch-0", "batch-1"])
DEDICATED_PODS = st.sampled_from(["db-0", "db-1"])
PODS = st.one_of(SHARED_PODS, RECLAIMED_PODS, DEDICATED_PODS)


#: Pools sized by requests (§6.2 step 6d): pool ``share`` moves as its containers come and go.
RECLAIMING = dataclasses.replace(CTX, enable_reclaim=True)


def listed(
    state: State,
    now: float,
    previous: ResourcesAllocation | None = None,
    ctx: PolicyContext = CTX,
) -> Decision[ResourcesAllocation]:
    return cpu_policy.get_resources_allocation(state, LISTING, ctx, now, previous)


def assert_same_listing(
    got: Decision[ResourcesAllocation], want: Decision[ResourcesAllocation]
) -> None:
    """Same events, same reply in the same order, same warnings, same parts."""
    assert got.events == want.events
    assert got.reply == want.reply
    assert list(got.reply.pod_resources) == list(want.reply.pod_resources)
    assert got.reply.warnings == want.reply.warnings == got.warnings
    assert got.reply.parts is not None and want.reply.parts is not None
    assert got.reply.parts.unreadable == want.reply.parts.unreadable
    assert got.reply.parts.ramping == want.reply.parts.ramping
    assert list(got.reply.parts.pods) == list(want.reply.parts.pods)
    assert got.reply.settled == want.reply.settled


def assert_as_the_oracle(got: Decision[ResourcesAllocation], want: OracleListing) -> None:
    """The listing a plain walk over every container makes (``listing_oracle``)."""
    assert got.events == want.events
    assert got.reply.pod_resources == want.pod_resources
    assert list(got.reply.pod_resources) == list(want.pod_resources)
    assert got.reply.warnings == want.warnings


class ListingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.listings: list[ResourcesAllocation] = []

    @initialize(enable_reclaim=st.booleans())
    def start(self, enable_reclaim: bool) -> None:
        self.ctx = RECLAIMING if enable_reclaim else CTX
        self.node = Node(self.ctx)

    @property
    def last(self) -> ResourcesAllocation | None:
        return self.listings[-1] if self.listings else None

    # -- kubelet's calls --------------------------------------------------------------------

    @rule(pod=SHARED_PODS, cpu=st.integers(1, 4), phase=st.sampled_from([None, "Running"]))
    def allocate_shared(self, pod: str, cpu: int, phase: str | None) -> None:
        self.node.phases[pod] = phase
        self._allocate(request(pod, cpu=cpu, qos="shared_cores"))

    @rule(pod=RECLAIMED_PODS, cpu=st.integers(0, 2))
    def allocate_reclaimed(self, pod: str, cpu: int) -> None:
        self._allocate(request(pod, cpu=cpu, qos="reclaimed_cores"))

    @rule(pod=DEDICATED_PODS, cpu=st.integers(1, 4), numa=st.integers(0, 3))
    def allocate_dedicated(self, pod: str, cpu: int, numa: int) -> None:
        self._allocate(dedicated(pod, cpu=cpu, hint=(numa,)))

    @rule(pod=PODS)
    def remove(self, pod: str) -> None:
        # A level without lifecycle (break_timestamp) makes the removal refuse: no change.
        with contextlib.suppress(PolicyError):
            self.node.remove(pod)

    @rule(
        pod=PODS,
        stamp=st.sampled_from(["", "yesterday"]),
        level=st.sampled_from(["", "", "", "system_cores"]),
    )
    def break_timestamp(self, pod: str, stamp: str, level: str) -> None:
        """An unreadable ``init_timestamp`` (a checkpoint from an older writer, §10.1), or a
        level with no lifecycle (a warning at every listing)."""
        entry = self.node.state.cpu.entry(pod, "app")
        if entry is not None:
            broken = dataclasses.replace(entry, init_timestamp=stamp)
            if level:
                broken = dataclasses.replace(broken, qos_level=level)
            self.node.state = apply_all(self.node.state, [ContainerAllocated(broken)])

    @rule(pod=PODS, level=st.sampled_from(["system_cores", "reclaimed_cores"]))
    def flag_without_lifecycle(self, pod: str, level: str) -> None:
        """A readable timestamp but no ``finish_ramp_up`` from the container's phase (a level
        without lifecycle; a reclaimed container with the ramp-up flag): a warning at every
        listing, ramp-up period or not."""
        entry = self.node.state.cpu.entry(pod, "app")
        if entry is not None:
            odd = dataclasses.replace(entry, qos_level=level, ramp_up=True)
            with contextlib.suppress(PolicyError):  # a placement the level cannot have
                self.node.state = apply_all(self.node.state, [ContainerAllocated(odd)])

    @rule(seconds=st.sampled_from([0, 3, 29, 31]), older=st.integers(0, 5))
    def list_later(self, seconds: int, older: int) -> None:
        """kubelet's reconcile, with the last listing, and with an older one, as previous."""
        self.now += seconds
        state, now, ctx = self.node.state, self.now, self.ctx
        fresh = listed(state, now, None, ctx)
        assert_as_the_oracle(fresh, walk_every_container(state, ctx, now))
        if self.listings:
            stale = self.listings[max(0, len(self.listings) - 1 - older)]
            assert_same_listing(listed(state, now, stale, ctx), fresh)
        decision = listed(state, now, self.last, ctx)
        assert_same_listing(decision, fresh)
        self.node.commit(decision)
        self.listings.append(decision.reply)

    @rule(seconds=st.sampled_from([3, 31]))
    def list_refused(self, seconds: int) -> None:
        """The commit of what the listing settled is refused: the answer is the state as is,
        made with the refused listing's parts (as the Allocator does)."""
        self.now += seconds
        refused = listed(self.node.state, self.now, self.last, self.ctx).reply
        as_is = cpu_policy.get_resources_allocation_as_is
        got = as_is(self.node.state, LISTING, self.ctx, self.now, refused).reply
        want = as_is(self.node.state, LISTING, self.ctx, self.now).reply
        assert got == want and list(got.pod_resources) == list(want.pod_resources)
        self.listings.append(got)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def keeps_only_the_pods_it_lists(self) -> None:
        last = self.last
        if last is None or last.parts is None:
            return
        listed_pods = set(last.parts.state.pods)
        assert set(last.parts.pods) == listed_pods == set(last.pod_resources)
        in_use = {part.shape for part in last.parts.pods.values()}
        assert set(last.parts.allocations) >= in_use
        assert len(last.parts.allocations) - len(in_use) <= last.parts.spare

    def _allocate(self, req: ResourceRequest) -> None:
        with contextlib.suppress(PolicyError):  # refused: nothing committed, nothing to list
            self.node.allocate(req, self.now)


ListingMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_listing_with_previous_parts_equals_a_fresh_one = ListingMachine.TestCase


# -- examples ---------------------------------------------------------------------------------


def node_with_shared_pods(count: int) -> Node:
    node = Node(CTX)
    for i in range(count):
        node.allocate(request(f"pod-{i}", cpu=1, qos="shared_cores"))
    node.commit(listed(node.state, T0 + 31))  # ramp-up ends: they join pool share
    return node


def test_a_removed_pods_part_is_not_kept() -> None:
    node = node_with_shared_pods(3)
    before = node.commit(listed(node.state, T0 + 32)).reply
    assert before.parts is not None and "pod-1" in before.parts.pods
    node.remove("pod-1")
    after = node.commit(listed(node.state, T0 + 33, before)).reply
    assert after.parts is not None
    assert set(after.parts.pods) == set(after.pod_resources) == {"pod-0", "pod-2"}
    assert all(part.containers is not before.parts.pods["pod-1"].containers
               for part in after.parts.pods.values())  # fmt: skip


def test_unchanged_pods_keep_their_part_and_a_changed_pod_gets_a_new_one() -> None:
    node = node_with_shared_pods(3)
    before = node.commit(listed(node.state, T0 + 32)).reply
    node.allocate(request("pod-9", cpu=1, qos="shared_cores"), T0 + 32)  # ramps: share stays
    after = node.commit(listed(node.state, T0 + 33, before)).reply
    assert before.parts is not None and after.parts is not None
    for pod in ("pod-0", "pod-1", "pod-2"):
        assert after.parts.pods[pod] is before.parts.pods[pod]
        assert after.pod_resources[pod] is before.pod_resources[pod]
    assert after.pod_resources["pod-9"]["app"].allocation_result == "1,3-15"


def test_pods_follow_their_pool_when_it_moves() -> None:
    """With pools sized by requests, pool ``share`` grows when a ramp-up ends: its pods keep
    their parts (their entries did not change) but are listed on the new cpuset."""
    node = Node(RECLAIMING)
    for pod in ("pod-0", "pod-1"):
        node.allocate(request(pod, cpu=1, qos="shared_cores"))
    node.commit(listed(node.state, T0 + 31, None, RECLAIMING))
    before = node.commit(listed(node.state, T0 + 32, None, RECLAIMING)).reply
    node.allocate(request("pod-9", cpu=4, qos="shared_cores"), T0 + 32)
    ended = listed(node.state, T0 + 63, before, RECLAIMING)
    assert RampUpFinished("pod-9", "app") in ended.events
    node.commit(ended)
    after = node.commit(listed(node.state, T0 + 64, ended.reply, RECLAIMING)).reply
    assert before.parts is not None and after.parts is not None
    share = str(node.state.cpu.pools["share"])
    assert share != before.pod_resources["pod-0"]["app"].allocation_result
    assert after.parts.pods["pod-0"] is before.parts.pods["pod-0"]
    assert after.pod_resources["pod-0"]["app"].allocation_result == share
    assert after == listed(node.state, T0 + 64, None, RECLAIMING).reply


def test_shapes_of_removed_pods_are_pruned() -> None:
    """Dedicated pods each have a shape of their own (their own CPUs); once they are gone,
    the shapes kept for reuse are bounded by those in use plus a fixed spare."""
    node = Node(CTX)
    previous = None
    for i in range(300):
        node.allocate(dedicated(f"db-{i}", cpu=1, hint=(i % 4,)))
        previous = node.commit(listed(node.state, T0, previous)).reply
        node.remove(f"db-{i}")
    parts = list_pods(node.state.cpu, None if previous is None else previous.parts)
    assert len(parts.shapes) <= len(parts.allocations) + 256


def test_a_listing_of_another_state_is_a_safe_previous() -> None:
    one = node_with_shared_pods(3)
    other = node_with_shared_pods(2)
    other.allocate(dedicated("db-0", cpu=2, hint=(1,)))
    foreign = listed(other.state, T0 + 40).reply
    assert_same_listing(listed(one.state, T0 + 40, foreign), listed(one.state, T0 + 40))


def test_unreadable_timestamps_are_repaired_with_a_previous_listing() -> None:
    node = node_with_shared_pods(2)
    before = node.commit(listed(node.state, T0 + 32)).reply
    entry = node.state.cpu.require_entry("pod-1", "app")
    broken = dataclasses.replace(entry, init_timestamp="")
    node.state = apply_all(node.state, [ContainerAllocated(broken)])
    got = listed(node.state, T0 + 40, before)
    assert_same_listing(got, listed(node.state, T0 + 40))
    assert got.events[0].init_timestamp == format_qrm_time(T0 + 40)  # type: ignore[attr-defined]


def test_a_flag_without_finish_ramp_up_warns_at_every_listing_within_the_period() -> None:
    """A reclaimed container carrying the ramp-up flag, and a level without lifecycle, have
    no step to wait for: their warnings come at every listing, as a walk over every container
    gives them, also before any transition period has passed."""
    node = Node(CTX)
    node.allocate(request("web-0", cpu=1, qos="shared_cores"), T0)
    node.allocate(request("batch-0", cpu=1, qos="reclaimed_cores"), T0)
    for pod, level in (("web-0", "system_cores"), ("batch-0", "reclaimed_cores")):
        entry = node.state.cpu.require_entry(pod, "app")
        odd = dataclasses.replace(entry, qos_level=level, ramp_up=True)
        node.state = apply_all(node.state, [ContainerAllocated(odd)])
    previous = None
    for now in (T0, T0 + 3, T0 + 40):
        got = listed(node.state, now, previous)
        assert_as_the_oracle(got, walk_every_container(node.state, CTX, now))
        assert len(got.warnings) == 2
        previous = got.reply
