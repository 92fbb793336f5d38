"""``qrmd journal show --follow`` against a live writer: every seq once, in order.

The real CLI runs as a subprocess while the real journal writer appends from a thread at a
steady rate, through segment rotations, two checkpoints after which retention deletes the old
segments, and a restart of the writer (a new ``Journal.open`` on the same directory) that
cuts the torn tail a crash mid-write left. Nothing waits a fixed time for correctness: each
step waits for the follower's output to reach a seq, with a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from journal import Journal, Retention
from journal.framing import encode_frame
from journal.records import Record, encode_record
from tests.journal.helpers import FakeClock, cause_of, events_of, newest_segment, open_journal

REPO = Path(__file__).resolve().parents[3]
#: Long enough for a loaded 2-core machine; a passing run takes a few seconds.
TIMEOUT_S = 90.0
#: Small segments: the steady appends rotate every few dozen records.
SEGMENT_BYTES = 4096
#: Everything recovery does not need is deleted after each checkpoint.
NO_HISTORY = Retention(max_bytes=0, max_age_s=None)


class FollowerOutput:
    """The seqs a ``--follow --json`` subprocess printed, collected by a reader thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seqs: list[int] = []
        self._changed = threading.Condition()
        self._process = process
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with self._changed:
                self.seqs.append(json.loads(line)["seq"])
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_seq(self, seq: int) -> None:
        """Block until the follower printed ``seq`` (or a later one); fail after the timeout."""
        with self._changed:
            reached = self._changed.wait_for(
                lambda: (self.seqs and self.seqs[-1] >= seq) or self._process.poll() is not None,
                timeout=TIMEOUT_S,
            )
            assert reached and self.seqs and self.seqs[-1] >= seq, (
                f"the follower printed up to {self.seqs[-1:] or 'nothing'}, not seq {seq}"
            )

    def close(self) -> tuple[int, str]:
        self._process.send_signal(signal.SIGINT)
        try:
            code = self._process.wait(timeout=TIMEOUT_S)
        finally:
            self._process.kill()
        self._reader.join(timeout=TIMEOUT_S)
        assert self._process.stderr is not None
        return code, self._process.stderr.read()


class SteadyWriter:
    """The real journal writer appending one record every ``period_s`` from a thread."""

    def __init__(self, directory: Path, period_s: float = 0.002) -> None:
        self.directory = directory
        self.period_s = period_s
        self.journal = self._open()
        self.last_seq = self.journal.last_seq

    def _open(self) -> Journal:
        journal, _ = open_journal(
            self.directory,
            segment_max_bytes=SEGMENT_BYTES,
            retention=NO_HISTORY,
            clock=FakeClock(),
        )
        return journal

    def append(self, count: int) -> None:
        for _ in range(count):
            n = self.journal.last_seq + 1
            assert self.journal.append(cause_of(n), events_of(n)) == n
            self.last_seq = n
            time.sleep(self.period_s)  # the rate of the daemon's appends, not a wait

    def append_while(self, going: Callable[[], bool]) -> None:
        while going():
            self.append(1)

    def checkpoint(self) -> set[str]:
        """Write a checkpoint at the newest record; the segment files retention deleted."""
        before = set(os.listdir(self.directory))
        self.journal.write_checkpoint(self.last_seq, {"state": self.last_seq})
        return {name for name in before - set(os.listdir(self.directory)) if name.endswith(".seg")}

    def crash_mid_write_and_restart(self) -> None:
        """Close, leave half of the next record's frame at the tail, and open again."""
        self.journal.close()
        seq = self.last_seq + 1
        frame = encode_frame(encode_record(Record(seq, 0.0, 0.0, cause_of(seq), events_of(seq))))
        with open(newest_segment(self.directory), "ab") as segment:
            segment.write(frame[: len(frame) // 2])
        self.journal = self._open()
        assert self.journal.last_seq == self.last_seq


def start_follower(directory: Path) -> FollowerOutput:
    process = subprocess.Popen(
        [sys.executable, "-m", "qrmd", "journal", "show", str(directory), "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return FollowerOutput(process)


def test_the_cli_follower_prints_every_seq_once_through_rotation_retention_and_a_restart(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    writer = SteadyWriter(directory)
    writer.append(1500)
    follower = start_follower(directory)
    try:
        # The daemon keeps appending while the follower starts and shows what is there.
        started = threading.Event()
        appending = threading.Thread(
            target=writer.append_while, args=(lambda: not started.is_set(),)
        )
        appending.start()
        try:
            follower.wait_for_seq(1500)
        finally:
            started.set()
            appending.join()
        follower.wait_for_seq(writer.last_seq)
        # Two checkpoints, each once the follower has read past it: the second lets
        # retention delete the segments the first covers, which the follower already read.
        writer.append(200)
        follower.wait_for_seq(writer.last_seq)
        assert writer.checkpoint() == set()
        writer.append(200)
        follower.wait_for_seq(writer.last_seq)
        assert writer.checkpoint() != set()
        writer.append(100)
        follower.wait_for_seq(writer.last_seq)
        writer.crash_mid_write_and_restart()
        writer.append(300)
        follower.wait_for_seq(writer.last_seq)
    finally:
        code, err = follower.close()
        writer.journal.close()
    assert follower.seqs == list(range(1, writer.last_seq + 1)), (
        f"printed twice: {sorted({s for s in follower.seqs if follower.seqs.count(s) > 1})[:10]}"
    )
    assert err == "" and code == 130
