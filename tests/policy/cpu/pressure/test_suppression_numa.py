"""The suppression plugin's ``GetEvictPods`` at v0.5.47 (``policy.cpu.pressure.suppression_numa``):
the reclaim pool judged by parts, each against the CPU it can supply.

Provenance: katalyst-core v0.5.47 ``cpueviction/strategy/pressure_suppression_test.go``
``TestCPUPressureSuppression_GetEvictPods`` (:79-352: the reclaim pool ``1,3-6,9,11-14``, each
of its 10 CPUs at usage ratio 0.5, the reclaim cgroup ``test``; ``GetEvictPods`` twice, 10 ms
apart, with a 10 ms minimum duration; no NUMA cgroup ``test-<n>`` exists, so only the non-bound
part is judged). The RNB cases follow ``pressure_suppression.go:145-260`` and
``metric/helper/reclaim.go``; the reference's tests have none.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from policy.cpu.pressure.pods import ActivePod
from policy.cpu.pressure.settings import PressureSettings
from policy.cpu.pressure.suppression import SuppressionError
from policy.cpu.pressure.suppression_numa import (
    NON_BOUND,
    NUMASuppressionInputs,
    ReclaimPart,
    ReclaimSample,
    evict_pods_by_numa,
    numa_reclaim_cgroups,
    reclaim_parts,
)
from policy.cpu.reference import V0_5_47, ReferenceOptions
from policy.decision import Decision
from policy.state.pressure import PressureHistory, apply_pressure_event
from tests.policy.decision_fixtures import CTX, Node, request

SETTINGS = PressureSettings(
    enable_suppression_eviction=True,
    max_suppression_tolerance_rate=5.0,
    min_suppression_tolerance_duration_s=0.010,
)
TOLERANCE_1_2 = {"katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1.2"}'}
RNB = {"katalyst.kubewharf.io/memory_enhancement": '{"numa_binding": "true"}'}
#: The reference's metrics: 10 CPUs at 0.5 each, cgroup usage 5, quota 20000/1000.
USAGE_HALF = 5.0


def reclaimed(name: str, cpus: float, numa: int | None = None, **notes: str) -> ActivePod:
    """A reclaimed pod as the reference's test builds it: its request in reclaimed milli-CPU."""
    annotations = {"katalyst.kubewharf.io/qos_level": "reclaimed_cores", **TOLERANCE_1_2, **notes}
    if numa is not None:
        annotations["katalyst.kubewharf.io/numa_bind_result"] = str(numa)
    requests = {"resource.katalyst.kubewharf.io/reclaimed_millicpu": str(int(cpus * 1000))}
    return ActivePod(uid=f"uid-{name}", namespace=name, name=name, annotations=annotations,
                     containers=((name, requests),))  # fmt: skip


def twice(inputs: NUMASuppressionInputs) -> tuple[Decision, PressureHistory]:  # type: ignore[type-arg]
    """``GetEvictPods`` at 0 s and 10.001 ms later, the first call's events applied."""
    history = PressureHistory()
    first = evict_pods_by_numa(history, inputs, SETTINGS, 0.0)
    for event in first.events:
        history = apply_pressure_event(history, event)
    second = evict_pods_by_numa(history, inputs, SETTINGS, 0.010001)
    for event in second.events:
        history = apply_pressure_event(history, event)
    return second, history


def offered(decision: Decision) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    return [(o.pod_uid, o.reason) for o in decision.reply.offers]


def reason(rate: str) -> str:
    return (f"current pool suppression rate {rate} is over than the "
            "pod suppression tolerance rate 1.20")  # fmt: skip


def non_bound(cgroup_usage: float, quota: float, period: float = 1000) -> ReclaimPart:
    return ReclaimPart(NON_BOUND, 10, ReclaimSample(USAGE_HALF, cgroup_usage, quota, period))


@pytest.mark.parametrize(
    ("part", "pods", "want"),
    [
        pytest.param(non_bound(5, 20000), [reclaimed("pod-1", 2)], [],
                     id="TestCPUPressureSuppression_GetEvictPods: no over tolerance rate pod "
                        "(2 CPUs on a supply of 10)"),
        pytest.param(non_bound(5, 20000), [reclaimed("pod-1", 15), reclaimed("pod-2", 4)],
                     [("uid-pod-1", reason("1.90"))],
                     id="TestCPUPressureSuppression_GetEvictPods: over tolerance rate (19 CPUs on "
                        "10: the larger pod goes, 4 on 10 keeps the other)"),
        pytest.param(non_bound(55, 5000), [reclaimed("pod-1", 15), reclaimed("pod-2", 4)],
                     [("uid-pod-1", reason("3.80"))],
                     id="TestCPUPressureSuppression_GetEvictPods: over tolerance rate, because "
                        "quota limited (the supply of 60 is capped at 5000/1000)"),
    ],
)  # fmt: skip
def test_the_references_cases(
    part: ReclaimPart, pods: list[ActivePod], want: list[tuple[str, str]]
) -> None:
    decision, _ = twice(NUMASuppressionInputs(10, (part,), tuple(pods)))
    assert decision.error is None
    assert offered(decision) == want


@pytest.mark.parametrize(
    ("sample", "cpus", "supply"),
    [
        pytest.param(ReclaimSample(5, 5, 20000, 1000), 10, 10.0,
                     id="idle CPUs plus what reclaimed pods use, under the quota"),
        pytest.param(ReclaimSample(12, 1, -1, 100000), 10, 1.0,
                     id="a part busier than its size supplies only what reclaimed pods use"),
        pytest.param(ReclaimSample(0, 0, 3, 0), 10, 3.0,
                     id="a quota without a period caps at the raw quota, as the reference does"),
        pytest.param(ReclaimSample(4, 0, 0, 100000), 4, 0.0,
                     id="a part used up by others supplies nothing"),
    ],
)  # fmt: skip
def test_a_parts_supply(sample: ReclaimSample, cpus: int, supply: float) -> None:
    assert sample.supply(cpus) == supply


