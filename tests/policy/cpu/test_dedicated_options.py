"""Dedicated allocation options of v0.5.47 as pure rules (cpu-policy-v0.5.47 (b)): the option
annotations and their errors, the hint filters and ``preferred``, and the allocation."""

from __future__ import annotations

import itertools

import pytest

from policy.cpu.dedicated_allocation import (
    DedicatedAllocationError,
    allocate_numa_binding_cpus_v0547,
    numa_binding_hint_id,
)
from policy.cpu.dedicated_hints import (
    DedicatedHintError,
    _crosses_sockets,
    _socket_crossings,
    can_align_by_socket,
    can_distribute_evenly,
    can_full_pcpus_pairing,
    dedicated_hints_v0547,
    numa_count_to_fit_v0547,
)
from policy.cpu.dedicated_options import (
    DEFAULT_NUMA_IDS_ANNOTATION_KEY as IDS,
)
from policy.cpu.dedicated_options import (
    DEFAULT_NUMA_NUMBER_ANNOTATION_KEY as NUMBER,
)
from policy.cpu.dedicated_options import (
    DedicatedOptions,
    OptionError,
    go_atoi,
    read_options,
)
from policy.cpu.request import TopologyHint
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.topologies import SYNTH_6_1_2, SYNTH_16_2_4, cpus

NUMAS = [0, 1, 2, 3]
#: SYNTH_16_2_4 with the reserve 0,2 taken: each NUMA node's available CPUs.
FRESH = {0: cpus("1,8-9"), 1: cpus("3,10-11"), 2: cpus("4-5,12-13"), 3: cpus("6-7,14-15")}


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({}, DedicatedOptions(), id="no annotation asks for nothing"),
        pytest.param(
            {"align_by_socket": "true", "distribute_evenly_across_numa": "true",
             "full_pcpus_pairing": "true"},
            DedicatedOptions(align_by_socket=True, distribute_evenly=True, full_pcpus_pairing=True),
            id="the three switches on with true",
        ),
        pytest.param(
            {"align_by_socket": "True", "full_pcpus_pairing": "1"}, DedicatedOptions(),
            id="any other value than true is off",
        ),
        pytest.param({NUMBER: "2"}, DedicatedOptions(numa_number=2), id="a numa number"),
        pytest.param({NUMBER: "+2"}, DedicatedOptions(numa_number=2), id="Atoi takes a sign"),
        pytest.param({NUMBER: ""}, DedicatedOptions(), id="an empty numa number is none"),
        pytest.param(
            {IDS: "1-3", NUMBER: "x"},
            DedicatedOptions(numa_ids=frozenset({1, 2, 3}), numa_number=3),
            id="numa ids stand for the number, which is then not read",
        ),
        pytest.param({IDS: "3-1"}, DedicatedOptions(), id="a reversed range names nothing"),
        pytest.param({IDS: "0-1-2,3"}, DedicatedOptions(numa_ids=frozenset({3}), numa_number=1),
                     id="a piece with two dashes is skipped as the reference's Parse does"),
    ],
)  # fmt: skip
def test_read_options(annotations: dict[str, str], want: DedicatedOptions) -> None:
    assert read_options(annotations, NUMAS) == want


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        pytest.param({NUMBER: "two"}, 'get NUMA number from annotations failed with error: failed '
                     'to parse numa number: strconv.Atoi: parsing "two": invalid syntax',
                     id="a number that is no integer"),
        pytest.param({NUMBER: "5"}, "numa number 5 out of range, lowest 0 and highest: 4",
                     id="a number above the NUMA count"),
        pytest.param({NUMBER: "-1"}, "numa number -1 out of range", id="a negative number"),
        pytest.param({NUMBER: " 2"}, 'parsing " 2": invalid syntax', id="Atoi takes no space"),
        pytest.param({NUMBER: "99999999999999999999"}, "value out of range",
                     id="a number past int64"),
        pytest.param({IDS: "0-4"}, "get NUMA IDs from annotations failed with error: invalid "
                     "numa ids: 0-4 as they are not a subset of machine numa nodes: 0-3",
                     id="ids outside the machine"),
        pytest.param({IDS: "0-99999999999"}, "invalid numa ids: 0-99999999999",
                     id="a huge range is refused without being built"),
        pytest.param({IDS: "a"}, 'failed to parse numa ids: strconv.Atoi: parsing "a"',
                     id="ids that do not parse"),
        pytest.param({IDS: "-1"}, 'parsing "": invalid syntax', id="a negative id"),
    ],
)  # fmt: skip
def test_read_options_errors(annotations: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace("+", r"\+")):
        read_options(annotations, NUMAS)


