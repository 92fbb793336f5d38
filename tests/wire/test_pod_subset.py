"""The Kubernetes Pod subset of wire.md §7.4 reads real pods and echoes them whole.

The agent sends full `k8s.io.api.core.v1.Pod` objects in `active_pods`; the balancer
echoes the chosen ones in `EvictPod.pod`. The subset declares only what qrmd reads, so
the fields it does not declare must survive a parse and re-serialize unchanged.
"""

from wire.gen import evictionplugin_pb2 as ep
from wire.gen import k8s_core_v1_pb2 as core


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    """A varint field (wire type 0)."""
    return _varint(number << 3) + _varint(value)


# A pod as Go encodes it, with fields the subset does not declare (marked "unknown").
MANAGED_FIELDS = _field(17, _field(1, b"kubectl"))  # ObjectMeta.managedFields: unknown
METADATA = (
    _field(1, b"web-0")
    + _field(3, b"default")
    + _field(5, b"uid-1")
    + _field(11, _field(1, b"app") + _field(2, b"web"))  # labels {"app": "web"}
    + MANAGED_FIELDS
)
QUANTITY = _field(1, b"1500m")
NAME = _field(1, b"main")
IMAGE = _field(2, b"nginx:1.25")  # Container.image: unknown
RESOURCES = _field(8, _field(2, _field(1, b"cpu") + _field(2, QUANTITY)))  # requests cpu=1500m


def _pod(container: bytes) -> bytes:
    spec = _field(2, container) + _field(10, b"node-a") + _varint_field(25, 0)  # priority 0
    status = _field(1, b"Running") + _field(9, b"Burstable") + _field(2, _field(1, b"Ready"))
    return _field(1, METADATA) + _field(2, spec) + _field(3, status)


POD = _pod(NAME + IMAGE + RESOURCES)  # Go writes fields in number order
# Python writes a message's known fields first, then its unknown ones. Field order does
# not matter on the wire (Go decodes either), and every unknown byte comes back.
POD_ECHOED = _pod(NAME + RESOURCES + IMAGE)


def test_declared_fields_decode_with_the_real_numbers() -> None:
    pod = core.Pod.FromString(POD)
    assert (pod.metadata.name, pod.metadata.namespace, pod.metadata.uid) == (
        "web-0",
        "default",
        "uid-1",
    )
    assert dict(pod.metadata.labels) == {"app": "web"}
    assert pod.spec.containers[0].name == "main"
    assert pod.spec.containers[0].resources.requests["cpu"].string == "1500m"
    assert pod.spec.nodeName == "node-a"
    assert pod.status.phase == "Running" and pod.status.qosClass == "Burstable"


def test_explicit_zero_priority_is_kept_apart_from_unset() -> None:
    pod = core.Pod.FromString(POD)
    assert pod.spec.HasField("priority") and pod.spec.priority == 0
    assert not core.PodSpec().HasField("priority")


def test_echoed_pod_keeps_every_field_it_was_sent_with() -> None:
    pod = core.Pod.FromString(POD)
    assert pod.SerializeToString() == POD_ECHOED
    request = ep.GetEvictPodsRequest.FromString(_field(1, POD))
    echoed = ep.EvictPod(pod=request.active_pods[0], force_evict=True)
    assert echoed.SerializeToString() == _field(1, POD_ECHOED) + _varint_field(4, 1)
