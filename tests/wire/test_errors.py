"""One gRPC status per error class (wire.errors), with messages naming pod and container."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator

import grpc
import pykka
import pytest

import actors
import policy
import qrmd.host
from actors.allocator_messages import AllocatorUnavailable
from actors.balancer_messages import BalancerUnavailable
from actors.cpu_pressure_messages import PressureUnavailable
from actors.errors import ActorError
from actors.ports.advisor import AdvisorCallError, AdvisorRefused, AdvisorSick
from actors.ports.balancer import AnonMemoryUnavailable
from actors.ports.cgroups import CpuIdleError, CpusetUnavailable
from actors.store_messages import CommitOutcomeUnknown, CommitRefused, StoreUnavailable
from actors.supervisor import ActorUnavailable, SupervisorError
from policy.balance.errors import BalanceError, RoundFailed
from policy.cpu.advisor.advice import AdviceRequestError
from policy.cpu.advisor.application import ApplyError
from policy.cpu.advisor.blocks import BlockError
from policy.cpu.advisor.decision import AdviceRefused
from policy.cpu.advisor.extra_entries import HeadroomFormatError
from policy.cpu.advisor.refusal import AdvisorRefusedError
from policy.cpu.advisor.resize import ResizeError
from policy.cpu.advisor.response import ResponseFormatError
from policy.cpu.advisor.validation import AdvisorValidationError
from policy.cpu.allocate import AllocationError
from policy.cpu.cause import CauseError
from policy.cpu.dedicated_allocation import DedicatedAllocationError
from policy.cpu.dedicated_hints import DedicatedHintError
from policy.cpu.dedicated_options import OptionError
from policy.cpu.errors import UnknownContainerError
from policy.cpu.hints import NO_NUMA_BINDING, NOT_EXCLUSIVE_TOO_LARGE, HintError
from policy.cpu.invariants import InvariantError
from policy.cpu.pool_sizing import PoolError
from policy.cpu.pressure import InputError, PodError, PressureSettingsError, SuppressionError
from policy.cpu.qos import QoSConfigError, QoSError
from policy.cpu.ramp_steps import RampUpError
from policy.cpu.request import RequestError
from policy.cpu.reserve import ReserveChangeRefused, ReserveError
from policy.cpu.rnb_allocate import RNBAllocationError
from policy.cpu.snb_allocate import SNBAllocationError
from policy.cpu.snb_hints import SNBHintError
from policy.errors import CodecError, ErrorKind, PolicyError, StateError
from policy.state.katalyst_checkpoint import (
    CheckpointCorruptedError,
    CheckpointMismatchError,
    CheckpointUnmodelledError,
)
from policy.state.replay import ReplayError
from policy.topology.cpuset import CPUSet
from policy.topology.machine_file import MachineFileError
from policy.topology.model import TopologyError
from policy.topology.selection import NOT_ENOUGH_CPUS, SelectionError
from qrmd.host.machine_file import MachineFileReadError
from qrmd.host.numa_stat import NumaStatError
from qrmd.host.sysfs_topology import SysfsTopologyError
from qrmd.offline.decision_rerun import RerunError
from wire.errors import STATUS_BY_KIND, NotReady, code_for, kind_of, status_for

C = grpc.StatusCode


def wrapped(outer: type[PolicyError], reason: str, inner: PolicyError) -> PolicyError:
    """``outer`` raised around ``inner`` as the policy raises its wrappers: with its kind."""
    error = outer(f"{reason}: {inner}", kind=inner.kind)
    error.__cause__ = inner
    return error


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
            AllocationError("results can't meet cpus request", kind=ErrorKind.SHORTAGE),
            C.RESOURCE_EXHAUSTED,
            id="exclusive NUMA too small",
        ),
        pytest.param(
            AllocationError("get empty pooledCPUs", kind=ErrorKind.SHORTAGE),
            C.RESOURCE_EXHAUSTED,
            id="no pool",
        ),
        pytest.param(
            AllocationError("pool: reclaim is not empty", kind=ErrorKind.SHORTAGE),
            C.RESOURCE_EXHAUSTED,
            id="empty reclaim",
        ),
        pytest.param(
            wrapped(
                AllocationError,
                "take cpu failed",
                SelectionError(NOT_ENOUGH_CPUS, requested=8, available=3),
            ),
            C.RESOURCE_EXHAUSTED,
            id="a shortage wrapped by the allocation",
        ),
        pytest.param(
            wrapped(AllocationError, "pod x: failed", QoSError("bad level")),
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
        pytest.param(
            CommitOutcomeUnknown("record 2 may be on disk"),
            C.UNAVAILABLE,
            id="a commit whose outcome is unknown asks for a retry",
        ),
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
            RequestError("pod uid is empty", subject=SUBJECT),
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


def test_an_unknown_commit_outcome_is_answered_as_retry_not_as_refused() -> None:
    # The store could not cut a failed write back: the record may be replayed at the next
    # start. UNAVAILABLE asks kubelet to retry without claiming nothing happened; the answer
    # is not a ``CommitRefused``, whose promise is that nothing was persisted.
    error = CommitOutcomeUnknown("commit outcome unknown: record 2 may be on disk")
    assert not isinstance(error, CommitRefused)
    status = status_for(error, "Allocate", SUBJECT)
    assert status.code is C.UNAVAILABLE
    assert status.message == f"Allocate: {SUBJECT}: commit outcome unknown: record 2 may be on disk"


def test_message_without_a_subject() -> None:
    status = status_for(CommitRefused("disk full"), "GetResourcesAllocation")
    assert status == status_for(CommitRefused("disk full"), "GetResourcesAllocation", "")
    assert status.message == "GetResourcesAllocation: disk full"
    assert status.code is C.UNAVAILABLE


# -- every error class, by kind ------------------------------------------------------------------

#: Every error class qrmd raises on purpose and the status it answers: DESIGN.md "Time, config,
#: errors" (bad input INVALID_ARGUMENT, an unknown container NOT_FOUND, a commit that is not
#: durable UNAVAILABLE), the codes the RPC tests expect (tests/wire/test_plugin_rpcs.py,
#: test_eviction_server.py), and qrmd's choice for the policy's refusals (wire.errors).
#: wire.md has no error section: the reference answers every error as Unknown.
EVERY_ERROR_CLASS: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (PolicyError, C.FAILED_PRECONDITION),
    (StateError, C.FAILED_PRECONDITION),
    (CodecError, C.INVALID_ARGUMENT),
    (CheckpointCorruptedError, C.INVALID_ARGUMENT),
    (CheckpointMismatchError, C.INVALID_ARGUMENT),
    (CheckpointUnmodelledError, C.INVALID_ARGUMENT),
    (TopologyError, C.INVALID_ARGUMENT),
    (MachineFileError, C.INVALID_ARGUMENT),
    (SelectionError, C.RESOURCE_EXHAUSTED),
    (BalanceError, C.INVALID_ARGUMENT),
    (RoundFailed, C.FAILED_PRECONDITION),
    (RequestError, C.INVALID_ARGUMENT),
    (QoSError, C.INVALID_ARGUMENT),
    (QoSConfigError, C.INVALID_ARGUMENT),
    (ReserveError, C.INVALID_ARGUMENT),
    (ReserveChangeRefused, C.FAILED_PRECONDITION),
    (InvariantError, C.INTERNAL),
    (UnknownContainerError, C.NOT_FOUND),
    (AllocationError, C.FAILED_PRECONDITION),
    (HintError, C.FAILED_PRECONDITION),
    (DedicatedHintError, C.FAILED_PRECONDITION),
    (DedicatedAllocationError, C.FAILED_PRECONDITION),
    (OptionError, C.INVALID_ARGUMENT),
    (SNBHintError, C.RESOURCE_EXHAUSTED),
    (RNBAllocationError, C.FAILED_PRECONDITION),
    (HeadroomFormatError, C.INVALID_ARGUMENT),
    (AdviceRequestError, C.INVALID_ARGUMENT),
    (SNBAllocationError, C.FAILED_PRECONDITION),
    (PoolError, C.FAILED_PRECONDITION),
    (RampUpError, C.FAILED_PRECONDITION),
    (MachineFileReadError, C.INVALID_ARGUMENT),
    (SysfsTopologyError, C.INVALID_ARGUMENT),
    (ActorError, C.INTERNAL),
    (AllocatorUnavailable, C.UNAVAILABLE),
    (BalancerUnavailable, C.UNAVAILABLE),
    (ActorUnavailable, C.UNAVAILABLE),
    (CommitRefused, C.UNAVAILABLE),
    (StoreUnavailable, C.UNAVAILABLE),
    (CommitOutcomeUnknown, C.UNAVAILABLE),
    (AnonMemoryUnavailable, C.UNAVAILABLE),
    (CpusetUnavailable, C.UNAVAILABLE),
    (CpuIdleError, C.INTERNAL),
    (NumaStatError, C.UNAVAILABLE),
    (ReplayError, C.INTERNAL),
    (SupervisorError, C.INTERNAL),
    (CauseError, C.INTERNAL),
    (RerunError, C.INTERNAL),
    (NotReady, C.UNAVAILABLE),
    (PressureSettingsError, C.INVALID_ARGUMENT),
    (InputError, C.INVALID_ARGUMENT),
    (PodError, C.INVALID_ARGUMENT),
    (SuppressionError, C.FAILED_PRECONDITION),
    (PressureUnavailable, C.UNAVAILABLE),
    (AdvisorValidationError, C.INVALID_ARGUMENT),
    (ResizeError, C.INVALID_ARGUMENT),
    (BlockError, C.INVALID_ARGUMENT),
    (ApplyError, C.INVALID_ARGUMENT),
    (ResponseFormatError, C.INVALID_ARGUMENT),
    (HeadroomFormatError, C.INVALID_ARGUMENT),
    (AdviceRequestError, C.INVALID_ARGUMENT),
    (AdviceRefused, C.INVALID_ARGUMENT),
    (AdvisorCallError, C.INTERNAL),
    (AdvisorSick, C.UNAVAILABLE),
    (AdvisorRefused, C.FAILED_PRECONDITION),
    (AdvisorRefusedError, C.FAILED_PRECONDITION),
]


def _instance(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` with the reason "boom", whatever its constructor takes."""
    if issubclass(cls, SelectionError):
        return cls("boom", requested=2, available=1)
    if issubclass(cls, UnknownContainerError):
        return cls("u", "c")
    if issubclass(cls, MachineFileError):
        return cls("sockets[0]", "boom")
    if issubclass(cls, ReplayError | RerunError):
        return cls(7, "boom")
    if issubclass(cls, AdviceRefused):
        return cls("validate", "boom")
    if issubclass(cls, AdvisorCallError):
        return cls("AddContainer", "CODE", "boom")
    if issubclass(cls, ReserveChangeRefused):
        return cls("boom", previous=CPUSet.parse("0,2"), reserved=CPUSet.parse("0-3"))
    return cls("boom")


