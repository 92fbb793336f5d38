"""Corruption corpus: one checker, many tiny damage functions (STYLE.md, Tests).

Tail damage (what a crash mid-write leaves) recovers exactly the complete records and keeps the
cut bytes in a .broken file; damage before the tail fails loudly with the file, offset and seq.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import CorruptRecord
from journal.fileops import OsFileOps
from journal.segments import list_segments, scan_segment
from tests.journal.helpers import (
    assert_holds_exactly,
    cause_of,
    events_of,
    newest_segment,
    open_journal,
    write_records,
)

Damage = Callable[[Path], None]


@dataclass(frozen=True)
class Location:
    segment: Path
    offset: int
    end: int


def locate(directory: Path) -> dict[int, Location]:
    """Where every record's frame lies, read from the undamaged journal."""
    found = {}
    for _, path in list_segments(OsFileOps(), str(directory)):
        scan = scan_segment(Path(path).read_bytes(), path)
        ends = [*scan.offsets[1:], scan.size] if scan.offsets else []
        for record, offset, end in zip(scan.records, scan.offsets, ends, strict=True):
            found[record.seq] = Location(Path(path), offset, end)
    return found


# -- damage functions: each takes the journal directory ----------------------------------------


def intact(directory: Path) -> None:
    del directory


def truncate_tail(n: int) -> Damage:
    def damage(directory: Path) -> None:
        segment = newest_segment(directory)
        data = segment.read_bytes()
        segment.write_bytes(data[: len(data) - n])

    return damage


def append_bytes(extra: bytes) -> Damage:
    def damage(directory: Path) -> None:
        with newest_segment(directory).open("ab") as handle:
            handle.write(extra)

    return damage


def flip_bit(seq: int, byte: int, bit: int = 0) -> Damage:
    """Flip one bit, ``byte`` bytes into the frame of record ``seq``."""

    def damage(directory: Path) -> None:
        where = locate(directory)[seq]
        data = bytearray(where.segment.read_bytes())
        data[where.offset + byte] ^= 1 << bit
        where.segment.write_bytes(bytes(data))

    return damage


def zero_record(seq: int) -> Damage:
    """The file kept its length but the record's blocks never reached the disk."""

    def damage(directory: Path) -> None:
        where = locate(directory)[seq]
        data = bytearray(where.segment.read_bytes())
        data[where.offset : where.end] = bytes(where.end - where.offset)
        where.segment.write_bytes(bytes(data))

    return damage


def remove_record(seq: int) -> Damage:
    def damage(directory: Path) -> None:
        where = locate(directory)[seq]
        data = where.segment.read_bytes()
        where.segment.write_bytes(data[: where.offset] + data[where.end :])

    return damage


def swap_records(first: int, second: int) -> Damage:
    def damage(directory: Path) -> None:
        places = locate(directory)
        a, b = places[first], places[second]
        data = a.segment.read_bytes()
        a_bytes, b_bytes = data[a.offset : a.end], data[b.offset : b.end]
        a.segment.write_bytes(data[: a.offset] + b_bytes + a_bytes + data[b.end :])

    return damage


def flip_segment_header(index: int) -> Damage:
    def damage(directory: Path) -> None:
        path = Path(list_segments(OsFileOps(), str(directory))[index][1])
        data = bytearray(path.read_bytes())
        data[20] ^= 0x10
        path.write_bytes(bytes(data))

    return damage


def delete_segment(index: int) -> Damage:
    def damage(directory: Path) -> None:
        Path(list_segments(OsFileOps(), str(directory))[index][1]).unlink()

    return damage


# -- the one checker ---------------------------------------------------------------------------


