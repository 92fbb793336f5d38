"""The demo's view: the kubelet's answers grouped into pools and drawn per NUMA node."""

from __future__ import annotations

import pytest
from rich.console import Console

from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.commands.node_view import render_numa_map, render_pools
from qrmd.sim.demo.view import admission_line, holders, runtime_view, snapshot
from qrmd.sim.kubelet import AllocationInfo, Hint, dedicated_pod, reclaimed_pod, shared_pod

# Spec cpu-policy §1.3's generated layout: NUMA 0 = CPUs 0-1,8-9; core k = CPUs k and k+8.
SYNTH_16_2_4 = parse_synthetic_spec("synthetic:cpus=16,sockets=2,numas=4")

DB = dedicated_pod("u-db", "db", 2, numa_exclusive=True, sidecars={"exporter": 0.5})
WEB = shared_pod("u-web", "web", 1, sidecars={"envoy": 1})
API = shared_pod("u-api", "api", 1)
BATCH = reclaimed_pod("u-batch", "batch", 500)
PODS = (DB, WEB, API, BATCH)


def cpuset(result: str, prop: str = "CpusetCpus") -> dict[str, AllocationInfo]:
    return {"cpu": AllocationInfo(prop, result, float(len(CPUSet.parse(result))), True)}


def test_snapshot_keeps_each_containers_cpuset_only() -> None:
    answer = {
        "u-db": {"main": cpuset("0-1,8-9"), "exporter": cpuset("0-1,8-9")},
        "u-debug": {"shell": cpuset("", prop="")},  # a debug pod: no OCI property
    }
    assert snapshot(answer) == {
        "u-db": {"exporter": "0-1,8-9", "main": "0-1,8-9"},
        "u-debug": {},
    }


@pytest.mark.parametrize(
    ("view", "want"),
    [
        pytest.param(
            {
                "u-batch": {"worker": "7,15"},
                "u-web": {"app": "2-6,10-14", "envoy": "2-6,10-14"},
                "u-db": {"main": "0-1,8-9", "exporter": "0-1,8-9"},
                "u-api": {"app": "2-6,10-14"},
            },
            [
                ("A", "db", "0-1,8-9", ("db/exporter", "db/main")),
                ("s", "share", "2-6,10-14", ("api/app", "web/app", "web/envoy")),
                ("r", "reclaim", "7,15", ("batch/worker",)),
            ],
            id="a dedicated pod and its sidecar are one holder, shared containers one pool",
        ),
        pytest.param(
            {"u-web": {"app": "2-7,10-15"}, "u-api": {"app": "3-6"}},
            [
                ("s", "share", "2-7,10-15", ("web/app",)),
                ("s", "share#2", "3-6", ("api/app",)),
            ],
            id="shared containers on different cpusets are told apart",
        ),
        pytest.param(
            {"u-gone": {"app": "4"}},
            [("A", "u-gone", "4", ("u-gone/app",))],
            id="a pod the kubelet does not know is shown by its UID",
        ),
    ],
)
def test_holders(
    view: dict[str, dict[str, str]], want: list[tuple[str, str, str, tuple[str, ...]]]
) -> None:
    got = [(h.code, h.name, str(h.cpus), h.containers) for h in holders(PODS, view)]
    assert got == want


def text_of(renderable: object, width: int = 160) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_map_shows_each_cpu_with_its_holder_by_core_and_sibling() -> None:
    view = {
        "u-db": {"main": "0-1,8-9"},
        "u-web": {"app": "2-7,10-15"},
        "u-batch": {"worker": "7,15"},  # overlaps share: drawn as "+"
    }
    text = text_of(render_numa_map(SYNTH_16_2_4, holders(PODS, view)))
    assert "NUMA 0 · socket 0 · 4/4 held" in text
    # NUMA 0: cores 0 and 1 as columns, their siblings 8 and 9 underneath.
    assert " 0A  1A " in text and " 8A  9A " in text
    assert " 6s  7+ " in text and "14s 15+ " in text


def test_pool_table_ends_with_the_cpus_nobody_holds() -> None:
    view = {"u-db": {"main": "0-1,8-9"}, "u-web": {"app": "3-6,11-14"}}
    text = text_of(render_pools(SYNTH_16_2_4, holders(PODS, view)))
    rows = [line.split() for line in text.splitlines() if line.strip()]
    assert ["A", "db", "dedicated_cores", "0-1,8-9", "4", "0:4", "db/main"] in rows
    assert ["s", "share", "shared_cores", "3-6,11-14", "8", "1:2", "2:4", "3:2", "web/app"] in rows
    unheld = next(r for r in rows if r[1:2] == ["unheld"])
    assert unheld[2:6] == ["2,7,10,15", "4", "1:2", "3:2"]


def test_runtime_view_keeps_the_cpuset_property() -> None:
    properties = {
        ("u-web", "app"): {"CpusetCpus": "2-7"},
        ("u-db", "main"): {"CpusetCpus": "0-1,8-9", "CpusetMems": "0"},
        ("u-x", "debug"): {"CpuShares": "2"},
    }
    assert runtime_view(properties) == {"u-db": {"main": "0-1,8-9"}, "u-web": {"app": "2-7"}}


def test_admission_line_names_each_container_its_hint_and_cpus() -> None:
    pod = shared_pod("u-w", "web", 1, init={"migrate": 1}, sidecars={"envoy": 1})
    every = Hint((0, 1, 2, 3), True)
    line = admission_line(
        pod,
        {"app": "2-7", "envoy": "2-7"},
        {"migrate": every, "app": every, "envoy": every},
    )
    assert line == (
        "  [bold]web[/] [dim]shared_cores[/]: "
        "migrate (init, hint NUMA [0, 1, 2, 3]) → no allocation (init container); "
        "app (main, hint NUMA [0, 1, 2, 3]) → CPUs 2-7; "
        "envoy (sidecar, hint NUMA [0, 1, 2, 3]) → CPUs 2-7"
    )