@pytest.mark.parametrize(
    ("cls", "code"), [pytest.param(cls, code, id=cls.__name__) for cls, code in EVERY_ERROR_CLASS]
)
def test_every_error_class_answers_the_status_of_its_kind(
    cls: type[BaseException], code: grpc.StatusCode
) -> None:
    error = _instance(cls)
    assert code_for(error) is code
    assert status_for(error, "Allocate").code is code


def _subclasses(root: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in root.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_the_table_lists_every_error_class_of_the_project() -> None:
    # Import every module that may define one, so that a new class without a row fails here.
    for package in (policy, actors, qrmd.host):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    ours = ("policy.", "actors.", "wire.", "qrmd.")
    defined = {
        cls
        for root in (PolicyError, ActorError)
        for cls in (root, *_subclasses(root))
        if cls.__module__.startswith(ours)
    }
    assert defined - {cls for cls, _ in EVERY_ERROR_CLASS} == set()


def test_every_kind_has_one_status() -> None:
    assert set(STATUS_BY_KIND) == set(ErrorKind)


# -- the kind decides, never the message -------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(
            RequestError(f"{NOT_ENOUGH_CPUS}: requested=8, available=3"),
            C.INVALID_ARGUMENT,
            id="an invalid request in the reference's shortage words is INVALID_ARGUMENT",
        ),
        pytest.param(
            AllocationError("results can't meet cpus request", kind=ErrorKind.INVALID),
            C.INVALID_ARGUMENT,
            id="an allocation error raised as invalid is INVALID_ARGUMENT whatever it says",
        ),
        pytest.param(
            AllocationError("pool: reclaim is not empty"),
            C.FAILED_PRECONDITION,
            id="an allocation error raised without a kind is a refusal whatever it says",
        ),
        pytest.param(
            HintError("get empty pooledCPUs"),
            C.FAILED_PRECONDITION,
            id="a hint error raised without a kind is a refusal whatever it says",
        ),
        pytest.param(
            ValueError("not enough cpus available to satisfy request"),
            C.INTERNAL,
            id="an error that carries no kind is INTERNAL whatever it says",
        ),
    ],
)
def test_the_message_never_decides_the_status(error: BaseException, code: grpc.StatusCode) -> None:
    assert code_for(error) is code


