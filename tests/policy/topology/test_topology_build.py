"""Assembling a topology from physical cores (spec cpu-policy §1.2, §1.3)."""

import re

import pytest

from policy.topology.build import (
    CoreSpec,
    assemble_topology,
    default_distances,
    parse_cpu_list,
)
from policy.topology.cpuset import CPUSet
from policy.topology.model import TopologyError
from policy.topology.synthetic import generate_dummy_cpu_topology


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        pytest.param("", [], id="empty list is no CPUs"),
        pytest.param("\n", [], id="a kernel's empty file is no CPUs"),
        pytest.param("0-3,8\n", [0, 1, 2, 3, 8], id="trailing newline ignored"),
        pytest.param("5", [5], id="single CPU"),
        pytest.param("7-7", [7], id="one-CPU range"),
        pytest.param("0-11,48-59", [*range(12), *range(48, 60)], id="two runs"),
    ],
)
def test_parse_cpu_list(text: str, ids: list[int]) -> None:
    assert parse_cpu_list(text) == CPUSet(ids)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        pytest.param("3-1", "'3-1' runs backwards", id="reversed range is an error, not empty"),
        pytest.param("1-2-3", "'1-2-3'", id="three-part piece is an error, not ignored"),
        pytest.param("1,,2", "''", id="empty piece"),
        pytest.param("a", "'a'", id="not a number"),
        pytest.param("+4", "'+4'", id="sign not accepted"),
        pytest.param("1 ,2", "'1 '", id="inner space"),
        pytest.param("-1", "'-1'", id="negative"),
        pytest.param("1-", "'1-'", id="open range"),
        pytest.param("٣", "'٣'", id="non-ASCII digit"),
    ],
)
def test_parse_cpu_list_rejects(text: str, names: str) -> None:
    with pytest.raises(TopologyError, match=f"CPU list .*{re.escape(names)}"):
        parse_cpu_list(text)


def test_core_id_is_the_lowest_sibling() -> None:
    topo = assemble_topology([CoreSpec(socket_id=0, numa_id=0, cpus=(48, 0))])
    assert topo.core_of(48) == 0 and topo.core_of(0) == 0


def test_assembles_the_spec_layout_16_2_4() -> None:
    # §1.3's table: NUMA n holds cores 2n, 2n+1; core k = CPUs k, k+8.
    cores = [
        CoreSpec(socket_id=n // 2, numa_id=n, cpus=(k, k + 8))
        for n in range(4)
        for k in (2 * n, 2 * n + 1)
    ]
    assert assemble_topology(cores) == generate_dummy_cpu_topology(16, 2, 4)


def test_counts_physical_cores_and_distinct_ids() -> None:
    # A hybrid CPU: two 2-thread cores and two 1-thread cores on one socket, two NUMA nodes.
    topo = assemble_topology(
        [
            CoreSpec(socket_id=3, numa_id=1, cpus=(0, 1)),
            CoreSpec(socket_id=3, numa_id=1, cpus=(2, 3)),
            CoreSpec(socket_id=3, numa_id=5, cpus=(4,)),
            CoreSpec(socket_id=3, numa_id=5, cpus=(5,)),
        ]
    )
    assert (topo.num_cpus, topo.num_cores, topo.num_sockets, topo.num_numa_nodes) == (6, 4, 1, 2)
    assert topo.numa_nodes() == [1, 5]
    assert topo.distances.as_lists() == {1: [10, 12], 5: [12, 10]}


@pytest.mark.parametrize(
    ("cores", "distances", "message"),
    [
        pytest.param([], None, "at least one core", id="no cores"),
        pytest.param([CoreSpec(0, 0, ())], None, "has no CPUs", id="core without CPUs"),
        pytest.param(
            [CoreSpec(0, 0, (0, 1)), CoreSpec(0, 0, (1, 2))],
            None,
            "CPU 1 is in two cores",
            id="CPU in two cores",
        ),
        pytest.param([CoreSpec(0, 0, (-1,))], None, "non-negative", id="negative CPU"),
        pytest.param(
            [CoreSpec(0, 0, (0,)), CoreSpec(1, 1, (1,))],
            {0: {0: 10}},
            "NUMA node.*1 have CPUs but no NUMA distances",
            id="distances leave out a CPU node",
        ),
    ],
)
def test_assemble_rejects(cores: list[CoreSpec], distances: dict | None, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        assemble_topology(cores, distances=distances)


@pytest.mark.parametrize(
    ("numa_sockets", "want"),
    [
        pytest.param({0: [0]}, {0: {0: 10}}, id="one node is local to itself"),
        pytest.param(
            {0: [0], 1: [0], 2: [1]},
            {0: {0: 10, 1: 12, 2: 21}, 1: {0: 12, 1: 10, 2: 21}, 2: {0: 21, 1: 21, 2: 10}},
            id="12 within a socket, 21 across",
        ),
        pytest.param(
            {0: [0, 1], 1: [1]},
            {0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}},
            id="a node spanning sockets shares a socket with each",
        ),
    ],
)
def test_default_distances(numa_sockets: dict, want: dict) -> None:
    assert default_distances(numa_sockets) == want
