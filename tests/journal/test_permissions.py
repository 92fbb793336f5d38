"""The journal's directories are 0700 and its files 0600 whatever the umask (DESIGN.md, owner-only).

Run under ``umask 000``, the most permissive an operator's shell can leave: every mode is what
the journal sets, not what the umask lets through. Directories the journal did not create keep
their mode.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal import repair
from tests.journal.helpers import newest_segment, open_journal, write_records


@pytest.fixture
def umask_000() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_000")
def test_the_state_directory_and_its_parents_are_owner_only(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)  # not the journal's: must stay as it is
    state = tmp_path / "var" / "lib" / "qrmd"
    journal, _ = open_journal(state, checkpoint_every_records=2)
    with journal:
        for n in range(3):
            journal.append({"n": n}, [])
        journal.write_checkpoint(3, {"state": 3})
    assert {p.name: oct(mode(p)) for p in (tmp_path / "var", tmp_path / "var" / "lib", state)} == {
        "var": "0o700",
        "lib": "0o700",
        "qrmd": "0o700",
    }
    assert mode(tmp_path) == 0o755
    files = {p.name: oct(mode(p)) for p in state.iterdir()}
    assert files and set(files.values()) == {"0o600"}, files


@pytest.mark.usefixtures("umask_000")
def test_a_cut_tail_is_kept_owner_only(tmp_path: Path) -> None:
    write_records(tmp_path / "state", 3)
    segment = newest_segment(tmp_path / "state")
    segment.write_bytes(segment.read_bytes()[:-3])
    report = repair(str(tmp_path / "state"))
    assert report.applied and report.moved_aside
    assert {oct(mode(Path(dst))) for _, dst in report.moved_aside} == {"0o600"}


@pytest.mark.usefixtures("umask_000")
def test_an_existing_state_directory_of_ours_is_made_owner_only(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    state = tmp_path / "state"
    state.mkdir()
    os.chmod(state, 0o755)  # as a DaemonSet's hostPath may leave it
    write_records(state, 1)
    assert mode(state) == 0o700 and mode(tmp_path) == 0o755
