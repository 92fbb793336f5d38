"""CPU selection (spec cpu-policy §2): worked values, edge cases and properties.

The properties compare the bitmask implementation with ``SpecModel``, a slow, literal reading
of §2 written on the §1.2 queries, on random synthetic topologies and random free CPUs.
"""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.errors import PolicyError
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.selection import (
    SelectionError,
    take_by_numa_balance,
    take_by_topology,
    take_ht_by_numa_balance,
)
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.topologies import (
    HYBRID_12_1_2,
    NO_HT_8_2_2,
    REVERSED_CORES_16_2_4,
    SYNTH_6_1_2,
    SYNTH_16_2_4,
    SYNTH_96_2_4,
    SYNTH_256_2_8,
    cpus,
)
from tests.topology_shapes import random_machines

ALL_16 = "0-15"


@pytest.mark.parametrize(
    ("topo", "free", "n", "want"),
    [
        pytest.param(
            SYNTH_16_2_4, ALL_16, 2, "0,2", id="spec 2.4: two from all is 0,2 (checklist 3)"
        ),
        pytest.param(SYNTH_16_2_4, ALL_16, 3, "0,2,4", id="spec 2.4: three from all"),
        pytest.param(SYNTH_16_2_4, ALL_16, 4, "0,2,4,6", id="spec 2.4: four from all"),
        pytest.param(SYNTH_16_2_4, ALL_16, 5, "0-2,4,6", id="spec 2.4: five starts a second round"),
        pytest.param(SYNTH_16_2_4, ALL_16, 0, "", id="nothing asked, nothing taken"),
        pytest.param(SYNTH_16_2_4, ALL_16, -3, "", id="a negative count takes nothing"),
        pytest.param(
            SYNTH_16_2_4, "0-1,6,8-9", 4, "0-1,6,8", id="NUMA nodes without CPUs are skipped"
        ),
        pytest.param(
            SYNTH_6_1_2, "0-5", 3, "0-1,3", id="odd-CPU quirk topology takes only real CPUs"
        ),
        pytest.param(
            SYNTH_256_2_8, "0-255", 8, "0,16,32,48,64,80,96,112", id="one per NUMA of eight"
        ),
    ],
)
def test_take_ht_by_numa_balance(topo: CPUTopology, free: str, n: int, want: str) -> None:
    taken, rest = take_ht_by_numa_balance(topo, cpus(free), n)
    assert taken == cpus(want)
    assert rest == cpus(free).difference(cpus(want))


@pytest.mark.parametrize(
    ("topo", "free", "n", "want"),
    [
        pytest.param(SYNTH_16_2_4, "1,3-15", 4, "1,3,9,11", id="spec 2.4: four from 1,3-15"),
        pytest.param(SYNTH_16_2_4, "1,3-15", 2, "1,9", id="spec 2.4: two from 1,3-15"),
        pytest.param(SYNTH_16_2_4, "1,3-15", 6, "1,3-4,9,11-12", id="spec 2.4: six from 1,3-15"),
        pytest.param(
            SYNTH_16_2_4,
            "3-8,10-15",
            8,
            "3-6,11-14",
            id="spec 2.4: a NUMA node with no free core is skipped",
        ),
        pytest.param(SYNTH_16_2_4, ALL_16, 3, "0,2,8", id="a core, then one CPU once n < a core"),
        pytest.param(SYNTH_16_2_4, ALL_16, 5, "0,2,4,8,10", id="two cores then a single CPU"),
        pytest.param(SYNTH_16_2_4, "8-15", 3, "8,10,12", id="cores gone: single CPUs per NUMA"),
        pytest.param(SYNTH_16_2_4, ALL_16, 0, "", id="nothing asked, nothing taken"),
        pytest.param(NO_HT_8_2_2, "0-7", 3, "0-1,4", id="without SMT every CPU is a core"),
        pytest.param(SYNTH_6_1_2, "0-5", 2, "0,3", id="odd-CPU quirk topology: core 0 is 0,3"),
        pytest.param(HYBRID_12_1_2, "0-11", 2, "4,10", id="hybrid: single-thread cores are free"),
        pytest.param(
            REVERSED_CORES_16_2_4, ALL_16, 2, "1,9", id="the node's smallest core id, not CPU"
        ),
        pytest.param(
            HYBRID_12_1_2,
            "0-3,6-9",
            2,
            "0-1",
            id="hybrid: a P-core with one thread taken becomes free for the next node",
        ),
    ],
)
def test_take_by_numa_balance(topo: CPUTopology, free: str, n: int, want: str) -> None:
    taken, rest = take_by_numa_balance(topo, cpus(free), n)
    assert taken == cpus(want)
    assert rest == cpus(free).difference(cpus(want))