def test_go_atoi_quotes_like_go() -> None:
    with pytest.raises(OptionError, match=r'parsing "a\\"b": invalid syntax'):
        go_atoi('a"b')


@pytest.mark.parametrize(
    ("request_cpus", "want"),
    [
        pytest.param(0.0, 1, id="nothing asked still needs one NUMA node"),
        pytest.param(4.0, 1, id="a whole NUMA node"),
        pytest.param(4.5, 2, id="a fraction over spills to the next"),
        pytest.param(16.0, 4, id="the whole machine"),
    ],
)
def test_numa_count_to_fit(request_cpus: float, want: int) -> None:
    assert numa_count_to_fit_v0547(SYNTH_16_2_4, request_cpus) == want


def test_numa_count_past_the_machine_is_refused_with_three_decimals() -> None:
    with pytest.raises(DedicatedHintError, match=r"invalid cpu req: 16\.500 in topology"):
        numa_count_to_fit_v0547(SYNTH_16_2_4, 16.5)


def test_filter_predicates() -> None:
    assert can_align_by_socket(SYNTH_16_2_4, (2, 3), 7)
    assert not can_align_by_socket(SYNTH_16_2_4, (1, 2, 3), 7)
    assert can_full_pcpus_pairing(SYNTH_16_2_4, 3, cpus("1,8-9"))
    assert not can_full_pcpus_pairing(SYNTH_16_2_4, 4, cpus("1,3,8,10"))  # no whole core
    total = CPUSet.union_all(FRESH.values())
    assert not can_distribute_evenly(SYNTH_16_2_4, (0, 1), 7, total, False)  # 7 does not split
    # With full_pcpus_pairing only the first node is checked: NUMA 0 has one whole core
    # (1, 9) for 2 CPUs, so (0, 2) passes though it is NUMA 2 that could hold anything.
    assert can_distribute_evenly(SYNTH_16_2_4, (0, 2), 4, total, True)
    assert not can_distribute_evenly(SYNTH_16_2_4, (2, 0), 8, total, False)


def _hints(request: float, annotations: dict[str, str], exclusive: bool = False) -> list[object]:
    got = dedicated_hints_v0547(
        SYNTH_16_2_4, request, exclusive, annotations, available=FRESH, allocated=frozenset(),
        numa_number_key=NUMBER, numa_ids_key=IDS,
    )  # fmt: skip
    return [(list(h.nodes), h.preferred) for h in got]


def test_preferred_is_the_smallest_size_before_the_socket_filter() -> None:
    # Exclusive, 7 CPUs, align_by_socket: {0, 2} has the capacity (size 2 is recorded) but
    # crosses sockets; only {2, 3} is left, preferred because 2 was recorded first.
    assert _hints(7, {"align_by_socket": "true"}, exclusive=True) == [([2, 3], True)]


def test_preferred_follows_the_numa_number_over_the_smallest_size() -> None:
    assert _hints(2, {NUMBER: "2"}, exclusive=True) == [([0, 1], True), ([2, 3], True)]


def test_fractional_requests_are_truncated_for_the_option_checks() -> None:
    # 2.5 CPUs: the capacity check reads 2.5, the whole-core check int(2.5) = 2.
    assert _hints(2.5, {"full_pcpus_pairing": "true"}) == [
        ([0], True), ([1], True), ([2], True), ([3], True),
    ]  # fmt: skip


def test_uneven_machines_only_warn_at_v0547() -> None:
    # SYNTH_6_1_2 splits 3 CPUs per NUMA node; v0.5.3 refused a machine whose CPUs do not
    # divide by its NUMA count, v0.5.47 rounds up. Here they divide: the rule is the same.
    assert numa_count_to_fit_v0547(SYNTH_6_1_2, 3) == 1


