"""How a refused call is logged (wire.rpc): the node's trouble (UNAVAILABLE: a commit the disk
refused, an actor restarting) at WARNING, so an operator sees a full disk at the default log
level; the caller's (a bad request, an unknown container) at INFO; a bug at ERROR."""

from __future__ import annotations

import logging

import grpc
import pytest

from actors.allocator_messages import AllocatorUnavailable
from policy.cpu.errors import UnknownContainerError
from policy.cpu.request import RequestError
from wire.gen import resourceplugin_pb2 as pb
from wire.rpc import unary_handler


class AbortedError(Exception):
    """The call was aborted with a status."""


class Context:
    """What the handler uses of a ServicerContext when a call fails."""

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise AbortedError(code, details)


@pytest.mark.parametrize(
    ("error", "level"),
    [
        pytest.param(
            AllocatorUnavailable("Allocate not committed (1 events): commit refused"),
            "WARNING",
            id="a commit the disk refused is a warning",
        ),
        pytest.param(RequestError("pod uid is empty"), "INFO", id="a bad request is info"),
        pytest.param(UnknownContainerError("u", "c"), "INFO", id="an unknown container is info"),
        pytest.param(RuntimeError("boom"), "ERROR", id="a bug is an error"),
    ],
)
def test_a_refusal_is_logged_at_the_level_of_whose_trouble_it_is(
    error: Exception, level: str, caplog: pytest.LogCaptureFixture
) -> None:
    def work(request: pb.Empty, context: grpc.ServicerContext) -> pb.Empty:
        raise error

    handler = unary_handler("GetResourcePluginOptions", pb.Empty, work, None)
    with caplog.at_level(logging.INFO, logger="wire.rpc"), pytest.raises(AbortedError):
        handler.unary_unary(pb.Empty(), Context())  # type: ignore[arg-type]
    assert [r.levelname for r in caplog.records] == [level]