@pytest.mark.parametrize(
    ("topo", "free", "n", "want"),
    [
        pytest.param(
            SYNTH_16_2_4, "1,8-9", 2, "1,9", id="spec 2.4: two from 1,8-9 is a whole core"
        ),
        pytest.param(SYNTH_16_2_4, "1,8-9", 1, "8", id="spec 2.4: one from 1,8-9 fills core 0"),
        pytest.param(SYNTH_16_2_4, ALL_16, 8, "0-3,8-11", id="a whole socket, lower id on a tie"),
        pytest.param(SYNTH_16_2_4, ALL_16, 10, "0-4,8-12", id="a socket, then a core of the other"),
        pytest.param(SYNTH_16_2_4, "1-15", 2, "1,9", id="the partly used socket first"),
        pytest.param(SYNTH_16_2_4, "1-15", 1, "8", id="a single CPU from the most used core"),
        pytest.param(
            SYNTH_16_2_4,
            "4-7,12-15,1,9",
            3,
            "1,4,9",
            id="the used socket's core, then a CPU of the free socket",
        ),
        pytest.param(SYNTH_16_2_4, ALL_16, 0, "", id="nothing asked, nothing taken"),
        pytest.param(REVERSED_CORES_16_2_4, ALL_16, 2, "3,11", id="cores in core id order"),
        pytest.param(
            NO_HT_8_2_2, "1-7", 3, "1-3", id="a free socket n does not cover is passed by"
        ),
        pytest.param(NO_HT_8_2_2, "1-7", 5, "1,4-7", id="a whole free socket before any core"),
        pytest.param(SYNTH_6_1_2, "0-5", 2, "0,3", id="odd-CPU quirk topology: no socket is free"),
        pytest.param(
            HYBRID_12_1_2,
            "1-3",
            2,
            "1-2",
            id="hybrid: a half-free P-core gives only its free thread (reference: both)",
        ),
    ],
)
def test_take_by_topology(topo: CPUTopology, free: str, n: int, want: str) -> None:
    assert take_by_topology(topo, cpus(free), n) == cpus(want)


TAKERS = [
    pytest.param(lambda t, a, n: take_ht_by_numa_balance(t, a, n)[0], id="take_ht_by_numa_balance"),
    pytest.param(lambda t, a, n: take_by_numa_balance(t, a, n)[0], id="take_by_numa_balance"),
    pytest.param(take_by_topology, id="take_by_topology"),
]


