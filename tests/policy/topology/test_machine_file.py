"""Machine files: the document → topology rules and their key-path errors (spec cpu-policy §1.2)."""

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.topology.cpuset import CPUSet
from policy.topology.machine_file import (
    MachineFileError,
    machine_from_topology,
    topology_from_machine,
)
from policy.topology.model import CPUTopology
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.topology_shapes import random_machines, synthetic_shapes

SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)  # spec §1.3's reference layout

# §1.3's table, written by hand in the full form.
FULL_16_2_4: dict[str, Any] = {
    "sockets": [
        {
            "id": 0,
            "numa_nodes": [
                {"id": 0, "cores": [[0, 8], [1, 9]]},
                {"id": 1, "cores": [[2, 10], [3, 11]]},
            ],
        },
        {
            "id": 1,
            "numa_nodes": [
                {"id": 2, "cores": [[4, 12], [5, 13]]},
                {"id": 3, "cores": [[6, 14], [7, 15]]},
            ],
        },
    ]
}

# The same machine in the compact form.
COMPACT_16_2_4: dict[str, Any] = {
    "threads_per_core": 2,
    "sockets": [
        {
            "id": 0,
            "numa_nodes": [{"id": 0, "cpus": "0-1,8-9"}, {"id": 1, "cpus": "2-3,10-11"}],
        },
        {
            "id": 1,
            "numa_nodes": [{"id": 2, "cpus": "4-5,12-13"}, {"id": 3, "cpus": "6-7,14-15"}],
        },
    ],
}


