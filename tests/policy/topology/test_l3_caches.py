"""The L3 cache level of the topology and the L3-aware best fit (cpu-policy-v0.5.47 (b)).

Katalyst v0.5.47's dedicated allocation runs ``TakeByTopology(..., alignByL3Caches=true)``:
whole sockets, then the L3 caches, then whole cores, then threads. The L3 layout comes from
sysfs (``cache/index3/shared_cpu_list``), a machine file (``l3_caches``), or, synthetic, one
L3 per NUMA node (the reference's ``GenerateDummyCPUTopology``).
"""

import pytest

from policy.topology.build import CoreSpec, assemble_topology
from policy.topology.cpuset import CPUSet
from policy.topology.machine_file import (
    MachineFileError,
    machine_from_topology,
    topology_from_machine,
)
from policy.topology.model import NO_L3_CACHE, CPUTopology, TopologyError
from policy.topology.selection import take_by_topology
from tests.topologies import SYNTH_16_2_4, cpus


def _mock_machine(
    num_cpus: int, num_cores: int, num_numas: int, num_sockets: int, num_l3: int
) -> CPUTopology:
    """The reference test's ``createMockMachineInfo``: CPU i sits in NUMA i % numas, socket
    i % sockets, core i % cores and L3 i % l3 (calculator/cpu_assignment_test.go at
    v0.5.47). Only shapes where that is a consistent machine are built here."""
    cores = [
        CoreSpec(
            socket_id=k % num_sockets,
            numa_id=k % num_numas,
            cpus=tuple(range(k, num_cpus, num_cores)),
        )
        for k in range(num_cores)
    ]
    caches = [CPUSet(range(l3, num_cpus, num_l3)) for l3 in range(num_l3)]
    return assemble_topology(cores, l3_caches=caches)


