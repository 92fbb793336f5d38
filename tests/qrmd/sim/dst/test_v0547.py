"""The simulated node at Katalyst v0.5.47 (``--reference-version v0.5.47``): the seed picks
the level, the node runs it with its flags, pods of its shapes, a v0.5.47 sys-advisor answering
GetAdvice and a reclaim metrics source, and the level is recorded for the replay."""

from __future__ import annotations

from random import Random

import pytest

from actors.ports.advisor import AdvisorRefused, AdvisorSick
from actors.ports.reclaim_metrics import MissingMetric
from policy.cpu.advisor.advice import AdviceRequest
from policy.cpu.reference import V0_5_3, V0_5_47
from qrmd.sim.dst.advisor import SimAdvisor
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.kubelet import KubeletPeer
from qrmd.sim.dst.metrics import SimLoadSource, SimReclaimMetrics
from qrmd.sim.dst.node import sim_config
from qrmd.sim.dst.simulation import Simulation, run

STEPS = 200


def test_the_seed_picks_the_level_and_reclaimed_numa_binding_unless_told() -> None:
    picked = [run(seed, 5, faults=()) for seed in range(12)]
    assert {o.reference_version for o in picked} == {V0_5_3, V0_5_47}
    assert {o.reclaim_numa_binding for o in picked if o.reference_version == V0_5_47} == {
        True,
        False,
    }
    assert not any(o.reclaim_numa_binding for o in picked if o.reference_version == V0_5_3)
    for outcome in picked:
        level = V0_5_3 if outcome.reference_version == V0_5_47 else V0_5_47
        told = run(outcome.seed, 5, faults=(), reference_version=level)
        assert told.as_json()["reference_version"] == level


def test_an_unknown_level_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"v0\.5\.3, v0\.5\.47"):
        Simulation(1, reference_version="v0.6")


@pytest.mark.parametrize(
    ("level", "rnb", "flags"),
    [
        pytest.param(V0_5_3, False, (V0_5_3, False), id="a v0.5.3 node runs the default level"),
        pytest.param(
            V0_5_47, True, (V0_5_47, True), id="a v0.5.47 node may switch reclaimed binding on"
        ),
    ],
)
def test_the_node_runs_qrmd_run_flags_of_its_level(
    level: str, rnb: bool, flags: tuple[str, bool]
) -> None:
    config = sim_config(cpu_advisor=True, reference_version=level, reclaim_numa_binding=rnb)
    assert (config.reference_version, config.reference.enable_reclaim_numa_binding) == flags


def test_reclaimed_numa_binding_at_v0_5_3_is_refused() -> None:
    with pytest.raises(ValueError, match=r"v0\.5\.47 only"):
        sim_config(cpu_advisor=False, reclaim_numa_binding=True)


def test_a_v0_5_47_kubelet_draws_snb_rnb_and_dedicated_option_pods() -> None:
    kubelet = KubeletPeer(Random(5), VirtualClock(), at_v0_5_47=True, reclaim_numa_binding=True)
    pods = [kubelet._new_pod() for _ in range(200)]
    shapes = {(p.kind, p.numa_binding, bool(p.options)) for p in pods}
    assert ("shared", True, False) in shapes and ("reclaimed", True, False) in shapes
    assert any(p.kind.startswith("dedicated") and p.options for p in pods)
    snb = next(p for p in pods if p.kind == "shared" and p.numa_binding)
    annotations = snb.request(snb.containers[-1], with_hint=False).annotations or {}
    assert annotations["katalyst.kubewharf.io/memory_enhancement"] == '{"numa_binding":"true"}'


def test_a_v0_5_3_kubelet_draws_no_v0_5_47_shapes() -> None:
    kubelet = KubeletPeer(Random(5), VirtualClock())
    pods = [kubelet._new_pod() for _ in range(100)]
    assert not any(p.options for p in pods)
    assert not any(p.numa_binding for p in pods)


def test_a_v0_5_47_node_with_sys_advisor_polls_get_advice_and_reads_reclaim_metrics() -> None:
    sim = Simulation(2, faults=(), cpu_advisor=True, reference_version=V0_5_47)
    outcome = sim.run(STEPS)
    assert outcome.failures == []
    assert sim.advisor.counts.get("GetAdvice:healthy", 0) > 0
    assert any(sent.response.numa_headroom for sent in sim.advisor.sent.values())
    assert sim.reclaim_metrics.reads > 0


