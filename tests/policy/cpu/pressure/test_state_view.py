"""What the plugins read of the CPU state: the pool map and the shared pools' limit, on the
reference's ``TestCPUPressureLoadEviction_collectMetrics`` state (pressure_load_test.go,
v0.5.3: ``GenerateDummyCPUTopology(16, 2, 4)``, share ``3-6,11-14``, reclaim ``7,10,15``)."""

from __future__ import annotations

import pytest

from policy.cpu.pressure.inputs import ContainerPool
from policy.cpu.pressure.state_view import pool_map, reserved_for_reclaim, shared_pools_limit
from policy.cpu.qos import DEDICATED_CORES, RECLAIMED_CORES
from policy.cpu.reserve import reserved_cpus
from policy.state.cpu_state import CPUState
from policy.state.entries import InPool, OwnCPUs
from policy.state.events import ContainerAllocated, PoolSet
from policy.state.sections import CPU_SECTION, apply_all, empty_state
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus


def collect_metrics_state(*, numa_binding: bool = False) -> CPUState:
    events = [
        PoolSet("share", cpus("3-6,11-14")),
        PoolSet("reclaim", cpus("7,10,15")),
        ContainerAllocated(container("pod1", "test", InPool("share"), owner="share")),
        ContainerAllocated(container("pod2", "test", InPool("share"), owner="share")),
        ContainerAllocated(
            container("pod3", "test", InPool("reclaim"), owner="reclaim", qos=RECLAIMED_CORES)
        ),
        ContainerAllocated(
            container(
                "pod4",
                "test",
                OwnCPUs(cpus("0-1,8-9"), cpus("0-1,8-9")),
                owner="dedicated",
                qos=DEDICATED_CORES,
                numa_binding=numa_binding,
            )
        ),
    ]
    state = apply_all(empty_state(SYNTH_16_2_4), events).section(CPU_SECTION)
    assert isinstance(state, CPUState)
    return state


def test_the_pool_map_has_every_pool_and_every_owned_container() -> None:
    view = pool_map(collect_metrics_state())
    assert view.pools == {"share": 8, "reclaim": 3}
    assert view.containers == (
        ContainerPool("pod1", "test", "share"),
        ContainerPool("pod2", "test", "share"),
        ContainerPool("pod3", "test", "reclaim"),
        ContainerPool("pod4", "test", "dedicated"),
    )


@pytest.mark.parametrize(
    ("system_reserved", "want"),
    [
        pytest.param(4, 8, id="4 reserved for the system: 16 - 4 - 4 = 8, the share pool fills it"),
        pytest.param(0, 12, id="none reserved: 16 - 0 - 4 = 12, the share pool may grow"),
    ],
)
def test_shared_pools_limit_as_the_reference_collect_metrics_cases(
    system_reserved: int, want: int
) -> None:
    reserved = reserved_cpus(
        SYNTH_16_2_4, use_kubelet_reserved_config=False, reserved_cpu_cores=system_reserved
    )
    assert shared_pools_limit(collect_metrics_state(), reserved, 4) == want


def test_a_dedicated_numa_binding_container_takes_its_numa_node_out_of_the_limit() -> None:
    # pod4 on 0-1,8-9 is NUMA node 0 of the 16/2/4 layout: its 4 CPUs and its reclaim core go.
    state = collect_metrics_state(numa_binding=True)
    assert shared_pools_limit(state, cpus(""), 4) == 16 - 4 - 3


@pytest.mark.parametrize(
    ("cores", "numas", "want"),
    [
        pytest.param(4, 4, {0: 1, 1: 1, 2: 1, 3: 1}, id="one per NUMA node"),
        pytest.param(2, 4, {0: 1, 1: 0, 2: 1, 3: 0}, id="fewer cores than nodes: every other node"),
        pytest.param(8, 2, {0: 4, 1: 4}, id="more cores than nodes: shared out"),
        pytest.param(0, 2, {0: 0, 1: 0}, id="none: nothing (the reference divides by zero)"),
    ],
)
def test_reserved_for_reclaim(cores: int, numas: int, want: dict[int, int]) -> None:
    assert reserved_for_reclaim(cores, numas) == want
