"""The memory balancer's invariants, checked after every step (spec memory-balancer; DESIGN.md
"Subsystems and simulation"). Registered in ``qrmd.sim.dst.invariants.INVARIANTS``.

* ``balancer-record-reads-every-numa``: the stored record of a computed round lists every
  NUMA node of the host once in its raw metrics, its max-latency and max-bandwidth nodes are
  the maxima (lowest id on ties, §7.1), and its source and destinations are host nodes, the
  source never among the destinations (§7.7, §7.9). A round with a missing sample fails
  (§4.1): its record is never stored, so a partial one is a defect.
* ``balancer-pods-move-within-advice``: the page mover moved only the advised containers'
  pages, only off the advice's source node and only onto a node both in the advice's
  destinations and in the container's own list (its pool's NUMA nodes, §7.10, §11); a dry
  run or a dropped advice moves nothing.
* ``balancer-advice-journaled-first``: an advice is handed to the page mover only once the
  journal holds it as taken (write-ahead, ``actors.ports.migration``): the durable balance
  section's ``last`` is the record it came from, ``balanceExecuted`` (§8 step 6).
* ``balancer-advice-once-per-cool-down``: each advice comes from a newer record, at least the
  30 s cool-down after the previous advice's record (§6.2 step 2, §8 step 6), across
  crashes and restarts (``last`` is durable, §6.1).

The migrations are the simulated host's records (``qrmd.sim.dst.numa_host``); the stored
record is the store's published state, read without asking an actor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from actors.ports.migration import MigrationMode
from policy.balance import advice_for
from policy.balance.record import NumaLatencyInfo
from qrmd.sim.dst.numa_host import Migration

if TYPE_CHECKING:
    from qrmd.sim.dst.invariants import World

__all__ = ["BALANCER_INVARIANTS", "COOL_DOWN_S"]

#: §2: rounds are skipped this long after the last emitted advice's record.
COOL_DOWN_S = 30.0


def record_reads_every_numa(world: World) -> list[str]:
    core = world.node.store_core()
    record = None if core is None else core.snapshot.state.balance.current
    if record is None or not record.raw_numa_latency_info:
        return []
    numas = set(range(world.ctx.topology.num_numa_nodes))
    raw = record.raw_numa_latency_info
    out = []
    ids = [n.numa_id for n in raw]
    if sorted(ids) != sorted(numas):
        out.append(f"the stored record read NUMA nodes {ids}, the host has {sorted(numas)}")
    for name, chosen, value in (
        ("max-latency", record.max_latency_numa, _latency),
        ("max-bandwidth", record.max_bandwidth_numa, _bandwidth),
    ):
        best = min(raw, key=lambda n, v=value: (-v(n), n.numa_id))  # type: ignore[misc]
        if chosen is not None and chosen.numa_id != best.numa_id:
            out.append(
                f"the record's {name} NUMA is {chosen.numa_id}, the metrics say {best.numa_id}"
            )
    dests = [n.numa_id for n in record.dest_numas or ()]
    if not set(dests) <= numas:
        out.append(f"the record's destinations {dests} are not all host NUMA nodes")
    if record.source_numa is not None and record.source_numa.numa_id in dests:
        out.append(f"the record moves NUMA {record.source_numa.numa_id} onto itself")
    for pod in record.balance_pods:
        if not pod.dest_numas or not set(pod.dest_numas) <= numas:
            out.append(f"balance pod {pod.uid} may go to {list(pod.dest_numas)}")
    return out


def pods_move_within_advice(world: World) -> list[str]:
    out = []
    for migration in _new_migrations(world, "moves"):
        advice = migration.plan.advice
        if migration.plan.mode is not MigrationMode.EXECUTE and migration.moves:
            out.append(f"a {migration.plan.mode} advice moved pages: {migration.moves}")
        allowed = {
            (c.pod_uid, c.container_name): set(c.dest_numa_list) & set(advice.dest_numa_list)
            for c in advice.migrate_containers
        }
        for move in migration.moves:
            may = allowed.get((move.pod_uid, move.container))
            if may is None:
                out.append(f"{move.pod_uid}/{move.container} moved but was not advised")
            elif move.source != advice.source_numa or move.dest not in may:
                out.append(
                    f"{move.pod_uid}/{move.container} moved NUMA {move.source} -> {move.dest}; "
                    f"the advice allowed {advice.source_numa} -> {sorted(may)}"
                )
    return out


def advice_journaled_first(world: World) -> list[str]:
    out = []
    for migration in _new_migrations(world, "journaled"):
        last = None if migration.balance is None else migration.balance.last
        if last is None or not last.balance_executed:
            out.append("an advice was started before the journal held it as taken")
        elif advice_for(replace(last, balance_executed=False)) != migration.plan.advice:
            out.append("an advice was started that is not the durable record's")
    return out


def advice_once_per_cool_down(world: World) -> list[str]:
    out = []
    for migration in _new_migrations(world, "once"):
        last = None if migration.balance is None else migration.balance.last
        if last is None:
            continue  # advice-journaled-first says so
        witness = _witness(world)
        previous = witness.advised_at
        if previous is not None and last.detect_time < previous + COOL_DOWN_S:
            out.append(
                f"an advice from the record of {last.detect_time:.3f} follows one from "
                f"{previous:.3f}, within the {COOL_DOWN_S:g} s cool-down"
            )
        witness.advised_at = last.detect_time
    return out


class _Witness:
    """What the balancer invariants carry from one step to the next: how many of the host's
    migrations each has checked, and the record the last advice came from."""

    def __init__(self) -> None:
        self.advised_at: float | None = None
        self.checked: dict[str, int] = {}


def _witness(world: World) -> _Witness:
    host = world.node.page_mover
    assert host is not None
    if not isinstance(host.invariant_witness, _Witness):
        host.invariant_witness = _Witness()
    return host.invariant_witness


def _new_migrations(world: World, reader: str) -> list[Migration]:
    """The migrations started since ``reader`` last looked."""
    host = world.node.page_mover
    if host is None:
        return []
    witness = _witness(world)
    seen = witness.checked.get(reader, 0)
    witness.checked[reader] = len(host.migrations)
    return host.migrations[seen:]


def _latency(n: NumaLatencyInfo) -> float:
    return n.read_latency


def _bandwidth(n: NumaLatencyInfo) -> float:
    return n.read_write_bandwidth


BALANCER_INVARIANTS: tuple[tuple[str, Callable[[World], list[str]]], ...] = (
    ("balancer-record-reads-every-numa", record_reads_every_numa),
    ("balancer-pods-move-within-advice", pods_move_within_advice),
    ("balancer-advice-journaled-first", advice_journaled_first),
    ("balancer-advice-once-per-cool-down", advice_once_per_cool_down),
)
