"""Request types, quantity parsing and validation (spec cpu-policy §4.1, §4.2; §16 item 8)."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.cpu.request import (
    MAX_CPU_REQUEST,
    ContainerType,
    Quantity,
    RequestError,
    ResourceRequest,
    TopologyHint,
    parse_quantity,
    validate_request,
)
from policy.errors import PolicyError

MILLICPU = "resource.katalyst.kubewharf.io/reclaimed_millicpu"


def web_app(**changes: object) -> ResourceRequest:
    request = ResourceRequest(
        pod_uid="1234",
        pod_namespace="default",
        pod_name="web",
        container_name="app",
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": 1.0},
    )
    return dataclasses.replace(request, **changes)  # type: ignore[arg-type]


def test_container_type_numbers_and_stored_names() -> None:
    assert [(t.value, t.name) for t in ContainerType] == [
        (0, "INIT"),
        (1, "MAIN"),
        (2, "SIDECAR"),
        (3, "EPHEMERAL"),
    ]


@pytest.mark.parametrize(
    ("requests", "want"),
    [
        pytest.param({"cpu": 1.2}, Quantity(2, 1.2), id="cpu 1.2 is 2 whole CPUs and 1.2 exact"),
        pytest.param(
            {MILLICPU: 1500}, Quantity(2, 1.5), id="1500 reclaimed millicpu is 2 CPUs and 1.5"
        ),
        pytest.param({"cpu": 4}, Quantity(4, 4.0), id="whole cpu request stays whole"),
        pytest.param({"cpu": 0}, Quantity(0, 0.0), id="zero cpu is allowed"),
        pytest.param({"cpu": -0.0}, Quantity(0, 0.0), id="negative zero reads as zero"),
        pytest.param({MILLICPU: 1}, Quantity(1, 0.001), id="one millicore rounds up to a CPU"),
        pytest.param({"memory": 1024.5}, Quantity(1025, 1024.5), id="memory bytes round up"),
        pytest.param(
            {"resource.katalyst.kubewharf.io/reclaimed_memory": 7},
            Quantity(7, 7.0),
            id="reclaimed memory is taken as is",
        ),
        pytest.param(
            {"resource.katalyst.kubewharf.io/net_bandwidth": 100},
            Quantity(100, 100.0),
            id="net bandwidth is taken as is",
        ),
        pytest.param(
            {"cpu": MAX_CPU_REQUEST}, Quantity(MAX_CPU_REQUEST, 1e6), id="the bound itself is fine"
        ),
    ],
)
def test_parse_quantity(requests: dict[str, float], want: Quantity) -> None:
    assert parse_quantity(requests) == want


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        pytest.param({}, "invalid req.ResourceRequests length: 0", id="no key is refused"),
        pytest.param(
            {"cpu": 1, "memory": 2},
            "invalid req.ResourceRequests length: 2",
            id="two keys are refused",
        ),
        pytest.param(
            {"nvidia.com/gpu": 1},
            "invalid request resource name: nvidia.com/gpu",
            id="unknown resource name is refused",
        ),
        pytest.param({"cpu": -1}, "cpu request -1 is negative", id="negative cpu is refused"),
        pytest.param(
            {"cpu": -0.5}, "cpu request -0.5 is negative", id="small negative is refused too"
        ),
        pytest.param({"cpu": math.nan}, "cpu request nan is not a number", id="NaN is refused"),
        pytest.param({"cpu": math.inf}, "cpu request inf is infinite", id="infinity is refused"),
        pytest.param(
            {"cpu": 1e6 + 1},
            "cpu request 1000001 is absurd: more than 1000000 CPUs",
            id="more than a million CPUs is absurd",
        ),
        pytest.param(
            {MILLICPU: 2e9},
            f"{MILLICPU} request 2000000000 is absurd: more than 1000000 CPUs",
            id="millicores are bounded in CPUs",
        ),
        pytest.param(
            {"memory": 2.0**60}, "is absurd: more than 2**53 units", id="absurd bytes are refused"
        ),
        pytest.param({"cpu": "2"}, "cpu request '2' is not a number", id="text is refused"),
        pytest.param(
            {"cpu": 10**5000},
            "cpu request is absurd: a 16610-bit integer",
            id="a huge int is refused",
        ),
        pytest.param({"cpu": True}, "cpu request True is not a number", id="a bool is refused"),
    ],
)
def test_parse_quantity_refuses(requests: dict[str, object], message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_quantity(requests)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param(
            {"pod_uid": ""},
            "pod default/web (uid ), container app: pod uid is empty",
            id="empty pod uid is refused",
        ),
        pytest.param(
            {"container_name": ""},
            "pod default/web (uid 1234), container : container name is empty",
            id="empty container name is refused",
        ),
        pytest.param(
            {"container_index": -1},
            "pod default/web (uid 1234), container app: container index -1 is negative",
            id="negative container index is refused",
        ),
        pytest.param(
            {"hint": TopologyHint((0, 1, 0), True)},
            "pod default/web (uid 1234), container app: hint names NUMA nodes [0] more than once",
            id="hint naming a NUMA node twice is refused",
        ),
        pytest.param(
            {"hint": TopologyHint((-1, 2), False)},
            "pod default/web (uid 1234), container app: hint names negative NUMA nodes [-1]",
            id="hint naming a negative NUMA node is refused",
        ),
    ],
)
def test_validate_request_refuses(changes: dict[str, object], message: str) -> None:
    with pytest.raises(RequestError) as caught:
        validate_request(web_app(**changes))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({}, id="a plain request passes"),
        pytest.param({"hint": TopologyHint((), False)}, id="an empty hint passes"),
        pytest.param({"hint": TopologyHint((3, 1), True)}, id="a hint keeps kubelet's order"),
        pytest.param({"pod_namespace": "", "pod_name": ""}, id="empty namespace and name pass"),
    ],
)
def test_validate_request_accepts(changes: dict[str, object]) -> None:
    validate_request(web_app(**changes))


def test_request_error_is_a_policy_error() -> None:
    assert issubclass(RequestError, PolicyError) and issubclass(PolicyError, ValueError)


def test_describe_container_names_pod_and_container() -> None:
    assert web_app().describe() == "pod default/web (uid 1234), container app"


_names = st.sampled_from(
    ["cpu", MILLICPU, "memory", "resource.katalyst.kubewharf.io/net_bandwidth", "gpu", ""]
)
_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**320),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_names, _values, max_size=3))
def test_garbage_quantities_raise_only_request_error(requests: dict[str, object]) -> None:
    try:
        quantity = parse_quantity(requests)
    except RequestError:
        return
    assert quantity.req_int >= 0 and quantity.req_int == math.ceil(quantity.req_float)
