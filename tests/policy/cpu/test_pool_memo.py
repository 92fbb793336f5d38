"""The last pool sizing answered again for the same inputs (``policy.cpu.pool_memo``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from policy.cpu.context import PolicyContext
from policy.cpu.pool_memo import sized_pools
from policy.cpu.pool_sizing import (
    IsolatedCPUs,
    IsolatedQuantities,
    PoolError,
    generate_pools_and_isolation,
)
from policy.topology.cpuset import CPUSet
from tests.policy.pool_fixtures import CTX
from tests.topologies import cpus

ADJUSTABLE = cpus("1,3-15")
ISOLATED = {"pod-d": {"app": 2}}


class CountedSizing:
    """``generate_pools_and_isolation``, counting the calls that reach it."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(
        self,
        ctx: PolicyContext,
        pools_q: Mapping[str, int],
        iso_q: IsolatedQuantities,
        available: CPUSet,
    ) -> tuple[dict[str, CPUSet], IsolatedCPUs]:
        self.calls += 1
        return generate_pools_and_isolation(ctx, pools_q, iso_q, available)


def _changed(field: str) -> dict[str, Any]:
    inputs: dict[str, Any] = {
        "ctx": CTX,
        "pools_q": {"share": 3, "batch": 2},
        "iso_q": ISOLATED,
        "available": ADJUSTABLE,
    }
    inputs[field] = {
        "ctx": dataclasses.replace(CTX),
        "pools_q": {"share": 4, "batch": 2},
        "iso_q": {"pod-d": {"app": 3}},
        "available": cpus("1,3-14"),
    }[field]
    return inputs


def test_the_same_inputs_are_answered_from_the_memo_with_the_same_answer() -> None:
    sizing = CountedSizing()
    first = sized_pools(sizing, CTX, {"share": 3, "batch": 2}, ISOLATED, ADJUSTABLE)
    again = sized_pools(sizing, CTX, {"share": 3, "batch": 2}, ISOLATED, ADJUSTABLE)
    assert sizing.calls == 1
    assert (
        again
        == first
        == generate_pools_and_isolation(CTX, {"share": 3, "batch": 2}, ISOLATED, ADJUSTABLE)
    )


@pytest.mark.parametrize(
    "field",
    [
        pytest.param("ctx", id="another context (even an equal one) is sized again"),
        pytest.param("pools_q", id="another pool quantity is sized again"),
        pytest.param("iso_q", id="another isolated quantity is sized again"),
        pytest.param("available", id="other adjustable CPUs are sized again"),
    ],
)
def test_any_changed_input_is_sized_again(field: str) -> None:
    sizing = CountedSizing()
    sized_pools(sizing, CTX, {"share": 3, "batch": 2}, ISOLATED, ADJUSTABLE)
    inputs = _changed(field)
    answer = sized_pools(sizing, **inputs)
    assert sizing.calls == 2
    assert answer == generate_pools_and_isolation(**inputs)


def test_pools_in_another_order_are_sized_again_and_keep_their_order() -> None:
    sizing = CountedSizing()
    sized_pools(sizing, CTX, {"share": 3, "batch": 2}, {}, ADJUSTABLE)
    pools, _ = sized_pools(sizing, CTX, {"batch": 2, "share": 3}, {}, ADJUSTABLE)
    assert sizing.calls == 2
    assert list(pools) == list(
        generate_pools_and_isolation(CTX, {"batch": 2, "share": 3}, {}, ADJUSTABLE)[0]
    )


def test_a_caller_changing_its_answer_does_not_change_the_next_one() -> None:
    sizing = CountedSizing()
    pools, isolated = sized_pools(sizing, CTX, {"share": 3}, ISOLATED, ADJUSTABLE)
    pools["share"] = CPUSet()
    isolated["pod-d"]["app"] = CPUSet()
    again = sized_pools(sizing, CTX, {"share": 3}, ISOLATED, ADJUSTABLE)
    assert sizing.calls == 1
    assert again == generate_pools_and_isolation(CTX, {"share": 3}, ISOLATED, ADJUSTABLE)


def test_a_failed_sizing_is_not_kept() -> None:
    sizing = CountedSizing()
    for _ in range(2):
        with pytest.raises(PoolError):
            sized_pools(sizing, CTX, {"reserve": 2}, {}, ADJUSTABLE)
    assert sizing.calls == 2


def test_overlap_ratios_are_passed_and_other_ratios_are_sized_again() -> None:
    seen: list[Mapping[str, float] | None] = []

    def sizing(
        ctx: PolicyContext,
        pools_q: Mapping[str, int],
        iso_q: IsolatedQuantities,
        available: CPUSet,
        overlap: Mapping[str, float] | None = None,
    ) -> tuple[dict[str, CPUSet], IsolatedCPUs]:
        seen.append(overlap)
        return generate_pools_and_isolation(ctx, pools_q, iso_q, available)

    for overlap in ({"share": 0.5}, {"share": 0.5}, {"share": 0.25}, None):
        sized_pools(sizing, CTX, {"share": 3}, {}, ADJUSTABLE, overlap=overlap)
    assert seen == [{"share": 0.5}, {"share": 0.25}, None]
