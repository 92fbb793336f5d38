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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from journal import JournalError, read_records
from qrmd.sim.kubelet import RemovePodSent

__all__ = ["ClaimError", "Deletions", "JournaledCause", "check_deletions", "journaled_causes"]

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
