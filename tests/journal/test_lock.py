"""One writer per journal directory, even when the lock file's name is taken away.

The exclusion is a ``flock`` on the journal directory's own descriptor (``journal.lock``), so
deleting or replacing a file in the directory cannot let a second writer in. The second writer
is a real second process: ``flock`` excludes open file descriptions, and a test within one
process would prove less than the kernel's rule between two.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from journal import JournalError
from tests.journal.helpers import NODE, TOPOLOGY, open_journal

REPO = Path(__file__).resolve().parents[2]

#: A second writer in its own process: prints "opened" or the refusal, and exits.
SECOND_WRITER = textwrap.dedent(
    """
    import sys
    from journal import Journal, JournalError
    try:
        journal, _ = Journal.open(sys.argv[1], node_name=sys.argv[2],
                                  topology_fingerprint=sys.argv[3], durability="none")
    except JournalError as exc:
        print("refused:", exc)
        sys.exit(3)
    journal.append({"rpc": "second"}, [])
    journal.close()
    print("opened")
    """
)


def _second_writer(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SECOND_WRITER, str(directory), NODE, TOPOLOGY],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda d: None, id="a second process is refused while the first writes"),
        pytest.param(
            lambda d: (d / "journal.lock").unlink(missing_ok=True),
            id="a second process is refused after journal.lock was deleted",
        ),
        pytest.param(
            lambda d: (
                (d / "journal.lock").unlink(missing_ok=True),
                (d / "journal.lock").write_bytes(b""),
            ),
            id="a second process is refused after journal.lock was replaced",
        ),
    ],
)
def test_a_second_writer_process_is_refused(tmp_path: Path, tamper) -> None:
    journal, _ = open_journal(tmp_path)
    with journal:
        journal.append({"rpc": "first"}, [])
        tamper(tmp_path)
        second = _second_writer(tmp_path)
        assert second.returncode == 3, second.stdout + second.stderr
        assert "in use by another process" in second.stdout
        assert str(tmp_path) in second.stdout
        # The first writer still appends, and nothing of the second's reached the journal.
        assert journal.append({"rpc": "first"}, []) == 2
    reopened, recovery = open_journal(tmp_path, read_only=True)
    reopened.close()
    assert [r.cause["rpc"] for r in recovery.records] == ["first", "first"]


def test_the_lock_is_released_when_the_writer_closes(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)
    journal.close()
    second = _second_writer(tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr


def test_a_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)
    with journal, pytest.raises(JournalError, match="in use by another process"):
        (tmp_path / "journal.lock").unlink(missing_ok=True)
        open_journal(tmp_path)
