"""The balancer's pod inputs carry Kubernetes' bounds too (``policy.names``)."""

from __future__ import annotations

import pytest

from policy.balance.errors import BalanceError
from policy.balance.inputs import Container, Pod


def pod(
    uid: str = "p", namespace: str = "default", name: str = "web", container: str = "app"
) -> Pod:
    return Pod(uid, namespace, name, "share", (Container(container, {0: 1.0}),))


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        pytest.param(
            {"uid": "u" * 129}, "pod uid is 129 bytes", id="a 129-byte pod uid is refused"
        ),
        pytest.param(
            {"namespace": "n" * 64}, "namespace is 64 bytes", id="a 64-byte namespace is refused"
        ),
        pytest.param({"name": "n" * 254}, "name is 254 bytes", id="a 254-byte pod name is refused"),
        pytest.param(
            {"container": "c" * 64},
            "container name is 64 bytes",
            id="a 64-byte container name is refused",
        ),
    ],
)
def test_an_oversized_name_is_refused(fields: dict[str, str], reason: str) -> None:
    with pytest.raises(BalanceError, match=reason):
        pod(**fields)


def test_names_at_their_bounds_pass() -> None:
    pod(uid="u" * 128, namespace="n" * 63, name="n" * 253, container="c" * 63)


@pytest.mark.parametrize(
    ("container", "refused"),
    [
        pytest.param("\U0001f600" * 15, False, id="fifteen 4-byte characters are 60 bytes"),
        pytest.param("\U0001f600" * 16, True, id="sixteen 4-byte characters are 64 bytes"),
        pytest.param("\u20ac" * 21, False, id="twenty-one 3-byte characters are 63 bytes"),
        pytest.param("\u20ac" * 22, True, id="twenty-two 3-byte characters are 66 bytes"),
        pytest.param("\ud800" * 22, True, id="a lone surrogate counts its 3 bytes"),
    ],
)
def test_the_bounds_count_utf8_bytes_not_characters(container: str, refused: bool) -> None:
    if refused:
        with pytest.raises(BalanceError, match="container name is"):
            pod(container=container)
    else:
        pod(container=container)