def test_a_wrapped_error_answers_its_own_kind_not_its_causes() -> None:
    # The kind is decided where the error is raised (with the wrapped error's, when it only adds
    # context); the wire does not walk the cause chain.
    error = AllocationError("hint is nil")
    error.__cause__ = SelectionError(NOT_ENOUGH_CPUS, requested=8, available=3)
    assert code_for(error) is C.FAILED_PRECONDITION


def test_a_library_exception_takes_its_kind_from_the_foreign_table() -> None:
    assert kind_of(pykka.Timeout("5 s")) is ErrorKind.UNAVAILABLE
    assert kind_of(pykka.ActorDeadError("gone")) is ErrorKind.UNAVAILABLE
    assert kind_of(RuntimeError("bug")) is ErrorKind.INTERNAL


# -- the container named once ------------------------------------------------------------------


def test_an_error_naming_its_container_is_not_given_the_requests_again() -> None:
    error = AllocationError("hint is nil", subject=SUBJECT)
    assert str(error) == f"{SUBJECT}: hint is nil"
    assert status_for(error, "Allocate", SUBJECT).message == f"Allocate: {SUBJECT}: hint is nil"


def test_the_subject_is_not_searched_for_in_the_message() -> None:
    # Only the error's subject says it names the container: text that merely contains the
    # description (hand-written, which no raise does) is not matched, so it is named again.
    error = RequestError(f"{SUBJECT}: pod uid is empty")
    assert status_for(error, "Allocate", SUBJECT).message == (
        f"Allocate: {SUBJECT}: {SUBJECT}: pod uid is empty"
    )


def test_the_rpc_name_is_not_stripped_from_the_message() -> None:
    # Actors' messages do not name the RPC; the wire puts it in front, once.
    error = BalancerUnavailable("the eviction offer was not taken: disk full")
    assert status_for(error, "GetEvictPods").message == (
        "GetEvictPods: the eviction offer was not taken: disk full"
    )
