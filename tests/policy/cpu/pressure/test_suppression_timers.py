"""The suppression timers through the reference's early returns, in-process with an injected
clock: the decision's answer or error at each step, and the timers the section keeps
(``suppression_timeline``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policy.cpu.pressure import SuppressionError, SuppressionInputs, evict_pods
from policy.state.pressure import PressureHistory, apply_pressure_event
from tests.actors.fakes import FakeClock
from tests.policy.cpu.pressure.suppression_timeline import PODS, SETTINGS, TIMELINES, Timeline

START = 1_000.0


@pytest.mark.parametrize("timeline", TIMELINES, ids=lambda t: t.id)
def test_the_timers_through_the_early_returns(timeline: Timeline) -> None:
    clock = FakeClock(START)
    history = PressureHistory()
    for n, step in enumerate(timeline.steps):
        clock.advance(step.advance_s)
        settings = replace(SETTINGS, enable_suppression_eviction=step.enabled)
        inputs = SuppressionInputs(step.reclaim_pool, tuple(PODS[p] for p in step.pods))
        try:
            decision = evict_pods(history, inputs, settings, clock.time())
        except SuppressionError as err:
            assert str(err) == step.error, f"step {n}"
        else:
            assert step.error == "", f"step {n}"
            assert tuple(o.pod_uid for o in decision.reply.offers) == step.offered, f"step {n}"
            for event in decision.events:
                history = apply_pressure_event(history, event)
        want = {pod: START + at for pod, at in step.timers.items()}
        assert dict(history.tolerance_since) == want, f"step {n}"
