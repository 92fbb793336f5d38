"""A round's pods held as columns (``policy.balance.pod_table``): the table reads as the pods it
stands for, its columns are the journal's ``podColumns`` of those pods, what the planner reads
of it equals what it reads of the pods, and a round's reads taken in bulk (``gathered``) make
the same table as the same values made into pods one by one (``of``), or are left to the pods'
own checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance import Container, Pod, RoundInputs
from policy.balance.columns import pod_columns
from policy.balance.errors import BalanceError
from policy.balance.pod_table import PodTable
from tests.policy.balance.test_columns import inputs_with_ids
from tests.policy.balance.test_properties import round_inputs

GiB = 1 << 30


def _gathered(pods: tuple[Pod, ...], *, plain: bool) -> PodTable | None:
    """``PodTable.gathered`` of the pods' values; with ``plain``, each figure as the map of
    byte counts a cgroup reader gives instead of a checked ``NumaAmounts``."""
    return PodTable.gathered(
        (
            [p.uid for p in pods],
            [p.namespace for p in pods],
            [p.name for p in pods],
            [p.pool for p in pods],
        ),
        [tuple(c.name for c in p.containers) for p in pods],
        [tuple(c.container_id for c in p.containers) for p in pods],
        [
            [{n: int(v) for n, v in c.anon.items()} if plain else c.anon for c in p.containers]
            for p in pods
        ],
    )


@given(inputs_with_ids())
def test_the_table_reads_as_its_pods_and_its_columns_are_the_journals(inputs: RoundInputs) -> None:
    pods = tuple(sorted(inputs.pods, key=lambda p: p.uid))
    table = PodTable.of(pods)
    assert tuple(table) == pods and table == pods and len(table) == len(pods)
    assert all(a is b for a, b in zip(table, pods, strict=True)), "the very pods, kept"
    assert table.columns == pod_columns(pods)
    assert table.container_ids() == {
        (p.uid, c.name): c.container_id for p in pods for c in p.containers if c.container_id
    }


@given(round_inputs())
def test_what_the_planner_reads_of_the_table_equals_what_it_reads_of_the_pods(
    inputs: RoundInputs,
) -> None:
    pods = tuple(inputs.pods)
    table = PodTable.of(pods)
    for numa in [*inputs.distances, 99]:
        assert table.anon_on(numa) == [p.anon_on(numa) for p in pods]
    for pool in ("share", "reclaim", "batch", "nowhere"):
        assert table.rows_in(pool) == [i for i, p in enumerate(pods) if p.pool == pool]
    for row, pod in enumerate(pods):
        assert (table.uid(row), table.namespace(row), table.name(row)) == (
            pod.uid,
            pod.namespace,
            pod.name,
        )
        assert table.container_names(row) == tuple(c.name for c in pod.containers)


@given(inputs_with_ids(), st.booleans())
def test_reads_taken_in_bulk_make_the_table_of_the_same_pods(
    inputs: RoundInputs, plain: bool
) -> None:
    pods = tuple(inputs.pods)
    gathered = _gathered(pods, plain=plain)
    assert gathered is not None
    assert gathered.columns == PodTable.of(pods).columns
    assert tuple(gathered) == pods, "pods made from the columns equal the pods"
    assert RoundInputs.from_json(replace(inputs, pods=gathered).to_journal()) == inputs


def test_a_pods_own_figure_rounds_its_sums_as_the_pod_does() -> None:
    # 0.1 + 0.2 is not 0.3 in floats: the table adds in pod-spec order from 0.0, as a Pod.
    pod = Pod("p", "ns", "p", "share", (Container("a", {0: 0.1}), Container("b", {0: 0.2})))
    assert PodTable.of((pod,)).anon_on(0) == [pod.anon_on(0)] == [0.1 + 0.2]


def _one(
    uid: str = "p",
    name: str = "p",
    namespace: str = "ns",
    containers: tuple[str, ...] = ("a",),
    figure: dict[int, Any] | None = None,
) -> Callable[[], Pod]:
    """A pod's values as a round reads them, made into a ``Pod`` when called."""
    return lambda: Pod(
        uid,
        namespace,
        name,
        "share",
        tuple(Container(c, figure if figure is not None else {0: GiB}) for c in containers),
    )


@dataclass(frozen=True)
class Values:
    """One pod's values as ``gathered`` takes them."""

    uid: Any = "p"
    namespace: Any = "ns"
    name: Any = "p"
    pool: Any = "share"
    containers: tuple[Any, ...] = ("a",)
    ids: tuple[Any, ...] = ("",)
    figures: tuple[Any, ...] = ({0: GiB},)