def check_recovery(
    tmp_path: Path,
    *,
    records: int,
    damage: Damage,
    survivors: int | None = None,
    corrupt_seq: int | None = None,
    corrupt_offset: int | None = None,
    segment_max_bytes: int = 1 << 20,
    durability: str = "none",
) -> None:
    """Write ``records`` commits, damage them, and check what opening the journal does.

    With ``survivors``: recovery yields exactly commits 1..survivors, cutting the damaged tail
    into a .broken file, and the next append continues at survivors + 1 and survives reopening.
    With ``corrupt_seq``: opening fails with CorruptRecord naming that seq and the offset of
    its frame (or ``corrupt_offset``), and changes nothing on disk.
    """
    directory = tmp_path / "journal"
    write_records(directory, records, segment_max_bytes=segment_max_bytes, durability=durability)
    places = locate(directory)
    damage(directory)
    if corrupt_seq is not None:
        before = {p.name: p.read_bytes() for p in directory.iterdir()}
        with pytest.raises(CorruptRecord) as caught:
            open_journal(directory, segment_max_bytes=segment_max_bytes)
        error = caught.value
        want_offset = places[corrupt_seq].offset if corrupt_offset is None else corrupt_offset
        assert (error.seq, error.offset) == (corrupt_seq, want_offset)
        assert f"offset {want_offset}" in str(error) and f"seq {corrupt_seq}" in str(error)
        assert f"qrmd journal repair {directory} --force" in str(error)
        assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
        return
    assert survivors is not None
    tail = newest_segment(directory)
    damaged_size = tail.stat().st_size
    journal, recovery = open_journal(
        directory, segment_max_bytes=segment_max_bytes, durability=durability
    )
    with journal:
        assert_holds_exactly(recovery.records, 1, survivors)
        if recovery.truncated_bytes:
            assert recovery.broken_path == f"{tail}.broken"
            cut = Path(recovery.broken_path).read_bytes()
            assert len(cut) == recovery.truncated_bytes == damaged_size - tail.stat().st_size
        else:
            assert recovery.broken_path is None and tail.stat().st_size == damaged_size
        assert journal.append(cause_of(survivors + 1), events_of(survivors + 1)) == survivors + 1
    _, again = open_journal(directory, read_only=True)
    assert again.truncated_bytes == 0
    assert_holds_exactly(again.records, 1, survivors + 1)


@pytest.mark.parametrize(
    ("records", "damage", "survivors"),
    [
        pytest.param(10, intact, 10, id="an intact journal recovers every record"),
        pytest.param(0, intact, 0, id="an empty journal recovers nothing"),
        pytest.param(10, truncate_tail(1), 9, id="last record missing its last byte is cut"),
        pytest.param(10, truncate_tail(40), 9, id="last record cut inside its payload is cut"),
        pytest.param(10, append_bytes(b"QRJ"), 10, id="half a magic after the last record is cut"),
        pytest.param(
            10, append_bytes(b"\x00" * 4096), 10, id="a zero-filled block at the end is cut"
        ),
        pytest.param(10, append_bytes(b"garbage"), 10, id="garbage after the last record is cut"),
        pytest.param(10, zero_record(10), 9, id="last record zeroed by a crash is cut"),
        pytest.param(
            10, flip_bit(10, 30), 9, id="bit flip in the last record's payload is a torn tail"
        ),
        pytest.param(
            10, flip_bit(10, 5), 9, id="bit flip in the last record's length is a torn tail"
        ),
        pytest.param(
            10, flip_bit(10, 13), 9, id="bit flip in the last record's header CRC is a torn tail"
        ),
        pytest.param(1, flip_bit(1, 0), 0, id="the only record damaged leaves an empty journal"),
    ],
)
@pytest.mark.parametrize("durability", ["always", "none"])
def test_tail_damage_recovers_the_complete_records(
    tmp_path: Path, records: int, damage: Damage, survivors: int, durability: str
) -> None:
    check_recovery(
        tmp_path, records=records, damage=damage, survivors=survivors, durability=durability
    )


@pytest.mark.parametrize(
    ("damage", "corrupt_seq"),
    [
        pytest.param(flip_bit(5, 30), 5, id="bit flip in a middle record's payload"),
        pytest.param(flip_bit(5, 5), 5, id="bit flip in a middle record's length"),
        pytest.param(flip_bit(1, 0), 1, id="bit flip in the first record's magic"),
        pytest.param(flip_bit(9, 20, 7), 9, id="bit flip in the record before the last"),
        pytest.param(zero_record(3), 3, id="a middle record zeroed"),
        pytest.param(remove_record(5), 5, id="a middle record cut out leaves a sequence gap"),
        pytest.param(swap_records(4, 5), 4, id="two records swapped are out of sequence"),
    ],
)
def test_damage_before_the_tail_fails_loudly(
    tmp_path: Path, damage: Damage, corrupt_seq: int
) -> None:
    check_recovery(tmp_path, records=10, damage=damage, corrupt_seq=corrupt_seq)


