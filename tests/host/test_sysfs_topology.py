"""Reading the host topology from sysfs (spec cpu-policy §1.2, §1.3), on fake trees and on /sys."""

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.topology.build import CoreSpec, assemble_topology, parse_cpu_list
from policy.topology.cpuset import CPUSet
from policy.topology.machine_file import topology_from_machine
from policy.topology.model import CPUTopology
from policy.topology.synthetic import generate_dummy_cpu_topology
from qrmd.host.sysfs_topology import SysfsTopologyError, read_sysfs_topology
from tests.host.sysfs_tree import put, tree_of
from tests.topology_shapes import random_machines, synthetic_shapes

# 2 sockets, one NUMA node each, 2 threads per core, Linux x86 numbering (siblings k, k+8).
TWO_SOCKET_HT = generate_dummy_cpu_topology(16, 2, 2)
# 2 sockets with sub-NUMA clustering (SNC4): 8 NUMA nodes, 256 CPUs, siblings k, k+128;
# the shape of docs/examples/machine-8numa-256cpu.yaml.
EIGHT_NUMA_SNC = generate_dummy_cpu_topology(256, 2, 8)
# 2 sockets plus a CXL memory expander as NUMA node 2 (memory, no CPUs).
TWO_SOCKET_CXL = topology_from_machine(
    {
        "sockets": [
            {"id": 0, "numa_nodes": [{"id": 0, "cores": [[0, 4], [1, 5]]}]},
            {"id": 1, "numa_nodes": [{"id": 1, "cores": [[2, 6], [3, 7]]}]},
        ],
        "memory_only_numa_nodes": [2],
        "distances": {0: [10, 21, 14], 1: [21, 10, 24], 2: [14, 24, 10]},
    }
)


@pytest.mark.parametrize(
    "topo",
    [
        pytest.param(TWO_SOCKET_HT, id="2-socket HT"),
        pytest.param(EIGHT_NUMA_SNC, id="8 NUMA with SNC"),
        pytest.param(TWO_SOCKET_CXL, id="memory-only node"),
        pytest.param(generate_dummy_cpu_topology(16, 2, 4), id="spec 16-2-4"),
    ],
)
@pytest.mark.parametrize("siblings_file", ["core_cpus_list", "thread_siblings_list"])
def test_reads_the_shape_back(tmp_path: Path, topo: CPUTopology, siblings_file: str) -> None:
    tree = tree_of(topo)
    tree.siblings_file = siblings_file
    assert read_sysfs_topology(tree.write(tmp_path)) == topo


def test_memory_only_node_is_in_distances_not_in_cpu_topology(tmp_path: Path) -> None:
    topo = read_sysfs_topology(tree_of(TWO_SOCKET_CXL).write(tmp_path))
    assert topo.numa_nodes() == [0, 1]
    assert topo.num_numa_nodes == 2
    assert topo.distances.nodes() == [0, 1, 2]
    assert topo.distances.as_lists()[2] == [14, 24, 10]


@pytest.mark.parametrize(
    "stale_siblings",
    [
        pytest.param(False, id="siblings lists without offline CPUs, as Linux writes them"),
        pytest.param(True, id="siblings lists still naming offline CPUs"),
    ],
)
def test_offline_cpus_are_left_out(tmp_path: Path, stale_siblings: bool) -> None:
    # Core 3 (CPUs 3, 11) entirely offline, core 5 loses its first thread (CPU 5).
    tree = tree_of(TWO_SOCKET_HT, offline=CPUSet([3, 5, 11]), stale_siblings=stale_siblings)
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo.cpus() == CPUSet(range(16)).difference(CPUSet([3, 5, 11]))
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (13, 7, 2, 2)
    assert topo.core_of(13) == 13  # the lowest *online* sibling names the core
    assert topo.cpus_in_numa(1) == parse_cpu_list("4,6-7,12-15")


def test_node_without_cpus_or_memory_is_dropped(tmp_path: Path) -> None:
    tree = tree_of(TWO_SOCKET_CXL)
    tree.has_memory = "0-1"  # node 2 has neither CPUs nor memory now
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo.distances.as_lists() == {0: [10, 21], 1: [21, 10]}


def test_memoryless_cpu_node_stays(tmp_path: Path) -> None:
    tree = tree_of(TWO_SOCKET_HT)
    tree.has_memory = "0"  # node 1 has CPUs but no memory of its own
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo == TWO_SOCKET_HT


def test_kernel_without_numa_puts_every_cpu_on_node_0(tmp_path: Path) -> None:
    tree = tree_of(TWO_SOCKET_HT)
    tree.nodes = None
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo.numa_nodes() == [0]
    assert topo.cpus_in_numa(0) == CPUSet(range(16))
    assert (topo.num_sockets, topo.num_cores) == (2, 8)
    assert topo.distances.as_lists() == {0: [10]}


