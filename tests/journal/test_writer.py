"""Appending, rotation, identity checks and the writer lock (journal/writer.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import (
    JournalError,
    JournalMismatch,
    UnencodableRecord,
    read_records,
)
from journal.fileops import OsFileOps
from journal.segments import list_segments, parse_segment_name, scan_segment
from tests.journal.helpers import (
    NODE,
    TOPOLOGY,
    FakeClock,
    FaultyFileOps,
    assert_holds_exactly,
    cause_of,
    events_of,
    open_journal,
    write_records,
)


@pytest.mark.parametrize("durability", ["always", "none"])
def test_appends_get_consecutive_seqs_and_survive_reopening(
    tmp_path: Path, durability: str
) -> None:
    write_records(tmp_path, 5, durability=durability)
    journal, recovery = open_journal(tmp_path, durability=durability)
    with journal:
        assert recovery.last_seq == 5 and recovery.checkpoint_seq is None
        assert_holds_exactly(recovery.records, 1, 5)
        assert journal.append(cause_of(6), events_of(6)) == 6
    _, recovery = open_journal(tmp_path)
    assert_holds_exactly(recovery.records, 1, 6)


def test_a_new_journal_starts_at_seq_1_with_its_identity_on_disk(tmp_path: Path) -> None:
    journal, recovery = open_journal(tmp_path / "new")
    journal.close()
    assert recovery.last_seq == 0 and recovery.records == [] and recovery.node_name is None
    [(first, path)] = list_segments(OsFileOps(), str(tmp_path / "new"))
    assert first == 1 and path.endswith("0000000000000001.seg")
    header = scan_segment(Path(path).read_bytes(), path).header
    assert (header.node_name, header.topology_fingerprint, header.first_seq) == (NODE, TOPOLOGY, 1)


def test_records_carry_the_clock_readings(tmp_path: Path) -> None:
    clock = FakeClock(wall=1_750_000_000.5, mono=42.0)
    journal, _ = open_journal(tmp_path, clock=clock)
    with journal:
        journal.append({"tick": "residual"}, [])
        clock.advance(2.5)
        journal.append({"tick": "residual"}, [])
    first, second = read_records(str(tmp_path))
    assert (first.wall_time, first.monotonic_time) == (1_750_000_000.5, 42.0)
    assert (second.wall_time, second.monotonic_time) == (1_750_000_003.0, 44.5)
    assert first.schema_version == 1


def test_rotation_starts_a_segment_named_by_its_first_seq(tmp_path: Path) -> None:
    write_records(tmp_path, 60, segment_max_bytes=1024)
    segments = list_segments(OsFileOps(), str(tmp_path))
    assert len(segments) > 3
    for index, (first, path) in enumerate(segments):
        scan = scan_segment(Path(path).read_bytes(), path)
        assert scan.header.first_seq == first == scan.records[0].seq
        assert parse_segment_name(Path(path).name) == first
        if index + 1 < len(segments):
            # Full but not over: the next record would not have fitted.
            assert scan.size <= 1024
            assert scan.records[-1].seq + 1 == segments[index + 1][0]
    assert_holds_exactly(list(read_records(str(tmp_path))), 1, 60)


def test_a_record_larger_than_a_segment_gets_one_of_its_own(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path, segment_max_bytes=1024)
    with journal:
        journal.append({"small": 1}, [])
        journal.append({"big": "x" * 3000}, [])
        journal.append({"small": 3}, [])
    assert [first for first, _ in list_segments(OsFileOps(), str(tmp_path))] == [1, 2, 3]


def test_rotation_and_reopening_continue_in_the_newest_segment(tmp_path: Path) -> None:
    write_records(tmp_path, 30, segment_max_bytes=1024)
    before = list_segments(OsFileOps(), str(tmp_path))
    journal, _ = open_journal(tmp_path, segment_max_bytes=1024)
    with journal:
        assert journal.append(cause_of(31), events_of(31)) == 31
    after = list_segments(OsFileOps(), str(tmp_path))
    assert after[: len(before)] == before
    assert_holds_exactly(list(read_records(str(tmp_path))), 1, 31)


@pytest.mark.parametrize(
    ("node", "topology", "named"),
    [
        pytest.param("node-b", TOPOLOGY, "node-b", id="another node's journal is refused"),
        pytest.param(
            NODE, "synthetic:cpus=8", "cpus=8", id="another topology's journal is refused"
        ),
    ],
)
def test_another_machines_journal_is_refused(
    tmp_path: Path, node: str, topology: str, named: str
) -> None:
    write_records(tmp_path, 3)
    with pytest.raises(JournalMismatch, match=named) as caught:
        open_journal(tmp_path, node_name=node, topology_fingerprint=topology)
    assert "refusing" in str(caught.value) and caught.value.found_node == NODE
    # Opened read-only for forensics, it is readable and reports whose it is.
    journal, recovery = open_journal(
        tmp_path, node_name=node, topology_fingerprint=topology, read_only=True
    )
    assert recovery.node_name == NODE and recovery.topology_fingerprint == TOPOLOGY
    assert_holds_exactly(recovery.records, 1, 3)
    with pytest.raises(JournalError, match="read-only"):
        journal.append({"x": 1}, [])


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)
    with journal, pytest.raises(JournalError, match="in use by another process"):
        open_journal(tmp_path)
    second, _ = open_journal(tmp_path)  # released by close
    second.close()


@pytest.mark.parametrize(
    ("cause", "events", "message"),
    [
        pytest.param(["not", "a", "map"], [], "cause map", id="a cause that is not a map"),
        pytest.param({"rpc": "x"}, ({"e": 1},), "event list", id="events that are not a list"),
        pytest.param(
            {"rpc": object()}, [], "cannot be encoded", id="a cause msgpack cannot encode"
        ),
        pytest.param(
            {"rpc": "x"}, [{1, 2}], "cannot be encoded", id="an event msgpack cannot encode"
        ),
    ],
)
def test_unencodable_records_write_nothing(
    tmp_path: Path, cause: object, events: object, message: str
) -> None:
    journal, _ = open_journal(tmp_path)
    with journal:
        journal.append(cause_of(1), events_of(1))
        with pytest.raises(UnencodableRecord, match=message):
            journal.append(cause, events)  # type: ignore[arg-type]
        assert journal.append(cause_of(2), events_of(2)) == 2
    assert_holds_exactly(list(read_records(str(tmp_path))), 1, 2)


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        pytest.param(
            "durability",
            "sometimes",
            "durability must be 'always' or 'none'",
            id="unknown durability",
        ),
        pytest.param(
            "segment_max_bytes", 10, "segment_max_bytes must be >= 1024", id="tiny segments"
        ),
        pytest.param(
            "checkpoint_every_records",
            0,
            "checkpoint_every_records",
            id="checkpoint every 0 records",
        ),
        pytest.param(
            "checkpoint_every_s", 0.0, "checkpoint_every_s", id="checkpoint every 0 seconds"
        ),
        pytest.param("node_name", "", "node_name", id="empty node name"),
    ],
)
def test_bad_settings_name_the_setting(
    tmp_path: Path, setting: str, value: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        open_journal(tmp_path, **{setting: value})


def test_read_only_open_of_a_missing_directory_says_so(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="does not exist"):
        open_journal(tmp_path / "nowhere", read_only=True)


def test_stats_count_appends_bytes_and_fsyncs(tmp_path: Path) -> None:
    clock = FakeClock()
    fs = FaultyFileOps(clock)
    fs.fsync_cost_s = 0.25  # each file fsync takes a quarter second on the fake clock
    journal, _ = open_journal(
        tmp_path, durability="always", segment_max_bytes=1024, fs=fs, clock=clock
    )
    with journal:
        for n in range(1, 21):
            journal.append(cause_of(n), events_of(n))
        stats = journal.stats
    segments = [scan_segment(p.read_bytes(), str(p)) for p in sorted(tmp_path.glob("*.seg"))]
    assert stats.appends == 20 and stats.rotations == len(segments) - 1 >= 1
    assert stats.bytes_appended == sum(s.size - s.header_end for s in segments)
    # One fsync per record, and two per segment created (its file, then the directory).
    assert stats.fsync.count == 20 + 2 * len(segments)
    assert stats.fsync.max_s == 0.25
    assert stats.fsync.total_s == pytest.approx(0.25 * (20 + len(segments)))
    assert stats.fsync.slow == 0


def test_a_slow_fsync_is_counted_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    fs = FaultyFileOps(clock)
    journal, _ = open_journal(tmp_path, durability="always", fs=fs, clock=clock, slow_fsync_s=1.0)
    with journal:
        journal.append(cause_of(1), events_of(1))
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
        fs.fsync_cost_s = 1.5
        journal.append(cause_of(2), events_of(2))
    assert journal.stats.fsync.slow == 1 and journal.stats.fsync.max_s == 1.5
    [warning] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "slow fsync" in warning.getMessage() and "1.500 s" in warning.getMessage()


def test_a_new_journal_directory_is_made_durable_in_its_parent(tmp_path: Path) -> None:
    class RecordingFileOps(FaultyFileOps):
        def __init__(self) -> None:
            super().__init__()
            self.synced_dirs: list[str] = []

        def fsync_dir(self, directory: str) -> None:
            self.synced_dirs.append(directory)
            super().fsync_dir(directory)

    fs = RecordingFileOps()
    journal, _ = open_journal(tmp_path / "new", fs=fs, durability="always")
    journal.close()
    # The parent, for the new directory's entry; then the directory, for the first segment's.
    assert fs.synced_dirs == [str(tmp_path), str(tmp_path / "new")]
