"""Reclaimed cores with NUMA binding at v0.5.47 in the policy (``policy.cpu.rnb``,
``rnb_hints``, ``rnb_allocate``): the ``numa_hint`` of a one-NUMA hint, the reclaim pool's
per-NUMA split, the reference's shrink (katalyst-core v0.5.47
``policy_allocation_handlers.go:207-348, 2101-2160``), the resize refusals, the split on pool
regeneration, and sys-advisor's headroom kept in the state (``applyNUMAHeadroom``).

The node is the reference's (16,2,4) with reserve ``0,2``: NUMA 0 is ``0-1,8-9``, NUMA 1
``2-3,10-11``, NUMA 2 ``4-5,12-13``, NUMA 3 ``6-7,14-15``; v0.5.47's start-up reclaim pool is
``1,3-4,6``, one CPU per NUMA.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.reference import INPLACE_UPDATE_RESIZING_KEY, V0_5_47, ReferenceOptions
from policy.cpu.rnb import headroom_event
from policy.cpu.rnb_allocate import RESIZE_CHANGES_KIND, RESIZE_CHANGES_NUMA
from policy.cpu.rnb_hints import RESIZE_SHORT
from policy.cpu.snb_hints import SNBHintError
from policy.errors import PolicyError
from policy.state.advisor_section import NUMAHeadroomSet
from policy.state.codec import decode_event, decode_state, encode_event, encode_state
from policy.state.entries import InPool
from policy.state.sections import apply_all
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.cpu.advisor.fixtures import pool, response
from tests.policy.decision_fixtures import CTX, Node, cpus, dedicated, request

AT_47 = replace(
    CTX,
    reference_version=V0_5_47,
    reference=ReferenceOptions(enable_reclaim_numa_binding=True),
)
HEADROOM = {0: 2.0, 1: 1.0, 2: 2.5, 3: 3.0}


def reclaimed(pod: str, cpu: float = 1, *, binding: bool = True, **kw: object):  # type: ignore[no-untyped-def]
    return request(pod, cpu=cpu, qos="reclaimed_cores", numa_binding=binding, **kw)  # type: ignore[arg-type]


def node_with(*requests) -> Node:  # type: ignore[no-untyped-def]
    node = Node(AT_47)
    for req in requests:
        node.allocate(req)
    return node


@pytest.mark.parametrize(
    ("first", "second", "want"),
    [
        pytest.param(
            reclaimed("plain", binding=False), reclaimed("rnb", hint=(0,)),
            {"plain": "1,4,6", "rnb": "1"},
            id="an RNB container on NUMA 0 drops NUMA 1, not 0, from the non-actual one "
               "(the reference subtracts CPU ids from NUMA ids)",
        ),
        pytest.param(
            reclaimed("plain", binding=False), reclaimed("rnb", hint=(2,)),
            {"plain": "1,3-4,6", "rnb": "4"},
            id="an RNB container on NUMA 2 (CPU 4, no NUMA id) shrinks nothing",
        ),
        pytest.param(
            reclaimed("rnb", hint=(3,)), reclaimed("plain", binding=False),
            {"plain": "1,3-4", "rnb": "6"},
            id="a non-actual container allocated later takes the NUMAs no RNB container is in",
        ),
        pytest.param(
            reclaimed("a", binding=False, hint=(1,)), reclaimed("b", binding=False),
            {"a": "3", "b": "1,3-4,6"},
            id="a plain reclaimed container with a one-NUMA hint is narrowed to that NUMA",
        ),
        pytest.param(
            reclaimed("a", binding=False, hint=(0, 1)), reclaimed("b", hint=(1,)),
            {"a": "1,3-4", "b": "3"},
            id="a two-NUMA hint binds nothing; an RNB container on NUMA 1 (CPU 3) then drops "
               "NUMA 3 from it",
        ),
    ],
)  # fmt: skip
def test_reclaimed_containers_take_their_part_of_the_reclaim_pool(first, second, want) -> None:  # type: ignore[no-untyped-def]
    node = node_with(first, second)
    assert {pod: str(node.cpus_of(pod)) for pod in want} == want
    assert node.replayed() == node.state


def test_a_pool_regeneration_puts_the_shrunk_container_right() -> None:
    node = node_with(reclaimed("plain", binding=False), reclaimed("rnb", hint=(0,)))
    assert str(node.cpus_of("plain")) == "1,4,6"
    # a dedicated pod makes the pools regenerate: the non-actual NUMAs are 1-3 again
    node.allocate(dedicated("ded", 2, exclusive=False, hint=(3,)))
    placement = node.state.cpu.require_entry("plain", "app").placement
    assert placement == InPool("reclaim", frozenset({1, 2, 3}))
    assert node.state.cpu.require_entry("rnb", "app").placement == InPool("reclaim", frozenset({0}))
    assert node.replayed() == node.state


def test_the_numa_hint_is_kept_only_when_it_leaves_a_non_actual_numa() -> None:
    # one-NUMA machine: the non-actual NUMAs are exactly {0} and a non-actual container is
    # there, so a second one-NUMA hint records no numa_hint (policy_allocation_handlers.go:284)
    one_numa = replace(AT_47, topology=generate_dummy_cpu_topology(12, 1, 1), reserved=cpus("0-1"))
    node = Node(one_numa)
    node.allocate(reclaimed("plain", binding=False))
    node.allocate(reclaimed("rnb", hint=(0,)))
    annotations = node.state.cpu.require_entry("rnb", "app").annotations or {}
    assert "numa_hint" not in annotations


@pytest.mark.parametrize(
    ("resize", "message"),
    [
        pytest.param(reclaimed("r", 2, binding=False, hint=(0,)), RESIZE_CHANGES_KIND,
                     id="an RNB container resized without numa_binding is refused"),
        pytest.param(reclaimed("r", 2, hint=(1,)), RESIZE_CHANGES_NUMA,
                     id="an RNB container resized onto another NUMA is refused"),
    ],
)  # fmt: skip
def test_an_in_place_resize_keeps_kind_and_numa(resize, message) -> None:  # type: ignore[no-untyped-def]
    node = node_with(reclaimed("r", hint=(0,)))
    resizing = replace(
        resize, annotations={**resize.annotations, INPLACE_UPDATE_RESIZING_KEY: "true"}
    )
    with pytest.raises(PolicyError) as err:
        node.allocate(resizing)
    assert message in str(err.value)
    assert node.state.cpu.require_entry("r", "app").request_quantity == 1


def test_an_in_place_resize_on_its_numa_only_changes_the_request() -> None:
    node = node_with(reclaimed("r", hint=(0,)))
    before = node.state.cpu.require_entry("r", "app")
    grown = reclaimed("r", 2, hint=(0,))
    node.allocate(
        replace(grown, annotations={**grown.annotations, INPLACE_UPDATE_RESIZING_KEY: "true"})
    )
    after = node.state.cpu.require_entry("r", "app")
    assert after == replace(before, request_quantity=2.0)


def test_a_growth_in_place_beyond_the_numa_headroom_is_refused() -> None:
    node = node_with(reclaimed("r", hint=(1,)))
    node.state = apply_all(node.state, [headroom_event(HEADROOM)])
    grown = reclaimed("r", 2, hint=(1,))
    resizing = replace(
        grown, annotations={**grown.annotations, INPLACE_UPDATE_RESIZING_KEY: "true"}
    )
    with pytest.raises(SNBHintError) as err:
        node.hints(resizing)
    assert RESIZE_SHORT in str(err.value)


def test_the_advisor_headroom_is_kept_and_replayed_through_the_codec() -> None:
    node = Node(AT_47)
    settings = AdvisorSettings(AT_47)
    advice = replace(
        response(pool("share", 6), pool("reserve", 2)),
        numa_headroom=HEADROOM,
        numa_headroom_sent=True,
    )
    decision = apply_advice(node.state, advice, settings, 1.0)
    assert decision.error is None
    assert NUMAHeadroomSet(((0, 2.0), (1, 1.0), (2, 2.5), (3, 3.0))) in decision.events
    state = apply_all(node.state, [decode_event(encode_event(e)) for e in decision.events])
    assert state.advisor.headroom_of() == HEADROOM
    assert decode_state(encode_state(state), AT_47.topology) == state
    # the same response again changes nothing: coalesced
    again = apply_advice(state, advice, settings, 2.0)
    assert again.events == () and again.reply is not None and again.reply.coalesced
    # and the hints read it
    node.state = state
    assert [h.nodes for h in node.hints(reclaimed("new", 1)) or ()] == [(3,), (2,), (0,), (1,)]


def test_a_v0_5_3_node_keeps_no_headroom() -> None:
    node = Node(CTX)
    advice = replace(
        response(pool("share", 6), pool("reserve", 2)),
        numa_headroom=HEADROOM,
        numa_headroom_sent=True,
    )
    decision = apply_advice(node.state, advice, AdvisorSettings(CTX), 1.0)
    assert not any(isinstance(e, NUMAHeadroomSet) for e in decision.events)


def test_a_narrowed_placement_survives_the_codec() -> None:
    node = node_with(reclaimed("plain", binding=False), reclaimed("rnb", hint=(0,)))
    assert decode_state(encode_state(node.state), AT_47.topology) == node.state
