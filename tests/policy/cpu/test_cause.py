"""Allocator causes: inputs encode to plain msgpack data and decode back; version-1 causes
(qrmd up to ac84ea9) upgrade with the pod phase unknown, older residual removals to evidence
naming only their candidates; bad causes name the field at fault; a kubelet call's reply is
kept compactly beside its inputs without changing what they decode to."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.cause import (
    CAUSE_VERSION,
    CauseError,
    ResidualPods,
    _request_plain,
    cause_of,
    decode_cause,
    plain,
    reply_of,
    upgrade_cause,
)
from policy.cpu.commands import (
    Allocate,
    AllocateInputs,
    GetResourcesAllocation,
    GetTopologyAwareResources,
    PodPhase,
    PreStartContainer,
    RemovePod,
    StartPolicy,
)
from policy.cpu.replies import AllocationReply, CPUAllocation
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from policy.cpu.residual_check import ListingSummary, ResidualEvidence, Sighting
from policy.decision import Decision
from policy.errors import PolicyError
from tests.policy.cpu.residual_fixtures import evidence
from tests.policy.decision_fixtures import dedicated, request

T0 = 1715180645.0

#: A version-1 Allocate cause as ac84ea9 wrote it (tests/fixtures/journal-ac84ea9, record 2).
V1_ALLOCATE: dict[str, Any] = {
    "rpc": "Allocate",
    "now": T0,
    "request": {
        "pod_uid": "pod-a",
        "pod_namespace": "default",
        "pod_name": "name-pod-a",
        "container_name": "app",
        "container_type": "MAIN",
        "container_index": 0,
        "resource_name": "cpu",
        "resource_requests": {"cpu": 2},
        "pod_role": "",
        "pod_type": "",
        "hint": None,
        "labels": {"app": "pod-a"},
        "annotations": {},
        "native_qos_class": "Guaranteed",
    },
}


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(AllocateInputs(Allocate(request("pod-a"))), id="an unknown pod's Allocate"),
        pytest.param(
            AllocateInputs(Allocate(dedicated(hint=(1, 2))), PodPhase("Running", 2.5)),
            id="a dedicated Allocate of a running pod, with a hint",
        ),
        pytest.param(RemovePod("pod-a"), id="a RemovePod"),
        pytest.param(GetResourcesAllocation(), id="a GetResourcesAllocation"),
        pytest.param(GetTopologyAwareResources("p", "c"), id="a topology-aware query"),
        pytest.param(PreStartContainer("p", "ns", "n", "c"), id="a PreStartContainer"),
        pytest.param(StartPolicy(), id="the start-up"),
        pytest.param(
            ResidualPods(evidence("pod-b", "pod-c", at=T0, missing=("pod-d",)), ("pod-c",)),
            id="a residual removal with its evidence and an advisor refusal",
        ),
        pytest.param(
            ResidualPods(ResidualEvidence({}, ("pod-b",), None, counted=True)),
            id="a residual removal with no listing (an upgraded one)",
        ),
    ],
)
def test_inputs_survive_the_journal(inputs: Any) -> None:
    cause = cause_of(inputs, T0)
    assert cause["cause_version"] == CAUSE_VERSION
    stored = msgpack.unpackb(msgpack.packb(cause))
    decoded = decode_cause(stored)
    assert (decoded.inputs, decoded.now, decoded.version) == (inputs, T0, CAUSE_VERSION)


def test_an_allocate_cause_holds_the_pod_phase_it_read() -> None:
    inputs = AllocateInputs(Allocate(request("pod-a")), PodPhase("Pending", 12.0))
    assert cause_of(inputs, T0)["pod"] == {"phase": "Pending", "listing_age_s": 12.0}


def test_a_version_1_allocate_upgrades_with_the_pod_phase_unknown() -> None:
    upgraded = upgrade_cause(V1_ALLOCATE)
    assert upgraded == {
        **V1_ALLOCATE,
        "cause_version": 3,
        "pod": {"phase": "unknown", "listing_age_s": None},
    }
    assert "cause_version" not in V1_ALLOCATE  # the record's own cause is not changed
    decoded = decode_cause(V1_ALLOCATE)
    assert decoded.version == 1
    assert decoded.inputs == AllocateInputs(Allocate(request("pod-a")), PodPhase())


@pytest.mark.parametrize(
    ("cause", "want"),
    [
        pytest.param({"rpc": "RemovePod", "now": T0, "pod_uid": "p"}, RemovePod("p"), id="removal"),
        pytest.param({"rpc": "StartPolicy", "now": T0}, StartPolicy(), id="start-up"),
    ],
)
def test_version_1_causes_without_a_pod_read_decode_unchanged(cause: Any, want: Any) -> None:
    assert upgrade_cause(cause) == {**cause, "cause_version": 3}
    assert decode_cause(cause).inputs == want


@pytest.mark.parametrize(
    "cause",
    [
        pytest.param(
            {"rpc": "RemoveResidualPods", "now": T0, "pod_uids": ["b"]}, id="of version 1"
        ),
        pytest.param(
            {"rpc": "RemoveResidualPods", "cause_version": 2, "now": T0, "pod_uids": ["b"]},
            id="of version 2",
        ),
    ],
)
def test_an_older_residual_removal_upgrades_to_evidence_naming_only_its_candidates(
    cause: dict[str, Any],
) -> None:
    """Before version 3 the Allocator kept its own count and journaled the candidates; they
    become the due pods of evidence with no listing, no sightings and no advisor refusal."""
    assert upgrade_cause(cause) == {
        **cause,
        "cause_version": 3,
        "listing": None,
        "sightings": {},
        "advisor_refused": [],
    }
    decoded = decode_cause(cause)
    assert decoded.inputs == ResidualPods(ResidualEvidence({}, ("b",), None, counted=True))
    assert decoded.version == cause.get("cause_version", 1)


_RESIDUAL = cause_of(ResidualPods(evidence("pod-b", at=T0)), T0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            {"sightings": {"pod-b": {"first_at": T0, "last_at": T0, "count": "10"}}},
            "RemoveResidualPods.sightings.pod-b: field 'count' is '10', not an integer",
            id="a sighting count as text",
        ),
        pytest.param(
            {"sightings": []},
            "RemoveResidualPods: field 'sightings' is [], not a map",
            id="sightings as a list",
        ),
        pytest.param(
            {"listing": {"fingerprint": "f", "pods": 1}},
            "RemoveResidualPods.listing: field 'fetched_at' is None, not a number",
            id="a listing without its time",
        ),
        pytest.param(
            {"pod_uids": "pod-b"},
            "RemoveResidualPods: pod_uids 'pod-b' is not a list of strings",
            id="candidates as one string",
        ),
        pytest.param(
            {"advisor_refused": [1]},
            "RemoveResidualPods: advisor_refused [1] is not a list of strings",
            id="refusals that are not uids",
        ),
    ],
)
def test_a_bad_residual_cause_names_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(CauseError) as caught:
        decode_cause({**_RESIDUAL, **change})
    assert message in str(caught.value)


_UIDS = st.sampled_from(["pod-a", "pod-b", "pod-c"])
_SIGHTINGS = st.builds(Sighting, st.floats(0, 4e9), st.floats(0, 4e9), st.integers(1, 100))
_EVIDENCE = st.builds(
    ResidualEvidence,
    st.dictionaries(_UIDS, _SIGHTINGS, max_size=3),
    st.lists(_UIDS, unique=True, max_size=3).map(lambda u: tuple(sorted(u))),
    st.none()
    | st.builds(ListingSummary, st.text(max_size=16), st.integers(0, 10**5), st.floats(0, 4e9)),
    st.just(True),
)


@given(proof=_EVIDENCE, refused=st.lists(_UIDS, unique=True, max_size=2), now=st.floats(0, 4e9))
def test_any_residual_evidence_decodes_to_itself(
    proof: ResidualEvidence, refused: list[str], now: float
) -> None:
    inputs = ResidualPods(proof, tuple(sorted(refused)))
    decoded = decode_cause(msgpack.unpackb(msgpack.packb(cause_of(inputs, now))))
    assert decoded.inputs == inputs and decoded.now == now


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param({"cause_version": 4}, "version 4; this qrmd reads versions 1 to 3", id="new"),
        pytest.param({"cause_version": True}, "version True;", id="a version that is a bool"),
        pytest.param({"cause_version": "2"}, "version '2';", id="a version that is text"),
        pytest.param({"rpc": "Tick"}, "no Allocator command: rpc='Tick'", id="not the Allocator's"),
        pytest.param({"now": "soon"}, "Allocate: field 'now' is 'soon', not a number", id="now"),
        pytest.param(
            {"request": {**V1_ALLOCATE["request"], "container_type": "BOGUS"}},
            "Allocate.request: container_type 'BOGUS' is unknown",
            id="unknown container type",
        ),
        pytest.param(
            {"request": {**V1_ALLOCATE["request"], "container_index": "0"}},
            "Allocate.request: field 'container_index' is '0', not an integer",
            id="index as text",
        ),
        pytest.param(
            {"request": {k: v for k, v in V1_ALLOCATE["request"].items() if k != "pod_uid"}},
            "Allocate.request: field 'pod_uid' is missing",
            id="missing uid",
        ),
        pytest.param(
            {"request": {**V1_ALLOCATE["request"], "hint": {"nodes": [0], "preferred": 1}}},
            "Allocate.request.hint: preferred 1 is not a bool",
            id="hint preference as a number",
        ),
        pytest.param(
            {"pod": {"phase": 7}},
            "Allocate.pod: field 'phase' is 7, not a string",
            id="phase as a number",
        ),
    ],
)
def test_a_bad_cause_names_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(CauseError) as caught:
        decode_cause({**V1_ALLOCATE, **change})
    assert message in str(caught.value)


_TEXT = st.text(max_size=8)
_REQUESTS = st.builds(
    ResourceRequest,
    pod_uid=_TEXT,
    pod_namespace=_TEXT,
    pod_name=_TEXT,
    container_name=_TEXT,
    container_type=st.sampled_from(ContainerType),
    container_index=st.integers(0, 2**31),
    resource_name=_TEXT,
    resource_requests=st.dictionaries(_TEXT, st.floats(allow_nan=False), max_size=2),
    pod_role=_TEXT,
    pod_type=_TEXT,
    hint=st.none() | st.builds(TopologyHint, st.tuples(st.integers(0, 64)), st.booleans()),
    labels=st.none() | st.dictionaries(_TEXT, _TEXT, max_size=2),
    annotations=st.none() | st.dictionaries(_TEXT, _TEXT, max_size=2),
    native_qos_class=_TEXT,
)
_PHASES = st.builds(
    PodPhase,
    st.sampled_from(["unknown", "Pending", "Running", "Succeeded", "Unknown", ""]),
    st.none() | st.floats(0, 1e6),
)


@given(request=_REQUESTS, pod=_PHASES, now=st.floats(0, 4e9))
def test_any_allocate_inputs_decode_to_themselves(
    request: ResourceRequest, pod: PodPhase, now: float
) -> None:
    inputs = AllocateInputs(Allocate(request), pod)
    decoded = decode_cause(msgpack.unpackb(msgpack.packb(cause_of(inputs, now))))
    assert decoded.inputs == inputs and decoded.now == now


class _Name(str):
    """A text subclass: the general walk keeps it, as the fast path must."""


@given(
    request=_REQUESTS,
    odd=st.sampled_from(["none", "subclassed name", "whole-number request", "bool NUMA id"]),
)
def test_an_allocate_request_packs_as_the_general_walk_packs_it(
    request: ResourceRequest, odd: str
) -> None:
    if odd == "subclassed name":
        request = replace(request, pod_name=_Name(request.pod_name))
    elif odd == "whole-number request":
        request = replace(request, resource_requests={"cpu": 2})
    elif odd == "bool NUMA id":
        request = replace(request, hint=TopologyHint((True, 3), preferred=True))
    # msgpack bytes: the same keys in the same order, the same value types.
    assert msgpack.packb(_request_plain(request)) == msgpack.packb(plain(request))


_GARBAGE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(garbage=st.dictionaries(st.sampled_from(["rpc", "now", "request", "pod"]), _GARBAGE))
def test_garbage_causes_raise_cause_error_only(garbage: dict[str, Any]) -> None:
    with pytest.raises(CauseError):
        decode_cause({"rpc": "Allocate", **garbage})


# -- the reply kubelet got ----------------------------------------------------------------------

_SENT = CPUAllocation("CpusetCpus", False, True, 14.0, "1,3-15", (None,))


@pytest.mark.parametrize(
    ("inputs", "decision", "want"),
    [
        pytest.param(
            AllocateInputs(Allocate(request("pod-a"))),
            Decision((), AllocationReply.echo(request("pod-a"), None, None, _SENT)),
            {"allocation": {"allocation_result": "1,3-15", "allocated_quantity": 14.0}},
            id="an Allocate keeps the cpu allocation it sent",
        ),
        pytest.param(
            AllocateInputs(Allocate(request("pod-a"))),
            Decision((), AllocationReply()),
            {"allocation": None},
            id="an Allocate answered without an allocation keeps that",
        ),
        pytest.param(
            AllocateInputs(Allocate(request("pod-a"))),
            Decision((), None, PolicyError("no CPUs left", subject="default/a/app")),
            {"error": "default/a/app: no CPUs left"},
            id="an Allocate that failed after committing keeps its error",
        ),
        pytest.param(
            GetResourcesAllocation(),
            Decision((), ResourcesAllocation({}, listed_after_events=2)),
            {"listed_after_events": 2},
            id="a listing keeps how many of its events the listed state holds, not the listing",
        ),
        pytest.param(RemovePod("pod-a"), Decision((), None), None, id="a RemovePod keeps none"),
    ],
)
def test_a_kubelet_calls_reply_is_kept_compactly(inputs: Any, decision: Any, want: Any) -> None:
    assert reply_of(inputs, decision) == want


def test_a_kept_reply_does_not_change_what_the_cause_decodes_to() -> None:
    inputs = AllocateInputs(Allocate(request("pod-a")))
    reply = {"allocation": {"allocation_result": "1", "allocated_quantity": 1.0}}
    cause = msgpack.unpackb(msgpack.packb(cause_of(inputs, T0, reply)))
    assert cause["reply"] == reply
    assert decode_cause(cause).inputs == inputs
    assert {k: v for k, v in cause.items() if k != "reply"} == cause_of(inputs, T0)
