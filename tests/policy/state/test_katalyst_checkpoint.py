"""Export to and import from the reference's checkpoint (spec cpu-policy §13.3, §5.4).

The round trip is checked on states built by random kubelet call sequences: the façade state
machine of ``tests/policy/cpu/test_facade_stateful.py``, with one more invariant.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

from policy.state.cpu_state import CPUState
from policy.state.entries import RAMPING, InPool
from policy.state.katalyst_checkpoint import (
    CheckpointCorruptedError,
    CheckpointMismatchError,
    export_document,
    imported_state,
    plan_import,
)
from policy.state.katalyst_decode import decode_document
from policy.state.katalyst_file import checksum_of, encode_document
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.cpu.test_facade_stateful import PolicyMachine
from tests.policy.decision_fixtures import CTX, Node, request
from tests.policy.state.katalyst_vectors import vector_text

ONE_NUMA_4 = generate_dummy_cpu_topology(4, 1, 1)  # the vectors' 4-CPU single-NUMA machine


def round_trip(state: CPUState) -> CPUState:
    data = encode_document(export_document(state))
    plan = plan_import(decode_document(data), state.topology, skip_corruption=False)
    return imported_state(plan, state.topology)


def assert_same_for_the_reference(before: CPUState, after: CPUState) -> None:
    assert after.pools == before.pools
    assert list(after.allocation_infos()) == list(before.allocation_infos())
    assert encode_document(export_document(after)) == encode_document(export_document(before))


class RoundTripMachine(PolicyMachine):
    @invariant()
    def export_then_import_is_the_identity(self) -> None:
        if hasattr(self, "node"):
            state = self.node.state.cpu
            assert_same_for_the_reference(state, round_trip(state))


RoundTripMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_round_trip_over_random_kubelet_workloads = RoundTripMachine.TestCase


def test_export_carries_a_valid_checksum_and_the_regenerated_machine_state() -> None:
    node = Node(CTX)
    node.allocate(request("web", cpu=2, qos="shared_cores"))
    doc = export_document(node.state.cpu)
    again = decode_document(encode_document(doc))
    plan = plan_import(again, CTX.topology, skip_corruption=False)
    assert plan.notes == ()
    assert set(doc["pod_entries"]) == {"web", "reserve", "reclaim"}
    assert sorted(doc["machineState"]) == [0, 1, 2, 3]


def test_imported_containers_follow_their_pool_or_the_ramp_up_set() -> None:
    node = Node(CTX)
    node.allocate(request("web", cpu=2, qos="shared_cores"))
    node.allocate(request("batch", cpu=1, qos="reclaimed_cores"))
    state = round_trip(node.state.cpu)
    web, batch = state.require_entry("web", "app"), state.require_entry("batch", "app")
    before = node.state.cpu.allocation_info("web", "app")
    assert before is not None and before.ramp_up
    assert web.placement == RAMPING and state.ramp_cpus == before.allocation_result
    assert batch.placement == InPool("reclaim")


def test_the_v4_container_is_imported_on_its_own_cpus_when_no_pool_matches() -> None:
    plan = plan_import(decode_document(vector_text("V4")), ONE_NUMA_4, skip_corruption=False)
    state = imported_state(plan, ONE_NUMA_4)
    assert set(state.pools) == {"reserve"} and str(state.pools["reserve"]) == "0"
    entry = state.require_entry("pod-a", "app")
    assert entry.ramp_up and entry.request_quantity == 1.5
    assert entry.init_timestamp == "2024-05-08 15:04:05.123456789 +0800 CST"
    assert str(state.placement_cpus(entry.placement)[0]) == "1-3"
    # V4's stored NUMA entry equals the regenerated one, so nothing is to be said.
    assert plan.notes == ()


def test_v1_machine_state_is_regenerated_with_a_note() -> None:
    plan = plan_import(decode_document(vector_text("V1")), ONE_NUMA_4, skip_corruption=False)
    assert plan.events == ()
    assert any("regenerated" in note for note in plan.notes)  # {} stored, null regenerated


def _corrupted() -> str:
    doc = json.loads(vector_text("V4"))
    doc["pod_entries"]["pod-a"]["app"]["allocation_result"] = "1-2"
    doc["pod_entries"]["pod-a"]["app"]["topology_aware_assignments"] = {"0": "1-2"}
    return json.dumps(doc)


def test_a_checksum_mismatch_is_refused_with_the_reference_message() -> None:
    with pytest.raises(
        CheckpointCorruptedError, match=r"^checkpoint is corrupted: checksum 4093228067"
    ):
        plan_import(decode_document(_corrupted()), ONE_NUMA_4, skip_corruption=False)


def test_a_checksum_mismatch_is_accepted_when_skipping_corruption() -> None:
    plan = plan_import(decode_document(_corrupted()), ONE_NUMA_4, skip_corruption=True)
    state = imported_state(plan, ONE_NUMA_4)
    assert str(state.allocation_info("pod-a", "app").allocation_result) == "1-2"  # type: ignore[union-attr]
    assert any(note.startswith("checkpoint is corrupted") for note in plan.notes)


def test_another_policy_name_is_refused_as_the_reference_does() -> None:
    doc = json.loads(vector_text("V1"))
    doc["policyName"] = "native"
    doc["checksum"] = checksum_of(decode_document(json.dumps(doc)))  # a well-formed file
    with pytest.raises(
        CheckpointCorruptedError, match='differs from state checkpoint policy "native"'
    ):
        plan_import(decode_document(json.dumps(doc)), ONE_NUMA_4, skip_corruption=False)
    skipped = plan_import(decode_document(json.dumps(doc)), ONE_NUMA_4, skip_corruption=True)
    assert any("native" in note for note in skipped.notes)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(
            lambda d: d["pod_entries"]["pod-a"]["app"].update(
                allocation_result="1-9", topology_aware_assignments={"0": "1-9"}
            ),
            "CPUs 4-9 do not exist on this machine",
            id="cpus beyond the machine are refused",
        ),
        pytest.param(
            lambda d: d["pod_entries"]["pod-a"]["app"].update(
                topology_aware_assignments={"3": "1-3"}
            ),
            "NUMA node 3 does not exist",
            id="a numa id beyond the machine is refused",
        ),
        pytest.param(
            lambda d: d["machineState"].update({"1": d["machineState"]["0"]}),
            "machineState.1: NUMA node 1 does not exist",
            id="a machine state numa beyond the machine is refused",
        ),
        pytest.param(
            lambda d: d["pod_entries"]["pod-a"]["app"].update(
                original_topology_aware_assignments={"0": "1"}
            ),
            "is not the NUMA split of original_allocation_result 1-3",
            id="topology fields that are not the split of the cpuset are refused",
        ),
        pytest.param(
            lambda d: d["pod_entries"]["pod-a"]["app"].update(pod_uid="pod-b"),
            "the record names pod 'pod-b'",
            id="a record filed under another pod's key is refused",
        ),
    ],
)
def test_checkpoints_that_do_not_fit_this_machine_are_refused(damage, message) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(vector_text("V4"))
    damage(doc)
    with pytest.raises(CheckpointMismatchError, match=message):
        plan_import(decode_document(json.dumps(doc)), ONE_NUMA_4, skip_corruption=True)
