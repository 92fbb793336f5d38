"""What the demo tells, checked against what happened before it is told.

The demo narrates what the daemon did; a narration that did not happen is worse than none. So
each claim is read back from the record: the daemon's journal (``journal.read_records``, the
same reader as ``qrmd journal show``) and the kubelet simulator's own record of the calls it
sent (``Kubelet.removals_sent``). A claim that does not hold raises ``ClaimError`` naming the
claim and what the record shows instead; the demo reports it as its phase's error and exits
non-zero.

Phase 4 (pod deletion) claims, for the pods the kubelet deletes (``stopped``) and the one it
forgets:

* each deleted pod was removed by a ``RemovePod`` from the kubelet's garbage collection: the
  simulator sent it and the plugin answered OK, the journal holds its ``RemovePod`` record,
  and no ``RemoveResidualPods`` record took the pod (wire.md §9.3);
* the forgotten pod got no ``RemovePod`` (none sent, none journaled), and exactly one
  ``RemoveResidualPods`` record removed it, alone: qrmd's residual-state checker
  (cpu-policy §12.4).

Phase 3b (``--reference-version v0.5.47``) claims, from each pod's journaled ``Allocate``
(its reply is what the kubelet got):

* the shared pod bound to a NUMA node was hinted one node, is stored in that node's
  ``share-NUMA<n>`` pool with ``numa_hint: "<n>"``, and got CPUs of that node only;
* the dedicated pod asking for two NUMA nodes, distributed evenly, was hinted two nodes and
  got the same number of CPUs on each, on no other node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal import JournalError, read_records
from qrmd.sim.kubelet import RemovePodSent

__all__ = [
    "SNB_POOL_FORMAT",
    "ClaimError",
    "Deletions",
    "JournaledCause",
    "Placement",
    "check_deletions",
    "check_even_placement",
    "check_snb_placement",
    "journaled_causes",
    "journaled_placement",
]

REMOVE_POD = "RemovePod"
REMOVE_RESIDUAL_PODS = "RemoveResidualPods"


class ClaimError(Exception):
    """What the demo was about to tell did not happen; the message says what the record shows."""


@dataclass(frozen=True, slots=True)
class JournaledCause:
    """One journal record as the claims read it: its seq, its cause and how many events."""

    seq: int
    cause: Mapping[str, Any]
    events: int

    @property
    def rpc(self) -> str | None:
        rpc = self.cause.get("rpc")
        return rpc if isinstance(rpc, str) else None

    def removes(self, pod_uid: str) -> bool:
        """Whether this record is a removal (``RemovePod`` or residual) naming ``pod_uid``."""
        if self.rpc == REMOVE_POD:
            return self.cause.get("pod_uid") == pod_uid
        if self.rpc == REMOVE_RESIDUAL_PODS:
            return pod_uid in self.residual_uids
        return False

    @property
    def residual_uids(self) -> tuple[str, ...]:
        return tuple(self.cause.get("pod_uids", ())) if self.rpc == REMOVE_RESIDUAL_PODS else ()


def journaled_causes(state_dir: Path, from_seq: int = 1) -> list[JournaledCause]:
    """The journal's records from ``from_seq`` on (a live journal: a torn tail ends it).

    Raises:
        ClaimError: the journal cannot be read.
    """
    try:
        return [
            JournaledCause(r.seq, r.cause, len(r.events))
            for r in read_records(str(state_dir), from_seq=from_seq)
        ]
    except JournalError as exc:
        raise ClaimError(f"cannot read the journal {state_dir}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Deletions:
    """Phase 4 as the record shows it.

    Attributes:
        removed_by_kubelet: each deleted pod's uid → the seq of its journaled ``RemovePod``.
        residual: the ``RemoveResidualPods`` record that removed the forgotten pod.
    """

    removed_by_kubelet: dict[str, int]
    residual: JournaledCause


def _describe(record: JournaledCause) -> str:
    if record.rpc == REMOVE_RESIDUAL_PODS:
        return f"journal seq {record.seq}, RemoveResidualPods [{', '.join(record.residual_uids)}]"
    return f"journal seq {record.seq}, {record.rpc}"


def check_deletions(
    causes: Sequence[JournaledCause],
    sent: Sequence[RemovePodSent],
    stopped: Sequence[str],
    forgotten: str,
) -> Deletions:
    """Check phase 4's claims (module docstring).

    Args:
        causes: the records journaled since the phase began.
        sent: the ``RemovePod`` calls the simulator sent since the phase began.
        stopped: the deleted pods, whose removal is the kubelet's garbage collection's.
        forgotten: the pod the kubelet forgot.

    Returns:
        Where each removal is in the journal.

    Raises:
        ClaimError: the first claim that does not hold.
    """
    removed: dict[str, int] = {}
    for uid in stopped:
        residual = [c for c in causes if c.rpc == REMOVE_RESIDUAL_PODS and c.removes(uid)]
        if residual:
            raise ClaimError(
                f"{uid} was removed by qrmd's residual-state checker ({_describe(residual[0])}), "
                "not by a RemovePod from the kubelet's garbage collection"
            )
        answered = [s for s in sent if s.pod_uid == uid and s.error is None]
        if not answered:
            failed = "; ".join(s.error for s in sent if s.pod_uid == uid and s.error) or "none"
            raise ClaimError(
                f"the kubelet's garbage collection sent no RemovePod for {uid} that succeeded "
                f"(failed: {failed})"
            )
        journaled = [c for c in causes if c.rpc == REMOVE_POD and c.removes(uid) and c.events]
        if not journaled:
            raise ClaimError(
                f"the kubelet sent RemovePod for {uid}, but the journal holds no RemovePod "
                "record removing it"
            )
        removed[uid] = journaled[0].seq
    if any(s.pod_uid == forgotten for s in sent):
        raise ClaimError(f"the kubelet forgot {forgotten}, yet it sent RemovePod for it")
    by_remove_pod = [c for c in causes if c.rpc == REMOVE_POD and c.removes(forgotten)]
    if by_remove_pod:
        raise ClaimError(
            f"{forgotten} was removed by a RemovePod ({_describe(by_remove_pod[0])}), not by "
            "qrmd's residual-state checker"
        )
    residual = [c for c in causes if c.rpc == REMOVE_RESIDUAL_PODS and c.removes(forgotten)]
    if len(residual) != 1:
        raise ClaimError(
            f"{forgotten} should be removed by one RemoveResidualPods record; the journal holds "
            f"{len(residual)}"
        )
    (record,) = residual
    if record.residual_uids != (forgotten,):
        raise ClaimError(
            f"the residual-state checker removed more than the forgotten {forgotten} "
            f"({_describe(record)})"
        )
    return Deletions(removed, record)


# -- the v0.5.47 placement phase ---------------------------------------------------------------

ALLOCATE = "Allocate"
CONTAINER_ALLOCATED = "ContainerAllocated"
#: The pool of shared cores bound to NUMA ``n`` (cpu-policy-v0.5.47 (a)): ``share-NUMA<n>``.
SNB_POOL_FORMAT = "share-NUMA{numa}"


@dataclass(frozen=True, slots=True)
class Placement:
    """One container's ``Allocate`` as the journal holds it.

    Attributes:
        seq: the record's journal seq.
        hint: the NUMA nodes of the hint the kubelet allocated with.
        cpus: the CPUs the plugin answered (and the kubelet got).
        owner_pool: the pool the stored container belongs to (``dedicated``, ``share-NUMA1``).
        numa_hint: the container's ``numa_hint`` annotation as stored, or None.
        per_numa: NUMA node → how many of ``cpus`` are there (nodes holding none left out).
    """

    seq: int
    hint: tuple[int, ...]
    cpus: str
    owner_pool: str
    numa_hint: str | None
    per_numa: dict[int, int]


def journaled_placement(
    state_dir: Path,
    from_seq: int,
    *,
    pod_uid: str,
    container: str,
    answered: str,
    numa_of_cpus: Callable[[str], dict[int, int]],
) -> Placement:
    """The journaled ``Allocate`` of one container, checked against what the kubelet got.

    Args:
        state_dir: the daemon's journal.
        from_seq: the first record to look at.
        pod_uid: the pod.
        container: its container.
        answered: the cpuset ``Allocate`` answered the kubelet.
        numa_of_cpus: a cpuset → its CPUs per NUMA node, on the demo's machine.

    Raises:
        ClaimError: the journal holds no such record, or one whose reply is not what the
            kubelet got, or one that stored no container.
    """
    try:
        records = list(read_records(str(state_dir), from_seq=from_seq))
    except JournalError as exc:
        raise ClaimError(f"cannot read the journal {state_dir}: {exc}") from None
    for record in records:
        cause = record.cause
        request = cause.get("request") or {}
        if (
            cause.get("rpc") != ALLOCATE
            or request.get("pod_uid") != pod_uid
            or request.get("container_name") != container
        ):
            continue
        reply = ((cause.get("reply") or {}).get("allocation") or {}).get("allocation_result")
        if reply != answered:
            raise ClaimError(
                f"the kubelet got CPUs {answered} for {pod_uid}/{container}, but the journal's "
                f"Allocate (seq {record.seq}) answered {reply!r}"
            )
        stored = [
            event["entry"]
            for event in record.events
            if event.get("kind") == CONTAINER_ALLOCATED
            and event["entry"].get("pod_uid") == pod_uid
            and event["entry"].get("container_name") == container
        ]
        if not stored:
            raise ClaimError(
                f"the journal's Allocate of {pod_uid}/{container} (seq {record.seq}) stored "
                "no container"
            )
        entry = stored[-1]
        hint = request.get("hint") or {}
        return Placement(
            seq=record.seq,
            hint=tuple(hint.get("nodes") or ()),
            cpus=answered,
            owner_pool=str(entry.get("owner_pool_name")),
            numa_hint=(entry.get("annotations") or {}).get("numa_hint"),
            per_numa=numa_of_cpus(answered),
        )
    raise ClaimError(f"the journal holds no Allocate of {pod_uid}/{container}")


def check_snb_placement(placement: Placement, pod: str) -> int:
    """A shared pod bound to a NUMA node: one node in its hint, stored with that ``numa_hint``
    in that node's ``share-NUMA<n>`` pool, its CPUs all on that node (cpu-policy-v0.5.47 (a)).

    Returns:
        The NUMA node.

    Raises:
        ClaimError: the first of those that does not hold.
    """
    where = f"{pod} (journal seq {placement.seq})"
    if len(placement.hint) != 1:
        raise ClaimError(f"{where} was allocated with hint {list(placement.hint)}, not one node")
    (numa,) = placement.hint
    pool = SNB_POOL_FORMAT.format(numa=numa)
    if placement.owner_pool != pool or placement.numa_hint != str(numa):
        raise ClaimError(
            f"{where} is stored in pool {placement.owner_pool} with numa_hint "
            f"{placement.numa_hint!r}, not in {pool} with numa_hint '{numa}'"
        )
    if set(placement.per_numa) != {numa}:
        raise ClaimError(f"{where} got CPUs {placement.cpus}, not all on NUMA {numa}")
    return numa


def check_even_placement(placement: Placement, pod: str, numa_number: int) -> tuple[int, ...]:
    """A dedicated pod asking ``numa_number`` nodes, distributed evenly: its hint has that many
    nodes, its CPUs are on exactly those, the same count on each (cpu-policy-v0.5.47 (b)).

    Returns:
        The NUMA nodes.

    Raises:
        ClaimError: the first of those that does not hold.
    """
    where = f"{pod} (journal seq {placement.seq})"
    if len(placement.hint) != numa_number:
        raise ClaimError(
            f"{where} was allocated with hint {list(placement.hint)}, not {numa_number} nodes"
        )
    if set(placement.per_numa) != set(placement.hint):
        raise ClaimError(
            f"{where} got CPUs {placement.cpus} on NUMA {sorted(placement.per_numa)}, not on "
            f"its hint's {list(placement.hint)}"
        )
    if len(set(placement.per_numa.values())) != 1:
        raise ClaimError(
            f"{where} got CPUs {placement.cpus}, not evenly over its NUMA nodes "
            f"({placement.per_numa})"
        )
    return placement.hint
