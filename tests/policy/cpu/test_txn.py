"""A decision in progress (policy/cpu/txn.py) and the context it reads (policy/cpu/context.py):
the working state, its CPU section kept between emits, the events; the derived v0.5.47 flag."""

from __future__ import annotations

import dataclasses

import pytest

from policy.cpu.context import PolicyContext
from policy.cpu.reference import V0_5_3, V0_5_47
from policy.cpu.txn import Txn
from policy.state.entries import OwnCPUs
from policy.state.events import ContainerAllocated, Event
from policy.state.sections import apply_all
from tests.policy.pool_fixtures import CTX, fresh_state, shared
from tests.topologies import cpus


def _allocated(pod: str, cpuset: str) -> ContainerAllocated:
    return shared(pod, OwnCPUs.of(cpus(cpuset)))


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param([], id="a decision that emits nothing"),
        pytest.param([[]], id="an emit of nothing"),
        pytest.param([[_allocated("a", "4-5")]], id="one event"),
        pytest.param(
            [[_allocated("a", "4-5"), _allocated("b", "6")], [], [_allocated("c", "7")]],
            id="events, an emit of nothing, events again",
        ),
    ],
)
def test_the_kept_cpu_section_is_always_the_working_states(batches: list[list[Event]]) -> None:
    base = fresh_state()
    txn = Txn(base)
    assert txn.cpu is base.cpu
    emitted: list[Event] = []
    for batch in batches:
        txn.emit(*batch)
        emitted.extend(batch)
        assert txn.cpu is txn.state.cpu
        assert txn.events == tuple(emitted)
    assert txn.state == apply_all(base, emitted)


def test_an_emit_of_nothing_leaves_the_working_state_as_it_was() -> None:
    txn = Txn(fresh_state())
    txn.emit(_allocated("a", "4-5"))
    state, cpu = txn.state, txn.cpu
    txn.emit()
    assert txn.state is state and txn.cpu is cpu and len(txn) == 1


@pytest.mark.parametrize(
    ("version", "at_v0_5_47"),
    [
        pytest.param(V0_5_3, False, id="v0.5.3 applies the v0.5.3 rules"),
        pytest.param(V0_5_47, True, id="v0.5.47 applies the v0.5.47 rules"),
    ],
)
def test_the_reference_level_is_derived_from_the_version(version: str, at_v0_5_47: bool) -> None:
    ctx = PolicyContext(topology=CTX.topology, reserved=CTX.reserved, reference_version=version)
    assert ctx.at_v0_5_47 is at_v0_5_47
    other = V0_5_3 if at_v0_5_47 else V0_5_47
    # replace() derives it again from the new version; it takes no part in equality.
    assert dataclasses.replace(ctx, reference_version=other).at_v0_5_47 is not at_v0_5_47
    assert dataclasses.replace(ctx, reference_version=version) == ctx
