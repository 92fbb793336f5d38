"""Crash-test writer through the StateStore: commits CPU events in a loop, reporting each ack.

Run as a separate process (``python tests/actors/store_crash_writer.py DIR``) and killed with
SIGKILL at random moments by ``test_store_crash.py``. It prints ``start <recovered seq>`` once
the store is open, then one line per acknowledged commit, written with ``os.write`` so nothing
sits in a buffer: every seq printed was committed (journaled, fsynced with durability
``always``, applied) before it was printed.

Commit ``n`` is a function of ``n`` alone (``events_of``), valid on the state the commits
before it build, and most commits carry two or three events, so the checker can rebuild the
state any seq must have and see that no record was half-applied.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from actors.state_store import StateStoreCore, StoreConfig
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, Event, PodRemoved, PoolSet
from policy.state.sections import State, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.state_fixtures import container

NODE = "store-crash-node"
TOPO = generate_dummy_cpu_topology(16, 2, 4)


def events_of(n: int) -> list[Event]:
    """Commit n: pod-n joins the share pool; every 3rd also removes pod-(n-2); every 4th
    also resizes the pool (first, so the container joins the resized pool)."""
    if n == 1:
        return [PoolSet("share", CPUSet.parse("4-15"))]
    events: list[Event] = []
    if n % 4 == 0:
        events.append(PoolSet("share", CPUSet.parse(f"{4 + n % 5}-15")))
    entry = container(f"pod-{n}", "app", InPool("share"), owner="share", quantity=n % 7 / 2)
    events.append(ContainerAllocated(entry))
    if n % 3 == 0 and n - 2 > 1:
        events.append(PodRemoved(f"pod-{n - 2}"))
    return events


def cause_of(n: int) -> dict[str, object]:
    return {"rpc": "Allocate", "request": {"pod_uid": f"pod-{n}", "container_name": "app"}}


def expected_state(seq: int) -> State:
    return apply_all(empty_state(TOPO), [e for n in range(1, seq + 1) for e in events_of(n)])


def config(directory: str, durability: str = "always") -> StoreConfig:
    return StoreConfig(
        directory,
        NODE,
        durability=durability,  # type: ignore[arg-type]
        segment_max_bytes=16384,
        checkpoint_every_records=25,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("directory")
    parser.add_argument("--durability", default="always", choices=["always", "none"])
    args = parser.parse_args()
    store = StateStoreCore.open(config(args.directory, args.durability), TOPO)
    os.write(1, f"start {store.snapshot.seq}\n".encode())
    while True:
        n = store.snapshot.seq + 1
        assert store.commit(events_of(n), cause_of(n)).seq == n
        os.write(1, f"{n}\n".encode())


if __name__ == "__main__":
    main()