def test_damaged_segment_header_is_corruption_at_offset_0(tmp_path: Path) -> None:
    check_recovery(
        tmp_path, records=10, damage=flip_segment_header(0), corrupt_seq=1, corrupt_offset=0
    )


# With 1 KiB segments, 60 records make several segments.
MULTI = 60


def test_damage_at_the_end_of_an_older_segment_is_not_a_tail(tmp_path: Path) -> None:
    directory = tmp_path / "probe"
    write_records(directory, MULTI, segment_max_bytes=1024)
    second_first = list_segments(OsFileOps(), str(directory))[1][0]
    check_recovery(
        tmp_path,
        records=MULTI,
        damage=truncate_tail_of_segment(0, 3),
        corrupt_seq=second_first - 1,
        segment_max_bytes=1024,
    )


def truncate_tail_of_segment(index: int, n: int) -> Damage:
    def damage(directory: Path) -> None:
        path = Path(list_segments(OsFileOps(), str(directory))[index][1])
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - n])

    return damage


def test_a_deleted_middle_segment_is_a_gap(tmp_path: Path) -> None:
    directory = tmp_path / "probe"
    write_records(directory, MULTI, segment_max_bytes=1024)
    firsts = [first for first, _ in list_segments(OsFileOps(), str(directory))]
    check_recovery(
        tmp_path,
        records=MULTI,
        damage=delete_segment(1),
        corrupt_seq=firsts[1],
        corrupt_offset=0,
        segment_max_bytes=1024,
    )


def test_a_torn_tail_in_the_newest_of_several_segments_is_cut(tmp_path: Path) -> None:
    check_recovery(
        tmp_path,
        records=MULTI,
        damage=truncate_tail(2),
        survivors=MULTI - 1,
        segment_max_bytes=1024,
    )


def test_last_record_cut_at_every_byte_offset(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    write_records(pristine, 6)
    where = locate(pristine)[6]
    data = where.segment.read_bytes()
    for cut in range(where.end - where.offset):
        directory = tmp_path / f"cut-{cut}"
        shutil.copytree(pristine, directory)
        (directory / where.segment.name).write_bytes(data[: where.offset + cut])
        journal, recovery = open_journal(directory)
        with journal:
            assert_holds_exactly(recovery.records, 1, 5)
            assert recovery.truncated_bytes == cut, cut
            if cut:
                assert (
                    Path(str(recovery.broken_path)).read_bytes()
                    == data[where.offset : where.offset + cut]
                )
            assert journal.append(cause_of(6), events_of(6)) == 6
        assert (directory / where.segment.name).read_bytes() == data, cut


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Location]]:
    directory = tmp_path_factory.mktemp("flips") / "journal"
    write_records(directory, 12)
    return directory, locate(directory)


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_single_bit_flips(pristine: tuple[Path, dict[int, Location]], data: st.DataObject) -> None:
    source, places = pristine
    seq = data.draw(st.integers(1, 12), label="seq")
    where = places[seq]
    byte = data.draw(st.integers(0, where.end - where.offset - 1), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch) / "journal"
        shutil.copytree(source, directory)
        flip_bit(seq, byte, bit)(directory)
        if seq == 12:
            journal, recovery = open_journal(directory)
            journal.close()
            assert_holds_exactly(recovery.records, 1, 11)
            assert recovery.torn_tail is not None and recovery.torn_tail.offset == where.offset
        else:
            with pytest.raises(CorruptRecord) as caught:
                open_journal(directory)
            assert (caught.value.seq, caught.value.offset) == (seq, where.offset)
            assert caught.value.path == str(directory / where.segment.name)


def test_a_read_only_open_reports_a_torn_tail_and_changes_nothing(tmp_path: Path) -> None:
    write_records(tmp_path, 8)
    truncate_tail(9)(tmp_path)
    segment = newest_segment(tmp_path)
    before = segment.read_bytes()
    _, recovery = open_journal(tmp_path, read_only=True)
    assert_holds_exactly(recovery.records, 1, 7)
    assert recovery.torn_tail is not None and recovery.torn_tail.seq == 8
    assert recovery.truncated_bytes == recovery.torn_tail.cut_bytes > 0
    assert recovery.broken_path is None and segment.read_bytes() == before
    assert not list(tmp_path.glob("*.broken"))
