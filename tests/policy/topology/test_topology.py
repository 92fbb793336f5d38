"""The topology model (spec cpu-policy §1.2), NUMA-aware assignment (§1.4) and distances."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.topology.cpuset import CPUSet
from policy.topology.model import (
    CPUInfo,
    CPUTopology,
    NUMADistances,
    TopologyError,
    numa_aware_assignments,
)
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.topologies import NO_HT_8_2_2, SYNTH_6_1_2, SYNTH_16_2_4, SYNTH_96_2_4, cpus

D = SYNTH_16_2_4.cpu_details
SOME = D.keep_only(cpus("1,8-9,12"))


@pytest.mark.parametrize(
    ("query", "want"),
    [
        pytest.param(D.cpus, "0-15", id="cpus"),
        pytest.param(D.numa_nodes, "0-3", id="numa_nodes"),
        pytest.param(D.sockets, "0-1", id="sockets"),
        pytest.param(D.cores, "0-7", id="cores"),
        pytest.param(lambda: D.cpus_in_numa_nodes(1), "2-3,10-11", id="cpus_in_numa_nodes one"),
        pytest.param(
            lambda: D.cpus_in_numa_nodes(0, 3), "0-1,6-9,14-15", id="cpus_in_numa_nodes two"
        ),
        pytest.param(lambda: D.cpus_in_numa_nodes(9), "", id="cpus_in_numa_nodes unknown"),
        pytest.param(lambda: D.cpus_in_sockets(1), "4-7,12-15", id="cpus_in_sockets"),
        pytest.param(lambda: D.cpus_in_cores(3), "3,11", id="cpus_in_cores: core k is k, k+8"),
        pytest.param(lambda: D.cpus_in_cores(0, 7), "0,7-8,15", id="cpus_in_cores two"),
        pytest.param(lambda: D.cores_in_numa_nodes(2), "4-5", id="cores_in_numa_nodes"),
        pytest.param(lambda: D.cores_in_numa_nodes(0, 1), "0-3", id="cores_in_numa_nodes two"),
        pytest.param(lambda: D.cores_in_sockets(0), "0-3", id="cores_in_sockets"),
        pytest.param(lambda: D.numa_nodes_in_sockets(1), "2-3", id="numa_nodes_in_sockets"),
        pytest.param(lambda: D.numa_nodes_in_sockets(0, 1), "0-3", id="numa_nodes_in_sockets two"),
        pytest.param(lambda: D.sockets_in_numa_nodes(3), "1", id="sockets_in_numa_nodes"),
        pytest.param(lambda: D.sockets_in_numa_nodes(1, 2), "0-1", id="sockets_in_numa_nodes two"),
        pytest.param(SOME.cpus, "1,8-9,12", id="keep_only: cpus"),
        pytest.param(SOME.numa_nodes, "0,2", id="keep_only: numa_nodes"),
        pytest.param(SOME.sockets, "0-1", id="keep_only: sockets"),
        pytest.param(SOME.cores, "0-1,4", id="keep_only: cores"),
        pytest.param(lambda: SOME.cpus_in_cores(0), "8", id="keep_only: cpus_in_cores"),
        pytest.param(lambda: SOME.cpus_in_numa_nodes(1), "", id="keep_only: an emptied NUMA"),
        pytest.param(lambda: SOME.cores_in_numa_nodes(0), "0-1", id="keep_only: cores_in_numa"),
        pytest.param(lambda: SOME.cores_in_sockets(1), "4", id="keep_only: cores_in_sockets"),
        pytest.param(lambda: SOME.numa_nodes_in_sockets(1), "2", id="keep_only: numas_in_socket"),
        pytest.param(lambda: SOME.sockets_in_numa_nodes(1), "", id="keep_only: socket of no CPU"),
        pytest.param(lambda: SOME.keep_only(cpus("8-15")).cpus(), "8-9,12", id="keep_only twice"),
    ],
)
def test_cpu_details_queries(query, want: str) -> None:
    assert query() == cpus(want)


def test_cpu_details_is_a_map_of_cpu_info() -> None:
    assert len(D) == 16 and len(SOME) == 4
    assert D[10] == CPUInfo(numa_id=1, socket_id=0, core_id=2)
    assert 12 in SOME and 2 not in SOME and "12" not in SOME
    assert [cpu for cpu, _ in SOME.items()] == [1, 8, 9, 12]
    with pytest.raises(KeyError):
        SOME[2]
    with pytest.raises(KeyError):
        D[16]


@pytest.mark.parametrize(
    ("topo", "per_core", "per_socket", "per_numa", "numas_per_socket"),
    [
        pytest.param(SYNTH_16_2_4, 2, 8, 4, 2, id="(16,2,4)"),
        pytest.param(SYNTH_96_2_4, 2, 48, 24, 2, id="(96,2,4)"),
        pytest.param(NO_HT_8_2_2, 1, 4, 4, 1, id="no SMT"),
        pytest.param(SYNTH_6_1_2, 2, 6, 3, 2, id="quirk: counts from num_cpus as given"),
    ],
)
def test_derived_counts(topo, per_core, per_socket, per_numa, numas_per_socket) -> None:
    assert topo.cpus_per_core == per_core
    assert topo.cpus_per_socket == per_socket
    assert topo.cpus_per_numa == per_numa
    assert topo.numas_per_socket() == numas_per_socket


def _topology(infos: dict[int, CPUInfo], *, sockets: int, numas: int, cores: int) -> CPUTopology:
    nodes = sorted({i.numa_id for i in infos.values()})
    matrix = {a: {b: 10 if a == b else 20 for b in nodes} for a in nodes}
    return CPUTopology(
        num_cpus=len(infos),
        num_cores=cores,
        num_sockets=sockets,
        num_numa_nodes=numas,
        cpu_details=infos,
        distances=NUMADistances.of(matrix),
    )


def test_derived_counts_are_zero_when_the_divisor_is() -> None:
    empty = _topology({}, sockets=0, numas=0, cores=0)
    assert (empty.cpus_per_core, empty.cpus_per_socket, empty.cpus_per_numa) == (0, 0, 0)


def test_numas_per_socket_refuses_an_uneven_split() -> None:
    # Hand-written: three NUMA nodes over two sockets.
    infos = {n: CPUInfo(numa_id=n, socket_id=min(n, 1), core_id=n) for n in range(3)}
    topo = _topology(infos, sockets=2, numas=3, cores=3)
    with pytest.raises(TopologyError, match="invalid numasCount: 3 and socketsCount: 2"):
        topo.numas_per_socket()


@pytest.mark.parametrize(
    ("numas", "crosses"),
    [
        pytest.param([], False, id="no NUMA node"),
        pytest.param([0], False, id="one NUMA node"),
        pytest.param([3], False, id="one NUMA node of socket 1"),
        pytest.param([0, 1], False, id="two of socket 0"),
        pytest.param([2, 3], False, id="two of socket 1"),
        pytest.param([1, 2], True, id="one of each socket"),
        pytest.param([0, 1, 2, 3], True, id="all four"),
    ],
)
def test_check_numa_cross_sockets(numas: list[int], crosses: bool) -> None:
    assert SYNTH_16_2_4.check_numa_cross_sockets(numas) is crosses


@pytest.mark.parametrize(
    ("cpuset", "want"),
    [
        pytest.param(
            "1,3-15",
            {0: "1,8-9", 1: "3,10-11", 2: "4-5,12-13", 3: "6-7,14-15"},
            id="every NUMA node with a CPU of the set",
        ),
        pytest.param("4", {2: "4"}, id="only non-empty parts"),
        pytest.param("", {}, id="empty set gives an empty map"),
        pytest.param("15-20", {3: "15"}, id="CPUs outside the topology are dropped"),
    ],
)
def test_numa_aware_assignments(cpuset: str, want: dict[int, str]) -> None:
    got = numa_aware_assignments(SYNTH_16_2_4, cpus(cpuset))
    assert got == {n: cpus(s) for n, s in want.items()}
    assert list(got) == sorted(got)


def test_numa_aware_assignments_of_nil_is_an_empty_map() -> None:
    assert numa_aware_assignments(SYNTH_16_2_4, CPUSet.uninitialized()) == {}


@settings(max_examples=100, deadline=None)
@given(mask=st.integers(0, (1 << 96) - 1))
def test_numa_aware_assignments_partition_the_set(mask: int) -> None:
    cpuset = CPUSet.from_mask(mask)
    parts = numa_aware_assignments(SYNTH_96_2_4, cpuset)
    assert CPUSet.union_all(parts.values()) == cpuset
    assert sum(p.size() for p in parts.values()) == cpuset.size()
    for numa, part in parts.items():
        assert part and part.is_subset_of(SYNTH_96_2_4.cpus_in_numa(numa))


# -- distances -------------------------------------------------------------------------------


def test_distances_hold_memory_only_nodes() -> None:
    # Hand-written: two CPU nodes plus node 2, a CXL expander with memory and no CPUs (§1.3).
    matrix = {0: {0: 10, 1: 21, 2: 30}, 1: {0: 21, 1: 10, 2: 30}, 2: {0: 30, 1: 30, 2: 10}}
    infos = {0: CPUInfo(0, 0, 0), 1: CPUInfo(1, 1, 1)}
    topo = CPUTopology(
        num_cpus=2,
        num_cores=2,
        num_sockets=2,
        num_numa_nodes=2,
        cpu_details=infos,
        distances=NUMADistances.of(matrix),
    )
    assert topo.numa_nodes() == [0, 1]
    assert topo.distances.nodes() == [0, 1, 2]
    assert topo.distances.distance(2, 0) == 30
    assert topo.distances.as_lists() == {0: [10, 21, 30], 1: [21, 10, 30], 2: [30, 30, 10]}


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        pytest.param({0: {0: 10}, 1: {1: 10}}, "row of node 0 covers nodes", id="short row"),
        pytest.param({0: {0: 10, 1: 0}, 1: {0: 21, 1: 10}}, "0->1 is 0", id="zero distance"),
        pytest.param({0: {0: -1}}, "0->0 is -1", id="negative distance"),
    ],
)
def test_bad_distance_matrix(matrix, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        NUMADistances.of(matrix)


def test_distances_are_frozen() -> None:
    with pytest.raises(TypeError):
        SYNTH_16_2_4.distances.matrix[0] = {}  # type: ignore[index]


def test_equal_shapes_are_equal_topologies() -> None:
    assert generate_dummy_cpu_topology(16, 2, 4) == SYNTH_16_2_4
    assert hash(generate_dummy_cpu_topology(16, 2, 4)) == hash(SYNTH_16_2_4)
    assert generate_dummy_cpu_topology(16, 2, 2) != SYNTH_16_2_4
    assert SYNTH_16_2_4.fingerprint() != SYNTH_96_2_4.fingerprint()
