"""Rolling back to an older qrmd (docs/running.md, "Roll back to the previous qrmd release"):
a journal holding a record of a newer schema is refused at start with one line naming both
versions, and nothing in it is cut or changed — the newer release can still read all of it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.daemon_process import REPO, SYNTH_16_2_4

pytestmark = pytest.mark.slow

FIXTURE = REPO / "tests" / "fixtures" / "journal-newer-schema"


def test_an_older_qrmd_refuses_a_newer_journal_and_changes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(FIXTURE / "0000000000000001.seg", state)
    before = (state / "0000000000000001.seg").read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "run", "--topology", SYNTH_16_2_4,
         "--reserved-cpu-cores", "2", "--state-dir", str(state),
         "--socket-dir", str(tmp_path / "k"), "--metrics-address", "off"],
        env=dict(os.environ, PYTHONPATH=str(REPO), NODE_NAME="older-node"),
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2
    assert "record schema version 2 is newer than this qrmd reads (1)" in done.stderr
    assert "read the journal with a newer qrmd" in done.stderr
    # Start-up log lines (the open-file limit, the state directory's mode) may come first;
    # the refusal itself is said once, on one line.
    refusal = [line for line in done.stderr.splitlines() if "newer than this qrmd" in line]
    assert len(refusal) == 1
    assert (state / "0000000000000001.seg").read_bytes() == before
    assert not list(state.glob("*.broken"))