def _four_l3_two_sockets() -> CPUTopology:
    """The reference test's 16-CPU machine: NUMA = socket = i/8, core i/2, L3 i/4."""
    cores = [CoreSpec(socket_id=k // 4, numa_id=k // 4, cpus=(2 * k, 2 * k + 1)) for k in range(8)]
    return assemble_topology(cores, l3_caches=[CPUSet(range(4 * c, 4 * c + 4)) for c in range(4)])


#: 384 CPUs, 192 cores, 4 NUMA nodes, 2 sockets, 24 L3 caches (TestTakeByTopology, "L3 cache
#: alignment enabled not enough a L3 cache", calculator/cpu_assignment_test.go, v0.5.47).
MOCK_384_L3_24 = _mock_machine(384, 192, 4, 2, 24)
#: 8 CPUs, 4 cores, 2 NUMA nodes, 2 sockets, 2 L3 caches ("L3 cache alignment enabled").
MOCK_8_L3_2 = _mock_machine(8, 4, 2, 2, 2)
#: 16 CPUs on 2 sockets, L3 0-3 · 4-7 · 8-11 · 12-15 ("... with L3 cache alignment").
FOUR_L3_TWO_SOCKETS = _four_l3_two_sockets()
#: SYNTH_16_2_4 but one L3 per socket, as an SNC host shows it (NUMA 0+1, NUMA 2+3).
L3_PER_SOCKET_16_2_4 = assemble_topology(
    [
        CoreSpec(
            socket_id=SYNTH_16_2_4.socket_of_numa(SYNTH_16_2_4.numa_of(k)),
            numa_id=SYNTH_16_2_4.numa_of(k),
            cpus=SYNTH_16_2_4.cpus_in_core(k).ids(),
        )
        for k in range(8)
    ],
    l3_caches=[cpus("0-3,8-11"), cpus("4-7,12-15")],
)


# -- the model -------------------------------------------------------------------------------


def test_synthetic_topology_has_one_l3_per_numa_node() -> None:
    assert {l3: str(CPUSet.from_mask(m)) for l3, m in SYNTH_16_2_4.l3_masks().items()} == {
        0: "0-1,8-9",
        2: "2-3,10-11",
        4: "4-5,12-13",
        6: "6-7,14-15",
    }
    assert SYNTH_16_2_4.has_default_l3_layout()


def test_l3_level_is_not_part_of_the_fingerprint_but_of_equality() -> None:
    assert L3_PER_SOCKET_16_2_4.fingerprint() == SYNTH_16_2_4.fingerprint()
    assert L3_PER_SOCKET_16_2_4 != SYNTH_16_2_4
    assert not L3_PER_SOCKET_16_2_4.has_default_l3_layout()


def test_details_answer_l3_queries_for_the_cpus_they_hold() -> None:
    details = L3_PER_SOCKET_16_2_4.cpu_details.keep_only(cpus("2-5"))
    assert details.l3_caches() == (0, 4)
    assert details.cpus_in_l3_caches(4) == cpus("4-5")
    assert L3_PER_SOCKET_16_2_4.l3_of(13) == 4


def test_a_cpu_no_cache_lists_has_no_l3() -> None:
    topo = assemble_topology([CoreSpec(0, 0, (0,)), CoreSpec(0, 0, (1,))], l3_caches=[CPUSet([0])])
    assert topo.l3_of(1) == NO_L3_CACHE
    assert topo.cpu_details.l3_caches() == (NO_L3_CACHE, 0)


def test_a_cpu_in_two_caches_is_refused() -> None:
    with pytest.raises(TopologyError, match="CPU 1 is in two L3 caches"):
        assemble_topology(
            [CoreSpec(0, 0, (0,)), CoreSpec(0, 0, (1,))], l3_caches=[cpus("0-1"), cpus("1")]
        )


# -- machine files ---------------------------------------------------------------------------


def test_machine_file_l3_caches_round_trip() -> None:
    doc = machine_from_topology(L3_PER_SOCKET_16_2_4)
    assert doc["l3_caches"] == ["0-3,8-11", "4-7,12-15"]
    assert topology_from_machine(doc) == L3_PER_SOCKET_16_2_4


def test_machine_document_of_a_default_layout_has_no_l3_key() -> None:
    assert "l3_caches" not in machine_from_topology(SYNTH_16_2_4)
    assert topology_from_machine(machine_from_topology(SYNTH_16_2_4)) == SYNTH_16_2_4


def _doc(l3: object) -> dict[str, object]:
    return {
        "sockets": [{"id": 0, "numa_nodes": [{"id": 0, "cores": [[0, 2], [1, 3]]}]}],
        "l3_caches": l3,
    }


@pytest.mark.parametrize(
    ("l3", "message"),
    [
        pytest.param("0-3", "l3_caches: expected a list", id="a single list is not a list"),
        pytest.param(["0-1", "1-3"], r"l3_caches\[1\]: CPU 1 already in", id="a CPU twice"),
        pytest.param(["0-1"], r"CPU\(s\) 2-3 are in no L3 cache", id="a CPU left out"),
        pytest.param(["0-4"], r"l3_caches\[0\]: CPU 4 is in no NUMA node", id="a CPU unknown"),
        pytest.param(["3-0"], r"l3_caches\[0\]: .*runs backwards", id="a reversed range"),
        pytest.param([True], r"l3_caches\[0\]: expected a CPU list", id="a boolean"),
        pytest.param([""], r"l3_caches\[0\]: an L3 cache needs", id="an empty cache"),
    ],
)
def test_machine_file_l3_errors_name_the_key(l3: object, message: str) -> None:
    with pytest.raises(MachineFileError, match=message):
        topology_from_machine(_doc(l3))


def test_machine_file_reads_a_one_cpu_cache_written_as_a_number() -> None:
    topo = topology_from_machine(
        {
            "sockets": [{"id": 0, "numa_nodes": [{"id": 0, "cores": [[0], [1]]}]}],
            "l3_caches": [0, 1],
        }
    )
    assert topo.l3_of(1) == 1


# -- the L3-aware best fit -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topo", "free", "n", "want"),
    [
        # TestTakeByTopology, calculator/cpu_assignment_test.go, kubewharf/katalyst-core v0.5.47
        pytest.param(
            MOCK_384_L3_24,
            "120,144,168,192,312,336,360,1,25,49,73,97,121,145,169,193,217,241,265,289,313,337,361",
            8,
            "1,25,49,73,193,217,241,265",
            id="reference: no cache matches exactly, the rest is confined to the smallest larger",
        ),
        pytest.param(
            FOUR_L3_TWO_SOCKETS,
            "0-15",
            4,
            "0-3",
            id="reference: a cache of exactly the request is taken whole",
        ),
        pytest.param(
            FOUR_L3_TWO_SOCKETS,
            "0-15",
            10,
            "0-9",
            id="reference: a whole socket first, then the rest within one cache",
        ),
        pytest.param(
            MOCK_8_L3_2, "0-7", 4, "0,2,4,6", id="reference: a whole free socket before caches"
        ),
        # qrmd's own cases on the dummy topology (one L3 per NUMA node)
        pytest.param(
            SYNTH_16_2_4,
            "4-7,12-15",
            6,
            "4-6,12-14",
            id="a whole NUMA cache, then a whole core of the next",
        ),
        pytest.param(
            SYNTH_16_2_4,
            "1-7,9-15",
            4,
            "2-3,10-11",
            id="the first cache of exactly the request beats a partly used one",
        ),
        pytest.param(
            SYNTH_16_2_4,
            "1,4-5,9,12-13",
            3,
            "4-5,12",
            id="all caches too small: the largest is taken whole first",
        ),
        pytest.param(
            L3_PER_SOCKET_16_2_4,
            "1-3,5-7,9-11,13-15",
            3,
            "1,9,2",
            id="one cache per socket: the cache exceeding the request by least, then cores",
        ),
    ],
)
def test_take_by_topology_aligned_by_l3(topo: CPUTopology, free: str, n: int, want: str) -> None:
    assert take_by_topology(topo, cpus(free), n, align_by_l3=True) == cpus(want)


def test_without_l3_alignment_the_v053_best_fit_is_unchanged() -> None:
    # The request the L3 table answers with NUMA 1 whole: v0.5.3 takes cores 1 and 2.
    assert take_by_topology(SYNTH_16_2_4, cpus("1-7,9-15"), 4) == cpus("1-2,9-10")


def test_l3_alignment_never_takes_outside_the_available_cpus() -> None:
    free = cpus("1,3,5,7,9,11")
    got = take_by_topology(FOUR_L3_TWO_SOCKETS, free, 3, align_by_l3=True)
    assert got.is_subset_of(free) and got.size() == 3
