"""Crash-test writer for group commit: the Allocator serves groups of kubelet calls through the
real StateStore, and reports each call's answer (``test_group_commit_crash.py``).

Run as ``python tests/actors/group_crash_writer.py DIR HANG_AT``. Group ``g`` holds Allocates
of three new shared pods and, from the second group on, RemovePod of a pod an earlier group
placed. Every third group's fsync fails (EIO, once: the cut-back's own fsync succeeds), so its
calls answer failed; group ``HANG_AT`` writes its records, prints ``syncing`` and hangs in its
fsync until the test kills the process, so its calls are never answered. Each answer is
printed as ``ok|failed allocate|remove POD`` with ``os.write``, after the Allocator returned
it (and ``sent remove POD`` before its group is served: a removal in flight may land): nothing
sits in a buffer when the process dies.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from actors.allocator import AllocatorCore
from actors.allocator_messages import Allocate, CommandGroup, RemovePod, StartPolicy
from actors.state_store import InTurnCommitter, StateStoreCore, StoreConfig
from journal.fileops import OsFileOps
from tests.actors.test_allocator import CTX, T0
from tests.policy.decision_fixtures import request
from tests.topologies import SYNTH_16_2_4


class GroupFaults(OsFileOps):
    """Real files; the next fsync fails once (``fail``) or hangs (``hang``) when told."""

    def __init__(self) -> None:
        self.next_fsync = "ok"

    def fsync(self, fd: int) -> None:
        mode, self.next_fsync = self.next_fsync, "ok"
        if mode == "fail":
            raise OSError(errno.EIO, "injected fsync failure")
        if mode == "hang":
            say("syncing")
            time.sleep(600)
        super().fsync(fd)


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


def main() -> None:
    directory, hang_at = sys.argv[1], int(sys.argv[2])
    fs = GroupFaults()
    config = StoreConfig(directory=directory, node_name="node-a", durability="always")
    store = StateStoreCore.open(config, SYNTH_16_2_4, fs=fs)
    committer = InTurnCommitter(store)
    core = AllocatorCore(committer.latest(), CTX, committer, lambda: T0)
    core.handle(StartPolicy())
    placed: list[str] = []
    for group in range(hang_at + 1):
        pods = [f"pod-{group}-{i}" for i in range(3)]
        commands: list[Allocate | RemovePod] = [Allocate(request(p, cpu=0.1)) for p in pods]
        removed = placed.pop(0) if placed else None
        if removed is not None:
            commands.append(RemovePod(removed))
        if group == hang_at:
            fs.next_fsync = "hang"
        elif group % 3 == 1:
            fs.next_fsync = "fail"
        if removed is not None:
            say(f"sent remove {removed}")
        outcomes = core.handle(CommandGroup(tuple(commands)))
        for command, outcome in zip(commands, outcomes, strict=True):
            verdict = "ok" if outcome.error is None else "failed"
            if isinstance(command, Allocate):
                pod = command.request.pod_uid
                say(f"{verdict} allocate {pod}")
                if verdict == "ok":
                    placed.append(pod)
            else:
                say(f"{verdict} remove {command.pod_uid}")
                if verdict == "failed":
                    placed.insert(0, command.pod_uid)


if __name__ == "__main__":
    main()
