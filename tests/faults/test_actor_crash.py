"""The StateStore actor crashes in the middle of a commit while four clients commit (the
fault suite; DESIGN.md, the commit protocol, step 5).

The crash comes inside the journal's write, after part of the record's frame reached the file:
what a thread dying mid-write leaves, with nothing below it cleaning up. The Supervisor sees
the actor dead and restarts it; the restarted store recovers from disk (the half frame is a
torn tail, cut); commits asked meanwhile fail as unavailable, never with stale answers. After
a final restart from disk the state holds every acknowledged commit and none of the failed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pykka

from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import Commit, GetSnapshot
from actors.supervisor import ChildSpec, Supervisor
from journal.fileops import OsFileOps
from tests.actors.store_helpers import NODE, TOPO, share_pool, shared_container
from tests.faults.ledger import Ledger

CLIENTS = 4
COMMITS_EACH = 40
CRASH_AT_WRITE = 60  # some way into the load


class ThreadDeath(BaseException):
    """A thread dying mid-write: a ``BaseException``, so nothing below catches it to clean up."""


class CrashingFileOps(OsFileOps):
    """Real files; the ``crash_at``-th write of the whole test writes part of its frame, dies."""

    def __init__(self, crash_at: int) -> None:
        self.crash_at = crash_at
        self.writes = 0
        self.crashed = threading.Event()

    def write(self, fd: int, data: bytes) -> int:
        self.writes += 1
        if self.writes == self.crash_at:
            os.write(fd, data[: len(data) // 3])
            self.crashed.set()
            raise ThreadDeath("the store's thread died in the middle of a write")
        return super().write(fd, data)


class ActorCrashedError(Exception):
    """What the asker of the crashed commit is told (pykka hands an ask's error back)."""


class CrashableStore(StateStoreActor):
    """The real store actor; a ``ThreadDeath`` in a commit kills the actor as a crash does."""

    def on_receive(self, message: Any) -> Any:
        try:
            return super().on_receive(message)
        except ThreadDeath:
            # As pykka does with a handler that fails outside an ask: log, unregister, stop,
            # on_failure (which closes the journal without a checkpoint). The asker gets an
            # error; the Supervisor finds the actor dead.
            exc_info = sys.exc_info()
            self._handle_failure(*exc_info)
            self.on_failure(*exc_info)
            raise ActorCrashedError("the state store crashed mid-commit") from None


def test_a_store_crash_mid_commit_under_load_loses_nothing_acknowledged(tmp_path: Path) -> None:
    fs = CrashingFileOps(CRASH_AT_WRITE)
    config = StoreConfig(str(tmp_path), NODE, durability="always", checkpoint_every_records=25)

    def start(_refs: Mapping[str, pykka.ActorRef[Any]]) -> pykka.ActorRef[Any]:
        return CrashableStore.start(lambda: StateStoreCore.open(config, TOPO, fs=fs))

    supervisor = Supervisor(
        [ChildSpec("store", start, lambda ref: ref.ask(GetSnapshot(), timeout=10))],
        poll_interval_s=0.02,
    )
    supervisor.start()
    store = supervisor.ref("store")
    ledger = Ledger()
    store.ask(Commit([share_pool()], {"rpc": "Start", "request": {}}), timeout=10)

    def client(c: int) -> None:
        for n in range(COMMITS_EACH):
            pod = f"pod-{c}-{n}"
            commit = Commit([shared_container(pod)], {"rpc": "Allocate", "request": {"pod": pod}})
            try:
                store.ask(commit, timeout=10)
            except Exception as err:  # unavailable while restarting, or the crashed commit
                ledger.refuse(pod, f"{type(err).__name__}: {err}")
                time.sleep(0.01)  # kubelet backs off before retrying (not waiting for a period)
            else:
                ledger.ack(pod)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert fs.crashed.is_set(), "the load must reach the crash"
        [child] = supervisor.status().children
        assert child.restarts == 1, child
        assert any("ActorCrashedError" in r for r in ledger.reasons.values())
        assert len(ledger.acknowledged) > COMMITS_EACH  # commits went on after the restart
    finally:
        supervisor.stop()
    recovered = StateStoreCore.open(config, TOPO)
    try:
        durable = {entry.pod_uid for entry in recovered.snapshot.state.cpu.entries()}
    finally:
        recovered.close(checkpoint=False)
    ledger.check(durable)
