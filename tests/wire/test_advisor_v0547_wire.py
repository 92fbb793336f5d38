"""The advisor protos serve both reference levels: what v0.5.47 added is off the wire at v0.5.3.

The byte vectors below were written by qrmd's v0.5.3 protos (commit 0fe4e5c, before the
v0.5.47 fields existed) from the same plain values; the v0.5.47 protos must give the same bytes
as long as nothing v0.5.47 added is set (proto3 leaves unset scalars and empty repeated fields
off the wire).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from policy.cpu.advisor.checkpoint import CheckpointEntry
from policy.cpu.advisor.push import ContainerMetadata
from policy.cpu.advisor.response import AdvisorResponse, Block, CalculationInfo, OverlapTarget
from policy.topology.cpuset import CPUSet
from wire.advisor_convert import checkpoint_to_proto, metadata_to_proto, response_to_bytes
from wire.gen import advisorsvc_pb2 as svc_pb
from wire.gen import cpuadvisor_pb2 as cpu_pb

QOS = "katalyst.kubewharf.io/qos_level"

METADATA = ContainerMetadata(
    "pod-1", "ns", "web", "app", "MAIN", 0, {QOS: "shared_cores"}, {QOS: "shared_cores"},
    "shared_cores", 3,
)  # fmt: skip
METADATA_V053 = (
    "0a05706f642d3112026e731a03776562220361707028013a2f0a1f6b6174616c7973742e6b75626577686172"
    "662e696f2f716f735f6c6576656c120c7368617265645f636f726573422f0a1f6b6174616c7973742e6b7562"
    "6577686172662e696f2f716f735f6c6576656c120c7368617265645f636f7265734a0c7368617265645f636f"
    "7265735003"
)


def _shared_block(target: str) -> CalculationInfo:
    return CalculationInfo("share", {-1: (Block(6, "b1", (OverlapTarget(target, "", "", 1),)),)})


RESPONSE = AdvisorResponse(
    {"share": {"": _shared_block("reclaim")}, "pod-1": {"app": _shared_block("share")}},
    allow_shared_cores_overlap_reclaimed_cores=True,
)
RESPONSE_V053 = (
    "0a3b0a05706f642d3112320a300a0361707012290a057368617265122008ffffffffffffffffff0112131211"
    "080612090a05736861726520011a0262310a3a0a05736861726512310a2f0a00122b0a057368617265122208"
    "ffffffffffffffffff01121512130806120b0a077265636c61696d20011a0262311001"
)

_POOL_CPUS = {0: CPUSet.parse("1,9")}
CHECKPOINT = {
    "share": {"": CheckpointEntry(False, "share", _POOL_CPUS, _POOL_CPUS)},
    "pod-1": {"app": CheckpointEntry(True, "")},
}
CHECKPOINT_V053 = (
    "0a140a05706f642d31120b0a090a03617070120208010a280a057368617265121f0a1d0a001219120573686172"
    "651a0708001203312c39220708001203312c39"
)


@pytest.mark.parametrize(
    ("written", "v053"),
    [
        pytest.param(
            lambda: metadata_to_proto(METADATA).SerializeToString(),
            METADATA_V053,
            id="AddContainer's metadata is the v0.5.3 bytes",
        ),
        pytest.param(
            lambda: response_to_bytes(RESPONSE), RESPONSE_V053, id="a ListAndWatch response is"
        ),
        pytest.param(
            lambda: checkpoint_to_proto(CHECKPOINT).SerializeToString(deterministic=True),
            CHECKPOINT_V053,
            id="a GetCheckpoint answer is",
        ),
    ],
)
def test_v053_messages_keep_their_bytes(written: Callable[[], bytes], v053: str) -> None:
    assert written().hex() == v053


def test_the_v0547_fields_are_read_under_the_reference_numbers() -> None:
    # advisor_svc.proto:47-48 and cpu.proto:37 at tag v0.5.47.
    metadata = svc_pb.ContainerMetadata(requestMilliQuantity=2500, useMilliQuantity=True)
    assert metadata.SerializeToString() == b"\x58\xc4\x13" + b"\x60\x01"
    response = cpu_pb.ListAndWatchResponse()
    response.extra_entries.add().calculation_result.values["cpu_numa_headroom"] = "{}"
    assert response.SerializeToString().startswith(b"\x1a")  # field 3, length-delimited
