"""Journal volume of an idle node's memory balancer: bytes per simulated day, coalesced or not.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_journal_volume.py            # 4 and 64 NUMA, a day
    PYTHONPATH=. .venv/bin/python bench/bench_journal_volume.py --hours 2  # quicker

An idle node: every NUMA node quiet (simulated metrics), no pod, a round every 5 s
(``--qos-aware-sync-period``), the eviction manager polling ``GetEvictPods`` every 5 s, and the
store's checkpoint tick. The real ``MemoryBalancerCore`` commits to the real ``StateStoreCore``
on a temporary directory (durability ``none``: the bytes are the same, the fsyncs are not
what is measured), driven by a fake clock, so a simulated day takes seconds.

Printed per node size:

* ``coalesced``: segment bytes written in ``--hours`` with the default summary period (1 h,
  ``--balance-round-summary-every``), scaled to a day, and the records written;
* ``uncoalesced``: the same node with ``--balance-round-summary-every 0s`` (every round
  journaled, as before coalescing), measured over ``--uncoalesced-hours`` of the same run and
  scaled to a day: each round costs the same, so the scaling is a product, not a guess;
* ``checkpoints``: checkpoint bytes written per day in the coalesced run (a checkpoint follows
  a record after at most ``--checkpoint-every``; retention deletes old ones, this counts what
  was written);
* ``target``: ≤ 1 MB (10^6 bytes) of records per day (issue: coalesce idle rounds).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.balancer_messages import GetEvictPods, Tick
from actors.balancer_ports import BalancerPorts
from actors.memory_balancer import MemoryBalancerCore
from actors.ports.balancer import PodAnonMemory
from actors.state_store import StateStoreCore, StoreConfig
from actors.store_messages import Snapshot
from policy.balance import BalancerConfig
from policy.state.events import Event
from policy.state.pool_pods import PodsInPools, pods_in_pools
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.host.numa_distances import TopologyNumaDistances
from qrmd.sim.host.metrics import SimulatedNumaMetrics

DAY_S = 86400.0
PERIOD_S = 5.0
SUMMARY_EVERY_S = 3600.0
TARGET_BYTES_PER_DAY = 1_000_000
START = 1_795_000_000.0
NODES = {4: "synthetic:cpus=96,sockets=2,numas=4", 64: "synthetic:cpus=512,sockets=8,numas=64"}


class FakeClock:
    """Wall and monotonic time that move only when told to."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


class DirectCommitter:
    """The commit port on the store core itself, in this thread (no actor in between)."""

    def __init__(self, store: StateStoreCore) -> None:
        self._store = store

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        return self._store.commit(events, cause)

    def latest(self) -> Snapshot:
        return self._store.snapshot


class NoMemory:
    """An idle node has no pod whose memory a round would read."""

    def anon_by_numa(self, pod_uid: str, container_ids: object) -> PodAnonMemory:
        raise AssertionError(f"an idle round read pod {pod_uid}")


@dataclass(frozen=True, slots=True)
class Volume:
    segment_bytes: int
    checkpoint_bytes: int
    records: int
    seconds: float
    wall_s: float

    def per_day(self, value: int) -> float:
        return value * DAY_S / self.seconds


def simulate(spec: str, seconds: float, summary_every_s: float) -> Volume:
    """Run an idle node for ``seconds`` of simulated time; what its journal wrote."""
    topology = parse_synthetic_spec(spec)
    clock = FakeClock(START)
    with tempfile.TemporaryDirectory(prefix="qrmd-volume-") as directory:
        config = StoreConfig(directory=directory, node_name="bench", durability="none")
        store = StateStoreCore.open(config, topology, clock=clock)
        distances = TopologyNumaDistances(topology.distances)
        ports = BalancerPorts(
            metrics=SimulatedNumaMetrics.quiet(sorted(distances.distances())),
            distances=distances,
            memory=NoMemory(),
            pods=lambda: _pods(store),
        )
        core = MemoryBalancerCore(
            store.snapshot,
            DirectCommitter(store),
            ports,
            BalancerConfig(),
            now_fn=clock.time,
            round_summary_every_s=summary_every_s,
        )
        base_segments, base_checkpoints = _sizes(directory)
        seen_checkpoints: dict[str, int] = {}
        first_seq = store.snapshot.seq
        started = time.perf_counter()
        for _ in range(int(seconds / PERIOD_S)):
            clock.now += PERIOD_S
            core.handle(Tick(clock.now))
            core.handle(GetEvictPods(()))
            if store.checkpoint_if_due() is not None:
                seen_checkpoints.update(_checkpoints(directory))
        wall_s = time.perf_counter() - started
        segments, _ = _sizes(directory)
        records = store.snapshot.seq - first_seq
        store.close(checkpoint=False)
    checkpoint_bytes = sum(seen_checkpoints.values()) - base_checkpoints
    return Volume(segments - base_segments, checkpoint_bytes, records, seconds, wall_s)


def _pods(store: StateStoreCore) -> PodsInPools:
    return pods_in_pools(store.snapshot.state.cpu)


def _sizes(directory: str) -> tuple[int, int]:
    segments = checkpoints = 0
    for name in os.listdir(directory):
        size = os.path.getsize(os.path.join(directory, name))
        if name.endswith(".seg"):
            segments += size
        elif name.endswith(".ckpt"):
            checkpoints += size
    return segments, checkpoints


def _checkpoints(directory: str) -> dict[str, int]:
    return {
        name: os.path.getsize(os.path.join(directory, name))
        for name in os.listdir(directory)
        if name.endswith(".ckpt")
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0, help="simulated time, coalesced")
    parser.add_argument(
        "--uncoalesced-hours", type=float, default=1.0, help="simulated time, every round journaled"
    )
    parser.add_argument("--numa", type=int, action="append", help="node sizes (default 4, 64)")
    args = parser.parse_args()
    sizes = args.numa or sorted(NODES)
    print(
        f"idle node, a round and an eviction poll every {PERIOD_S:g} s; coalesced over "
        f"{args.hours:g} h (summary every {SUMMARY_EVERY_S / 3600:g} h), uncoalesced over "
        f"{args.uncoalesced_hours:g} h; bytes per simulated day"
    )
    ok = True
    for numas in sizes:
        spec = NODES.get(numas) or f"synthetic:cpus={max(96, 8 * numas)},sockets=2,numas={numas}"
        coalesced = simulate(spec, args.hours * 3600, SUMMARY_EVERY_S)
        every = simulate(spec, args.uncoalesced_hours * 3600, 0.0)
        per_day = coalesced.per_day(coalesced.segment_bytes)
        before = every.per_day(every.segment_bytes)
        meets = per_day <= TARGET_BYTES_PER_DAY
        ok &= meets
        print(
            f"{numas:>3} NUMA  coalesced {per_day / 1e6:8.3f} MB/day "
            f"({coalesced.per_day(coalesced.records):7.0f} records/day)  "
            f"uncoalesced {before / 1e6:8.1f} MB/day "
            f"({every.per_day(every.records):7.0f} records/day)  "
            f"ratio {before / per_day:6.0f}x  "
            f"checkpoints {coalesced.per_day(coalesced.checkpoint_bytes) / 1e6:6.3f} MB/day  "
            f"target <= 1 MB/day: {'met' if meets else 'MISSED'}  "
            f"(simulated in {coalesced.wall_s + every.wall_s:.1f} s)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
