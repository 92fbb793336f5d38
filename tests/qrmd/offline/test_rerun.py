"""``qrmd journal rerun``: nothing on an honest journal (today's, or one an older qrmd wrote),
and a planted policy change — a monkeypatched rule — found at exactly the records it touches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import policy.balance.round
import policy.cpu.allocate
import policy.cpu.pressure.rerun
from actors.cpu_pressure_messages import (
    CollectLoad,
    LoadThresholdMet,
    LoadTopEvictionPods,
    SuppressionEvictPods,
)
from actors.state_store import StateStoreCore, StoreConfig
from journal import read_records
from policy.cpu.qos import RECLAIMED_CORES
from policy.decision import Decision
from policy.state.entries import InPool
from policy.state.events import ContainerAllocated, PoolSet
from qrmd.cli import main
from tests.actors import test_cpu_pressure as pressure
from tests.actors import test_memory_balancer_rerun as balancer_journal
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus
from tests.qrmd.offline.scenario import TOPOLOGY_SPEC, Scenario, write_scenario

FIXTURE = Path(__file__).parents[2] / "fixtures" / "journal-ac84ea9"
#: The scenario's and the fixture's Allocator settings: reserve 0,2 (two reserved CPUs).
NODE_FLAGS = ("--topology", TOPOLOGY_SPEC, "--reserved-cpu-cores", "2")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return write_scenario(tmp_path_factory.mktemp("node") / "journal")


def rerun(capsys: pytest.CaptureFixture[str], directory: Path, *argv: str) -> tuple[int, dict]:
    code = main(["journal", "rerun", str(directory), *NODE_FLAGS, *argv, "--json"])
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, json.loads(captured.out)


def test_an_honest_journal_reruns_without_divergence(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = rerun(capsys, scenario.directory)
    assert code == 0
    assert (found["rerun"], found["same"], found["divergences"]) == (9, 9, [])


def test_a_journal_written_by_an_older_qrmd_reruns_without_divergence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, found = rerun(capsys, FIXTURE)
    assert code == 0
    assert (found["rerun"], found["same"], found["divergences"]) == (9, 9, [])


def test_a_planted_allocation_rule_is_found_at_the_record_it_decided(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = policy.cpu.allocate.allocate_numa_binding_cpus

    def not_exclusive(state, ctx, request, hint, exclusive):  # type: ignore[no-untyped-def]
        return original(state, ctx, request, hint, False)  # the planted change

    monkeypatch.setattr(policy.cpu.allocate, "allocate_numa_binding_cpus", not_exclusive)
    code, found = rerun(capsys, scenario.directory)
    assert code == 1
    # only seq 4 (Allocate of the exclusive dedicated pod db) used the rule
    assert [d["seq"] for d in found["divergences"]] == [4]
    divergence = found["divergences"][0]
    assert divergence["kind"] == "Allocate"
    assert divergence["expected_events"][0]["entry"]["placement"]["result"] == "3,10-11"
    assert divergence["got_events"][0]["entry"]["placement"]["result"] != "3,10-11"


def test_a_range_reruns_only_its_records(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = rerun(capsys, scenario.directory, "--from", "seq:3", "--to", "seq:5")
    assert code == 0 and (found["from_seq"], found["to_seq"], found["rerun"]) == (3, 5, 3)


def test_other_settings_than_the_nodes_show_as_divergences_in_text(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["journal", "rerun", str(scenario.directory), "--topology", TOPOLOGY_SPEC])
    out = capsys.readouterr().out
    assert code == 1
    assert "divergence at seq 1 (StartPolicy)" in out
    assert "recorded: PoolSet name=reserve cpuset=0,2" in out
    assert "9 decisions re-run, 1 the same, 8 divergent" in out


@pytest.fixture(scope="module")
def balancer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("balancer") / "journal"
    balancer_journal.journal_some_ticks(directory)
    return directory


def test_balance_rounds_rerun_without_divergence(
    balancer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = rerun(capsys, balancer_dir)
    assert code == 0 and found["divergences"] == []
    assert found["rerun"] >= 3


def test_a_planted_balance_rule_is_found_at_the_rounds_it_decided(
    balancer_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    offering = [
        r.seq
        for r in read_records(str(balancer_dir))
        if any(
            e.get("kind") == "BalanceRoundRecorded" and e["record"]["evictPods"] for e in r.events
        )
    ]
    assert offering  # the example rounds offer a pod for eviction
    monkeypatch.setattr(policy.balance.round, "pod_to_evict", lambda listing, source: None)
    code, found = rerun(capsys, balancer_dir)
    assert code == 1
    assert [d["seq"] for d in found["divergences"]] == offering
    assert all(d["kind"] == "Tick" for d in found["divergences"])


class _StoreCommitter:
    """The StateStore's plain core as a ``Committer`` (the actor answers ``latest`` so)."""

    def __init__(self, store: StateStoreCore) -> None:
        self.store = store

    def commit(self, events, cause):  # type: ignore[no-untyped-def]
        return self.store.commit(events, cause)

    def latest(self):  # type: ignore[no-untyped-def]
        return self.store.snapshot

    @property
    def snapshot(self):  # type: ignore[no-untyped-def]
        return self.store.snapshot


@pytest.fixture(scope="module")
def pressure_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU pressure plugins' decisions (load and suppression) journaled by the StateStore;
    their command names overlap the balancer's (``GetEvictPods``, ``ThresholdMet``)."""
    directory = tmp_path_factory.mktemp("pressure") / "journal"
    store = StateStoreCore.open(
        StoreConfig(str(directory), "pressure-node", durability="none"), SYNTH_16_2_4
    )
    # the node of tests.actors.test_cpu_pressure.node_state, as one record
    store.commit(
        [
            PoolSet("share", cpus("0-7")),
            PoolSet("reclaim", cpus("8-11")),
            ContainerAllocated(container("web", "main", InPool("share"), owner="share")),
            ContainerAllocated(
                container("etl", "main", InPool("reclaim"), owner="reclaim", qos=RECLAIMED_CORES)
            ),
        ],
        {"kind": "TestSetUp"},
    )
    core, _, loads, clock = pressure.make_core(_StoreCommitter(store))  # type: ignore[arg-type]
    loads.set_load("web", "main", 20.0)
    for _ in range(2):
        core.handle(CollectLoad(clock.time()))
        clock.advance(30)
    core.handle(LoadThresholdMet())
    core.handle(LoadTopEvictionPods((pressure.WEB,), 1))
    core.handle(SuppressionEvictPods((pressure.WEB, pressure.ETL)))
    clock.advance(61)
    core.handle(SuppressionEvictPods((pressure.WEB, pressure.ETL)))
    store.close(checkpoint=False)
    return directory


def test_cpu_pressure_decisions_rerun_by_their_own_rules(
    pressure_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, found = rerun(capsys, pressure_dir)
    assert code == 0 and found["divergences"] == []
    assert found["rerun"] == 6 and found["no_rerunner"] == {"TestSetUp": [1]}


def test_a_planted_suppression_rule_is_found_at_the_records_it_decided(
    pressure_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    offers = [
        r.seq for r in read_records(str(pressure_dir)) if r.cause.get("command") == "GetEvictPods"
    ]
    assert offers
    monkeypatch.setattr(
        policy.cpu.pressure.rerun,
        "evict_pods",
        lambda history, inputs, settings, now, qos: Decision(events=(), reply=None),
    )
    code, found = rerun(capsys, pressure_dir)
    assert code == 1
    assert [d["seq"] for d in found["divergences"]] == offers
    assert all(d["got_events"] == [] for d in found["divergences"])
