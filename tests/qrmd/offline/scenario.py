"""A scripted node history written by the real Allocator through the real StateStore.

The Allocator's plain core commits through the StateStore's plain core (``commit`` returns
the snapshot, as the actor's answer does), on one fake clock, so each record's wall time is the
scenario's. After every commit the live state and the record's wall time are kept: the
forensic commands must give back exactly those.

The history, on the 16-CPU, 4-NUMA test node (reserve 0,2):
start; shared pods web (default/web) and api; a dedicated NUMA-bound pod db; ramp-up ends
(GetResourcesAllocation resizes share and reclaim); a second ``web`` in namespace ``other``;
api removed; a reclaimed pod batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.allocator import AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorCommand,
    GetResourcesAllocation,
    RemovePod,
    StartPolicy,
)
from actors.state_store import StateStoreCore, StoreConfig
from policy.state.advisor_section import AdvisorResponseRefused
from policy.state.sections import State
from tests.actors.test_allocator import CTX
from tests.journal.helpers import FakeClock
from tests.policy.decision_fixtures import dedicated, request
from tests.topologies import SYNTH_16_2_4

TOPOLOGY_SPEC = "synthetic:cpus=16,sockets=2,numas=4"
T0 = 1_715_180_645.0
NODE = "forensics-node"


@dataclass
class Scenario:
    """The journal directory and what the node held after each record."""

    directory: Path
    live: dict[int, State] = field(default_factory=dict)
    wall_times: dict[int, float] = field(default_factory=dict)
    initial: State | None = None
    #: seq → what the command that wrote the record answered (the Allocator's reply value).
    replies: dict[int, Any] = field(default_factory=dict)


def script() -> list[tuple[float, AllocatorCommand]]:
    """``(seconds to advance before, command)`` in order."""
    return [
        (0.0, StartPolicy()),
        (5.0, Allocate(request("uid-web", cpu=2, pod_name="web"))),
        (5.0, Allocate(request("uid-api", cpu=2, pod_name="api"))),
        (5.0, Allocate(dedicated("uid-db", cpu=2, pod_name="db", hint=(1,)))),
        (40.0, GetResourcesAllocation()),
        (5.0, Allocate(request("uid-web2", cpu=1, pod_name="web", pod_namespace="other"))),
        (40.0, GetResourcesAllocation()),
        (5.0, RemovePod("uid-api")),
        (5.0, Allocate(request("uid-batch", cpu=1, qos="reclaimed_cores", pod_name="batch"))),
        (40.0, GetResourcesAllocation()),
    ]


def write_scenario(
    directory: Path, *, checkpoint_every_records: int = 4, node: str = NODE, start: float = T0
) -> Scenario:
    """Run :func:`script` and return the journal with the live states."""
    clock = FakeClock(wall=start)
    config = StoreConfig(
        str(directory),
        node,
        durability="none",
        checkpoint_every_records=checkpoint_every_records,
    )
    store = StateStoreCore.open(config, SYNTH_16_2_4, clock=clock)
    scenario = Scenario(directory, initial=store.snapshot.state)
    core = AllocatorCore(store.snapshot, CTX, store, clock.time)
    for advance, command in script():
        clock.advance(advance)
        before = store.snapshot.seq
        reply = core.handle(command)
        snapshot = store.snapshot
        if snapshot.seq != before:
            scenario.live[snapshot.seq] = snapshot.state
            scenario.wall_times[snapshot.seq] = clock.time()
            scenario.replies[snapshot.seq] = reply
    store.close(checkpoint=False)
    return scenario


def refuse_advice(directory: Path, node: str, stages: list[str]) -> None:
    """Append refused sys-advisor responses, as the Allocator journals them (the advisor
    section's ``AdvisorResponseRefused``: no CPU change, the stage and the reason)."""
    clock = FakeClock(wall=T0 + 7200)
    store = StateStoreCore.open(
        StoreConfig(str(directory), node, durability="none"), SYNTH_16_2_4, clock=clock
    )
    for n, stage in enumerate(stages):
        event = AdvisorResponseRefused(f"fp-{n}", stage, f"refused at {stage}")
        store.commit([event], {"rpc": "ApplyAdvice", "now": clock.time()})
        clock.advance(5)
    store.close(checkpoint=False)
