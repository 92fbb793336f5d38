"""Katalyst v0.5.47's GetAdvice request, its feature-gate negotiation and the NUMA headroom of
``extra_entries`` as plain values (``policy.cpu.advisor.advice``, ``extra_entries``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.cpu.advisor.advice import (
    AdviceRequestError,
    FeatureGate,
    advice_request,
    negotiate,
    snb_entries,
)
from policy.cpu.advisor.checkpoint import checkpoint_entries
from policy.cpu.advisor.decision import AdvisorSettings, apply_advice
from policy.cpu.advisor.extra_entries import HeadroomFormatError, numa_headroom_of
from policy.cpu.advisor.response import AdvisorResponse
from policy.cpu.advisor.validation import AdvisorValidationError, validate_request
from policy.cpu.reference import V0_5_47
from policy.state.entries import InPool, OwnCPUs
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.sections import State
from tests.policy.pool_fixtures import (
    CTX,
    cpus,
    dedicated,
    fresh_state,
    reclaimed,
    shared,
    with_events,
)

SIDECAR = ContainerAllocated(
    replace(
        shared("pod-a", OwnCPUs.of(cpus("6-7")), name="sidecar").entry,
        container_type="SIDECAR",
        owner_pool_name="",
        annotations={"katalyst.kubewharf.io/qos_level": "shared_cores"},
    )
)
MAIN = ContainerAllocated(
    replace(
        shared("pod-a", InPool("share"), name="main", quantity=2.5).entry,
        annotations={"katalyst.kubewharf.io/qos_level": "shared_cores", "numa_hint": "0"},
    )
)
STATE = with_events(
    fresh_state(),
    dedicated("pod-d", "4-5"),
    PoolSet("share", cpus("6-7")),
    MAIN,
    SIDECAR,
    reclaimed("pod-r"),
)


def test_every_entry_is_sent_pools_included_keyed_as_the_checkpoint_keys_them():
    request = advice_request(STATE.cpu)
    assert {name: sorted(subs) for name, subs in request.entries.items()} == {
        name: sorted(subs) for name, subs in checkpoint_entries(STATE.cpu).items()
    }
    assert request.wanted_feature_gates == {}


def test_a_pool_entry_has_no_container_type_and_carries_its_cpus():
    share = advice_request(STATE.cpu).entries["share"][""]
    assert share.metadata.container_type == "INIT"  # the enum's zero: off the wire
    assert share.allocation.owner_pool_name == "share"
    assert share.allocation.topology_aware_assignments == {3: cpus("6-7")}


def test_an_snb_pool_is_sent_tagged_shared_with_numa_binding():
    # policy_advisor_handler.go:1230-1237 at tag v0.5.47
    state = with_events(STATE, PoolSet("share-NUMA2", cpus("12-13")))
    snb = advice_request(state.cpu).entries["share-NUMA2"][""].metadata
    assert (snb.qos_level, snb.annotations) == ("shared_cores", {"numa_binding": "true"})
    plain = advice_request(state.cpu).entries["share"][""].metadata
    assert (plain.qos_level, plain.annotations) == ("", {})


def test_the_request_is_sent_in_milli_cpus_truncated_as_uint64_of_a_float():
    main = advice_request(STATE.cpu).entries["pod-a"]["main"].metadata
    assert (main.request_quantity, main.request_milli_quantity, main.use_milli_quantity) == (
        2,
        2500,
        True,
    )


def test_a_sidecar_without_owner_gets_its_main_pool_and_the_annotations_it_lacks():
    # policy_advisor_handler.go:277-300 at tag v0.5.47
    sidecar = advice_request(STATE.cpu).entries["pod-a"]["sidecar"]
    assert sidecar.allocation.owner_pool_name == "share"
    assert sidecar.metadata.annotations["numa_hint"] == "0"


@pytest.mark.parametrize(
    ("pod", "name", "has_assignments"),
    [
        pytest.param("pod-a", "main", False, id="a shared container is sent without its cpus"),
        pytest.param("pod-d", "c", True, id="a dedicated container is sent with them"),
        pytest.param("pod-r", "c", True, id="a reclaimed container too, unlike at v0.5.3"),
    ],
)
def test_assignments_are_left_out_for_shared_containers_only(
    pod: str, name: str, has_assignments: bool
) -> None:
    # policy_advisor_handler.go:303-307 at tag v0.5.47: !CheckShared() || IsPoolEntry()
    allocation = advice_request(STATE.cpu).entries[pod][name].allocation
    assert (allocation.topology_aware_assignments is not None) == has_assignments


def test_getcheckpoint_shows_reclaimed_cpus_at_v0547_only():
    assert checkpoint_entries(STATE.cpu)["pod-r"]["c"].topology_aware_assignments is None
    v0547 = checkpoint_entries(STATE.cpu, at_v0_5_47=True)["pod-r"]["c"]
    assert v0547.topology_aware_assignments is not None


def test_a_container_type_with_no_enum_name_fails_the_whole_request():
    odd = ContainerAllocated(replace(MAIN.entry, container_name="odd", container_type="ODD"))
    with pytest.raises(AdviceRequestError, match=r'container type "ODD" for container pod-a/odd'):
        advice_request(with_events(STATE, odd).cpu)


G1, G2, G3 = FeatureGate("gate1"), FeatureGate("gate2"), FeatureGate("gate3")


@pytest.mark.parametrize(
    ("wanted", "supported", "not_supported"),
    [
        # featuregatenegotiation/framework_test.go:29-88 at tag v0.5.47
        pytest.param({}, {"gate1": G1}, (), id="nothing wanted, nothing missing"),
        pytest.param({"gate1": G1, "gate2": G2}, {}, ("gate1", "gate2"), id="none supported"),
        pytest.param(
            {"gate1": G1, "gate2": G2, "gate3": G3},
            {"gate1": G1, "gate3": G3},
            ("gate2",),
            id="some wanted gates not supported",
        ),
        pytest.param(
            {"gate1": G1, "gate2": G2}, {"gate1": G1, "gate2": G2}, (), id="all supported"
        ),
    ],
)
def test_wanted_gates_the_advisor_does_not_support(
    wanted: dict[str, FeatureGate], supported: dict[str, FeatureGate], not_supported: tuple[str]
) -> None:
    assert negotiate(wanted, supported).not_supported == not_supported
    assert negotiate(wanted, supported).refusal == ""


def test_a_gate_that_must_be_mutually_supported_and_is_not_refuses_the_reply():
    must = FeatureGate("feature_gate_quota_ctrl_knob", must_mutually_supported=True)
    refusal = negotiate({must.name: must}, {}).refusal
    assert refusal == (
        "feature gate feature_gate_quota_ctrl_knob which must be mutually supported is not "
        "supported by cpu-advisor"
    )


#: The headroom of the reference's RNB hint cases (policy_test.go:3083 at tag v0.5.47).
HEADROOM = '{"0":2,"1":1,"2":2.5,"3":3}'


@pytest.mark.parametrize(
    ("entries", "headroom"),
    [
        pytest.param([], None, id="no extra entry: no headroom"),
        pytest.param([None], None, id="an entry without a result is skipped"),
        pytest.param([{"cgroup_config": "{}"}], None, id="an entry without the key is skipped"),
        pytest.param(
            [{"cpu_numa_headroom": HEADROOM}],
            {0: 2.0, 1: 1.0, 2: 2.5, 3: 3.0},
            id="the headroom by NUMA id",
        ),
        pytest.param([{"cpu_numa_headroom": "null"}], {}, id="JSON null is an empty headroom"),
        pytest.param(
            [{"cpu_numa_headroom": '{"0":1}'}, {"cpu_numa_headroom": '{"1":4}'}],
            {1: 4.0},
            id="the last entry with the key wins",
        ),
    ],
)
def test_the_numa_headroom_of_extra_entries(
    entries: list[dict[str, str] | None], headroom: dict[int, float] | None
) -> None:
    assert numa_headroom_of(entries) == headroom


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("[1,2]", id="not an object"),
        pytest.param('{"a":1}', id="a NUMA id that is no int"),
        pytest.param('{"0":"1"}', id="a value that is no number"),
        pytest.param("{", id="not JSON"),
    ],
)
def test_a_headroom_that_does_not_decode_fails_with_the_reference_message(value: str) -> None:
    with pytest.raises(HeadroomFormatError, match=r"^applyNUMAHeadroom failed with error: "):
        numa_headroom_of([{"cpu_numa_headroom": value}])


def test_the_headroom_is_journaled_only_when_the_response_carried_one():
    plain = AdvisorResponse({})
    assert "numa_headroom" not in plain.to_json()
    sent = AdvisorResponse({}, numa_headroom={0: 2.5}, numa_headroom_sent=True)
    assert sent.to_json()["numa_headroom"] == {"0": 2.5}
    assert AdvisorResponse.from_json(sent.to_json()) == sent
    empty = AdvisorResponse({}, numa_headroom_sent=True)
    assert AdvisorResponse.from_json(empty.to_json()).numa_headroom_sent
    assert sent.fingerprint() != plain.fingerprint()


SNB = ContainerAllocated(
    replace(
        shared("pod-s", InPool("share-NUMA3"), quantity=1).entry,
        annotations={"katalyst.kubewharf.io/qos_level": "shared_cores", "numa_binding": "true"},
    )
)
WITH_SNB = with_events(STATE, PoolSet("share-NUMA3", cpus("14-15")), SNB)
ASKED = snb_entries(advice_request(WITH_SNB.cpu))


def test_the_request_asks_about_snb_containers_and_their_pools():
    assert {("pod-s", "c"), ("share-NUMA3", "")} == ASKED


@pytest.mark.parametrize(
    ("state", "asked", "error"),
    [
        pytest.param(WITH_SNB, ASKED, None, id="state and request agree"),
        pytest.param(
            WITH_SNB,
            ASKED - {("pod-s", "c")},
            "missing request entry for shared_cores with numa_binding pod: pod-s container: c",
            id="an SNB container allocated after the request",
        ),
        pytest.param(
            STATE,
            frozenset({("pod-s", "c")}),
            "missing state entry for shared_cores with numa_binding pod: pod-s container: c",
            id="an SNB container removed after the request",
        ),
    ],
)
def test_an_answer_is_checked_against_its_request(
    state: State, asked: frozenset[tuple[str, str]], error: str | None
) -> None:
    # validator_cpu_advisor.go:46-91 at tag v0.5.47
    if error is None:
        validate_request(state.cpu, asked)
        return
    with pytest.raises(AdvisorValidationError, match=f"^{error}$"):
        validate_request(state.cpu, asked)


def test_an_answer_whose_request_missed_an_snb_container_is_refused_at_v0547_only():
    late = AdvisorResponse({}, asked_snb_entries=frozenset())
    v0547 = AdvisorSettings(replace(CTX, reference_version=V0_5_47))
    decision = apply_advice(WITH_SNB, late, v0547, 1.0)
    assert decision.reply.stage == "request"
    assert decision.reply.reason.startswith(
        "ValidateCPUAdvisorReq failed with error: missing request entry"
    )
    assert apply_advice(WITH_SNB, late, AdvisorSettings(CTX), 1.0).reply.stage != "request"
    assert AdvisorResponse.from_json(late.to_json()) == late
