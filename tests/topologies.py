"""Test topologies, named by shape, shared by every test package.

``SYNTH_<cpus>_<sockets>_<numas>`` come from the synthetic generator (spec cpu-policy §1.3):
core k holds CPUs k and k + cpus/2. Hand-written shapes say where they come from.
"""

from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUInfo, CPUTopology, NUMADistances
from policy.topology.synthetic import generate_dummy_cpu_topology

__all__ = [
    "HYBRID_12_1_2",
    "NO_HT_8_2_2",
    "REVERSED_CORES_16_2_4",
    "SYNTH_6_1_2",
    "SYNTH_16_2_4",
    "SYNTH_96_2_2",
    "SYNTH_96_2_4",
    "SYNTH_256_2_8",
    "cpus",
]


def cpus(text: str) -> CPUSet:
    """A CPUSet from list format, for readable tables."""
    return CPUSet.parse(text)


#: The spec's reference layout (§1.3 table), used by every worked example of the spec:
#: NUMA0 0-1,8-9 · NUMA1 2-3,10-11 (socket 0) · NUMA2 4-5,12-13 · NUMA3 6-7,14-15 (socket 1).
SYNTH_16_2_4 = generate_dummy_cpu_topology(16, 2, 4)

#: The generator's quirk for an odd CPU count per NUMA node (§1.3): only CPUs 0,1,3,4 exist
#: while num_cpus stays 6.
SYNTH_6_1_2 = generate_dummy_cpu_topology(6, 1, 2)

#: A plain two-socket hyper-threaded host, one NUMA node per socket (2 × 24 cores × 2).
SYNTH_96_2_2 = generate_dummy_cpu_topology(96, 2, 2)

#: The same host with two NUMA nodes per socket (SNC-2); ``make topology``'s
#: ``synthetic:cpus=96,sockets=2,numas=4``.
SYNTH_96_2_4 = generate_dummy_cpu_topology(96, 2, 4)

#: An 8-NUMA 256-CPU host: two sockets of four sub-NUMA clusters (SNC-4), 16 cores each.
SYNTH_256_2_8 = generate_dummy_cpu_topology(256, 2, 8)


def _no_ht_8_2_2() -> CPUTopology:
    # Hand-written: a host with SMT off, 2 sockets × 1 NUMA node × 4 single-thread cores;
    # core id = CPU id, as sysfs reports it. Here cpus_per_core is 1, so every free CPU is a
    # free core.
    details = {cpu: CPUInfo(numa_id=cpu // 4, socket_id=cpu // 4, core_id=cpu) for cpu in range(8)}
    return CPUTopology(
        num_cpus=8,
        num_cores=8,
        num_sockets=2,
        num_numa_nodes=2,
        cpu_details=details,
        distances=NUMADistances.of({0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}),
    )


NO_HT_8_2_2 = _no_ht_8_2_2()


def _hybrid_12_1_2() -> CPUTopology:
    # Hand-written, shaped like an Intel hybrid part (P-cores with two adjacent threads,
    # E-cores with one), split into two NUMA nodes of 2 P-cores + 2 E-cores each:
    # NUMA0 P(0,1) P(2,3) E4 E5, NUMA1 P(6,7) P(8,9) E10 E11; core id = lowest sibling.
    # cpus_per_core = 12 // 8 = 1: the irregular case, where a P-core counts as "free" only
    # once one of its threads is taken (spec §2's per-core count is the topology's average).
    details: dict[int, CPUInfo] = {}
    for numa in (0, 1):
        base = numa * 6
        for cpu, core in ((0, 0), (1, 0), (2, 2), (3, 2), (4, 4), (5, 5)):
            details[base + cpu] = CPUInfo(numa_id=numa, socket_id=0, core_id=base + core)
    return CPUTopology(
        num_cpus=12,
        num_cores=8,
        num_sockets=1,
        num_numa_nodes=2,
        cpu_details=details,
        distances=NUMADistances.of({0: {0: 10, 1: 12}, 1: {0: 12, 1: 10}}),
    )


HYBRID_12_1_2 = _hybrid_12_1_2()


def _reversed_cores_16_2_4() -> CPUTopology:
    # Hand-written: the (16,2,4) layout with its core ids numbered backwards (core 7 - k holds
    # CPUs k and k+8), as a machine file may number them. Core id order is then not CPU order,
    # which selection must follow all the same (it orders cores by id).
    details = {
        cpu: CPUInfo(numa_id=info.numa_id, socket_id=info.socket_id, core_id=7 - info.core_id)
        for cpu, info in SYNTH_16_2_4.cpu_details.items()
    }
    return CPUTopology(
        num_cpus=16,
        num_cores=8,
        num_sockets=2,
        num_numa_nodes=4,
        cpu_details=details,
        distances=SYNTH_16_2_4.distances,
    )


REVERSED_CORES_16_2_4 = _reversed_cores_16_2_4()
