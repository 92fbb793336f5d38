"""Phase 4b's claims (``--reference-version v0.5.47``), checked against a real journal.

Each case journals the ``Allocate`` record a run would (``journal.Journal``, real files): its
cause with the request's hint and the reply, its ``ContainerAllocated`` event with the stored
pool and annotations. ``journaled_placement`` reads it back against what the kubelet got, and
``check_snb_placement`` / ``check_even_placement`` say whether the story told holds. The
planted cases are the ways it could be false. The CPU counts per NUMA node are those of the
demo's machine (``synthetic:cpus=96,sockets=2,numas=4``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.sim.demo.claims import (
    ClaimError,
    check_even_placement,
    check_snb_placement,
    journaled_placement,
)
from qrmd.sim.demo.workload import TOPOLOGY
from tests.journal.helpers import FakeClock

MACHINE = parse_synthetic_spec(TOPOLOGY)
FEED_CPUS = "38-47,86-95"  # NUMA 3
INDEX_CPUS = "28-29,36-37,76-77,84-85"  # 4 on NUMA 2, 4 on NUMA 3


def per_numa(cpuset: str) -> dict[int, int]:
    cpus = CPUSet.parse(cpuset)
    counts = {n: cpus.intersection(MACHINE.cpus_in_numa(n)).size() for n in MACHINE.numa_nodes()}
    return {n: c for n, c in counts.items() if c}


def allocate(
    uid: str,
    container: str,
    hint: list[int],
    reply: str,
    *,
    pool: str,
    numa_hint: str | None = None,
    stored: bool = True,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cause = {
        "cause_version": 3,
        "now": 1.0,
        "rpc": "Allocate",
        "request": {"pod_uid": uid, "container_name": container, "hint": {"nodes": hint}},
        "reply": {"allocation": {"allocation_result": reply}},
    }
    annotations = {} if numa_hint is None else {"numa_hint": numa_hint}
    entry = {
        "pod_uid": uid,
        "container_name": container,
        "owner_pool_name": pool,
        "annotations": annotations,
    }
    events = [{"kind": "ContainerAllocated", "entry": entry}] if stored else [{"kind": "tick"}]
    return cause, events


def write_journal(
    directory: Path, records: list[tuple[dict[str, Any], list[dict[str, Any]]]]
) -> None:
    journal, _ = Journal.open(
        str(directory),
        node_name="demo-node",
        topology_fingerprint=MACHINE.fingerprint(),
        durability="none",
        clock=FakeClock(),
    )
    with journal:
        for cause, events in records:
            journal.append(cause, events)


FEED_AS_TOLD = allocate("uid-feed", "app", [3], FEED_CPUS, pool="share-NUMA3", numa_hint="3")
INDEX_AS_TOLD = allocate("uid-index", "main", [2, 3], INDEX_CPUS, pool="dedicated")


def read(directory: Path, uid: str, container: str, answered: str, from_seq: int = 1) -> Any:
    return journaled_placement(
        directory,
        from_seq,
        pod_uid=uid,
        container=container,
        answered=answered,
        numa_of_cpus=per_numa,
    )


def test_both_placements_as_told_hold(tmp_path: Path) -> None:
    write_journal(tmp_path, [INDEX_AS_TOLD, FEED_AS_TOLD])
    feed = read(tmp_path, "uid-feed", "app", FEED_CPUS)
    index = read(tmp_path, "uid-index", "main", INDEX_CPUS)
    assert (feed.seq, feed.owner_pool, check_snb_placement(feed, "feed")) == (2, "share-NUMA3", 3)
    assert (index.seq, index.per_numa) == (1, {2: 4, 3: 4})
    assert check_even_placement(index, "index", 2) == (2, 3)


def test_records_before_the_phase_are_not_read(tmp_path: Path) -> None:
    earlier = allocate("uid-feed", "app", [1], "13-23", pool="share-NUMA1", numa_hint="1")
    write_journal(tmp_path, [earlier, FEED_AS_TOLD])
    assert read(tmp_path, "uid-feed", "app", FEED_CPUS, from_seq=2).seq == 2


SNB_PLANTED = [
    pytest.param(
        allocate("uid-feed", "app", [2, 3], FEED_CPUS, pool="share-NUMA3", numa_hint="3"),
        FEED_CPUS,
        "was allocated with hint [2, 3], not one node",
        id="a shared pod bound to a NUMA node hinted two nodes",
    ),
    pytest.param(
        allocate("uid-feed", "app", [3], FEED_CPUS, pool="share", numa_hint="3"),
        FEED_CPUS,
        "is stored in pool share with numa_hint '3', not in share-NUMA3",
        id="stored in the non-binding share pool",
    ),
    pytest.param(
        allocate("uid-feed", "app", [3], FEED_CPUS, pool="share-NUMA3"),
        FEED_CPUS,
        "with numa_hint None, not in share-NUMA3 with numa_hint '3'",
        id="stored without its numa_hint annotation",
    ),
    pytest.param(
        allocate("uid-feed", "app", [3], "30-47", pool="share-NUMA3", numa_hint="3"),
        "30-47",
        "got CPUs 30-47, not all on NUMA 3",
        id="CPUs of another NUMA node in its pool",
    ),
    pytest.param(
        FEED_AS_TOLD,
        "13-23",
        "the kubelet got CPUs 13-23 for uid-feed/app, but the journal's Allocate (seq 1) "
        "answered '38-47,86-95'",
        id="the kubelet got other CPUs than the journal says were answered",
    ),
    pytest.param(
        allocate("uid-feed", "app", [3], FEED_CPUS, pool="share-NUMA3", stored=False),
        FEED_CPUS,
        "the journal's Allocate of uid-feed/app (seq 1) stored no container",
        id="an Allocate that stored nothing",
    ),
    pytest.param(
        INDEX_AS_TOLD,
        FEED_CPUS,
        "the journal holds no Allocate of uid-feed/app",
        id="no Allocate of the pod at all",
    ),
]


@pytest.mark.parametrize(("record", "answered", "says"), SNB_PLANTED)
def test_a_shared_numa_binding_claim_the_record_does_not_bear_out_is_named(
    tmp_path: Path, record: Any, answered: str, says: str
) -> None:
    write_journal(tmp_path, [record])
    with pytest.raises(ClaimError) as failed:
        check_snb_placement(read(tmp_path, "uid-feed", "app", answered), "feed")
    assert says in str(failed.value)


EVEN_PLANTED = [
    pytest.param(
        allocate("uid-index", "main", [2], "28-35", pool="dedicated"),
        "was allocated with hint [2], not 2 nodes",
        id="a pod asking for two NUMA nodes hinted one",
    ),
    pytest.param(
        allocate("uid-index", "main", [2, 3], "28-35", pool="dedicated"),
        "got CPUs 28-35 on NUMA [2], not on its hint's [2, 3]",
        id="all its CPUs on one node of its hint",
    ),
    pytest.param(
        allocate("uid-index", "main", [2, 3], "28-33,36-37", pool="dedicated"),
        "not evenly over its NUMA nodes ({2: 6, 3: 2})",
        id="its CPUs split unevenly",
    ),
]


@pytest.mark.parametrize(("record", "says"), EVEN_PLANTED)
def test_an_even_distribution_claim_the_record_does_not_bear_out_is_named(
    tmp_path: Path, record: Any, says: str
) -> None:
    write_journal(tmp_path, [record])
    answered = record[0]["reply"]["allocation"]["allocation_result"]
    with pytest.raises(ClaimError) as failed:
        check_even_placement(read(tmp_path, "uid-index", "main", answered), "index", 2)
    assert says in str(failed.value)