@pytest.mark.parametrize("take", TAKERS)
@pytest.mark.parametrize(
    ("free", "n", "available"),
    [
        pytest.param("1,8-9", 4, 3, id="more than available"),
        pytest.param("", 1, 0, id="nothing available"),
        pytest.param("14-20", 3, 2, id="CPUs outside the topology do not count"),
    ],
)
def test_not_enough_cpus_names_the_numbers(take, free: str, n: int, available: int) -> None:
    with pytest.raises(SelectionError) as caught:
        take(SYNTH_16_2_4, cpus(free), n)
    assert str(caught.value) == (
        f"not enough cpus available to satisfy request: requested={n}, available={available}"
    )
    assert (caught.value.requested, caught.value.available) == (n, available)
    assert isinstance(caught.value, PolicyError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("take", TAKERS)
def test_cpus_outside_the_topology_are_never_taken(take) -> None:
    assert take(SYNTH_16_2_4, cpus("15-40"), 1) == cpus("15")


def test_rest_keeps_cpus_outside_the_topology() -> None:
    # The reference's rest is available − taken, whatever the topology holds.
    _taken, rest = take_by_numa_balance(SYNTH_16_2_4, cpus("0-1,8-9,100"), 2)
    assert rest == cpus("1,9,100")


# -- a literal model of §2, for the properties ---------------------------------------------


class SpecModel:
    """§2's accumulator, written on the §1.2 queries exactly as the spec words it (slow)."""

    def __init__(self, topo: CPUTopology, available: CPUSet, n: int) -> None:
        self.topo = topo
        self.details = topo.cpu_details.keep_only(available)
        self.needed = n
        self.result = CPUSet()

    def take(self, s: CPUSet) -> None:
        self.result = self.result.union(s)
        self.details = self.details.keep_only(self.details.cpus().difference(s))
        self.needed -= s.size()

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.details)

    def is_free_core(self, core: int) -> bool:
        return self.details.cpus_in_cores(core).size() == self.topo.cpus_per_core

    def sockets_by_use(self) -> list[int]:
        d = self.details
        return sorted(d.sockets(), key=lambda s: (d.cpus_in_sockets(s).size(), s))

    def cores_by_use(self) -> list[int]:
        d = self.details
        return [
            core
            for s in self.sockets_by_use()
            for core in sorted(d.cores_in_sockets(s), key=lambda c: (d.cpus_in_cores(c).size(), c))
        ]

    def ht_by_numa_balance(self) -> CPUSet:
        if self.needed < 1:
            return self.result
        while True:
            if self.failed():
                raise SelectionError("model", requested=0, available=0)
            for numa in self.topo.cpu_details.numa_nodes():
                in_numa = self.details.cpus_in_numa_nodes(numa)
                if in_numa and self.needed >= 1:
                    self.take(CPUSet([in_numa.min()]))
                if self.satisfied():
                    return self.result

    def by_numa_balance(self) -> CPUSet:
        if self.needed < 1:
            return self.result
        while True:
            if self.failed():
                raise SelectionError("model", requested=0, available=0)
            for numa in self.topo.cpu_details.numa_nodes():
                any_free = any(self.is_free_core(c) for c in self.details.cores())
                if self.needed >= self.topo.cpus_per_core and any_free:
                    free_here = [
                        c for c in self.details.cores_in_numa_nodes(numa) if self.is_free_core(c)
                    ]
                    if free_here:
                        self.take(self.details.cpus_in_cores(free_here[0]))
                        if self.satisfied():
                            return self.result
                    continue
                in_numa = self.details.cpus_in_numa_nodes(numa)
                if in_numa and self.needed >= 1:
                    self.take(CPUSet([in_numa.min()]))
                if self.satisfied():
                    return self.result

    def by_topology(self) -> CPUSet:
        # Whole sockets and cores are taken as their CPUs still free: the reference takes the
        # topology's whole socket or core, the same on every regular topology, but on an
        # irregular one (HYBRID_12_1_2) that would hand out CPUs that are not available.
        full = self.topo.cpu_details
        if self.needed < 1:
            return self.result
        if self.failed():
            raise SelectionError("model", requested=0, available=0)
        free_sockets = [
            s
            for s in self.sockets_by_use()
            if self.details.cpus_in_sockets(s).size() == self.topo.cpus_per_socket
        ]
        for s in free_sockets:
            if self.needed >= full.cpus_in_sockets(s).size():
                self.take(self.details.cpus_in_sockets(s))
        if self.satisfied():
            return self.result
        for core in [c for c in self.cores_by_use() if self.is_free_core(c)]:
            if self.needed >= full.cpus_in_cores(core).size():
                self.take(self.details.cpus_in_cores(core))
        if self.satisfied():
            return self.result
        order = [cpu for c in self.cores_by_use() for cpu in self.details.cpus_in_cores(c)]
        for cpu in order:
            self.take(CPUSet([cpu]))
            if self.satisfied():
                return self.result
        raise SelectionError("model failed", requested=0, available=0)


@cache
def _synthetic(sockets: int, numas_per_socket: int, cores_per_numa: int) -> CPUTopology:
    numas = sockets * numas_per_socket
    return generate_dummy_cpu_topology(numas * cores_per_numa * 2, sockets, numas)


@st.composite
def selection_cases(draw: st.DrawFn) -> tuple[CPUTopology, CPUSet, int]:
    """A synthetic topology with an even CPU count per NUMA node (or a hand-written one),
    random free CPUs (some outside the topology) and a count around their number."""
    topo = draw(
        st.one_of(
            st.builds(
                _synthetic,
                st.integers(1, 3),
                st.integers(1, 3),
                st.integers(1, 4),
            ),
            st.sampled_from([NO_HT_8_2_2, SYNTH_6_1_2, HYBRID_12_1_2, REVERSED_CORES_16_2_4]),
        )
    )
    mask = draw(st.integers(0, (1 << (topo.num_cpus + 3)) - 1))
    available = CPUSet.from_mask(mask)
    in_topology = available.intersection(topo.cpus()).size()
    n = draw(st.integers(-1, in_topology + 2))
    return topo, available, n


