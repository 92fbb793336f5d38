"""A container's identity: one value from request to reply, flat in stored records."""

from __future__ import annotations

from policy.state.identity import ContainerIdentity, ContainerType, stored_identity
from tests.policy.decision_fixtures import Node, request

WEB = ContainerIdentity("uid-1", "default", "web", "app", ContainerType.SIDECAR, 2)


def test_the_stored_form_spells_the_type_by_its_name() -> None:
    assert WEB.stored() == {
        "pod_uid": "uid-1",
        "pod_namespace": "default",
        "pod_name": "web",
        "container_name": "app",
        "container_type": "SIDECAR",
        "container_index": 2,
    }
    assert WEB.key == ("uid-1", "app")


def test_a_request_s_identity_is_echoed_and_stored_unchanged() -> None:
    req = request("pod-a", container="app")
    node = Node()
    reply = node.allocate(req)
    assert reply.identity == req.identity
    entry = node.state.cpu.entry("pod-a", "app")
    assert entry is not None and stored_identity(entry) == req.identity.stored()
    info = node.state.cpu.allocation_info("pod-a", "app")
    assert info is not None and stored_identity(info) == stored_identity(entry)
