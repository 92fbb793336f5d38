"""``qrmd journal verify|repair|show|stats`` on a journal the StateStore wrote
(DESIGN.md "Who uses it": on-call engineers).

The journal: 7 commits of ``node_history(4)``, ten seconds apart on a fake clock, checkpoints
at seqs 3 and 6, closed without a final checkpoint:

    1 Start: PoolSet share          2-5 Allocate pod-0..pod-3/app: ContainerAllocated
    6 Allocate db/main: PoolSet share + ContainerAllocated db/main
    7 RemovePod pod-0: PodRemoved
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from journal import Journal
from journal.checkpoints import checkpoint_name
from policy.state.codec import encode_state
from policy.state.sections import empty_state
from qrmd.cli import main
from tests.actors.store_helpers import NODE, TOPO, node_history, open_store
from tests.journal.helpers import FakeClock, newest_segment, record_offsets, snapshot

TOPOLOGY = "synthetic:cpus=16,sockets=2,numas=4"
T0 = 1_700_000_000.0  # the fake clock's wall time at seq 1


@pytest.fixture
def journal_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "journal"
    clock = FakeClock(wall=T0)
    store = open_store(directory, clock=clock, checkpoint_every_records=3)
    for events, cause in node_history(4):
        store.commit(events, cause)
        clock.advance(10.0)
    store.close(checkpoint=False)
    return directory


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["journal", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shown_seqs(out: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^\s+(\d+)  \d{4}-", out, re.MULTILINE)]


def lose_checkpoints(directory: Path, *seqs: int) -> None:
    """Rot checkpoints, so that recovery needs the records they covered (DESIGN.md, Journal:
    damage a valid checkpoint covers does not block recovery)."""
    for seq in seqs:
        (directory / checkpoint_name(seq)).write_bytes(b"rotten")


def flip_byte_in_record(directory: Path, index: int) -> None:
    segment = newest_segment(directory)
    data = bytearray(segment.read_bytes())
    data[record_offsets(segment)[index] + 24] ^= 0x01  # inside the payload
    segment.write_bytes(bytes(data))


# -- verify ----------------------------------------------------------------------------------


def test_verify_accepts_an_intact_journal_and_replay_matches_every_checkpoint(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(journal_dir)
    code, out, _ = run(capsys, "verify", str(journal_dir), "--topology", TOPOLOGY)
    assert code == 0
    assert "7 records (seq 1-7), 2 valid checkpoints" in out
    assert "replay from empty through seq 7: every record applies; matches 2 checkpoints" in out
    assert out.rstrip().endswith("ok")
    assert snapshot(journal_dir) == before  # read-only


def test_verify_reports_a_damaged_record(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flip_byte_in_record(journal_dir, 2)  # seq 3, records after it intact: mid-log damage
    lose_checkpoints(journal_dir, 3, 6)  # so that recovery needs seq 3
    code, out, _ = run(capsys, "verify", str(journal_dir), "--topology", TOPOLOGY)
    assert code == 1
    assert "corrupt_record" in out and "blocks recovery" in out
    assert "replay: stopped after seq 2" in out


def test_verify_reports_damage_a_checkpoint_covers_as_not_blocking(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flip_byte_in_record(journal_dir, 2)  # seq 3; the checkpoint at 6 covers it
    code, out, _ = run(capsys, "verify", str(journal_dir), "--topology", TOPOLOGY)
    assert code == 1  # still a problem in the history, reported
    assert "corrupt_record" in out and "(recovery does not need it)" in out
    assert "blocks recovery" not in out


def test_verify_finds_a_checkpoint_that_replay_does_not_reproduce(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal, _ = Journal.open(
        str(journal_dir), node_name=NODE, topology_fingerprint=TOPO.fingerprint()
    )
    with journal:
        journal.write_checkpoint(7, encode_state(empty_state(TOPO)))  # a wrong state
    code, out, _ = run(capsys, "verify", str(journal_dir), "--topology", TOPOLOGY)
    assert code == 1
    assert "checkpoint 7 differs from the replay of the records up to it in sections ['cpu']" in out


def test_verify_refuses_another_topology_in_one_line(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "verify", str(journal_dir), "--topology", "synthetic:cpus=8,sockets=1,numas=1"
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert f"was written for topology {TOPO.fingerprint()}" in err


@pytest.mark.parametrize(
    ("action", "options"),
    [
        pytest.param("verify", [], id="verify"),
        pytest.param("repair", [], id="repair"),
        pytest.param("show", [], id="show"),
        pytest.param("stats", [], id="stats"),
        pytest.param("state", [], id="state"),
        pytest.param("diff", ["--from", "seq:1", "--to", "seq:2"], id="diff"),
        pytest.param("rerun", [], id="rerun"),
        pytest.param("export", ["--parquet", "out.parquet"], id="export"),
        pytest.param("report", ["--html", "out.html"], id="report"),
    ],
)
def test_a_missing_directory_is_one_line_prefixed_with_the_action_as_usage_errors_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str, options: list[str]
) -> None:
    code, _, err = run(capsys, action, str(tmp_path / "nope"), *options)
    assert (code, err) == (
        2,
        f"qrmd journal {action}: error: no journal at {tmp_path / 'nope'}: not a directory\n",
    )
    with pytest.raises(SystemExit):  # argparse's usage error, for the same prefix
        run(capsys, action)
    assert f"\nqrmd journal {action}: error: the following arguments are required: DIR" in (
        capsys.readouterr().err
    )


# -- repair ----------------------------------------------------------------------------------


def test_repair_describes_mid_log_damage_and_acts_only_with_force(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flip_byte_in_record(journal_dir, 4)  # seq 5 damaged, 6 and 7 intact
    lose_checkpoints(journal_dir, 6)  # so that recovery (from seq 3) needs seq 5
    before = snapshot(journal_dir)
    code, out, _ = run(capsys, "repair", str(journal_dir))
    assert code == 1
    assert "--force" in out and "Nothing was changed" in out
    assert snapshot(journal_dir) == before
    code, out, _ = run(capsys, "repair", str(journal_dir), "--force")
    assert code == 0
    assert snapshot(journal_dir) != before
    code, out, _ = run(capsys, "verify", str(journal_dir), "--topology", TOPOLOGY)
    assert code == 0, out
    assert "7 records" not in out and "(seq 1-4)" in out
    assert open_store(journal_dir).snapshot.seq == 4


def test_repair_cuts_a_torn_tail_without_force(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with newest_segment(journal_dir).open("ab") as segment:
        segment.write(b"QRJF\x20\x00")
    code, out, _ = run(capsys, "repair", str(journal_dir))
    assert code == 0, out
    assert list(journal_dir.glob("*.broken"))
    assert run(capsys, "verify", str(journal_dir), "--topology", TOPOLOGY)[0] == 0


# -- show ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "seqs"),
    [
        pytest.param([], [1, 2, 3, 4, 5, 6, 7], id="everything in seq order"),
        pytest.param(["--pod", "pod-1"], [3], id="a pod named by the cause and its event"),
        pytest.param(["--pod", "pod-0"], [2, 7], id="a pod's allocation and its removal"),
        pytest.param(["--container", "main"], [6], id="a container name"),
        pytest.param(["--kind", "PoolSet"], [1, 6], id="records with an event of a kind"),
        pytest.param(["--kind", "PodRemoved", "--pod", "pod-0"], [7], id="kind and pod together"),
        pytest.param(["--from-seq", "2", "--to-seq", "3"], [2, 3], id="a seq range"),
        pytest.param(["--since", str(T0 + 40)], [5, 6, 7], id="since epoch seconds"),
        pytest.param(
            ["--until", "2023-11-14T22:13:40Z"], [1, 2, 3], id="until an ISO time (inclusive)"
        ),
    ],
)
def test_show_filters(
    journal_dir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], seqs: list[int]
) -> None:
    code, out, _ = run(capsys, "show", str(journal_dir), *argv)
    assert code == 0
    assert shown_seqs(out) == seqs


def test_show_prints_the_cause_and_one_line_per_event(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "show", str(journal_dir), "--from-seq", "6", "--to-seq", "6")
    lines = out.splitlines()
    assert lines[0] == "       6  2023-11-14T22:14:10.000Z  Allocate db/main"
    assert lines[1].split() == ["PoolSet", "name=share", "cpuset=6-15"]
    assert lines[2].split()[:3] == ["ContainerAllocated", "db/main", "qos_level=dedicated_cores"]
    assert "placement=own(result=4-5, original=4-5)" in lines[2]


def test_show_event_filters_print_only_matching_events(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "show", str(journal_dir), "--kind", "PoolSet", "--json")
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["seq"] for d in docs] == [1, 6]
    assert docs[1]["events"] == [{"kind": "PoolSet", "name": "share", "cpuset": "6-15"}]
    assert docs[1]["cause"]["request"]["pod_uid"] == "db"
    assert docs[1]["time"] == "2023-11-14T22:14:10.000Z" and docs[1]["wall_time"] == T0 + 50


def test_show_json_is_one_object_per_record(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "show", str(journal_dir), "--json")
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["seq"] for d in docs] == list(range(1, 8))
    assert set(docs[0]) == {
        "seq",
        "time",
        "wall_time",
        "monotonic_time",
        "schema",
        "cause",
        "events",
    }
    assert docs[6]["events"] == [{"kind": "PodRemoved", "pod_uid": "pod-0"}]


def test_show_stops_at_damage_with_one_line(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flip_byte_in_record(journal_dir, 3)
    code, out, err = run(capsys, "show", str(journal_dir))
    assert code == 2
    assert shown_seqs(out) == [1, 2, 3]
    assert err.count("\n") == 1 and "the records before it were shown" in err


def test_a_bad_time_is_one_line(journal_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", str(journal_dir), "--since", "yesterday")
    assert code == 2 and "neither epoch seconds" in err


# -- stats -----------------------------------------------------------------------------------


def test_stats_sums_records_events_bytes_and_time(
    journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "stats", str(journal_dir), "--json")
    assert code == 0
    doc = json.loads(out)
    assert (doc["records"], doc["events"], doc["first_seq"], doc["last_seq"]) == (7, 8, 1, 7)
    assert doc["events_by_kind"] == {"ContainerAllocated": 5, "PoolSet": 2, "PodRemoved": 1}
    assert doc["records_by_cause"] == {"Allocate": 5, "Start": 1, "RemovePod": 1}
    assert (doc["segments"], doc["checkpoints"]) == (1, 2)
    assert doc["segment_bytes"] == newest_segment(journal_dir).stat().st_size
    assert doc["span_s"] == 60.0 and doc["damage"] is None
    code, out, _ = run(capsys, "stats", str(journal_dir))
    assert code == 0
    assert "records    7 (seq 1-7), 8 events" in out
    assert "ContainerAllocated     5" in out
