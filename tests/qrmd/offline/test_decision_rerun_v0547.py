"""A journal written at ``--reference-version v0.5.47`` re-runs as v0.5.47: each record's
cause holds the level and its options (``policy.cpu.reference.reference_cause``), and the
re-run decides at that level whatever settings it is given; a record without them was
decided at v0.5.3 (spec cpu-policy-v0.5.47; DESIGN.md "Every decision has one shape")."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from actors.allocator import AllocatorCore
from actors.allocator_messages import Allocate, GetResourcesAllocation, StartPolicy
from actors.state_store import StateStoreCore, StoreConfig
from journal import Record, read_records
from policy.cpu.context import PolicyContext
from policy.cpu.reference import (
    PACKING,
    V0_5_3,
    V0_5_47,
    ReferenceOptions,
    reference_cause,
    reference_of_cause,
)
from policy.cpu.request import TopologyHint
from qrmd.offline.decision_rerun import RerunError, rerun_in_journal, rerun_record, state_before
from tests.actors.fakes import FakeClock
from tests.policy.decision_fixtures import request
from tests.qrmd.offline.test_decision_rerun import CTX, T0, StoreCommitter
from tests.topologies import SYNTH_16_2_4

OPTIONS = ReferenceOptions(cpu_numa_hint_prefer_policy=PACKING)
AT_47 = dataclasses.replace(CTX, reference_version=V0_5_47, reference=OPTIONS)
SNB = {"katalyst.kubewharf.io/memory_enhancement": json.dumps({"numa_binding": "true"})}


@pytest.fixture(name="journal47")
def _journal47(tmp_path: Path) -> str:
    """A v0.5.47 node's journal: start, a shared pod ramping then pooled, an SNB pod."""
    store = StateStoreCore.open(StoreConfig(str(tmp_path), "n47", durability="none"), SYNTH_16_2_4)
    clock = FakeClock(T0)
    core = AllocatorCore(store.snapshot, AT_47, StoreCommitter(store), clock.time)
    try:
        core.handle(StartPolicy())
        core.handle(Allocate(request("pod-a", cpu=2)))
        clock.advance(31)
        core.handle(GetResourcesAllocation())  # v0.5.47: 1,3-11 (v0.5.3: 1,3-6,9,11-14)
        snb = request("pod-s", cpu=1, qos="shared_cores", numa_binding=True)
        core.handle(Allocate(dataclasses.replace(snb, hint=TopologyHint((1,), True))))
    finally:
        store.close(checkpoint=False)
    return str(tmp_path)


def records(directory: str) -> list[Record]:
    return list(read_records(directory))


def test_every_v0_5_47_decision_records_its_level_and_options(journal47: str) -> None:
    causes = [r.cause for r in records(journal47) if r.events]
    assert causes and all(reference_of_cause(c) == (V0_5_47, OPTIONS) for c in causes)


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(CTX, id="given the v0.5.3 default settings, it still re-runs as v0.5.47"),
        pytest.param(AT_47, id="given the node's own settings"),
    ],
)
def test_a_v0_5_47_journal_re_runs_to_the_same_events(journal47: str, given: PolicyContext) -> None:
    for record in records(journal47):
        if not record.events:
            continue
        rerun = rerun_in_journal(journal47, record.seq, given)
        assert rerun.refusal is None and rerun.same_events, record.seq


def test_without_the_recorded_level_the_ramp_up_end_would_diverge(journal47: str) -> None:
    # the guard on the test above: the level changes this record's events
    ended = next(r for r in records(journal47) if r.cause.get("rpc") == "GetResourcesAllocation")
    stripped = dataclasses.replace(ended, cause={k: v for k, v in ended.cause.items()
                                                 if k != "reference"})  # fmt: skip
    before, _ = state_before(journal47, ended.seq, SYNTH_16_2_4)
    assert not rerun_record(stripped, before, AT_47).same_events


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        pytest.param({"version": "v0.6"}, "reference level 'v0.6'", id="an unknown level"),
        pytest.param({"version": "v0.5.47", "options": {"warp": 1}},
                     "options this qrmd does not know: ['warp']", id="an unknown option"),
    ],
)  # fmt: skip
def test_a_recorded_level_this_qrmd_does_not_know_is_named(
    journal47: str, reference: dict[str, object], message: str
) -> None:
    record = next(r for r in records(journal47) if r.events)
    odd = dataclasses.replace(record, cause={**record.cause, "reference": reference})
    before, _ = state_before(journal47, record.seq, SYNTH_16_2_4)
    with pytest.raises(RerunError) as err:
        rerun_record(odd, before, CTX)
    assert message in str(err.value)


def test_the_cause_codec_round_trips_and_defaults_to_v0_5_3() -> None:
    assert reference_of_cause({}) == (V0_5_3, ReferenceOptions())
    options = ReferenceOptions(pod_annotation_kept_keys=("a",), enable_reclaim_numa_binding=True)
    cause = {"reference": reference_cause(V0_5_47, options)}
    assert reference_of_cause(cause) == (V0_5_47, options)