def _gather(*pods: Values) -> PodTable | None:
    return PodTable.gathered(
        (
            [p.uid for p in pods],
            [p.namespace for p in pods],
            [p.name for p in pods],
            [p.pool for p in pods],
        ),
        [p.containers for p in pods],
        [p.ids for p in pods],
        [list(p.figures) for p in pods],
    )


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param((Values(),), id="a pod with one container"),
        pytest.param((), id="no pods at all"),
        pytest.param((Values(name="n" * 253),), id="an ASCII name at its bound"),
        pytest.param((Values(containers=("c" * 63,)),), id="an ASCII container name at its bound"),
        pytest.param((Values(namespace=""),), id="an empty namespace, as a Pod takes it"),
        pytest.param((Values(uid="a"), Values(uid="b")), id="pods in UID order"),
        pytest.param((Values(figures=({},)),), id="a container without a sample"),
        pytest.param((Values(figures=({1: 5, 0: 7},)),), id="figures out of NUMA order"),
        pytest.param((Values(figures=({"0": 5},)),), id="NUMA ids as JSON's decimal keys"),
    ],
)
def test_values_the_bulk_checks_pass_are_taken(pods: tuple[Values, ...]) -> None:
    table = _gather(*pods)
    assert table is not None and len(table) == len(pods)


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param((Values(uid=""),), id="an empty UID"),
        pytest.param((Values(name="é" * 64),), id="a long non-ASCII name"),
        pytest.param((Values(name="n" * 254),), id="a name past its bound"),
        pytest.param((Values(namespace="x" * 64),), id="a namespace past its bound"),
        pytest.param((Values(containers=("",)),), id="an empty container name"),
        pytest.param((Values(containers=("c" * 64,)),), id="a container name past its bound"),
        pytest.param(
            (Values(containers=("a", "a"), ids=("", ""), figures=({}, {})),),
            id="a container named twice",
        ),
        pytest.param((Values(containers=(), ids=(), figures=()),), id="a pod without containers"),
        pytest.param((Values(ids=("", "")),), id="more IDs than containers"),
        pytest.param((Values(ids=(None,)),), id="an ID that is not a string"),
        pytest.param((Values(uid="b"), Values(uid="a")), id="pods out of UID order"),
        pytest.param((Values(), Values()), id="a UID twice"),
        pytest.param((Values(figures=({0: -5},)),), id="a negative amount"),
        pytest.param((Values(figures=({0: 2**64},)),), id="an amount beyond int64"),
    ],
)
def test_values_that_need_a_closer_look_are_left_to_the_pods_checks(
    pods: tuple[Values, ...],
) -> None:
    assert _gather(*pods) is None


@pytest.mark.parametrize(
    ("pods", "refused"),
    [
        pytest.param(
            (_one(name="é" * 127),),
            "pod 'p' name is 254 bytes, more than Kubernetes allows",
            id="a non-ASCII name past its bound",
        ),
        pytest.param(
            (_one(name="é" * 126),), None, id="a non-ASCII name within its bound is taken"
        ),
        pytest.param(
            (_one(figure={0: -5}),), r"container 'a' anon\[0\]: -5 is outside", id="a negative"
        ),
        pytest.param((_one(), _one()), "pods: pod 'p' is listed twice", id="a UID twice"),
        pytest.param((_one(uid="b"), _one(uid="a")), None, id="pods put in UID order"),
    ],
)
def test_the_pods_checks_refuse_or_take_what_the_bulk_checks_left(
    pods: tuple[Callable[[], Pod], ...], refused: str | None
) -> None:
    if refused is not None:
        with pytest.raises(BalanceError, match=refused):
            PodTable.of(tuple(make() for make in pods))
        return
    table = PodTable.of(tuple(make() for make in pods))
    assert [p.uid for p in table] == sorted(p.uid for p in table)


def test_equal_pods_compare_equal_whatever_form_holds_them() -> None:
    one = Pod("p", "ns", "p", "share", (Container("a", {0: GiB, 1: 0}),))
    other = Pod("q", "ns", "q", "share", (Container("a", {1: GiB}),))
    assert PodTable.of((one, other)) == PodTable.of((other, one)) == (one, other)
    assert PodTable.of((one,)) != PodTable.of((other,)) and PodTable.of((one,)) != (other,)
