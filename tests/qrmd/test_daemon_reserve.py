"""``--reserved-cpu-cores`` at start-up, in-process (cpu-policy §3, §6.2): a reserve with no
room is refused naming the flag and the numbers, a changed reserve over a used state directory
is applied by re-planning the pools, or refused naming the flag and the dedicated container in
the way. Never pools that overlap the reserve while ``/healthz`` says ok.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from actors.allocator_messages import Allocate, GetResourcesAllocation
from journal import read_records
from policy.cpu.invariants import check_invariants
from policy.topology.cpuset import CPUSet
from qrmd.config import ConfigError
from qrmd.daemon import Daemon, DaemonError
from qrmd.store.subsystem import StoreWiring
from tests.policy.decision_fixtures import dedicated
from tests.qrmd.test_daemon import SYNTH, Harness, http, shared


@pytest.fixture
def harness() -> Iterator[Harness]:
    with tempfile.TemporaryDirectory(dir="/tmp") as root:
        yield Harness(Path(root))
    pykka.ActorRegistry.stop_all()


def reserve_of(daemon: Daemon) -> tuple[CPUSet, dict[str, CPUSet]]:
    assert daemon.find(StoreWiring) is not None and daemon.context is not None
    state = daemon.find(StoreWiring).latest.state.cpu
    assert check_invariants(state, daemon.context) == []
    return daemon.context.reserved, dict(state.pools)


@pytest.mark.parametrize(
    ("count", "message"),
    [
        pytest.param(
            "16",
            f"--reserved-cpu-cores 16: --topology {SYNTH} has 16 CPUs; reserve at most 15 "
            "(the reclaim pool needs one)",
            id="a reserve of every CPU names the flag and the most the node can reserve",
        ),
        pytest.param(
            "200",
            f"--reserved-cpu-cores 200: --topology {SYNTH} has 16 CPUs; reserve at most 15 "
            "(the reclaim pool needs one)",
            id="a reserve larger than the node names the flag, the node's CPUs and the most",
        ),
    ],
)
def test_a_reserve_with_no_room_fails_on_a_fresh_directory_naming_the_flag(
    harness: Harness, count: str, message: str
) -> None:
    daemon = harness.daemon(**{"reserved-cpu-cores": count})
    with pytest.raises(ConfigError) as raised:
        daemon.start()
    assert str(raised.value) == message
    assert not (harness.root / "state").exists()  # refused before recovery
    assert pykka.ActorRegistry.get_all() == []


def test_the_most_the_node_can_reserve_starts_with_the_reclaim_pool_outside_it(
    harness: Harness,
) -> None:
    daemon = harness.daemon(**{"reserved-cpu-cores": "15"})
    daemon.start()
    try:
        reserved, pools = reserve_of(daemon)
        assert reserved.size() == 15
        assert pools["reclaim"].size() == 1 and pools["reclaim"].intersection(reserved).is_empty()
        assert http(daemon, "/healthz") == (200, "ok\n")
    finally:
        daemon.stop()


def test_a_larger_reserve_over_a_used_state_re_plans_the_pools(harness: Harness) -> None:
    first = harness.daemon()
    first.start()
    try:
        harness.servers[-1].allocator.ask(Allocate(shared("pod-a")))
    finally:
        first.stop()
    again = harness.daemon(**{"reserved-cpu-cores": "4"})
    again.start()
    try:
        reserved, pools = reserve_of(again)
        assert reserved == CPUSet.parse("0,2,4,6") and pools["reserve"] == reserved
        listing = harness.servers[-1].allocator.ask(GetResourcesAllocation())
        placed = CPUSet.parse(listing.pod_resources["pod-a"]["app"].allocation_result)
        assert placed.intersection(reserved).is_empty()
        assert http(again, "/healthz") == (200, "ok\n")
    finally:
        again.stop()


def test_a_reserve_over_a_dedicated_container_is_refused_naming_the_flag(
    harness: Harness,
) -> None:
    first = harness.daemon()
    first.start()
    try:
        harness.servers[-1].allocator.ask(Allocate(dedicated("pod-d", cpu=2, hint=(1,))))
        assert first.find(StoreWiring) is not None
        cpu_before = first.find(StoreWiring).latest.state.cpu
    finally:
        first.stop()
    with pytest.raises(DaemonError) as raised:
        harness.daemon(**{"reserved-cpu-cores": "8"}).start()
    message = str(raised.value)
    assert message.startswith(
        f"actor allocator failed to start: --reserved-cpu-cores=8 on --topology {SYNTH}: the "
        "reserve changed from 0,2 to 0-7, but dedicated pod default/name-pod-d (uid pod-d), "
        "container app holds "
    )
    assert "Start with the previous reserve (2 CPUs: 0,2), or remove those pods first" in message
    assert pykka.ActorRegistry.get_all() == []
    # No CPU decision was committed (each start journals its start record, nothing else): the
    # previous reserve starts on the state as it was.
    rpcs = [r.cause.get("rpc") for r in read_records(str(harness.root / "state"))]
    assert rpcs.count("StartPolicy") == 1
    again = harness.daemon()
    again.start()
    try:
        assert (
            again.find(StoreWiring) is not None
            and again.find(StoreWiring).latest.state.cpu == cpu_before
        )
    finally:
        again.stop()


def test_a_changed_topology_over_a_used_state_is_refused_naming_the_flags(
    harness: Harness,
) -> None:
    first = harness.daemon()
    first.start()
    first.stop()
    other = "synthetic:cpus=32,sockets=2,numas=4"
    with pytest.raises(DaemonError) as raised:
        harness.daemon(topology=other).start()
    assert str(raised.value).endswith(
        f"(state directory {harness.root / 'state'}: it was written with another --topology "
        f"or --node-name than --topology {other} --node-name {first.config.node_name})"
    )
    assert pykka.ActorRegistry.get_all() == []