def _allocate(
    request: int, hint: tuple[int, ...], annotations: dict[str, str], exclusive: bool = False
) -> CPUSet:
    return allocate_numa_binding_cpus_v0547(
        SYNTH_16_2_4, FRESH, request, TopologyHint(hint, True), exclusive=exclusive,
        annotations=annotations, numa_number_key=NUMBER,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("request_cpus", "hint", "annotations", "exclusive", "want"),
    [
        pytest.param(2, (0,), {}, True, "1,8-9", id="exclusive takes every available CPU"),
        pytest.param(4, (2, 3), {"distribute_evenly_across_numa": "true", NUMBER: "2"}, False,
                     "4,6,12,14", id="evenly: a whole core on each node"),
        pytest.param(6, (2, 3), {NUMBER: "2"}, False, "4-6,12-14",
                     id="the union: a whole L3 (NUMA 2) first, then a whole core"),
        pytest.param(2, (2,), {"full_pcpus_pairing": "true"}, False, "4,12",
                     id="full pcpus pairing does not change the allocation"),
    ],
)  # fmt: skip
def test_allocation(
    request_cpus: int,
    hint: tuple[int, ...],
    annotations: dict[str, str],
    exclusive: bool,
    want: str,
) -> None:
    assert _allocate(request_cpus, hint, annotations, exclusive) == cpus(want)


@pytest.mark.parametrize(
    ("request_cpus", "hint", "annotations", "exclusive", "message"),
    [
        pytest.param(2, (), {}, False, "hint is empty", id="an empty hint"),
        pytest.param(2, (0, 1), {IDS: "0-1"}, False,
                     "NUMA not exclusive binding container has request larger than 1 NUMA",
                     id="numa ids alone do not allow two nodes at Allocate"),
        pytest.param(2, (0,), {"full_pcpus_pairing": "true"}, True,
                     "NUMA exclusive and full pcpus pairing not supported at the same time",
                     id="exclusive with pairing"),
        pytest.param(2, (0,), {"distribute_evenly_across_numa": "true"}, True,
                     "NUMA exclusive and distribute evenly across numa not supported",
                     id="exclusive with distribute evenly"),
        pytest.param(5, (2, 3), {"distribute_evenly_across_numa": "true", NUMBER: "2"}, False,
                     "unable to evenly distribute cpus across numa nodes, request: 5, "
                     "numa nodes: 2",
                     id="a request that does not divide"),
    ],
)  # fmt: skip
def test_allocation_refusals(
    request_cpus: int,
    hint: tuple[int, ...],
    annotations: dict[str, str],
    exclusive: bool,
    message: str,
) -> None:
    with pytest.raises(DedicatedAllocationError, match=message):
        _allocate(request_cpus, hint, annotations, exclusive)


def test_allocation_reads_the_numa_number_with_its_own_error() -> None:
    with pytest.raises(OptionError, match="get numa number failed with error: failed to parse"):
        _allocate(2, (0,), {NUMBER: "x"})


@pytest.mark.parametrize(
    ("exclusive", "annotations", "want"),
    [
        pytest.param(False, {}, 2, id="one node, not exclusive: recorded"),
        pytest.param(True, {}, None, id="exclusive: not recorded"),
        pytest.param(False, {NUMBER: "2"}, None, id="a numa number above 1: not recorded"),
    ],
)
def test_numa_binding_hint_id(
    exclusive: bool, annotations: dict[str, str], want: int | None
) -> None:
    got = numa_binding_hint_id(
        exclusive, annotations, 4, TopologyHint((2,), True), numa_number_key=NUMBER
    )
    assert got == want


@pytest.mark.parametrize(
    ("cpus", "sockets", "numas"),
    [(64, 2, 8), (64, 4, 8), (32, 1, 4), (64, 2, 16)],
    ids=[
        "2 sockets of 4 NUMA nodes: remembered",
        "4 sockets of 2 NUMA nodes: remembered",
        "1 socket: remembered",
        "16 NUMA nodes: asked afresh",
    ],
)
def test_socket_crossings_asked_again_agree_with_the_topology(
    cpus: int, sockets: int, numas: int
) -> None:
    topology = generate_dummy_cpu_topology(cpus, sockets, numas)
    nodes = topology.numa_nodes()
    crossing = _socket_crossings(topology) if numas <= 8 else None
    for _ in range(2):
        for size in range(1, min(len(nodes), 4) + 1):
            for chosen in itertools.combinations(nodes, size):
                want = topology.check_numa_cross_sockets(chosen)
                assert _crosses_sockets(topology, chosen, crossing) is want
