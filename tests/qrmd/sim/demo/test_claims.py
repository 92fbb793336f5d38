"""Phase 4's claims, checked against a real journal and the kubelet simulator's record.

Each case writes the records a run journaled (``journal.Journal``, real files) and the
``RemovePod`` calls the simulator sent, and checks what ``check_deletions`` concludes: where
each removal is, or which claim does not hold. The planted cases are the ways the story can be
false, the first of them what the default demo did when qrmd's residual age (2 s) ran out
before the simulated kubelet's garbage collection (every 3 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from journal import Journal
from qrmd.sim.demo.claims import ClaimError, check_deletions, journaled_causes
from qrmd.sim.kubelet import RemovePodSent
from tests.journal.helpers import FakeClock

STOPPED = ("uid-db-replica", "uid-api")
FORGOTTEN = "uid-batch-2"


def remove_pod(uid: str) -> dict[str, Any]:
    return {"cause_version": 3, "now": 1.0, "rpc": "RemovePod", "pod_uid": uid}


def residual(*uids: str) -> dict[str, Any]:
    return {"cause_version": 3, "now": 2.0, "rpc": "RemoveResidualPods", "pod_uids": list(uids)}


TICK: dict[str, Any] = {"command": "Tick", "now": 1.5}


def sent(uid: str, error: str | None = None) -> RemovePodSent:
    return RemovePodSent(uid, "cpu", error)


def write_journal(directory: Path, causes: list[dict[str, Any]]) -> None:
    journal, _ = Journal.open(
        str(directory),
        node_name="demo-node",
        topology_fingerprint="synthetic:cpus=96,sockets=2,numas=4",
        durability="none",
        clock=FakeClock(),
    )
    with journal:
        for n, cause in enumerate(causes, start=1):
            events = [{"kind": "tick"}] if cause is TICK else [{"kind": "pod_removed", "n": n}]
            journal.append(cause, events)


AS_TOLD = [remove_pod("uid-api"), remove_pod("uid-db-replica"), TICK, residual(FORGOTTEN)]
AS_TOLD_SENT = [sent("uid-api"), sent("uid-db-replica")]


def test_the_kubelets_removals_and_one_residual_removal_hold(tmp_path: Path) -> None:
    write_journal(tmp_path, AS_TOLD)
    deletions = check_deletions(journaled_causes(tmp_path), AS_TOLD_SENT, STOPPED, FORGOTTEN)
    assert deletions.removed_by_kubelet == {"uid-db-replica": 2, "uid-api": 1}
    assert (deletions.residual.seq, deletions.residual.residual_uids) == (4, (FORGOTTEN,))


def test_records_before_the_phase_are_not_read(tmp_path: Path) -> None:
    write_journal(tmp_path, [residual("uid-db-replica"), *AS_TOLD])
    deletions = check_deletions(journaled_causes(tmp_path, 2), AS_TOLD_SENT, STOPPED, FORGOTTEN)
    assert deletions.removed_by_kubelet == {"uid-db-replica": 3, "uid-api": 2}


@pytest.mark.parametrize(
    ("causes", "removals", "says"),
    [
        pytest.param(
            [TICK, residual("uid-api", FORGOTTEN, "uid-db-replica")],
            [],
            "uid-db-replica was removed by qrmd's residual-state checker (journal seq 2, "
            "RemoveResidualPods [uid-api, uid-batch-2, uid-db-replica]), not by a RemovePod "
            "from the kubelet's garbage collection",
            id="the residual age ran out before the kubelet's garbage collection",
        ),
        pytest.param(
            [remove_pod("uid-api"), residual(FORGOTTEN)],
            [sent("uid-api")],
            "sent no RemovePod for uid-db-replica that succeeded (failed: none)",
            id="the garbage collection never sent a pod's RemovePod",
        ),
        pytest.param(
            [remove_pod("uid-api"), residual(FORGOTTEN)],
            [sent("uid-api"), sent("uid-db-replica", "DeadlineExceeded")],
            "(failed: DeadlineExceeded)",
            id="a RemovePod that failed is no removal",
        ),
        pytest.param(
            [remove_pod("uid-api"), residual(FORGOTTEN)],
            AS_TOLD_SENT,
            "the kubelet sent RemovePod for uid-db-replica, but the journal holds no RemovePod",
            id="a RemovePod sent but not journaled",
        ),
        pytest.param(
            [*AS_TOLD[:2], remove_pod(FORGOTTEN)],
            [*AS_TOLD_SENT, sent(FORGOTTEN)],
            "the kubelet forgot uid-batch-2, yet it sent RemovePod for it",
            id="the forgotten pod got a RemovePod after all",
        ),
        pytest.param(
            AS_TOLD[:2],
            AS_TOLD_SENT,
            "uid-batch-2 should be removed by one RemoveResidualPods record; the journal holds 0",
            id="the forgotten pod was never removed",
        ),
        pytest.param(
            [*AS_TOLD[:2], residual("uid-batch-1", FORGOTTEN)],
            AS_TOLD_SENT,
            "the residual-state checker removed more than the forgotten uid-batch-2 "
            "(journal seq 3, RemoveResidualPods [uid-batch-1, uid-batch-2])",
            id="the residual removal took a pod the kubelet still runs",
        ),
    ],
)
def test_a_claim_the_record_does_not_bear_out_is_named(
    tmp_path: Path, causes: list[dict[str, Any]], removals: list[RemovePodSent], says: str
) -> None:
    write_journal(tmp_path, causes)
    with pytest.raises(ClaimError) as failed:
        check_deletions(journaled_causes(tmp_path), removals, STOPPED, FORGOTTEN)
    assert says in str(failed.value)


def test_a_missing_journal_is_a_claim_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ClaimError, match=r"cannot read the journal .*nowhere"):
        journaled_causes(tmp_path / "nowhere")