def test_cpu_listed_by_no_node_belongs_to_node_0(tmp_path: Path) -> None:
    tree = tree_of(TWO_SOCKET_HT)
    assert tree.nodes is not None
    tree.nodes[1] = ("4-7,12-14", tree.nodes[1][1])  # CPU 15 in no node
    tree.cpus[7] = (1, "7")  # keep its sibling in the same node as it
    tree.cpus[15] = (1, "15")
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo.numa_of(15) == 0 and topo.numa_of(14) == 1


def test_without_node_online_the_node_directories_are_the_columns(tmp_path: Path) -> None:
    tree = tree_of(TWO_SOCKET_CXL)
    tree.node_online = None
    tree.has_memory = None
    assert read_sysfs_topology(tree.write(tmp_path)) == TWO_SOCKET_CXL


def test_unknown_package_is_socket_0(tmp_path: Path) -> None:
    tree = tree_of(generate_dummy_cpu_topology(4, 1, 1))
    tree.cpus = {cpu: (-1, siblings) for cpu, (_, siblings) in tree.cpus.items()}
    topo = read_sysfs_topology(tree.write(tmp_path))
    assert topo.sockets() == [0]


# -- damage: every broken file is one error naming it --------------------------------------


def remove(relative: str) -> Callable[[Path], None]:
    return lambda system: (system / relative).unlink()


def write(relative: str, text: str) -> Callable[[Path], None]:
    return lambda system: put(system / relative, text)


def replace_with_dir(relative: str) -> Callable[[Path], None]:
    def damage(system: Path) -> None:
        (system / relative).unlink()
        (system / relative).mkdir()

    return damage


def remove_node(node: int) -> Callable[[Path], None]:
    return lambda system: shutil.rmtree(system / "node" / f"node{node}")


@pytest.mark.parametrize(
    ("damage", "file", "message"),
    [
        pytest.param(remove("cpu/online"), "cpu/online", "missing", id="no cpu online file"),
        pytest.param(write("cpu/online", "0-x\n"), "cpu/online", "'0-x'", id="garbled online list"),
        pytest.param(
            write("cpu/online", "\n"), "cpu/online", "no online CPUs", id="no online CPUs"
        ),
        pytest.param(
            remove("cpu/cpu3/topology/physical_package_id"),
            "cpu/cpu3/topology/physical_package_id",
            "missing",
            id="no package id",
        ),
        pytest.param(
            write("cpu/cpu3/topology/physical_package_id", "abc\n"),
            "cpu/cpu3/topology/physical_package_id",
            "expected a socket id, got 'abc'",
            id="package id not a number",
        ),
        pytest.param(
            write("cpu/cpu3/topology/physical_package_id", "-2\n"),
            "cpu/cpu3/topology/physical_package_id",
            "negative",
            id="negative package id",
        ),
        pytest.param(
            remove("cpu/cpu2/topology/core_cpus_list"),
            "cpu/cpu2/topology/thread_siblings_list",
            "missing",
            id="no siblings file of either name",
        ),
        pytest.param(
            write("cpu/cpu2/topology/core_cpus_list", "10\n"),
            "cpu/cpu2/topology/core_cpus_list",
            "does not list CPU 2 itself",
            id="siblings without the CPU itself",
        ),
        pytest.param(
            write("cpu/cpu8/topology/core_cpus_list", "8\n"),
            "cpu/cpu8/topology",
            "CPU 8 lists siblings 8, but CPU 0 lists 0,8",
            id="siblings that disagree",
        ),
        pytest.param(
            write("cpu/cpu8/topology/physical_package_id", "1\n"),
            "cpu/cpu8/topology/physical_package_id",
            "CPU 8 is on socket 1, its thread sibling CPU 0 on socket 0",
            id="siblings on two sockets",
        ),
        pytest.param(
            lambda s: (
                put(s / "node/node0/cpulist", "0-3,9-11\n"),
                put(s / "node/node1/cpulist", "4-8,12-15\n"),
            ),
            "cpu/cpu8/topology",
            "thread siblings CPU 0 and CPU 8 are in different NUMA nodes (0 and 1)",
            id="siblings in two NUMA nodes",
        ),
        pytest.param(
            write("node/node1/cpulist", "0,4-7,12-15\n"),
            "node/node1/cpulist",
            "CPU 0 is also listed by node0/cpulist",
            id="CPU in two nodes",
        ),
        pytest.param(
            remove("node/node1/cpulist"), "node/node1/cpulist", "missing", id="no cpulist"
        ),
        pytest.param(
            remove("node/node0/distance"), "node/node0/distance", "missing", id="no distance"
        ),
        pytest.param(
            write("node/node0/distance", "10\n"),
            "node/node0/distance",
            "1 distances for 2 online NUMA nodes",
            id="short distance row",
        ),
        pytest.param(
            write("node/node0/distance", "10 x\n"),
            "node/node0/distance",
            "expected distances, got '10 x'",
            id="distance not a number",
        ),
        pytest.param(
            write("node/node0/distance", "10 0\n"),
            "node/node0/distance",
            "must be positive",
            id="zero distance",
        ),
        pytest.param(
            write("node/online", "0-2\n"),
            "node/node2/cpulist",
            "missing",
            id="online node without directory",
        ),
        pytest.param(
            write("node/has_memory", "0-\n"), "node/has_memory", "'0-'", id="garbled has_memory"
        ),
        pytest.param(
            replace_with_dir("node/node1/cpulist"),
            "node/node1/cpulist",
            "cannot read",
            id="unreadable cpulist",
        ),
        pytest.param(
            lambda s: (remove_node(0)(s), put(s / "node/online", "1\n")),
            "node",
            "CPU(s) 0-3,8-11 are in no node's cpulist and there is no node0",
            id="homeless CPUs and no node 0",
        ),
    ],
)
def test_broken_sysfs_names_the_file(
    tmp_path: Path, damage: Callable[[Path], object], file: str, message: str
) -> None:
    root = tree_of(TWO_SOCKET_HT).write(tmp_path)
    system = root / "devices" / "system"
    damage(system)
    with pytest.raises(SysfsTopologyError) as caught:
        read_sysfs_topology(root)
    text = str(caught.value)
    assert str(system / file) in text
    assert message in text
    assert "\n" not in text