# -- reclaimed cores bound to a NUMA node ------------------------------------------------------

#: A 2-CPU NUMA part, idle, no quota: it supplies 2 CPUs.
NUMA_0 = ReclaimPart(0, 2, ReclaimSample(0, 0, -1, 100000))


@pytest.mark.parametrize(
    ("parts", "pods", "want"),
    [
        pytest.param((non_bound(5, 20000), NUMA_0),
                     [reclaimed("bound", 4, numa=0), reclaimed("plain", 4)],
                     [("uid-bound", reason("2.00"))],
                     id="a bound pod is judged against its NUMA part only (4 CPUs on 2), the "
                        "others against the non-bound part (4 on 10)"),
        pytest.param((non_bound(5, 20000),),
                     [reclaimed("bound", 4, numa=0), reclaimed("plain", 15)],
                     [("uid-plain", reason("1.50"))],
                     id="without its NUMA cgroup a bound pod is not judged, nor counted"),
        pytest.param((non_bound(5, 20000), replace(NUMA_0, cpus=0,
                                                   sample=ReclaimSample(0, 0, -1, 100000))),
                     [reclaimed("bound", 1, numa=0)],
                     [("uid-bound", reason(f"{sys.float_info.max:.2f}"))],
                     id="a part that supplies nothing has an infinite rate"),
        pytest.param((non_bound(5, 20000),),
                     [reclaimed("asks", 15, **RNB)], [],
                     id="a pod asking for NUMA binding without a result is in no part"),
    ],
)  # fmt: skip
def test_bound_pods_are_judged_by_their_numa_part(
    parts: tuple[ReclaimPart, ...], pods: list[ActivePod], want: list[tuple[str, str]]
) -> None:
    decision, _ = twice(NUMASuppressionInputs(10, parts, tuple(pods)))
    assert decision.error is None
    assert offered(decision) == want


def test_a_pod_without_a_result_keeps_its_timer_and_is_named() -> None:
    history = PressureHistory(tolerance_since=(("asks/asks", 0.0),))
    inputs = NUMASuppressionInputs(10, (non_bound(5, 20000),), (reclaimed("asks", 15, **RNB),))
    decision = evict_pods_by_numa(history, inputs, SETTINGS, 1.0)
    assert decision.events == ()  # its timer is neither stopped nor used
    assert any("numa binding result not found" in w for w in decision.warnings)


def test_a_part_without_metrics_fails_the_call_and_keeps_the_timers_before_it() -> None:
    parts = (non_bound(5, 20000), ReclaimPart(0, 2, None, "cgroup /kubepods/besteffort-0: gone"))
    inputs = NUMASuppressionInputs(10, parts, (reclaimed("plain", 15), reclaimed("b", 4, numa=0)))
    decision = evict_pods_by_numa(PressureHistory(), inputs, SETTINGS, 0.0)
    assert decision.error is not None
    assert str(decision.error) == "get reclaim metrics failed: cgroup /kubepods/besteffort-0: gone"
    assert decision.reply.offers == ()
    # the non-bound part's pod started its timer before the failure, as the reference's
    # in-place map keeps it
    (event,) = decision.events
    assert event.since == (("plain/plain", 0.0),)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("size", "want"),
    [
        pytest.param(None, "get reclaim pool failed: pool not found",
                     id="no reclaim pool fails the call as at v0.5.3"),
    ],
)  # fmt: skip
def test_the_early_answers_stay_v0_5_3s(size: int | None, want: str) -> None:
    inputs = NUMASuppressionInputs(size, (), (reclaimed("p", 1),))
    with pytest.raises(SuppressionError, match=want):
        evict_pods_by_numa(PressureHistory(), inputs, SETTINGS, 0.0)
    empty = evict_pods_by_numa(PressureHistory(), replace(inputs, reclaim_pool_size=0),
                               SETTINGS, 0.0)  # fmt: skip
    assert empty.reply.offers == () and empty.warnings == ("reclaim pool set size is empty",)


def test_the_inputs_survive_their_plain_form() -> None:
    parts = (non_bound(5, 20000), ReclaimPart(2, 1, None, "no sample"))
    inputs = NUMASuppressionInputs(4, parts, (reclaimed("bound", 1, numa=2),))
    assert NUMASuppressionInputs.from_json(inputs.to_json()) == inputs


# -- the parts, from the CPU state -------------------------------------------------------------


def test_the_parts_follow_the_rnb_split_of_the_reclaim_pool() -> None:
    # the reference's (16,2,4) node at v0.5.47: reclaim 1,3-4,6, one CPU per NUMA; an RNB
    # container bound to NUMA 0 takes NUMA 0 out of the non-bound part
    ctx = replace(CTX, reference_version=V0_5_47,
                  reference=ReferenceOptions(enable_reclaim_numa_binding=True))  # fmt: skip
    node = Node(ctx)
    node.allocate(request("rnb", cpu=1, qos="reclaimed_cores", numa_binding=True, hint=(0,)))
    parts = reclaim_parts(node.state.cpu, {2, 0})
    assert [(numa, str(cpus)) for numa, cpus in parts] == [(-1, "3-4,6"), (0, "1"), (2, "4")]


def test_each_numa_has_its_reclaim_cgroup() -> None:
    assert numa_reclaim_cgroups("/kubepods/besteffort", [1, 0]) == {
        0: "/kubepods/besteffort-0",
        1: "/kubepods/besteffort-1",
    }
