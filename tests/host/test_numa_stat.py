"""Anonymous memory per NUMA node from cgroup ``memory.numa_stat`` (spec memory-balancer §4.2):
the parser on both file shapes, and the reader on synthetic kubelet trees (cgroup v1 and v2,
cgroupfs and systemd drivers, with and without container IDs) and on this host's own cgroup."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.balancer_inputs import metric_inputs, with_pods
from actors.ports.balancer import AnonMemoryUnavailable, ContainerMemoryReader, PodAnonMemory
from policy.balance import BalancerConfig, NumaDistance
from policy.state.pool_pods import PodsInPools, PoolPod
from qrmd.host.kube_cgroups import CgroupDriver
from qrmd.host.numa_stat import (
    CgroupAnonMemoryReader,
    NumaStatError,
    default_memory_cgroup_root,
    parse_numa_stat,
    read_numa_stat,
)
from qrmd.sim.host.memory import SimulatedContainerMemory
from qrmd.sim.host.metrics import SimulatedNumaMetrics
from tests.host.cgroup_tree import PAGE, numa_stat_text, put_cgroup

GiB = 1 << 30
MiB = 1 << 20
UID = "0b1c2d3e-aaaa-4bbb-8ccc-123456789abc"
UID_ = UID.replace("-", "_")
APP = "a1" * 32
SIDECAR = "b2" * 32
SANDBOX = "c3" * 32

# -- the parser --------------------------------------------------------------------------------

# This host's own memory cgroup (a cgroup v1 kernel), copied verbatim.
REAL_V1 = (
    "total=4163 N0=4163\nfile=217 N0=217\nanon=374 N0=374\nunevictable=3572 N0=3572\n"
    "hierarchical_total=201298 N0=201298\nhierarchical_file=192869 N0=192869\n"
    "hierarchical_anon=4857 N0=4857\nhierarchical_unevictable=3572 N0=3572\n"
)

# A cgroup v2 file of a two-node host, every line kernel 6.x writes (values in bytes).
REAL_V2 = "".join(
    f"{name} N0={n0} N1={n1}\n"
    for name, n0, n1 in [
        ("anon", 1610612736, 536870912),
        ("file", 40960, 0),
        ("kernel_stack", 32768, 16384),
        ("pagetables", 8192, 0),
        ("sec_pagetables", 0, 0),
        ("shmem", 0, 0),
        ("file_mapped", 4096, 0),
        ("file_dirty", 0, 0),
        ("file_writeback", 0, 0),
        ("swapcached", 0, 0),
        ("anon_thp", 0, 0),
        ("file_thp", 0, 0),
        ("shmem_thp", 0, 0),
        ("inactive_anon", 1610612736, 536870912),
        ("active_anon", 0, 0),
        ("inactive_file", 40960, 0),
        ("active_file", 0, 0),
        ("unevictable", 0, 0),
        ("slab_reclaimable", 2048, 0),
        ("slab_unreclaimable", 4096, 1024),
        ("workingset_refault_anon", 0, 0),
        ("workingset_refault_file", 0, 0),
        ("workingset_activate_anon", 0, 0),
        ("workingset_activate_file", 0, 0),
        ("workingset_restore_anon", 0, 0),
        ("workingset_restore_file", 0, 0),
        ("workingset_nodereclaim", 0, 0),
    ]
)


@pytest.mark.parametrize(
    ("text", "hierarchical", "want"),
    [
        pytest.param(REAL_V1, False, {0: 374 * PAGE}, id="v1 container: the anon line in pages"),
        pytest.param(REAL_V1, True, {0: 4857 * PAGE}, id="v1 pod: the hierarchical_anon line"),
        pytest.param(
            "total_anon=3 N0=1 N1=2\n", True, {0: PAGE, 1: 2 * PAGE}, id="v1 total_anon fallback"
        ),
        pytest.param(
            REAL_V2, False, {0: 1610612736, 1: 536870912}, id="v2: the anon line, already bytes"
        ),
        pytest.param(
            "anon N0=7 N1=9\n", True, {0: 7, 1: 9}, id="v2 is hierarchical for a pod as well"
        ),
        pytest.param(
            "anon=5 N0=5\n", False, {0: 5 * PAGE}, id="v1 node absent from the file has no key"
        ),
    ],
)
def test_anon_per_numa(text: str, hierarchical: bool, want: dict[int, int]) -> None:
    assert dict(parse_numa_stat(text, "f").anon(hierarchical=hierarchical)) == want


def test_v1_page_size_is_4096_unless_told() -> None:
    assert parse_numa_stat("anon=1 N0=1\n", "f").anon(hierarchical=False) == {0: 4096}
    stat = parse_numa_stat("anon=1 N0=1\n", "f", page_size=65536)
    assert stat.anon(hierarchical=False) == {0: 65536}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", r"^f: empty$", id="an empty file"),
        pytest.param(
            "anon 2147483648 N0=2147483648\n",
            r"^f: line 1: expected N<node>=<count>, got '2147483648'$",
            id="a v2 line carries no total",
        ),
        pytest.param(
            "anon=1 N0=1\nfile N0=2\n", r"^f: line 2: a cgroup v2 line in a v1 file$", id="mixed"
        ),
        pytest.param("anon N0=1 N0=2\n", r"^f: line 1: node 0 is listed twice$", id="node twice"),
        pytest.param("anon N0=-1\n", r"expected N<node>=<count>, got 'N0=-1'", id="negative"),
        pytest.param("Anon: 12 kB\n", r"^f: line 1: expected 'name=total", id="not a numa_stat"),
    ],
)
def test_malformed_files_name_the_file_and_line(text: str, message: str) -> None:
    with pytest.raises(NumaStatError, match=message):
        parse_numa_stat(text, "f")


@pytest.mark.parametrize(
    ("text", "hierarchical", "message"),
    [
        pytest.param("file=1 N0=1\n", False, r"^f: no 'anon' or 'total_anon' line$", id="v1"),
        pytest.param(
            "anon=1 N0=1\n",
            True,
            r"^f: no 'hierarchical_anon' or 'total_anon' line$",
            id="v1 pod needs a hierarchical line",
        ),
        pytest.param("file N0=1\n", True, r"^f: no 'anon' line$", id="v2"),
    ],
)
def test_a_file_without_its_anon_line_is_an_error(
    text: str, hierarchical: bool, message: str
) -> None:
    stat = parse_numa_stat(text, "f")
    with pytest.raises(NumaStatError, match=message):
        stat.anon(hierarchical=hierarchical)


def test_errors_are_the_ports_error() -> None:
    assert issubclass(NumaStatError, AnonMemoryUnavailable)


amounts = st.dictionaries(st.integers(0, 63), st.integers(0, 2**40).map(lambda v: v * PAGE))


@settings(max_examples=60)
@given(anon=amounts, hier=amounts, version=st.sampled_from([1, 2]))
def test_written_files_read_back(anon: dict[int, int], hier: dict[int, int], version: int) -> None:
    stat = parse_numa_stat(numa_stat_text(version, anon, hier), "f")
    assert stat.version == version
    assert stat.anon(hierarchical=False) == anon
    assert stat.anon(hierarchical=True) == (hier if version == 1 else anon)


@settings(max_examples=100)
@given(st.text(alphabet="anoN01= \n_x-\t", max_size=120) | st.text(max_size=60))
def test_garbage_raises_only_numa_stat_error(text: str) -> None:
    with contextlib.suppress(NumaStatError):
        parse_numa_stat(text, "f").anon(hierarchical=False)


# -- the reader on synthetic kubelet trees -----------------------------------------------------

LAYOUTS = [
    pytest.param(
        1,
        CgroupDriver.CGROUPFS,
        f"kubepods/burstable/pod{UID}",
        {"docker://": APP, "sidecar": SIDECAR},
        id="v1 cgroupfs burstable, docker IDs as directory names",
    ),
    pytest.param(
        1,
        CgroupDriver.CGROUPFS,
        f"kubepods/pod{UID}",
        {"containerd://": APP, "sidecar": SIDECAR},
        id="v1 cgroupfs guaranteed sits at kubepods itself",
    ),
    pytest.param(
        1,
        CgroupDriver.SYSTEMD,
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice",
        {
            "containerd://": f"cri-containerd-{APP}.scope",
            "sidecar": f"cri-containerd-{SIDECAR}.scope",
        },
        id="v1 systemd burstable, containerd scopes",
    ),
    pytest.param(
        2,
        CgroupDriver.SYSTEMD,
        f"kubepods.slice/kubepods-pod{UID_}.slice",
        {
            "containerd://": f"cri-containerd-{APP}.scope",
            "sidecar": f"cri-containerd-{SIDECAR}.scope",
        },
        id="v2 systemd guaranteed, containerd scopes",
    ),
    pytest.param(
        2,
        CgroupDriver.SYSTEMD,
        f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice",
        {"cri-o://": f"crio-{APP}.scope", "sidecar": f"crio-{SIDECAR}.scope"},
        id="v2 systemd besteffort, cri-o scopes",
    ),
    pytest.param(
        2,
        CgroupDriver.SYSTEMD,
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice",
        {"docker://": f"docker-{APP}.scope", "sidecar": f"docker-{SIDECAR}.scope"},
        id="v2 systemd burstable, docker scopes",
    ),
    pytest.param(
        2,
        CgroupDriver.CGROUPFS,
        f"kubepods/besteffort/pod{UID}",
        {"containerd://": APP, "sidecar": SIDECAR},
        id="v2 cgroupfs besteffort",
    ),
]

APP_ANON = {0: 2 * GiB, 1: 512 * MiB}
SIDECAR_ANON = {0: 64 * MiB, 1: 0}
POD_ANON = {0: 2 * GiB + 64 * MiB + 4 * PAGE, 1: 512 * MiB + 4 * PAGE}


def build_pod(root: Path, version: int, pod_path: str, names: dict[str, str]) -> None:
    """A pod cgroup with the app, a sidecar and the sandbox (pause) container. On v1 the pod's
    own anon line is empty (it runs no process) and its hierarchical line sums the subtree."""
    own = {0: 0, 1: 0} if version == 1 else POD_ANON
    pod = put_cgroup(root / pod_path, version, own, POD_ANON)
    app_name = next(v for k, v in names.items() if k.endswith("://"))
    put_cgroup(pod / app_name, version, APP_ANON)
    put_cgroup(pod / names["sidecar"], version, SIDECAR_ANON)
    sandbox = app_name.replace(APP, SANDBOX)
    put_cgroup(pod / sandbox, version, {0: 4 * PAGE, 1: 4 * PAGE})
    # A stray directory that is no container (systemd drops such slices): never read.
    (pod / "unrelated.slice").mkdir()


@pytest.mark.parametrize(("version", "driver", "pod_path", "names"), LAYOUTS)
@pytest.mark.parametrize("driver_setting", ["given", "auto"])
def test_reads_listed_containers(
    tmp_path: Path,
    version: int,
    driver: CgroupDriver,
    pod_path: str,
    names: dict[str, str],
    driver_setting: str,
) -> None:
    build_pod(tmp_path, version, pod_path, names)
    scheme = next(k for k in names if k.endswith("://"))
    reader = CgroupAnonMemoryReader(tmp_path, driver=driver if driver_setting == "given" else None)
    app_id, sidecar_id = f"{scheme}{APP}", f"{scheme}{SIDECAR}"
    got = reader.anon_by_numa(UID, [app_id, sidecar_id])
    assert got == PodAnonMemory(
        pod=POD_ANON, containers={app_id: APP_ANON, sidecar_id: SIDECAR_ANON}
    )
    # A bare ID (no runtime scheme) finds the same cgroup.
    assert reader.anon_by_numa(UID, [APP]).containers == {APP: APP_ANON}


@pytest.mark.parametrize(("version", "driver", "pod_path", "names"), LAYOUTS)
def test_without_container_ids_every_container_cgroup_is_read(
    tmp_path: Path, version: int, driver: CgroupDriver, pod_path: str, names: dict[str, str]
) -> None:
    build_pod(tmp_path, version, pod_path, names)
    got = CgroupAnonMemoryReader(tmp_path).anon_by_numa(UID, None)
    assert got.pod == POD_ANON
    assert got.containers == {
        APP: APP_ANON,
        SIDECAR: SIDECAR_ANON,
        SANDBOX: {0: 4 * PAGE, 1: 4 * PAGE},
    }


def test_reader_implements_the_port(tmp_path: Path) -> None:
    assert isinstance(CgroupAnonMemoryReader(tmp_path), ContainerMemoryReader)


def test_kubelet_cgroup_root_is_honoured(tmp_path: Path) -> None:
    build_pod(tmp_path / "k8s", 2, f"kubepods/pod{UID}", {"containerd://": APP, "sidecar": SIDECAR})
    reader = CgroupAnonMemoryReader(tmp_path, kubelet_cgroup_root="/k8s")
    assert reader.anon_by_numa(UID, [APP]).containers == {APP: APP_ANON}


def test_a_node_missing_from_a_container_file_is_absent_not_zero(tmp_path: Path) -> None:
    pod = put_cgroup(tmp_path / f"kubepods/pod{UID}", 2, {0: GiB, 1: GiB})
    put_cgroup(pod / APP, 2, {1: GiB})
    got = CgroupAnonMemoryReader(tmp_path).anon_by_numa(UID, [APP])
    assert got.containers[APP] == {1: GiB}
    assert 0 not in got.containers[APP]


def test_unknown_pod_lists_every_place_looked_at(tmp_path: Path) -> None:
    reader = CgroupAnonMemoryReader(tmp_path, driver=CgroupDriver.SYSTEMD)
    with pytest.raises(NumaStatError) as caught:
        reader.anon_by_numa(UID, None)
    message = str(caught.value)
    assert message.startswith(f"pod {UID}: no cgroup found; looked at {tmp_path}/kubepods.slice/")
    assert f"kubepods-besteffort-pod{UID_}.slice" in message


def test_unknown_container_names_pod_container_and_names_tried(tmp_path: Path) -> None:
    build_pod(tmp_path, 2, f"kubepods/pod{UID}", {"containerd://": APP, "sidecar": SIDECAR})
    missing = "d4" * 32
    with pytest.raises(NumaStatError) as caught:
        CgroupAnonMemoryReader(tmp_path).anon_by_numa(UID, [f"cri-o://{missing}"])
    assert str(caught.value) == (
        f"pod {UID}: no cgroup for container cri-o://{missing} under "
        f"{tmp_path}/kubepods/pod{UID} (looked for crio-{missing})"
    )


def test_malformed_container_file_is_named(tmp_path: Path) -> None:
    pod = put_cgroup(tmp_path / f"kubepods/pod{UID}", 2, {0: GiB})
    (pod / APP).mkdir()
    (pod / APP / "memory.numa_stat").write_text("anon N0=1\nfile N0=x\n")
    with pytest.raises(NumaStatError, match=rf"{pod / APP}/memory.numa_stat: line 2: .*'N0=x'"):
        CgroupAnonMemoryReader(tmp_path).anon_by_numa(UID, [APP])


def test_missing_file_is_named(tmp_path: Path) -> None:
    pod = put_cgroup(tmp_path / f"kubepods/pod{UID}", 2, {0: GiB})
    (pod / APP).mkdir()
    with pytest.raises(NumaStatError, match=rf"^{pod / APP}/memory.numa_stat: missing$"):
        read_numa_stat(pod / APP)


def test_default_root_prefers_a_v1_memory_controller(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    assert default_memory_cgroup_root(tmp_path) == tmp_path
    put_cgroup(tmp_path / "memory", 1, {0: PAGE})
    assert default_memory_cgroup_root(tmp_path) == tmp_path / "memory"


HOST_ROOT = default_memory_cgroup_root()


@pytest.mark.skipif(
    not (HOST_ROOT / "memory.numa_stat").exists(), reason="this host has no memory.numa_stat"
)
def test_this_hosts_own_memory_cgroup_parses() -> None:
    stat = read_numa_stat(HOST_ROOT)
    anon = stat.anon(hierarchical=True)
    assert anon, "a NUMA kernel lists at least node 0"
    assert all(v >= 0 and v % (PAGE if stat.version == 1 else 1) == 0 for v in anon.values())


def test_a_read_holds_its_figures_in_numa_order_whatever_order_they_came_in() -> None:
    read = PodAnonMemory(pod={2: 5, 0: 7}, containers={"c": {1: 3, 0: 4}})
    assert list(read.pod) == [0, 2] and list(read.containers["c"]) == [0, 1]


# -- a round's reads from the cgroup tree ------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("with_ids", [True, False], ids=["by container IDs", "by pod cgroups"])
def test_a_round_reads_the_cgroup_tree_as_the_same_figures_simulated(
    tmp_path: Path, version: int, with_ids: bool
) -> None:
    """The cgroup reader is read pod by pod (its cost is its files), the simulator in one
    call: the round's inputs from both, the same figures, are the same."""
    simulated = SimulatedContainerMemory()
    listed = []
    for i, uid in enumerate([UID, UID.replace("a", "d")]):
        app, sidecar = f"containerd://{APP[:-1]}{i}", f"containerd://{SIDECAR[:-1]}{i}"
        app_anon = {0: (i + 1) * GiB, 1: 512 * MiB}
        # v1: the pod runs no process of its own; its hierarchical counter sums the subtree.
        subtree = {0: (i + 1) * GiB + 64 * MiB, 1: 512 * MiB}
        own = {0: 0, 1: 0} if version == 1 else subtree
        pod = put_cgroup(tmp_path / f"kubepods/pod{uid}", version, own, subtree)
        put_cgroup(pod / app.removeprefix("containerd://"), version, app_anon)
        put_cgroup(pod / sidecar.removeprefix("containerd://"), version, {0: 64 * MiB})
        simulated.set_container(uid, app, app_anon)
        simulated.set_container(uid, sidecar, {0: 64 * MiB})
        listed.append(PoolPod(uid, "default", f"pod-{i}", "share", ("app", "sidecar"),
                              (app, sidecar) if with_ids else None))  # fmt: skip
    pods = PodsInPools({"share": (0, 1)}, tuple(listed))
    inputs = metric_inputs(
        now=1_795_994_721.5,
        distances={0: (NumaDistance(1, 11),), 1: (NumaDistance(0, 11),)},
        metrics=SimulatedNumaMetrics.quiet(range(2)),
        config=BalancerConfig(),
        cpu_vendor="",
        last=None,
    )
    from_files, unreadable = with_pods(inputs, pods, CgroupAnonMemoryReader(tmp_path))
    assert unreadable == 0
    assert from_files == with_pods(inputs, pods, simulated)[0]
    assert [p.anon_on(0) for p in from_files.pods] == [GiB + 64 * MiB, 2 * GiB + 64 * MiB]
