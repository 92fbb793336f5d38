"""``qrmd journal show`` and ``stats``: kinds in and out, tail, relative times, pod names,
reading past damage, following a live journal, and an error for every empty answer."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from actors.state_store import StateStoreCore, StoreConfig
from journal import Retention, read_records
from journal.fileops import OsFileOps
from journal.follow import JournalFollower, Skipped
from journal.segments import list_segments
from qrmd.cli import main
from qrmd.offline.commands import journal_show
from tests.actors import test_memory_balancer_rerun as balancer_journal
from tests.actors.store_helpers import share_pool
from tests.journal.helpers import (
    FakeClock,
    cause_of,
    events_of,
    newest_segment,
    open_journal,
    record_offsets,
)
from tests.policy.state_fixtures import SYNTH_16_2_4
from tests.qrmd.offline.scenario import NODE, Scenario, write_scenario


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    return write_scenario(tmp_path / "journal")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["journal", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shown_seqs(out: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^\s+(\d+)  \d{4}-", out, re.MULTILINE)]


@pytest.mark.parametrize(
    ("argv", "seqs"),
    [
        pytest.param(["--kind", "Allocate"], [2, 3, 4, 6, 9], id="a cause kind keeps its records"),
        pytest.param(["--kind", "PodRemoved,RampCPUsSet"], [4, 8], id="two event kinds"),
        pytest.param(
            ["--exclude-kind", "GetResourcesAllocation"],
            [1, 2, 3, 4, 6, 8, 9],
            id="a cause kind left out",
        ),
        pytest.param(
            ["--kind", "Allocate", "--exclude-kind", "ContainerAllocated"],
            [4],
            id="records left with no event after exclusion are dropped",
        ),
        pytest.param(["--tail", "2"], [8, 9], id="the last two records"),
        pytest.param(["--kind", "Allocate", "--tail", "1"], [9], id="tail of a filter"),
        pytest.param(["--since", "10s"], [7, 8, 9], id="since 10 s before the newest record"),
        pytest.param(["--until", "56s"], [1, 2, 3, 4], id="until 56 s before the newest record"),
        pytest.param(["--pod", "default/web"], [2, 4, 5], id="a pod by namespace and name"),
        pytest.param(["--pod", "db"], [4, 5], id="a pod by its name"),
        pytest.param(["--pod", "uid-web2"], [6, 7], id="a pod by its UID"),
    ],
)
def test_show_selects(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], argv: list[str], seqs: list[int]
) -> None:
    code, out, err = run(capsys, "show", str(scenario.directory), *argv)
    assert (code, err) == (0, "")
    assert shown_seqs(out) == seqs


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        pytest.param(
            ["--kind", "Bogus"], 2, "unknown kind 'Bogus' for --kind", id="an unknown kind"
        ),
        pytest.param(
            ["--exclude-kind", "Nope"],
            2,
            "unknown kind 'Nope' for --exclude-kind",
            id="an unknown kind to exclude",
        ),
        pytest.param(
            ["--from-seq", "30", "--to-seq", "20"],
            2,
            "--from-seq 30 is after --to-seq 20: the range is empty",
            id="a reversed seq range",
        ),
        pytest.param(
            ["--from-seq", "30"],
            2,
            "--from-seq 30 is outside",
            id="a seq range past the newest record",
        ),
        pytest.param(
            ["--since", "1s", "--until", "1m"],
            2,
            "is after --until 1m",
            id="a reversed time range",
        ),
        pytest.param(
            ["--pod", "web"],
            2,
            "pod 'web' is ambiguous: it names default/web (uid-web), other/web (uid-web2)",
            id="an ambiguous pod name",
        ),
        pytest.param(["--pod", "nobody"], 2, "no pod 'nobody' in the journal", id="no such pod"),
        pytest.param(
            ["--pod", "uid-batch", "--kind", "PodRemoved"],
            1,
            "no record of",
            id="a selection nothing matches",
        ),
        pytest.param(["--tail", "0"], 2, "--tail 0: give a number", id="a tail of nothing"),
    ],
)
def test_show_says_why_it_prints_nothing(
    scenario: Scenario,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    message: str,
) -> None:
    got, out, err = run(capsys, "show", str(scenario.directory), *argv)
    assert got == code and out == ""
    assert message in err and err.count("\n") == 1


def test_show_and_stats_refuse_an_empty_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for action in ("show", "stats"):
        code, out, err = run(capsys, action, str(tmp_path))
        assert (code, out) == (2, "")
        assert f"no journal at {tmp_path}: the directory holds no segment (*.seg)" in err


def test_stats_on_a_journal_without_records_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = StoreConfig(str(tmp_path / "j"), NODE, durability="none")
    StateStoreCore.open(config, SYNTH_16_2_4, clock=FakeClock()).close(checkpoint=False)
    code, out, _ = run(capsys, "stats", str(tmp_path / "j"))
    assert code == 0
    assert "time span  none: the journal has no records yet" in out and "None" not in out
    code, _, err = run(capsys, "show", str(tmp_path / "j"))
    assert code == 2 and "holds a journal with no records yet" in err


def test_show_reads_past_mid_log_damage_and_reports_the_gap(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = newest_segment(scenario.directory)
    data = bytearray(segment.read_bytes())
    offset = record_offsets(segment)[4]  # seq 5
    data[offset + 24] ^= 0x01
    segment.write_bytes(bytes(data))
    code, out, err = run(capsys, "show", str(scenario.directory))
    assert code == 2 and "--skip-damaged reads past it" in err
    code, out, err = run(capsys, "show", str(scenario.directory), "--skip-damaged")
    assert code == 1
    assert shown_seqs(out) == [1, 2, 3, 4, 6, 7, 8, 9]
    assert f"gap: damage in {segment} @ {offset} from seq 5" in err
    assert "resumed at seq 6" in err


def test_show_renders_a_kind_it_has_no_renderer_for_generically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = StoreConfig(str(tmp_path / "j"), NODE, durability="none")
    store = StateStoreCore.open(config, SYNTH_16_2_4, clock=FakeClock())
    store.commit([share_pool()], {"kind": "AdvisorResponse", "version": 2, "inputs": {"a": 1}})
    store.close(checkpoint=False)
    code, out, _ = run(capsys, "show", str(tmp_path / "j"), "--kind", "AdvisorResponse")
    assert code == 0
    assert "AdvisorResponse: version=2 [inputs]" in out.splitlines()[0]


def test_follow_yields_records_the_state_store_appends_after_the_ones_shown(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    config = StoreConfig(str(tmp_path / "j"), NODE, durability="none")
    store = StateStoreCore.open(config, SYNTH_16_2_4, clock=clock)
    store.commit([share_pool("4-15")], {"rpc": "Start"})
    skipped: list[Skipped] = []
    follower = JournalFollower(str(tmp_path / "j"), 1, on_skip=skipped.append)
    seen = []
    for cpus in ("5-15", "6-15", None):
        if cpus is not None:
            store.commit([share_pool(cpus)], {"rpc": "Tick"})
        seen += [r.seq for r in follower.poll()]
    store.close(checkpoint=False)
    assert seen == [2, 3] and skipped == []


def test_follow_goes_on_after_the_last_record_shown_when_the_daemon_appends_meanwhile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "j"
    journal, _ = open_journal(directory)
    for n in range(1, 6):
        journal.append(cause_of(n), events_of(n))
    scope_of = journal_show._show_scope

    def scope_then_appends(args: Any) -> Any:
        # The daemon appends seqs 6 and 7 after show has read the journal's range, before
        # the records are printed.
        scope = scope_of(args)
        for n in (6, 7):
            journal.append(cause_of(n), events_of(n))
        return scope

    passes: list[int] = []

    def one_more_record_then_stop() -> bool:
        passes.append(len(passes))
        if len(passes) == 1:
            journal.append(cause_of(8), events_of(8))
        return len(passes) <= 2

    monkeypatch.setattr(journal_show, "_show_scope", scope_then_appends)
    monkeypatch.setattr(journal_show, "_poll_wait", one_more_record_then_stop)
    code, out, err = run(capsys, "show", str(directory), "--follow", "--json")
    journal.close()
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert (code, err) == (0, "")


def test_follow_says_which_seqs_retention_deleted_before_it_read_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "j"
    journal, _ = open_journal(
        directory, segment_max_bytes=2048, retention=Retention(max_bytes=0, max_age_s=None)
    )
    for n in range(1, 6):
        journal.append(cause_of(n), events_of(n))
    passes: list[int] = []

    def checkpoints_then_stop() -> bool:
        # Between two looks the daemon appends 200 records and writes two checkpoints:
        # retention deletes the segments holding seqs 6 on before the follower read them.
        passes.append(len(passes))
        if len(passes) == 1:
            for _ in range(2):
                for _ in range(100):
                    n = journal.last_seq + 1
                    journal.append(cause_of(n), events_of(n))
                journal.write_checkpoint(journal.last_seq, {})
        return len(passes) <= 2

    monkeypatch.setattr(journal_show, "_poll_wait", checkpoints_then_stop)
    code, out, err = run(capsys, "show", str(directory), "--follow", "--json")
    journal.close()
    oldest = list_segments(OsFileOps(), str(directory))[0][0]
    seqs = [json.loads(line)["seq"] for line in out.splitlines()]
    assert seqs == [1, 2, 3, 4, 5, *range(oldest, 206)]
    assert err.startswith(
        f"qrmd journal show: seqs 6-{oldest - 1} were deleted by retention before they were read "
        f"(the checkpoint at seq 105 covers them)"
    )
    assert code == 1


def test_follow_stops_at_to_seq(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "j"
    journal, _ = open_journal(directory)
    for n in range(1, 6):
        journal.append(cause_of(n), events_of(n))
    passes: list[int] = []

    def three_more_records() -> bool:
        passes.append(len(passes))
        for n in range(journal.last_seq + 1, journal.last_seq + 4):
            journal.append(cause_of(n), events_of(n))
        return True

    monkeypatch.setattr(journal_show, "_poll_wait", three_more_records)
    code, out, _ = run(capsys, "show", str(directory), "--follow", "--to-seq", "6", "--json")
    journal.close()
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2, 3, 4, 5, 6]
    assert code == 0 and len(passes) == 1


def test_show_json_keeps_one_object_per_record(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "show", str(scenario.directory), "--tail", "3", "--json")
    assert code == 0
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [7, 8, 9]


def test_verify_and_repair_print_one_json_document(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "verify",
        str(scenario.directory),
        "--topology",
        "synthetic:cpus=16,sockets=2,numas=4",
        "--json",
    )
    document = json.loads(out)
    assert code == 0 and document["ok"] is True and document["records"] == 9
    assert document["findings"] == [] and document["replay_problems"] == []
    code, out, _ = run(capsys, "repair", str(scenario.directory), "--json")
    document = json.loads(out)
    assert code == 0 and document["damage"] == "" and document["applied"] is False


def test_verify_replays_to_a_checkpoint_written_before_the_columnar_containers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # journal-ac84ea9's checkpoint holds its containers as a list of entry maps; the journal
    # written on top of it by today's store holds columns; verify compares both to the replay.
    shutil.copytree(Path(__file__).parents[2] / "fixtures" / "journal-ac84ea9", tmp_path / "j")
    config = StoreConfig(str(tmp_path / "j"), "fixture-node", durability="none")
    store = StateStoreCore.open(config, SYNTH_16_2_4)
    store.commit((share_pool("4-7"),), {"rpc": "test"})
    store.close()
    topology = "synthetic:cpus=16,sockets=2,numas=4"
    code, out, _ = run(capsys, "verify", str(tmp_path / "j"), "--topology", topology, "--json")
    document = json.loads(out)
    assert document["checkpoints"] == [9, 10]
    assert code == 0 and document["ok"] is True and document["replay_problems"] == []


def test_show_pod_finds_the_balance_rounds_that_offer_it_for_eviction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    balancer_journal.journal_some_ticks(tmp_path / "journal")
    offering = {}
    for record in read_records(str(tmp_path / "journal")):
        for event in record.events:
            if event.get("kind") == "BalanceRoundRecorded":
                for pod in event["record"]["evictPods"]:
                    offering.setdefault(pod["UID"], []).append(record.seq)
    uid, seqs = next(iter(offering.items()))
    code, out, _ = run(capsys, "show", str(tmp_path / "journal"), "--pod", uid)
    assert code == 0
    assert set(seqs) <= set(shown_seqs(out))
