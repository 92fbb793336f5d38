"""sys-advisor's messages ↔ plain values, Go's nil map values included (wire.md §1.1, §6.3)."""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.cpu.advisor.checkpoint import CheckpointEntry
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo, OverlapTarget
from policy.topology.cpuset import CPUSet
from wire.advisor_convert import (
    AdvisorWireError,
    checkpoint_from_proto,
    checkpoint_to_proto,
    metadata_from_proto,
    metadata_to_proto,
    response_from_bytes,
    response_to_bytes,
)
from wire.gen import cpuadvisor_pb2 as cpu_pb

FULL = AdvisorResponse(
    {
        "share": {
            "": CalculationInfo(
                "share",
                {-1: (Block(6, "b1", (OverlapTarget("reclaim", "", "", 1),)),), 0: None},
            )
        },
        "ghost": None,
        "pod-a": {"c": None, "d": CalculationInfo("share", {})},
    },
    allow_shared_cores_overlap_reclaimed_cores=True,
)


def test_a_response_round_trips_with_its_nil_values():
    assert response_from_bytes(response_to_bytes(FULL)) == FULL


def test_go_nil_values_are_keys_without_values_and_python_sees_them_empty():
    data = response_to_bytes(FULL)
    message = cpu_pb.ListAndWatchResponse()
    message.ParseFromString(data)  # what Go's nil looks like to the generated code
    assert message.entries["ghost"].entries == {}
    assert response_from_bytes(data).entries["ghost"] is None


def test_bytes_written_by_the_generated_code_decode_the_same():
    message = cpu_pb.ListAndWatchResponse()
    info = message.entries["share"].entries[""]
    info.owner_pool_name = "share"
    info.calculation_results_by_numas[-1].blocks.add(result=3, block_id="q")
    decoded = response_from_bytes(message.SerializeToString())
    assert decoded == AdvisorResponse(
        {"share": {"": CalculationInfo("share", {-1: (Block(3, "q"),)})}}
    )


@given(st.binary(max_size=200))
def test_garbage_raises_the_wire_error_and_nothing_else(data: bytes) -> None:
    with contextlib.suppress(AdvisorWireError):
        response_from_bytes(data)


def test_metadata_round_trips_and_the_type_goes_by_name():
    metadata = ContainerMetadata(
        "pod", "ns", "name", "c", "SIDECAR", 2, {"l": "1"}, {"a": "2"}, "shared_cores", 3
    )
    message = metadata_to_proto(metadata)
    assert message.container_type == 2 and message.requestQuantity == 3
    assert metadata_from_proto(message) == metadata


def test_an_unknown_container_type_cannot_be_sent():
    with pytest.raises(AdvisorWireError, match="containerType: ODD not found"):
        metadata_to_proto(ContainerMetadata("p", "", "", "c", "ODD", 0))


def test_checkpoint_entries_round_trip():
    entries = {
        "share": {
            "": CheckpointEntry(False, "share", {0: CPUSet.parse("1,9")}, {0: CPUSet.parse("1,9")})
        },
        "pod": {"c": CheckpointEntry(True, "")},
    }
    assert checkpoint_from_proto(checkpoint_to_proto(entries)) == entries


def _with_names(entry: str, sub: str, owner: str, block_id: str, target_uid: str) -> bytes:
    return response_to_bytes(
        AdvisorResponse(
            {
                entry: {
                    sub: CalculationInfo(
                        owner, {0: (Block(2, block_id, (OverlapTarget("", target_uid, "", 1),)),)}
                    )
                }
            }
        )
    )


@pytest.mark.parametrize(
    ("names", "field"),
    [
        pytest.param(("e" * 254, "c", "share", "b", ""), "entries key", id="entry"),
        pytest.param(("pod", "c" * 64, "share", "b", ""), "entries[pod] key", id="container"),
        pytest.param(("pod", "c", "p" * 254, "b", ""), "owner_pool_name", id="owner pool"),
        pytest.param(("pod", "c", "share", "b" * 254, ""), "block_id", id="block id"),
        pytest.param(("pod", "c", "share", "b", "u" * 129), "overlap_target_pod_uid", id="target"),
    ],
)
def test_a_name_longer_than_kubernetes_allows_is_refused_naming_the_field(
    names: tuple[str, str, str, str, str], field: str
) -> None:
    with pytest.raises(AdvisorWireError, match=rf"{re.escape(field)} is \d+ bytes") as raised:
        response_from_bytes(_with_names(*names))
    assert len(str(raised.value)) < 400  # the name is quoted cut, not whole


def test_names_at_the_bounds_are_read() -> None:
    data = _with_names("e" * 253, "c" * 63, "p" * 253, "b" * 253, "u" * 128)
    response = response_from_bytes(data)
    info = response.info("e" * 253, "c" * 63)
    assert info is not None and info.owner_pool_name == "p" * 253