# -- properties ----------------------------------------------------------------------------


@st.composite
def hosts_with_offline_cpus(draw: st.DrawFn) -> tuple[CPUTopology, CPUSet]:
    sockets = draw(st.integers(1, 2))
    numas = sockets * draw(st.integers(1, 4))
    topo = generate_dummy_cpu_topology(numas * 2 * draw(st.integers(1, 4)), sockets, numas)
    ids = topo.cpus().ids()
    online = draw(st.sets(st.sampled_from(ids), min_size=1))
    return topo, CPUSet(ids).difference(CPUSet(online))


@settings(max_examples=15, deadline=None)
@given(case=hosts_with_offline_cpus())
def test_reads_the_topology_of_the_online_cpus(case: tuple[CPUTopology, CPUSet]) -> None:
    topo, offline = case
    expected_cores = []
    for core in topo.core_masks():
        cpus = topo.cpus_in_core(core).difference(offline)
        if cpus:
            info = topo.cpu_details[core]
            expected_cores.append(CoreSpec(info.socket_id, info.numa_id, cpus.ids()))
    # Nodes whose CPUs are all offline still have memory: they stay in the distances.
    expected = assemble_topology(
        expected_cores, distances={n: dict(r) for n, r in topo.distances.matrix.items()}
    )
    with tempfile.TemporaryDirectory() as tmp:
        got = read_sysfs_topology(tree_of(topo, offline=offline).write(Path(tmp)))
    assert got == expected


@settings(max_examples=15, deadline=None)
@given(topo=st.one_of(synthetic_shapes(), random_machines()))
def test_any_machine_reads_back(topo: CPUTopology) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        assert read_sysfs_topology(tree_of(topo).write(Path(tmp))) == topo


# -- this machine ----------------------------------------------------------------------------

HOST_CPU = Path("/sys/devices/system/cpu")
needs_linux_sysfs = pytest.mark.skipif(
    not (HOST_CPU / "online").exists(), reason="no Linux sysfs on this machine"
)


@needs_linux_sysfs
def test_this_host_matches_its_online_list() -> None:
    topo = read_sysfs_topology()
    online = parse_cpu_list((HOST_CPU / "online").read_text())
    assert topo.cpus() == online
    assert topo.num_cpus == len(online) == os.cpu_count()
    assert topo.num_numa_nodes >= 1 and topo.num_sockets >= 1
    assert topo.num_cores <= topo.num_cpus
    for cpu in online:
        topo_dir = HOST_CPU / f"cpu{cpu}" / "topology"
        siblings_file = topo_dir / "core_cpus_list"
        if not siblings_file.exists():
            siblings_file = topo_dir / "thread_siblings_list"
        siblings = parse_cpu_list(siblings_file.read_text()).intersection(online)
        assert topo.core_of(cpu) == siblings.min()
        assert topo.cpus_in_core(topo.core_of(cpu)) == siblings
    for numa in topo.numa_nodes():
        assert topo.distances.distance(numa, numa) == 10


@needs_linux_sysfs
def test_this_host_reads_the_same_twice() -> None:
    assert read_sysfs_topology().fingerprint() == read_sysfs_topology("/sys").fingerprint()