@pytest.mark.parametrize(
    ("mode", "missing"),
    [
        pytest.param("healthy", False, id="a healthy source reads every figure"),
        pytest.param("missing", True, id="a missing source reports MissingMetric, never a zero"),
    ],
)
def test_the_reclaim_metrics_source_follows_the_load_source_mode(mode: str, missing: bool) -> None:
    loads = SimLoadSource(Random(1))
    loads.mode = mode
    source = SimReclaimMetrics(Random(1), loads, range(4))
    readings = [source.read(["kubepods/besteffort"]) for _ in range(20)]
    found = any(
        isinstance(r.core_usage, MissingMetric)
        or any(isinstance(c, MissingMetric) for c in r.cgroups.values())
        for r in readings
    )
    assert found is missing


@pytest.mark.parametrize("level", [V0_5_3, V0_5_47])
def test_ten_seeds_run_clean_at_each_level(level: str) -> None:
    outcomes = [run(seed, STEPS, reference_version=level) for seed in range(10)]
    assert [(o.seed, f) for o in outcomes for f in o.failures] == []
    assert sum(o.kubelet_calls.get("Allocate:OK", 0) for o in outcomes) > 40


@pytest.mark.parametrize(
    ("seed", "steps"),
    [
        pytest.param(
            1679,
            210,
            id="a re-Allocate of a pooled shared container answers its CPUs from before the "
            "pool regenerated (cpu-policy §15.2), which kubelet-answer-agrees accepts",
        ),
        pytest.param(
            1458,
            157,
            id="an early GetEvictPods of a pressure actor holding an older snapshot changes no "
            "durable timer, which suppression-timers-kept accepts",
        ),
    ],
)
def test_seeds_the_v0_5_47_node_first_met_run_clean(seed: int, steps: int) -> None:
    outcome = run(seed, steps, fault_rate=0.06, reference_version=V0_5_47)
    assert outcome.failures == []


def _advisor(*, at_v0_5_47: bool, mode: str) -> tuple[SimAdvisor, VirtualClock]:
    clock = VirtualClock()
    advisor = SimAdvisor(
        Random(3), clock, {n: 4 for n in range(4)}, lambda: None, at_v0_5_47=at_v0_5_47
    )
    advisor.connect(2.0)  # dialled while healthy: the mode meets GetAdvice
    advisor.mode = mode
    return advisor, clock


@pytest.mark.parametrize(
    ("at_v0_5_47", "mode", "raised", "code"),
    [
        pytest.param(True, "healthy", None, "", id="a healthy v0.5.47 advisor answers GetAdvice"),
        pytest.param(True, "slow", None, "", id="a slow one answers within the timeout"),
        pytest.param(
            True, "stalled", AdvisorSick, "DEADLINE_EXCEEDED", id="a stalled one times out"
        ),
        pytest.param(
            True,
            "disconnecting",
            AdvisorSick,
            "UNAVAILABLE",
            id="a disconnecting one is unavailable",
        ),
        pytest.param(
            True, "refused", AdvisorRefused, "INVALID_ARGUMENT", id="a refusing one refuses"
        ),
        pytest.param(
            False,
            "healthy",
            AdvisorRefused,
            "UNIMPLEMENTED",
            id="a v0.5.3 advisor has no GetAdvice",
        ),
    ],
)
def test_the_simulated_advisor_answers_get_advice_as_its_mode_says(
    at_v0_5_47: bool, mode: str, raised: type[Exception] | None, code: str
) -> None:
    advisor, clock = _advisor(at_v0_5_47=at_v0_5_47, mode=mode)
    request = AdviceRequest({})
    if raised is None:
        reply = advisor.get_advice(request, 2.0)
        assert reply.response.numa_headroom_sent
        assert clock.monotonic() < 2.0
        assert [s.invalid for s in advisor.sent.values()] == [False]
        return
    with pytest.raises(raised) as caught:
        advisor.get_advice(request, 2.0)
    assert caught.value.code == code  # type: ignore[attr-defined]
    assert advisor.sent == {}


def test_a_garbage_advisor_sends_replies_made_invalid_or_refuses_unreadable_ones() -> None:
    advisor, _ = _advisor(at_v0_5_47=True, mode="garbage")
    refused = 0
    for _ in range(20):
        try:
            advisor.get_advice(AdviceRequest({}), 2.0)
        except AdvisorRefused as err:
            assert err.code == "INTERNAL"
            refused += 1
    assert refused > 0 and any(s.invalid for s in advisor.sent.values())
