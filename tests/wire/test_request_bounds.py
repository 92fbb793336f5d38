"""An oversized name is INVALID_ARGUMENT naming the field, and nothing is journaled:
one Allocate with a giant ``pod_name`` used to grow the journal by twice its size."""

from __future__ import annotations

import grpc
import pytest

from tests.wire.plugin_node import WireNode, resource_request
from tests.wire.test_plugin_rpcs import code_of


@pytest.mark.parametrize(
    ("field", "size"),
    [
        pytest.param("pod_name", 1 << 20, id="a one mebibyte pod name is refused"),
        pytest.param("pod_uid", 129, id="a 129-byte pod uid is refused"),
        pytest.param("container_name", 64, id="a 64-byte container name is refused"),
    ],
)
@pytest.mark.parametrize("rpc", ["Allocate", "GetTopologyHints"])
def test_an_oversized_string_is_invalid_argument_and_changes_nothing(
    node: WireNode, rpc: str, field: str, size: int
) -> None:
    request = resource_request("pod-big")
    setattr(request, field, "x" * size)
    seq = node.seq
    got, details = code_of(getattr(node.client.plugin, rpc), request, timeout=10)
    assert got == grpc.StatusCode.INVALID_ARGUMENT
    assert f"{field} is {size} bytes, more than Kubernetes allows" in details
    assert len(details) < 1000
    assert node.seq == seq
