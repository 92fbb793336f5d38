"""``wire.eviction_client`` against the real eviction plugin on its socket, behind the real
MemoryBalancer on worked example 2 (its eviction pod is ``r1``, source NUMA 0): registration,
one offer in plain values, nothing the second time, and one-line failures."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.wire.test_eviction_server import REASON, Plugin, make_plugin
from wire.eviction_client import ActivePod, EvictionManager, EvictionManagerError, Offer

ACTIVE = [
    ActivePod("default", "web-0", "uid-web-0", "Burstable"),
    ActivePod("batch", "r1", "r1", "BestEffort", (("app", "r1"),)),
]


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Short: pytest's tmp_path can exceed the 107-byte socket path limit.
    directory = Path(tempfile.mkdtemp(prefix="qrmd-evc-", dir="/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def served(socket_dir: Path) -> Iterator[Plugin]:
    made = make_plugin(socket_dir)
    made.server.start()
    try:
        yield made
    finally:
        made.server.stop()
        made.balancer.ref.stop()


def test_registers_and_gets_the_offer_once(served: Plugin) -> None:
    manager = EvictionManager(served.server.socket_path)
    try:
        info = manager.register()
        assert (info.type, info.name, info.versions, info.token) == (
            "EvictionPlugin",
            "numa_memory_balancer",
            ("v1alpha1",),
            "",
        )
        assert served.server.registration_state == "registered"
        assert manager.get_evict_pods(ACTIVE) == [
            Offer("batch", "r1", "r1", REASON, True, "numa_memory_balancer")
        ]
        assert manager.get_evict_pods(ACTIVE) == []
    finally:
        manager.close()


def test_a_call_before_registration_is_refused(served: Plugin) -> None:
    with pytest.raises(EvictionManagerError, match="not registered"):
        EvictionManager(served.server.socket_path).get_evict_pods(ACTIVE)


def test_no_plugin_on_the_socket_is_one_line(socket_dir: Path) -> None:
    with pytest.raises(
        EvictionManagerError, match=r"^registration: (UNAVAILABLE|DEADLINE_EXCEEDED)"
    ):
        EvictionManager(socket_dir / "none.sock").register()
