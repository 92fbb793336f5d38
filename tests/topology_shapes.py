"""Hypothesis strategies for topologies, shared by the tests of every way to build one."""

from hypothesis import strategies as st

from policy.topology.build import CoreSpec, assemble_topology
from policy.topology.model import CPUTopology
from policy.topology.synthetic import generate_dummy_cpu_topology


@st.composite
def synthetic_shapes(draw: st.DrawFn) -> CPUTopology:
    """(cpus, sockets, numas) with an even CPU count per NUMA node (§1.3)."""
    sockets = draw(st.integers(1, 4))
    numas = sockets * draw(st.integers(1, 4))
    per_numa = 2 * draw(st.integers(1, 8))
    return generate_dummy_cpu_topology(numas * per_numa, sockets, numas)


@st.composite
def random_machines(draw: st.DrawFn) -> CPUTopology:
    """Any machine: random core sizes, NUMA placement and CPU numbering."""
    n_cores = draw(st.integers(1, 24))
    sizes = draw(st.lists(st.integers(1, 4), min_size=n_cores, max_size=n_cores))
    cpus = draw(st.permutations(range(sum(sizes) + draw(st.integers(0, 8)))))
    cores, start = [], 0
    for size in sizes:
        numa = draw(st.integers(0, 5))
        cores.append(
            CoreSpec(socket_id=numa // 2, numa_id=numa, cpus=tuple(cpus[start : start + size]))
        )
        start += size
    return assemble_topology(cores)
