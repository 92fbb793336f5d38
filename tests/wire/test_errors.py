"""One gRPC status per error class (wire.errors), with messages naming pod and container."""

from __future__ import annotations

import grpc
import pykka
import pytest

from actors.allocator_messages import AllocatorUnavailable
from actors.store_messages import CommitRefused, StoreUnavailable
from policy.cpu.allocate import AllocationError
from policy.cpu.hints import NO_NUMA_BINDING, NOT_EXCLUSIVE_TOO_LARGE, HintError
from policy.cpu.pool_sizing import PoolError
from policy.cpu.qos import QoSError
from policy.cpu.request import RequestError
from policy.cpu.topology_aware import UnknownContainerError
from policy.errors import PolicyError
from policy.topology.selection import NOT_ENOUGH_CPUS, SelectionError
from wire.errors import NotReady, code_for, status_for

C = grpc.StatusCode


def wrapped(outer: PolicyError, inner: BaseException) -> PolicyError:
    outer.__cause__ = inner
    return outer


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(UnknownContainerError("u", "c"), C.NOT_FOUND, id="unknown container"),
        pytest.param(RequestError("pod uid is empty"), C.INVALID_ARGUMENT, id="bad request"),
        pytest.param(QoSError("can't get valid qos level"), C.INVALID_ARGUMENT, id="bad QoS"),
        pytest.param(
            SelectionError(NOT_ENOUGH_CPUS, requested=8, available=3),
            C.RESOURCE_EXHAUSTED,
            id="selection shortage",
        ),
        pytest.param(
            AllocationError("results can't meet cpus request"),
            C.RESOURCE_EXHAUSTED,
            id="exclusive NUMA too small",
        ),
        pytest.param(AllocationError("get empty pooledCPUs"), C.RESOURCE_EXHAUSTED, id="no pool"),
        pytest.param(
            AllocationError("pool: reclaim is not empty"), C.RESOURCE_EXHAUSTED, id="empty reclaim"
        ),
        pytest.param(
            wrapped(
                AllocationError("take cpu failed"),
                SelectionError(NOT_ENOUGH_CPUS, requested=8, available=3),
            ),
            C.RESOURCE_EXHAUSTED,
            id="a shortage wrapped by the allocation",
        ),
        pytest.param(
            wrapped(AllocationError("pod x: failed"), QoSError("bad level")),
            C.INVALID_ARGUMENT,
            id="a bad request wrapped by the allocation",
        ),
        pytest.param(AllocationError(NO_NUMA_BINDING), C.FAILED_PRECONDITION, id="no binding"),
        pytest.param(AllocationError("hint is nil"), C.FAILED_PRECONDITION, id="nil hint"),
        pytest.param(HintError(NOT_EXCLUSIVE_TOO_LARGE), C.FAILED_PRECONDITION, id="too large"),
        pytest.param(PoolError("adjust failed"), C.FAILED_PRECONDITION, id="other policy error"),
        pytest.param(AllocatorUnavailable("commit refused"), C.UNAVAILABLE, id="not durable"),
        pytest.param(CommitRefused("disk full"), C.UNAVAILABLE, id="commit refused"),
        pytest.param(StoreUnavailable("truncate failed"), C.UNAVAILABLE, id="store unavailable"),
        pytest.param(pykka.Timeout("timed out"), C.UNAVAILABLE, id="ask timed out"),
        pytest.param(pykka.ActorDeadError("dead"), C.UNAVAILABLE, id="allocator stopped"),
        pytest.param(NotReady("starting"), C.UNAVAILABLE, id="not ready"),
        pytest.param(KeyError("bug"), C.INTERNAL, id="a bug"),
    ],
)
def test_each_error_class_answers_one_code(error: BaseException, code: grpc.StatusCode) -> None:
    assert code_for(error) is code


SUBJECT = "pod default/web (uid u-1), container app"


@pytest.mark.parametrize(
    ("error", "message"),
    [
        pytest.param(
            RequestError("invalid req.ResourceRequests length: 2"),
            f"Allocate: {SUBJECT}: invalid req.ResourceRequests length: 2",
            id="the subject is added",
        ),
        pytest.param(
            RequestError(f"{SUBJECT}: pod uid is empty"),
            f"Allocate: {SUBJECT}: pod uid is empty",
            id="not twice",
        ),
        pytest.param(
            pykka.Timeout("9.95 seconds"),
            f"Allocate: {SUBJECT}: no answer from the allocator in time (9.95 seconds)",
            id="a timeout says so",
        ),
        pytest.param(
            KeyError("x"),
            f"Allocate: {SUBJECT}: internal error (KeyError): 'x'",
            id="a bug says so",
        ),
    ],
)
def test_message_names_rpc_pod_container_and_reason(error: BaseException, message: str) -> None:
    assert status_for(error, "Allocate", SUBJECT).message == message


def test_message_without_a_subject() -> None:
    status = status_for(CommitRefused("disk full"), "GetResourcesAllocation")
    assert status == status_for(CommitRefused("disk full"), "GetResourcesAllocation", "")
    assert status.message == "GetResourcesAllocation: disk full"
    assert status.code is C.UNAVAILABLE
