"""checkCPUSet (policy.cpu.cpuset_check, cpu-policy §12.5): which containers are checked, drift,
overlap and unreadable cpusets, every failing container reported (the reference's "last error
wins" fixed)."""

from __future__ import annotations

import pytest

from policy.cpu.cpuset_check import (
    CpusetReading,
    containers_to_check,
    judge_cpusets,
)
from policy.state.sections import State
from policy.topology.cpuset import CPUSet
from tests.policy.pool_fixtures import CTX, dedicated, fresh_state, ramping, with_events
from tests.topologies import cpus


def _node() -> State:
    """(16,2,4): dedicated pod-d1 on 4-5, pod-d2 on 12-13 (a sidecar too), shared pod-s in
    share, a shared container with no request, and the pools."""
    state = with_events(
        fresh_state(),
        dedicated("pod-d1", "4-5"),
        dedicated("pod-d2", "12-13"),
        dedicated("pod-d2", "12-13", name="sidecar", container_type="SIDECAR"),
    )
    return with_events(state, ramping(state, "pod-s"), ramping(state, "pod-zero", quantity=0.0))


def _readings(state: State, actual: dict[str, str | None]) -> list[CpusetReading]:
    readings = []
    for c in containers_to_check(state.cpu, CTX):
        text = actual.get(c.pod_uid, str(c.expected))
        if text is None:
            readings.append(CpusetReading(c, None, "no cgroup"))
        else:
            readings.append(CpusetReading(c, CPUSet.parse(text)))
    return readings


def test_main_containers_are_checked_sidecars_pools_and_zero_request_shared_ones_are_not() -> None:
    checked = containers_to_check(_node().cpu, CTX)
    assert [(c.pod_uid, c.container_name) for c in checked] == [
        ("pod-d1", "c"),
        ("pod-d2", "c"),
        ("pod-s", "c"),
    ]
    assert checked[0].expected == cpus("4-5") and checked[0].is_dedicated
    assert not checked[2].is_dedicated


@pytest.mark.parametrize(
    ("actual", "invalid", "overlapping", "unreadable", "health"),
    [
        pytest.param({}, [], [], [], None, id="every cpuset as allocated is ready"),
        pytest.param({"pod-s": "1,3-15"}, [], ["pod-d1", "pod-d2"], [],
                     "cpuset overlap: default/name-pod-d1/c has 4-5",
                     id="a shared cpuset over the dedicated CPUs is an overlap"),
        pytest.param({"pod-d1": "4"}, ["pod-d1"], [], [],
                     "invalid cpuset exists: default/name-pod-d1/c has 4, allocated 4-5",
                     id="a dedicated cpuset that drifted is invalid"),
        pytest.param({"pod-d1": "12", "pod-d2": "12-13"}, ["pod-d1"], ["pod-d2"], [],
                     "invalid cpuset exists",
                     id="invalid wins over overlap in the health message"),
        pytest.param({"pod-d1": None, "pod-d2": None}, [], [], ["pod-d1", "pod-d2"],
                     "2 containers' cpusets unreadable: default/name-pod-d1/c (no cgroup); "
                     "default/name-pod-d2/c (no cgroup)",
                     id="every unreadable container is reported, not only the last"),
        pytest.param({"pod-d1": None, "pod-d2": "4"}, ["pod-d2"], [], ["pod-d1"],
                     "1 containers' cpusets unreadable",
                     id="an unreadable cgroup wins over a later invalid one"),
    ],
)  # fmt: skip
def test_judge_cpusets(
    actual: dict[str, str | None],
    invalid: list[str],
    overlapping: list[str],
    unreadable: list[str],
    health: str | None,
) -> None:
    verdict = judge_cpusets(_readings(_node(), actual))
    assert [r.container.pod_uid for r in verdict.invalid] == invalid
    assert [r.container.pod_uid for r in verdict.overlapping] == overlapping
    assert [r.container.pod_uid for r in verdict.unreadable] == unreadable
    if health is None:
        assert verdict.health_error is None
    else:
        assert verdict.health_error is not None and verdict.health_error.startswith(health)


def test_a_long_list_names_five_containers_and_counts_the_rest() -> None:
    state = fresh_state()
    events = [dedicated(f"pod-{i:02d}", str(i + 1)) for i in range(8)]
    state = with_events(state, *events)
    readings = [CpusetReading(c, None, "gone") for c in containers_to_check(state.cpu, CTX)]
    health = judge_cpusets(readings).health_error
    assert health is not None and health.endswith("; and 3 more")
