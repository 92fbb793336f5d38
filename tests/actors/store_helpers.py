"""Builders for the StateStore tests: a store on a fake clock and faulty files, and CPU events.

The events are valid on the states the tests build (pools before the containers that refer to
them), built with the state tests' ``container`` builder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.state_store import StateStoreCore, StoreConfig
from policy.state.entries import DEDICATED_CORES, InPool, OwnCPUs
from policy.state.events import ContainerAllocated, Event, PodRemoved, PoolSet
from policy.topology.cpuset import CPUSet
from tests.journal.helpers import FakeClock, FaultyFileOps
from tests.policy.state_fixtures import SYNTH_16_2_4, container

TOPO = SYNTH_16_2_4
NODE = "store-node"


def open_store(
    directory: Path,
    *,
    durability: str = "none",
    clock: FakeClock | None = None,
    fs: FaultyFileOps | None = None,
    **settings: Any,
) -> StateStoreCore:
    """A store on ``directory`` with the test node's name and a fake clock."""
    config = StoreConfig(str(directory), NODE, durability=durability, **settings)  # type: ignore[arg-type]
    return StateStoreCore.open(config, TOPO, fs=fs, clock=clock or FakeClock())


def cause(rpc: str, pod: str = "", name: str = "", **fields: Any) -> dict[str, Any]:
    """A cause as the Allocator records it: the RPC and the request's identifying fields."""
    return {"rpc": rpc, "request": {"pod_uid": pod, "container_name": name, **fields}}


def share_pool(cpus: str = "4-15") -> PoolSet:
    return PoolSet("share", CPUSet.parse(cpus))


def shared_container(pod: str, name: str = "app", pool: str = "share") -> ContainerAllocated:
    return ContainerAllocated(container(pod, name, InPool(pool), owner=pool))


def dedicated_container(pod: str, cpus: str, name: str = "app") -> ContainerAllocated:
    placed = OwnCPUs.of(CPUSet.parse(cpus))
    return ContainerAllocated(container(pod, name, placed, qos=DEDICATED_CORES, owner="dedicated"))


def node_history(pods: int) -> list[tuple[list[Event], dict[str, Any]]]:
    """A small node's commits: a share pool, ``pods`` shared pods, one dedicated, a removal."""
    commits: list[tuple[list[Event], dict[str, Any]]] = [
        ([share_pool()], {"rpc": "Start", "request": {}}),
    ]
    for n in range(pods):
        commits.append(([shared_container(f"pod-{n}")], cause("Allocate", f"pod-{n}", "app")))
    commits.append(
        (
            [share_pool("6-15"), dedicated_container("db", "4-5", "main")],
            cause("Allocate", "db", "main", qos="dedicated_cores"),
        )
    )
    commits.append(([PodRemoved("pod-0")], cause("RemovePod", "pod-0")))
    return commits
