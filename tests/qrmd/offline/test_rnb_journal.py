"""``qrmd journal rerun`` and ``explain`` on a journal a v0.5.47 node with
``--enable-reclaim-numa-binding true`` wrote: the re-run re-decides the ``numa_hint`` and the
per-NUMA split of the reclaim pool (including the reference's shrink of the non-actual
container) from what the records hold, and explain names the NUMA a reclaimed container is
bound to (docs/reference-levels.md "Reclaimed cores bound to a NUMA node (RNB)")."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from actors.allocator import AllocatorCore
from actors.allocator_messages import Allocate, StartPolicy
from actors.state_store import StateStoreCore, StoreConfig
from journal import read_records
from policy.cpu.reference import V0_5_47, ReferenceOptions
from policy.cpu.request import TopologyHint
from qrmd.cli import main
from qrmd.offline.decision_rerun import rerun_in_journal
from tests.actors.fakes import FakeClock
from tests.policy.decision_fixtures import request
from tests.qrmd.offline.test_decision_rerun import CTX, T0, StoreCommitter
from tests.topologies import SYNTH_16_2_4

AT_47_RNB = dataclasses.replace(
    CTX,
    enable_reclaim=True,
    reference_version=V0_5_47,
    reference=ReferenceOptions(enable_reclaim_numa_binding=True),
)
NODE = ["--topology", "synthetic:cpus=16,sockets=2,numas=4"]


@pytest.fixture(name="journal_rnb")
def _journal_rnb(tmp_path: Path) -> str:
    """Start, a plain reclaimed pod on the whole reclaim pool, an RNB pod hinted NUMA 0."""
    store = StateStoreCore.open(StoreConfig(str(tmp_path), "rnb", durability="none"), SYNTH_16_2_4)
    clock = FakeClock(T0)
    core = AllocatorCore(store.snapshot, AT_47_RNB, StoreCommitter(store), clock.time)
    try:
        core.handle(StartPolicy())
        core.handle(Allocate(request("pod-p", cpu=1, qos="reclaimed_cores")))
        rnb = request("pod-r", cpu=1, qos="reclaimed_cores", numa_binding=True)
        core.handle(Allocate(dataclasses.replace(rnb, hint=TopologyHint((0,), True))))
    finally:
        store.close(checkpoint=False)
    return str(tmp_path)


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(CTX, id="given the v0.5.3 default settings, it re-runs as recorded"),
        pytest.param(AT_47_RNB, id="given the node's own settings"),
    ],
)
def test_an_rnb_journal_re_runs_to_the_same_events(journal_rnb: str, given: object) -> None:
    records = [r for r in read_records(journal_rnb) if r.events]
    assert len(records) >= 3
    for record in records:
        rerun = rerun_in_journal(journal_rnb, record.seq, given)  # type: ignore[arg-type]
        assert rerun.refusal is None and rerun.same_events, record.seq


def test_explain_names_the_numa_of_a_bound_reclaimed_container(
    journal_rnb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "explain", journal_rnb, "pod-r", *NODE])
    out = capsys.readouterr().out
    assert code == 0
    assert "pool reclaim (reclaimed cores bound to NUMA 0)" in out


def test_the_rerun_summary_finds_no_divergence(
    journal_rnb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "rerun", journal_rnb, *NODE, "--reserved-cpu-cores", "2", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0, summary
    assert summary["divergences"] == []
