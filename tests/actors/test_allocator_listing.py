"""The Allocator's GetResourcesAllocation keeps its last listing, and only what it lists
(actors/allocator.py ``_reconcile``; cpu-policy §10.1; DESIGN.md: an actor owns its data).

Each listing the Allocator answers is handed to the next as the parts to reuse; what it
answers is what a listing built from nothing on the durable state says, after Allocate,
RemovePod, the end of ramp-up and a refused commit, and it holds no part of a removed pod.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.allocator import AllocatorCore
from actors.allocator_messages import Allocate, GetResourcesAllocation, RemovePod, StartPolicy
from policy.cpu import facade as cpu_policy
from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.context import PolicyContext
from policy.errors import PolicyError
from policy.state.sections import empty_state
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.decision_fixtures import dedicated, request
from tests.topologies import SYNTH_16_2_4, cpus

CTX = PolicyContext(topology=SYNTH_16_2_4, reserved=cpus("0,2"))
T0 = 1715180645.0
LISTING = GetResourcesAllocation()


def start() -> tuple[AllocatorCore, ApplyingCommitter, FakeClock]:
    clock = FakeClock(T0)
    store = ApplyingCommitter(empty_state(SYNTH_16_2_4))
    core = AllocatorCore(store.latest(), CTX, store, clock.time)
    core.handle(StartPolicy())
    return core, store, clock


def fresh_listing(core: AllocatorCore, now: float) -> ResourcesAllocation:
    """The listing of the durable state, built from nothing (and not committed)."""
    return cpu_policy.get_resources_allocation(core.snapshot.state, LISTING, CTX, now).reply


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["allocate", "dedicated", "remove", "wait", "list", "refuse"]),
        st.sampled_from(["pod-0", "pod-1", "pod-2", "pod-3"]),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS)
def test_every_listing_answered_equals_one_built_from_nothing(
    steps: list[tuple[str, str]],
) -> None:
    core, store, clock = start()
    for step, pod in steps:
        try:
            if step == "allocate":
                core.handle(Allocate(request(pod, cpu=1, qos="shared_cores")))
            elif step == "dedicated":
                core.handle(Allocate(dedicated(pod, cpu=2, hint=(int(pod[-1]),))))
            elif step == "remove":
                core.handle(RemovePod(pod))
        except PolicyError:
            pass
        if step == "wait":
            clock.advance(31)
        if step in ("list", "refuse"):
            want = fresh_listing(core, clock.time())
            settles = cpu_policy.get_resources_allocation(
                core.snapshot.state, LISTING, CTX, clock.time()
            ).events
            if step == "refuse" and settles:  # the disk refuses what the listing settles
                store.refuse_next()
                want = cpu_policy.get_resources_allocation_as_is(
                    core.snapshot.state, LISTING, CTX, clock.time()
                ).reply
            got = core.handle(LISTING)
            assert got == want and list(got.pod_resources) == list(want.pod_resources)
            assert got.parts is not None
            assert set(got.parts.pods) == set(core.snapshot.state.cpu.pods)
    assert store.replayed() == core.snapshot.state


def test_a_listing_after_remove_pod_holds_no_part_of_the_pod() -> None:
    core, _, clock = start()
    for pod in ("pod-a", "pod-b"):
        core.handle(Allocate(request(pod, cpu=1, qos="shared_cores")))
    clock.advance(31)
    core.handle(LISTING)
    before = core.handle(LISTING)
    assert before.parts is not None and set(before.parts.pods) == {"pod-a", "pod-b"}
    core.handle(RemovePod("pod-a"))
    after = core.handle(LISTING)
    assert after.parts is not None and set(after.parts.pods) == {"pod-b"}
    assert after == fresh_listing(core, clock.time())
    assert after.parts.pods["pod-b"] is before.parts.pods["pod-b"]  # reused, not rebuilt


def test_a_settled_state_is_answered_with_the_same_reply() -> None:
    core, store, clock = start()
    core.handle(Allocate(request("pod-a", cpu=1, qos="shared_cores")))
    clock.advance(31)
    core.handle(LISTING)  # ramp-up ends (committed)
    first = core.handle(LISTING)
    causes = len(store.causes)
    clock.advance(3)
    assert core.handle(LISTING) is first and len(store.causes) == causes
