"""``qrmd balance plan --from-journal DIR --seq N``: a journaled round re-computed on the balance
section before it, with its verdict and exit status (issue item "re-computes a recorded round
and says whether it matches"; memory-balancer §6.2)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from actors.balancer_messages import Tick
from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from journal import Retention, read_records
from policy.balance import rerun as rerun_module
from policy.balance.events import BalanceRoundFailed, BalanceRoundRecorded
from policy.state.codec import decode_event
from qrmd.cli import main
from tests.actors.balancer_store import balancer_on, populate_cpu
from tests.actors.test_memory_balancer_rerun import journal_some_ticks
from tests.policy.balance.examples import NOW
from tests.policy.state_fixtures import SYNTH_16_2_4


@pytest.fixture(scope="module")
def journal_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("journal")
    journal_some_ticks(directory)
    return directory


def seqs_of(directory: Path, kind: type) -> list[int]:
    return [
        r.seq
        for r in read_records(str(directory))
        if any(isinstance(decode_event(e), kind) for e in r.events)
    ]


def plan(*args: str) -> int:
    return main(["balance", "plan", *args])


def test_every_journaled_round_matches(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rounds = seqs_of(journal_dir, BalanceRoundRecorded)
    assert len(rounds) == 2
    for seq in rounds:
        assert plan("--from-journal", str(journal_dir), "--seq", str(seq)) == 0
        out = capsys.readouterr().out
        assert f"Record {seq} re-computed with this qrmd's policy: matches the journal" in out
        assert "Pods to migrate" in out


def test_json_carries_the_verdict_beside_the_plan(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = seqs_of(journal_dir, BalanceRoundRecorded)[0]
    assert plan("--from-journal", str(journal_dir), "--seq", str(seq), "--json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["outcome"] == "stored" and document["advice"] is not None
    journal = document["journal"]
    assert journal["seq"] == seq and journal["matches"] is True
    assert journal["journaled"] == journal["recomputed"]


def test_a_changed_rule_is_found(
    journal_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = rerun_module.balance_round

    def halved_rss(section: Any, inputs: Any) -> Any:
        decision = real(section, inputs)
        (event,) = decision.events
        record = replace(event.record, total_rss=event.record.total_rss / 2)
        return replace(decision, events=(replace(event, record=record),))

    monkeypatch.setattr(rerun_module, "balance_round", halved_rss)
    seq = seqs_of(journal_dir, BalanceRoundRecorded)[0]
    assert plan("--from-journal", str(journal_dir), "--seq", str(seq)) == 1
    out = capsys.readouterr().out
    assert "DIFFERS from the journal" in out
    assert "journaled:" in out and "recomputed:" in out


def test_a_failed_round_reruns_to_its_failure(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (seq,) = seqs_of(journal_dir, BalanceRoundFailed)
    assert plan("--from-journal", str(journal_dir), "--seq", str(seq)) == 0
    assert "failed: failed to get numa metric" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--seq", "2"], "is not a balance round (BalanceAdviceTaken)",
                     id="a taken record is not a round"),
        pytest.param(["--seq", "1"], "is not a balance round (PoolSet ×2, ContainerAllocated ×",
                     id="a CPU record is not a round"),
        pytest.param(["--seq", "999"], "no record with seq 999", id="a seq past the end"),
        pytest.param(["--seq", "0"], "a record's seq is 1 or more", id="seq zero"),
    ],
)  # fmt: skip
def test_what_is_not_a_round_exits_non_zero_naming_the_record(
    journal_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    seq = int(args[1])
    if seq == 2:
        # The record after the first round's: its advice, taken by the same tick.
        seq = seqs_of(journal_dir, BalanceRoundRecorded)[0] + 1
        args = ["--seq", str(seq)]
    assert plan("--from-journal", str(journal_dir), *args) == 2
    assert message in capsys.readouterr().err


def test_file_and_journal_are_exclusive(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plan("x.json", "--from-journal", str(journal_dir), "--seq", "2") == 2
    assert "not both" in capsys.readouterr().err
    assert plan("--from-journal", str(journal_dir)) == 2
    assert "go together" in capsys.readouterr().err
    assert plan() == 2
    assert "give a round file" in capsys.readouterr().err


def test_a_round_after_retired_segments_reruns_from_a_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = StoreConfig(
        directory=str(tmp_path),
        node_name="node-a",
        durability="none",
        segment_max_bytes=4096,
        checkpoint_every_records=6,
        retention=Retention(max_bytes=0, max_age_s=None),
    )
    store = StateStoreActor.start(lambda: StateStoreCore.open(config, SYNTH_16_2_4))
    clock = [NOW]
    try:
        populate_cpu(store)
        actor, _ = balancer_on(store, clock)
        try:
            for t in range(0, 35 * 8, 35):  # past each cool-down: a round and its advice each
                clock[0] = NOW + t
                actor.ask(Tick(NOW + t), timeout=10)
        finally:
            actor.stop()
    finally:
        store.stop()
    first = next(iter(read_records(str(tmp_path)))).seq
    assert first > 2, "retention retired the oldest segments, the CPU record among them"
    rounds = seqs_of(tmp_path, BalanceRoundRecorded) + seqs_of(tmp_path, BalanceRoundFailed)
    seq = max(rounds)
    assert seq > first
    assert plan("--from-journal", str(tmp_path), "--seq", str(seq)) == 0
    assert "matches the journal" in capsys.readouterr().out
