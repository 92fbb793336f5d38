"""The synthetic topology generator (spec cpu-policy §1.3)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.topology.model import CPUInfo, TopologyError
from policy.topology.synthetic import generate_dummy_cpu_topology, parse_synthetic_spec
from tests.topologies import SYNTH_6_1_2, SYNTH_16_2_4, cpus


@pytest.mark.parametrize(
    ("numa", "socket", "numa_cpus", "cores"),
    [
        pytest.param(0, 0, "0-1,8-9", "0-1", id="NUMA0 on socket 0"),
        pytest.param(1, 0, "2-3,10-11", "2-3", id="NUMA1 on socket 0"),
        pytest.param(2, 1, "4-5,12-13", "4-5", id="NUMA2 on socket 1"),
        pytest.param(3, 1, "6-7,14-15", "6-7", id="NUMA3 on socket 1"),
    ],
)
def test_reference_layout_16_2_4(numa: int, socket: int, numa_cpus: str, cores: str) -> None:
    # Checklist item 2 and the §1.3 table.
    details = SYNTH_16_2_4.cpu_details
    assert details.cpus_in_numa_nodes(numa) == cpus(numa_cpus)
    assert details.cores_in_numa_nodes(numa) == cpus(cores)
    assert details.sockets_in_numa_nodes(numa) == cpus(str(socket))
    for core in cpus(cores):
        assert details.cpus_in_cores(core) == cpus(f"{core},{core + 8}")


def test_reference_layout_counts_and_sockets() -> None:
    topo = SYNTH_16_2_4
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (16, 8, 2, 4)
    assert topo.cpu_details.numa_nodes_in_sockets(0) == cpus("0-1")
    assert topo.cpu_details.numa_nodes_in_sockets(1) == cpus("2-3")
    assert topo.cpu_details[9] == CPUInfo(numa_id=0, socket_id=0, core_id=1)


def test_odd_cpus_per_numa_drops_cpus_like_the_reference() -> None:
    # (6,1,2): 3 CPUs per NUMA node, half = 1, so only cores 0 and 1 exist (§1.3 quirk).
    topo = SYNTH_6_1_2
    assert topo.cpus() == cpus("0-1,3-4")
    assert topo.num_cpus == 6 and topo.num_cores == 3
    assert topo.cpu_details.cpus_in_numa_nodes(0) == cpus("0,3")
    assert topo.cpu_details.cpus_in_numa_nodes(1) == cpus("1,4")
    assert topo.cpu_details.cpus_in_cores(1) == cpus("1,4")


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        pytest.param(
            (16, 3, 4), "invalid NUMA number: 4 and socket number: 3", id="NUMA per socket"
        ),
        pytest.param((18, 2, 4), "invalid cpu number: 18 and NUMA number: 4", id="cpus per NUMA"),
        pytest.param((15, 1, 1), "invalid cpu number: 15 and NUMA number: 1", id="odd cpu count"),
        pytest.param((0, 1, 1), "needs positive counts", id="no CPUs"),
        pytest.param((16, 0, 4), "needs positive counts", id="no sockets"),
        pytest.param((16, 2, -2), "needs positive counts", id="negative NUMA count"),
    ],
)
def test_impossible_shapes(shape: tuple[int, int, int], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        generate_dummy_cpu_topology(*shape)


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        pytest.param(0, 0, 10, id="itself"),
        pytest.param(0, 1, 12, id="same socket"),
        pytest.param(3, 2, 12, id="same socket, other side"),
        pytest.param(1, 2, 21, id="across sockets"),
        pytest.param(3, 0, 21, id="across sockets, other side"),
    ],
)
def test_distances_16_2_4(a: int, b: int, distance: int) -> None:
    assert SYNTH_16_2_4.distances.distance(a, b) == distance


@pytest.mark.parametrize(
    ("spec", "shape"),
    [
        pytest.param("synthetic:cpus=16,sockets=2,numas=4", (16, 2, 4), id="the topology guide's"),
        pytest.param("synthetic:numas=4,cpus=96,sockets=2", (96, 2, 4), id="keys in any order"),
    ],
)
def test_parse_synthetic_spec(spec: str, shape: tuple[int, int, int]) -> None:
    assert parse_synthetic_spec(spec) == generate_dummy_cpu_topology(*shape)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("cpus=16,sockets=2,numas=4", "not a synthetic topology spec", id="no prefix"),
        pytest.param("synthetic:cpus=16,sockets=2", "missing numas", id="missing key"),
        pytest.param("synthetic:cpus=16,sockets=2,numas=4,l3=2", "unknown key 'l3'", id="unknown"),
        pytest.param("synthetic:cpus=x,sockets=2,numas=4", "cpus='x' is not an integer", id="nan"),
        pytest.param("synthetic:cpus,sockets=2,numas=4", "'cpus' is not key=value", id="no ="),
        pytest.param("synthetic:cpus=16,sockets=3,numas=4", "invalid NUMA number", id="bad shape"),
    ],
)
def test_bad_synthetic_spec(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_synthetic_spec(spec)


# -- invariants over every valid shape with an even CPU count per NUMA node ------------------

shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 16)).map(
    lambda t: (t[0] * t[1] * t[2] * 2, t[0], t[0] * t[1])
)


@settings(max_examples=100, deadline=None)
@given(shape=shapes)
def test_synthetic_invariants(shape: tuple[int, int, int]) -> None:
    num_cpus, num_sockets, num_numas = shape
    topo = generate_dummy_cpu_topology(num_cpus, num_sockets, num_numas)
    half = num_cpus // 2
    every_cpu = (1 << num_cpus) - 1

    # every CPU exists, and sits in exactly one NUMA node, one core and one socket
    assert topo.cpus().mask == every_cpu
    for groups in (topo.numa_masks(), topo.core_masks(), topo.socket_masks()):
        union = 0
        for bits in groups.values():
            assert union & bits == 0
            union |= bits
        assert union == every_cpu

    # hyper-thread siblings are k and k + N/2, in core k
    assert topo.num_cores == half and topo.cpus_per_core == 2
    assert dict(topo.core_masks()) == {k: (1 << k) | (1 << (k + half)) for k in range(half)}

    # NUMA nodes are equal, numbered by socket, the same count on every socket
    numa_per_socket = num_numas // num_sockets
    assert topo.numas_per_socket() == numa_per_socket
    assert topo.numa_nodes() == list(range(num_numas))
    for numa, bits in topo.numa_masks().items():
        assert bits.bit_count() == topo.cpus_per_numa
        assert topo.socket_of_numa(numa) == numa // numa_per_socket
    for socket in topo.sockets():
        assert topo.cpu_details.numa_nodes_in_sockets(socket).size() == numa_per_socket
        assert topo.cpus_in_socket(socket).size() == topo.cpus_per_socket

    # distances: 10 to itself, 12 within a socket, 21 across; symmetric
    for a in range(num_numas):
        for b in range(num_numas):
            same_socket = a // numa_per_socket == b // numa_per_socket
            want = 10 if a == b else 12 if same_socket else 21
            assert topo.distances.distance(a, b) == want