MODEL_RUNS = [
    pytest.param(
        lambda t, a, n: take_ht_by_numa_balance(t, a, n)[0], "ht_by_numa_balance", id="ht"
    ),
    pytest.param(lambda t, a, n: take_by_numa_balance(t, a, n)[0], "by_numa_balance", id="numa"),
    pytest.param(take_by_topology, "by_topology", id="topology"),
]


@pytest.mark.parametrize(("take", "model_method"), MODEL_RUNS)
@settings(max_examples=150, deadline=None)
@given(case=selection_cases())
def test_takes_exactly_n_from_available_or_fails(take, model_method: str, case) -> None:
    topo, available, n = case
    usable = available.intersection(topo.cpus())
    if n > usable.size():
        with pytest.raises(SelectionError, match="not enough cpus available"):
            take(topo, available, n)
        return
    taken = take(topo, available, n)
    assert taken.size() == max(n, 0)
    assert taken.is_subset_of(usable)
    assert taken == getattr(SpecModel(topo, available, n), model_method)()


@settings(max_examples=100, deadline=None)
@given(case=selection_cases())
def test_rest_is_available_minus_taken(case) -> None:
    topo, available, n = case
    if n > available.intersection(topo.cpus()).size():
        return
    for take in (take_ht_by_numa_balance, take_by_numa_balance):
        taken, rest = take(topo, available, n)
        assert rest == available.difference(taken)
        assert rest.union(taken).same_cpus(available)


@st.composite
def large_cases(draw: st.DrawFn) -> tuple[CPUTopology, CPUSet, int]:
    """The 96- and 256-CPU hosts with random free CPUs and a count up to 40."""
    topo = draw(st.sampled_from([SYNTH_96_2_4, SYNTH_256_2_8]))
    available = CPUSet.from_mask(draw(st.integers(0, (1 << topo.num_cpus) - 1)))
    return topo, available, draw(st.integers(0, min(40, available.size())))


@pytest.mark.parametrize(("take", "model_method"), MODEL_RUNS)
@settings(max_examples=15, deadline=None)
@given(case=large_cases())
def test_agrees_with_the_model_on_large_hosts(take, model_method: str, case) -> None:
    topo, available, n = case
    assert take(topo, available, n) == getattr(SpecModel(topo, available, n), model_method)()


@st.composite
def large_takes(draw: st.DrawFn) -> tuple[CPUTopology, CPUSet, int]:
    """The 96- and 256-CPU hosts mostly free (a few dozen CPUs used), and a count up to every
    free CPU: pool sizing hands reclaim's surplus out this way, most of a node at once, so
    whole cores go in many full rounds and a partial one."""
    topo = draw(st.sampled_from([SYNTH_96_2_4, SYNTH_256_2_8]))
    used = draw(st.lists(st.sampled_from(topo.cpus().ids()), max_size=40))
    available = topo.cpus().difference(CPUSet(used))
    return topo, available, draw(st.integers(0, available.size()))


@settings(max_examples=25, deadline=None)
@given(case=large_takes())
def test_whole_core_rounds_agree_with_the_model_when_most_of_a_host_is_taken(case) -> None:
    topo, available, n = case
    taken, _ = take_by_numa_balance(topo, available, n)
    assert taken == SpecModel(topo, available, n).by_numa_balance()


@st.composite
def irregular_cases(draw: st.DrawFn) -> tuple[CPUTopology, CPUSet, int]:
    """Any machine shape (random core sizes, NUMA placement and numbering), random free CPUs."""
    topo = draw(random_machines())
    width = topo.cpus().ids()[-1] + 3
    available = CPUSet.from_mask(draw(st.integers(0, (1 << width) - 1)))
    in_topology = available.intersection(topo.cpus()).size()
    return topo, available, draw(st.integers(-1, in_topology + 1))


@pytest.mark.parametrize(("take", "model_method"), MODEL_RUNS)
@settings(max_examples=100, deadline=None)
@given(case=irregular_cases())
def test_any_machine_shape(take, model_method: str, case) -> None:
    topo, available, n = case
    usable = available.intersection(topo.cpus())
    if n > usable.size():
        with pytest.raises(SelectionError):
            take(topo, available, n)
        return
    taken = take(topo, available, n)
    assert taken.size() == max(n, 0) and taken.is_subset_of(usable)
    assert taken == getattr(SpecModel(topo, available, n), model_method)()
