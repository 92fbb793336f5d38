"""The suppression timers through the reference's early returns, through the CPU pressure actor
with a fake clock: the reclaim pool comes and goes in the CPU state the actor reads, the
settings change between calls, and the durable section keeps the timers
(``tests.policy.cpu.pressure.suppression_timeline``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from actors.cpu_pressure import CPUPressureCore, PressurePorts
from actors.cpu_pressure_messages import SuppressionEvictPods
from policy.cpu.pressure import SuppressionError
from policy.state.events import CPUEvent, PoolRemoved, PoolSet
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from qrmd.sim.host.cpu_load import SimulatedContainerLoads
from tests.actors.fakes import ApplyingCommitter, FakeClock
from tests.policy.cpu.pressure.suppression_timeline import (
    PODS,
    RECLAIM_CPUS,
    SETTINGS,
    TIMELINES,
    Timeline,
)
from tests.policy.state_fixtures import SYNTH_16_2_4, cpus

START = 1_000.0
RECLAIM = cpus("8-11")


def set_reclaim_pool(committer: ApplyingCommitter, size: int | None) -> None:
    """Make the CPU state's reclaim pool ``size`` CPUs (None: no pool), as the allocator would."""
    current = committer.latest().state.cpu.pools.get("reclaim")
    events: tuple[CPUEvent, ...]
    if size is None:
        events = () if current is None else (PoolRemoved("reclaim"),)
    else:
        wanted = RECLAIM if size == RECLAIM_CPUS else CPUSet.parse("")
        assert size in (0, RECLAIM_CPUS)
        events = () if current == wanted else (PoolSet("reclaim", wanted),)
    if events:
        committer.commit(events, {"test": "the allocator's pool change"})


@pytest.mark.parametrize("timeline", TIMELINES, ids=lambda t: t.id)
def test_the_actor_keeps_the_timers_through_the_early_returns(timeline: Timeline) -> None:
    state = apply_all(
        empty_state(SYNTH_16_2_4), [PoolSet("share", cpus("0-7")), PoolSet("reclaim", RECLAIM)]
    )
    committer = ApplyingCommitter(state)
    clock = FakeClock(START)
    core = CPUPressureCore(
        committer.snapshot,
        committer,
        PressurePorts(SimulatedContainerLoads()),
        SETTINGS,
        reserved=CPUSet.parse(""),
        now_fn=clock.time,
    )
    for n, step in enumerate(timeline.steps):
        clock.advance(step.advance_s)
        set_reclaim_pool(committer, step.reclaim_pool)
        core.settings = replace(SETTINGS, enable_suppression_eviction=step.enabled)
        command = SuppressionEvictPods(tuple(PODS[p] for p in step.pods))
        try:
            answer = core.handle(command)
        except SuppressionError as err:
            assert str(err) == step.error, f"step {n}"
        else:
            assert step.error == "", f"step {n}"
            assert tuple(o.pod_uid for o in answer.offers) == step.offered, f"step {n}"
        want = {pod: START + at for pod, at in step.timers.items()}
        assert dict(core.history.tolerance_since) == want, f"step {n}"
        # What the actor holds is what is durable.
        assert committer.latest().state.cpu_pressure == core.history, f"step {n}"
