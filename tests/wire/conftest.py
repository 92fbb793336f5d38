"""Fixtures of the wire tests: a served node, stopped and cleaned up after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.wire.plugin_node import WireNode


@pytest.fixture
def node() -> Iterator[WireNode]:
    served = WireNode().start()
    try:
        yield served
    finally:
        served.close()
