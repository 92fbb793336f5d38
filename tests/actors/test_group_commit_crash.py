"""A process killed between a group's write and its fsync: after restart, every call answered
OK is in the state and no call answered failed is (DESIGN.md, the commit protocol; group
commit, ``CommandGroup``). The writer is ``group_crash_writer.py``: groups whose fsync
succeeds, groups whose fsync fails (their calls answered failed, their records cut back), and
the group the kill lands in, written and never synced nor answered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from actors.state_store import StateStoreCore, StoreConfig
from tests.topologies import SYNTH_16_2_4

WRITER = Path(__file__).with_name("group_crash_writer.py")
ROOT = Path(__file__).resolve().parents[2]


def run_until_hung(directory: Path, hang_at: int) -> list[str]:
    """The writer's answers, up to the group hung in its fsync; the writer is then killed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(WRITER), str(directory), str(hang_at)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    assert process.stdout is not None
    answers = []
    try:
        for raw in process.stdout:
            line = raw.decode().strip()
            if line == "syncing":
                break
            answers.append(line)
        else:
            pytest.fail(f"the writer ended before its group {hang_at} hung: {answers[-3:]}")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    return answers


@pytest.mark.parametrize("hang_at", [3, 5, 9], ids=lambda g: f"killed in group {g}'s fsync")
def test_no_answered_call_is_lost_and_no_failed_call_is_kept_after_a_kill_mid_group(
    tmp_path: Path, hang_at: int
) -> None:
    answers = run_until_hung(tmp_path, hang_at)
    allocated_ok = {line.split()[-1] for line in answers if line.startswith("ok allocate")}
    removed_ok = {line.split()[-1] for line in answers if line.startswith("ok remove")}
    failed = {line.split()[-1] for line in answers if line.startswith("failed allocate")}
    # The hung group's RemovePod was written, never answered: it may land or not.
    last = answers[-1]
    in_flight = {last.split()[-1]} if last.startswith("sent remove") else set()
    failed_removals = {line.split()[-1] for line in answers if line.startswith("failed remove")}
    assert failed, "some group's fsync failed, so some calls answered failed"
    assert removed_ok, "some RemovePod answered OK"
    store = StateStoreCore.open(StoreConfig(str(tmp_path), "node-a"), SYNTH_16_2_4)
    try:
        pods = set(store.snapshot.state.cpu.pods)
    finally:
        store.close(checkpoint=False)
    assert allocated_ok - removed_ok - in_flight <= pods, "an Allocate answered OK was lost"
    assert not failed & pods, "an Allocate answered failed is in the recovered state"
    assert not removed_ok & pods, "a pod whose RemovePod answered OK came back"
    assert failed_removals - removed_ok - in_flight <= pods, "a failed RemovePod was kept"
