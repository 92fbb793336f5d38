"""The StateStore opens checkpoints of both forms of the CPU section's containers: the columns
it writes and the list of entry maps checkpoints held before; ill-shaped columns stop recovery
naming the checkpoint file and the column, as an undecodable checkpoint always did."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from actors.state_store import StateStoreCore, StoreConfig
from journal.checkpoints import list_checkpoints, load_checkpoint, write_checkpoint_file
from journal.fileops import OsFileOps
from journal.records import pack
from journal.syncer import Syncer
from policy.state.replay import ReplayError
from tests.actors.store_helpers import cause, open_store, share_pool, shared_container
from tests.journal.helpers import FakeClock
from tests.policy.state.checkpoint_fixture_state import fixture_state
from tests.topologies import SYNTH_16_2_4

OLD_FORM = Path(__file__).parents[1] / "fixtures" / "checkpoint-entry-maps"


def newest_checkpoint(directory: Path) -> str:
    return list_checkpoints(OsFileOps(), str(directory))[-1][1]


def written_store(directory: Path) -> StateStoreCore:
    store = open_store(directory)
    store.commit((share_pool(),), cause("Start"))
    for pod in ("pod-a", "pod-b", "pod-c"):
        store.commit((shared_container(pod),), cause("Allocate", pod, "app"))
    return store


def test_the_store_writes_columns_and_opens_them_to_the_state_it_closed_with(
    tmp_path: Path,
) -> None:
    store = written_store(tmp_path / "j")
    live = store.snapshot.state
    store.close()
    saved = load_checkpoint(OsFileOps(), newest_checkpoint(tmp_path / "j"))
    assert isinstance(saved.state["sections"]["cpu"]["containers"], dict)
    reopened = open_store(tmp_path / "j")
    assert reopened.snapshot.state == live
    assert reopened.snapshot.state.cpu.indexes == live.cpu.indexes
    reopened.close(checkpoint=False)


def test_a_checkpoint_written_before_the_columns_opens_to_its_state(tmp_path: Path) -> None:
    shutil.copytree(OLD_FORM, tmp_path / "j")
    saved = load_checkpoint(OsFileOps(), newest_checkpoint(tmp_path / "j"))
    assert isinstance(saved.state["sections"]["cpu"]["containers"], list)
    config = StoreConfig(str(tmp_path / "j"), "fixture-node", durability="none")
    store = StateStoreCore.open(config, SYNTH_16_2_4, clock=FakeClock())
    assert store.recovery.checkpoint_seq == 12
    assert store.snapshot.state == fixture_state()
    store.close()  # and the next checkpoint, in columns, holds the same state
    reopened = StateStoreCore.open(config, SYNTH_16_2_4, clock=FakeClock())
    assert reopened.snapshot.state == fixture_state()
    reopened.close(checkpoint=False)


def rewrite(path: str, state: dict[str, Any]) -> None:
    """The checkpoint at ``path`` with another state, its frames intact."""
    fs = OsFileOps()
    header = load_checkpoint(fs, path).header
    os.remove(path)
    payload = pack(state, "state")
    replaced = dataclasses.replace(header, state_bytes=len(payload))
    syncer = Syncer(fs, FakeClock(), enabled=False)
    write_checkpoint_file(fs, syncer, os.path.dirname(path), replaced, payload)


def test_ill_shaped_columns_stop_recovery_naming_the_file_and_the_column(tmp_path: Path) -> None:
    written_store(tmp_path / "j").close()
    path = newest_checkpoint(tmp_path / "j")
    state = load_checkpoint(OsFileOps(), path).state
    state["sections"]["cpu"]["containers"]["pod_name"][1] = 99
    rewrite(path, state)
    with pytest.raises(ReplayError) as err:
        open_store(tmp_path / "j")
    assert path in str(err.value)
    assert "sections.cpu.containers.pod_name[1]: 99 is not an index below" in str(err.value)
