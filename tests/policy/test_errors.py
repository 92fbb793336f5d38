"""The policy's error root: kinds, the message built once, the one container description."""

from __future__ import annotations

import pytest

from policy.balance.errors import BalanceError, RoundFailed
from policy.cpu.allocate import AllocationError
from policy.errors import CodecError, ErrorKind, PolicyError, StateError, describe_container


@pytest.mark.parametrize(
    ("args", "kwargs", "want"),
    [
        pytest.param(
            ("1234", "app"), {"pod_namespace": "default", "pod_name": "web"},
            "pod default/web (uid 1234), container app", id="a request names all four",
        ),
        pytest.param(
            ("", "app"), {"pod_namespace": "default", "pod_name": "web"},
            "pod default/web (uid ), container app", id="an empty uid shows as empty",
        ),
        pytest.param(
            ("1234", ""), {"pod_namespace": "default", "pod_name": "web"},
            "pod default/web (uid 1234), container ", id="an empty container name shows as empty",
        ),
        pytest.param(
            ("1234", "app"), {}, "pod (uid 1234), container app",
            id="a topology-aware query names no namespace or pod name",
        ),
        pytest.param(("1234",), {}, "pod (uid 1234)", id="RemovePod names only the pod"),
    ],
)  # fmt: skip
def test_describe_container(args: tuple[str, ...], kwargs: dict[str, str], want: str) -> None:
    assert describe_container(*args, **kwargs) == want


def test_the_message_is_built_once_from_subject_and_reason() -> None:
    error = AllocationError("hint is nil", subject="pod default/web (uid 1), container app")
    assert str(error) == "pod default/web (uid 1), container app: hint is nil"
    assert error.args == (str(error),)
    assert error.subject == "pod default/web (uid 1), container app"


def test_without_a_subject_the_message_is_the_reason() -> None:
    error = AllocationError("hint is nil")
    assert str(error) == "hint is nil" and error.subject == ""


def test_a_raise_may_override_its_classs_kind_for_that_error_only() -> None:
    shortage = AllocationError("results can't meet cpus request", kind=ErrorKind.SHORTAGE)
    assert shortage.kind is ErrorKind.SHORTAGE
    assert AllocationError("hint is nil").kind is ErrorKind.REFUSED
    assert AllocationError.kind is ErrorKind.REFUSED


@pytest.mark.parametrize(
    ("cls", "kind"),
    [
        pytest.param(PolicyError, ErrorKind.REFUSED, id="a policy error is a refusal"),
        pytest.param(StateError, ErrorKind.REFUSED, id="an event that does not fit is refused"),
        pytest.param(CodecError, ErrorKind.INVALID, id="a malformed encoding is invalid"),
        pytest.param(BalanceError, ErrorKind.INVALID, id="bad balancer input is invalid"),
        pytest.param(RoundFailed, ErrorKind.REFUSED, id="a failed round is a refusal"),
    ],
)
def test_the_roots_kinds(cls: type[PolicyError], kind: ErrorKind) -> None:
    assert cls("boom").kind is kind


def test_a_failed_round_is_a_policy_error_but_not_bad_input() -> None:
    # plan_round catches it; code that re-raises BalanceError with a field path must not.
    assert issubclass(RoundFailed, PolicyError)
    assert not issubclass(RoundFailed, BalanceError)