def one_node(node: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A one-socket, one-NUMA machine around ``node`` (id 0 unless given)."""
    return {**top, "sockets": [{"id": 0, "numa_nodes": [{"id": 0, **node}]}]}


def cores_of(topo: CPUTopology) -> list[list[int]]:
    return [list(topo.cpus_in_core(c).ids()) for c in topo.core_masks()]


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(FULL_16_2_4, id="full form of the spec's 16-2-4 table"),
        pytest.param(COMPACT_16_2_4, id="compact form of the spec's 16-2-4 table"),
        pytest.param(
            {
                **FULL_16_2_4,
                "distances": {n: row for n, row in SYNTH_16_2_4.distances.as_lists().items()},
            },
            id="explicit distances equal to the default rule",
        ),
        pytest.param(
            {
                **FULL_16_2_4,
                "description": "JSON keys are strings",
                "distances": {str(n): r for n, r in SYNTH_16_2_4.distances.as_lists().items()},
            },
            id="distance rows keyed by strings, as JSON writes them",
        ),
    ],
)
def test_describes_the_synthetic_16_2_4_machine(doc: dict[str, Any]) -> None:
    topo = topology_from_machine(doc)
    assert topo == SYNTH_16_2_4
    assert topo.fingerprint() == SYNTH_16_2_4.fingerprint()


@pytest.mark.parametrize(
    ("doc", "cores"),
    [
        pytest.param(
            one_node({"cpus": "0-3"}, threads_per_core=2, sibling_layout="adjacent"),
            [[0, 1], [2, 3]],
            id="adjacent layout pairs consecutive CPUs",
        ),
        pytest.param(
            one_node({"cpus": "0-3"}, threads_per_core=2),
            [[0, 2], [1, 3]],
            id="split layout is the default",
        ),
        pytest.param(
            one_node({"cpus": "0-5", "threads_per_core": 3}, threads_per_core=2),
            [[0, 2, 4], [1, 3, 5]],
            id="a node's threads_per_core overrides the top level",
        ),
        pytest.param(
            one_node({"cpus": "0-3", "sibling_layout": "adjacent"}, threads_per_core=4),
            [[0, 1, 2, 3]],
            id="a node's sibling_layout with the top level's threads_per_core",
        ),
        pytest.param(
            one_node({"cpus": 5}, threads_per_core=1),
            [[5]],
            id="YAML's number for a one-CPU list",
        ),
        pytest.param(
            one_node({"cores": [[48, 0], [1], [2, 3, 4, 5]]}),
            [[0, 48], [1], [2, 3, 4, 5]],
            id="cores of mixed sizes, siblings in any order",
        ),
    ],
)
def test_cores_of_a_node(doc: dict[str, Any], cores: list[list[int]]) -> None:
    assert cores_of(topology_from_machine(doc)) == cores


def test_core_id_is_the_lowest_sibling_and_cores_are_counted() -> None:
    topo = topology_from_machine(one_node({"cores": [[48, 0], [49, 1]]}))
    assert (topo.core_of(48), topo.core_of(49)) == (0, 1)
    assert (topo.num_cpus, topo.num_cores, topo.cpus_per_core) == (4, 2, 2)


def test_numa_node_spanning_sockets() -> None:
    # AMD NPS0: one NUMA node for both sockets, listed under each with that socket's cores.
    topo = topology_from_machine(
        {
            "sockets": [
                {"id": 0, "numa_nodes": [{"id": 0, "cores": [[0, 4], [1, 5]]}]},
                {"id": 1, "numa_nodes": [{"id": 0, "cores": [[2, 6], [3, 7]]}]},
            ]
        }
    )
    assert (topo.num_sockets, topo.num_numa_nodes) == (2, 1)
    assert topo.cpus_in_numa(0) == CPUSet(range(8))
    assert topo.cpus_in_socket(1) == CPUSet([2, 3, 6, 7])
    assert topo.distances.as_lists() == {0: [10]}


def test_memory_only_node_stays_in_distances_only() -> None:
    # §1.3: a CXL node is no NUMA node of the CPU topology but is in the distance matrix.
    topo = topology_from_machine(
        {
            **FULL_16_2_4,
            "memory_only_numa_nodes": [4],
            "distances": {
                0: [10, 12, 21, 21, 14],
                1: [12, 10, 21, 21, 14],
                2: [21, 21, 10, 12, 24],
                3: [21, 21, 12, 10, 24],
                4: [14, 14, 24, 24, 10],
            },
        }
    )
    assert topo.numa_nodes() == [0, 1, 2, 3]
    assert topo.num_numa_nodes == 4
    assert topo.distances.nodes() == [0, 1, 2, 3, 4]
    assert topo.distances.distance(2, 4) == 24
    assert topo.cpus() == SYNTH_16_2_4.cpus()


NODE = "sockets[0].numa_nodes[0]"


@pytest.mark.parametrize(
    ("doc", "key_path", "problem"),
    [
        pytest.param([], "", "expected a mapping, got a list", id="document is a list"),
        pytest.param(None, "", "got nothing", id="empty document"),
        pytest.param({}, "", "missing key 'sockets'", id="no sockets key"),
        pytest.param({"sockets": []}, "sockets", "at least one socket", id="no sockets"),
        pytest.param(
            {"sockets": {"id": 0}}, "sockets", "expected a list", id="sockets is a mapping"
        ),
        pytest.param(
            {**FULL_16_2_4, "socket": []}, "", "unknown key 'socket'", id="typo in a top-level key"
        ),
        pytest.param(
            {**FULL_16_2_4, "description": 7},
            "description",
            "expected text",
            id="description not text",
        ),
        pytest.param(
            {"sockets": [{"numa_nodes": []}]},
            "sockets[0]",
            "missing key 'id'",
            id="socket without id",
        ),
        pytest.param(
            {"sockets": [{"id": "0", "numa_nodes": []}]},
            "sockets[0].id",
            "expected a non-negative integer, got text '0'",
            id="socket id as text",
        ),
        pytest.param(
            {"sockets": [{"id": True, "numa_nodes": []}]},
            "sockets[0].id",
            "got a boolean",
            id="socket id a boolean",
        ),
        pytest.param(
            {"sockets": [{"id": -1, "numa_nodes": []}]},
            "sockets[0].id",
            "-1 is negative",
            id="negative socket id",
        ),
        pytest.param(
            {"sockets": [{"id": 0}]},
            "sockets[0].numa_nodes",
            "at least one NUMA node",
            id="socket without nodes",
        ),
        pytest.param(
            {"sockets": [{"id": 0, "numa_nodes": [{"id": 0, "cores": [[0]]}], "cores": []}]},
            "sockets[0]",
            "unknown key 'cores' (expected one of: id, numa_nodes)",
            id="cores directly under a socket",
        ),
        pytest.param(
            {
                "sockets": [
                    {"id": 0, "numa_nodes": [{"id": 0, "cores": [[0]]}]},
                    {"id": 0, "numa_nodes": [{"id": 1, "cores": [[1]]}]},
                ]
            },
            "sockets[1].id",
            "socket 0 already defined at sockets[0]",
            id="socket id twice",
        ),
        pytest.param(
            {
                "sockets": [
                    {"id": 0, "numa_nodes": [{"id": 0, "cores": [[0]]}, {"id": 0, "cores": [[1]]}]}
                ]
            },
            "sockets[0].numa_nodes[1].id",
            "NUMA node 0 listed twice in socket 0",
            id="NUMA id twice in a socket",
        ),
        pytest.param(
            one_node({}), NODE, "exactly one of 'cores'", id="node with neither cores nor cpus"
        ),
        pytest.param(
            one_node({"cores": [[0]], "cpus": "0"}),
            NODE,
            "exactly one of 'cores'",
            id="node with both",
        ),
        pytest.param(
            one_node({"cores": []}), f"{NODE}.cores", "at least one core", id="empty cores"
        ),
        pytest.param(
            one_node({"cores": [[]]}), f"{NODE}.cores[0]", "at least one CPU", id="empty core"
        ),
        pytest.param(
            one_node({"cores": [0, 1]}),
            f"{NODE}.cores[0]",
            "expected a list of thread-sibling",
            id="flat cores list",
        ),
        pytest.param(
            one_node({"cores": [[0, 0]]}),
            f"{NODE}.cores[0]",
            "lists a CPU twice",
            id="CPU twice in a core",
        ),
        pytest.param(
            one_node({"cores": [[0, 1.5]]}),
            f"{NODE}.cores[0][1]",
            "got a number (1.5)",
            id="fractional CPU id",
        ),
        pytest.param(
            {
                "sockets": [
                    {"id": 0, "numa_nodes": [{"id": 0, "cores": [[0], [1], [2, 9]]}]},
                    {"id": 1, "numa_nodes": [{"id": 1, "cores": [[3], [4], [5], [7, 6], [9]]}]},
                ]
            },
            "sockets[1].numa_nodes[0].cores[4]",
            "CPU 9 already in sockets[0].numa_nodes[0].cores[2]",
            id="CPU in two cores names both places",
        ),
        pytest.param(
            one_node({"cores": [[0]], "threads_per_core": 2}),
            f"{NODE}.threads_per_core",
            "only to a node given as 'cpus'",
            id="threads_per_core beside cores",
        ),
        pytest.param(
            one_node({"cpus": "0-3"}),
            f"{NODE}.cpus",
            "needs threads_per_core",
            id="cpus without threads_per_core",
        ),
        pytest.param(
            one_node({"cpus": "0-4"}, threads_per_core=2),
            f"{NODE}.cpus",
            "5 CPUs do not cut into cores of threads_per_core=2",
            id="odd CPU count for two threads",
        ),
        pytest.param(
            one_node({"cpus": "0-3"}, threads_per_core=0),
            "threads_per_core",
            "0 is not positive",
            id="zero threads",
        ),
        pytest.param(
            one_node({"cpus": "3-0"}, threads_per_core=1),
            f"{NODE}.cpus",
            "runs backwards",
            id="reversed range",
        ),
        pytest.param(
            one_node({"cpus": ""}, threads_per_core=1),
            f"{NODE}.cpus",
            "at least one CPU",
            id="empty cpus",
        ),
        pytest.param(
            one_node({"cpus": [0, 1]}, threads_per_core=1),
            f"{NODE}.cpus",
            "expected a CPU list",
            id="cpus as a list",
        ),
        pytest.param(
            one_node({"cpus": "0-3"}, threads_per_core=2, sibling_layout="interleaved"),
            "sibling_layout",
            "'interleaved' is not one of split, adjacent",
            id="unknown sibling layout",
        ),
        pytest.param(
            {**FULL_16_2_4, "memory_only_numa_nodes": [1]},
            "memory_only_numa_nodes[0]",
            "NUMA node 1 has CPUs (sockets[0].numa_nodes[1])",
            id="memory-only node that has CPUs",
        ),
        pytest.param(
            {**FULL_16_2_4, "memory_only_numa_nodes": [4, 4]},
            "memory_only_numa_nodes[1]",
            "listed twice",
            id="memory-only node twice",
        ),
        pytest.param(
            {**FULL_16_2_4, "memory_only_numa_nodes": [4]},
            "memory_only_numa_nodes",
            "need 'distances' too",
            id="memory-only node without distances",
        ),
        pytest.param(
            one_node({"cores": [[0]]}, distances=[[10]]),
            "distances",
            "expected a mapping",
            id="distances as a list",
        ),
        pytest.param(
            one_node({"cores": [[0]]}, distances={0: [10], 1: [10]}),
            "distances[1]",
            "no NUMA node 1 among the sockets",
            id="distance row for an unknown node",
        ),
        pytest.param(
            one_node({"cores": [[0]]}, distances={0: [10], "0": [10]}),
            "distances[0]",
            "two rows",
            id="a row keyed both 0 and '0'",
        ),
        pytest.param(
            one_node({"cores": [[0]]}, distances={"x": [10]}),
            "distances['x']",
            "expected a non-negative integer",
            id="distance key not a node id",
        ),
        pytest.param(
            {**FULL_16_2_4, "distances": {0: [10, 12, 21, 21]}},
            "distances",
            "no row for NUMA node(s) 1,2,3",
            id="missing distance rows",
        ),
        pytest.param(
            {**FULL_16_2_4, "distances": {n: [10, 12, 21] for n in range(4)}},
            "distances[0]",
            "3 distances, expected 4 (one per NUMA node 0,1,2,3, ascending)",
            id="short distance row",
        ),
        pytest.param(
            one_node({"cores": [[0]]}, distances={0: [0]}),
            "distances[0][0]",
            "distance to node 0 is 0, must be positive",
            id="zero distance",
        ),
        pytest.param(
            one_node({"cores": [[0]]}, distances={0: "10"}),
            "distances[0]",
            "expected a list of distances",
            id="distance row as text",
        ),
    ],
)
def test_bad_documents_name_the_key(doc: Any, key_path: str, problem: str) -> None:
    with pytest.raises(MachineFileError) as caught:
        topology_from_machine(doc)
    assert caught.value.key_path == key_path
    assert problem in caught.value.problem
    assert str(caught.value) == f"{key_path or 'top level'}: {caught.value.problem}"


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(topo=st.one_of(synthetic_shapes(), random_machines()))
def test_machine_document_round_trips(topo: CPUTopology) -> None:
    doc = machine_from_topology(topo)
    assert topology_from_machine(doc) == topo
    # and through JSON, whose object keys are strings
    assert topology_from_machine(json.loads(json.dumps(doc))) == topo


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 40)
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "sockets",
                    "id",
                    "numa_nodes",
                    "cores",
                    "cpus",
                    "threads_per_core",
                    "sibling_layout",
                    "memory_only_numa_nodes",
                    "distances",
                    "description",
                    "0",
                    "1",
                ]
            )
            | st.integers(0, 3),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None)
@given(doc=JSONISH)
def test_garbage_raises_machine_file_error_only(doc: Any) -> None:
    with contextlib.suppress(MachineFileError):
        topology_from_machine(doc)


@settings(max_examples=150, deadline=None)
@given(
    cores=st.lists(st.lists(st.integers(0, 12), max_size=3), max_size=4),
    ids=st.lists(st.integers(0, 2), min_size=2, max_size=2),
    distances=st.none()
    | st.dictionaries(st.integers(0, 3), st.lists(st.integers(-1, 30), max_size=3)),
    memory_only=st.lists(st.integers(0, 3), max_size=2),
)
def test_near_miss_documents_raise_machine_file_error_only(
    cores: list[list[int]], ids: list[int], distances: Any, memory_only: list[int]
) -> None:
    doc: dict[str, Any] = {
        "sockets": [
            {"id": ids[0], "numa_nodes": [{"id": ids[1], "cores": cores}]},
            {"id": 7, "numa_nodes": [{"id": 2, "cores": [[20, 21]]}]},
        ],
        "memory_only_numa_nodes": memory_only,
    }
    if distances is not None:
        doc["distances"] = distances
    try:
        topo = topology_from_machine(doc)
    except MachineFileError:
        return
    assert topo.cpus() == CPUSet([c for core in cores for c in core] + [20, 21])
