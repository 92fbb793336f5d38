"""The CPU invariants (``policy.cpu.invariants``) hold after every commit of the Allocator.

Any sequence of kubelet calls, with restarts in between that change ``--reserved-cpu-cores``
(issue: a changed reserve over an existing state gave overlapping pools while healthy), on
the spec's (16,2,4) node. A restart whose start-up is refused (a dedicated container holds
CPUs of the new reserve) leaves the state as it was; the node then starts again with the
reserve it had.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.allocator import AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorCommand,
    GetResourcesAllocation,
    RemovePod,
    StartPolicy,
)
from policy.cpu.context import PolicyContext
from policy.cpu.reserve import reserved_cpus
from policy.errors import PolicyError
from policy.state.sections import empty_state
from tests.actors.fakes import FakeClock, FakePodSource
from tests.actors.invariant_committer import InvariantCheckingCommitter
from tests.policy.decision_fixtures import dedicated, request
from tests.topologies import SYNTH_16_2_4

T0 = 1715180645.0


def context(reserved_cpu_cores: int) -> PolicyContext:
    reserved = reserved_cpus(
        SYNTH_16_2_4, use_kubelet_reserved_config=False, reserved_cpu_cores=reserved_cpu_cores
    )
    return PolicyContext(topology=SYNTH_16_2_4, reserved=reserved)


class Restart:
    """Stop the node and start it on the same state with ``--reserved-cpu-cores=count``."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __repr__(self) -> str:
        return f"Restart({self.count})"


_PODS = st.sampled_from(["pod-a", "pod-b", "pod-c", "pod-d"])
_CALLS = st.one_of(
    st.builds(lambda p, c: Allocate(request(p, cpu=c)), _PODS, st.integers(1, 4)),
    st.builds(
        lambda p, c: Allocate(request(p, cpu=c, cpuset_pool="batch")), _PODS, st.integers(1, 3)
    ),
    st.builds(
        lambda p, c, n, x: Allocate(dedicated(p, cpu=c, exclusive=x, hint=(n,))),
        _PODS,
        st.integers(1, 3),
        st.integers(0, 3),
        st.booleans(),
    ),
    st.builds(lambda p: Allocate(request(p, cpu=1, qos="reclaimed_cores")), _PODS),
    st.builds(RemovePod, _PODS),
    st.just(GetResourcesAllocation()),
)


def _steps(commands: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(
        st.tuples(
            commands,
            st.integers(0, 40),  # seconds before the command
            st.dictionaries(_PODS, st.sampled_from(["Pending", "Running"]), max_size=4),
        ),
        max_size=14,
    )


@settings(max_examples=80, deadline=None)
@given(reserve=st.integers(0, 6), steps=_steps(_CALLS))
def test_no_commit_of_any_call_sequence_breaks_an_invariant(
    reserve: int, steps: list[tuple[AllocatorCommand, int, dict[str, str]]]
) -> None:
    run(reserve, steps)


@settings(max_examples=120, deadline=None)
@given(
    first_reserve=st.integers(0, 4),
    steps=_steps(st.one_of(_CALLS, st.builds(Restart, st.integers(0, 8)))),
)
def test_no_commit_breaks_an_invariant_across_calls_and_reserve_changes(
    first_reserve: int, steps: list[tuple[AllocatorCommand | Restart, int, dict[str, str]]]
) -> None:
    run(first_reserve, steps)


def run(first_reserve: int, steps: Any) -> None:
    """Start a fresh node with ``first_reserve`` reserved CPUs and take ``steps``."""
    clock = FakeClock(T0)
    pods = FakePodSource()
    ctx = context(first_reserve)
    committer = InvariantCheckingCommitter(empty_state(SYNTH_16_2_4), ctx)
    core = AllocatorCore(committer.latest(), ctx, committer, clock.time, pods)
    core.handle(StartPolicy())
    for command, wait, phases in steps:
        clock.advance(wait)
        pods.list(clock.now - 1, **phases)
        if isinstance(command, Restart):
            core = _restart(committer, core, context(command.count), clock, pods)
            continue
        # A refusal commits nothing, or the §7.2 removal (checked like any commit).
        with contextlib.suppress(PolicyError):
            core.handle(command)


def _restart(
    committer: InvariantCheckingCommitter,
    core: AllocatorCore,
    ctx: PolicyContext,
    clock: FakeClock,
    pods: Any,
) -> AllocatorCore:
    old = core.ctx
    committer.restart_with(ctx)
    restarted = AllocatorCore(committer.latest(), ctx, committer, clock.time, pods)
    before = committer.latest()
    try:
        restarted.handle(StartPolicy())
    except PolicyError:
        # Refused start-up: nothing committed; the operator starts it as it was.
        assert committer.latest() is before
        committer.restart_with(old)
        restarted = AllocatorCore(committer.latest(), old, committer, clock.time, pods)
        restarted.handle(StartPolicy())
    return restarted
