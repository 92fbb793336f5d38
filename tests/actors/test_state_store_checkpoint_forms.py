"""The StateStore opens checkpoints of both forms of the CPU section's containers: the columns
it writes and the list of entry maps checkpoints held before; ill-shaped columns stop recovery
naming the checkpoint file and the column, as an undecodable checkpoint always did. With
``checkpoint_form="entries"`` (``--checkpoint-form``, for a rollback) it writes the list of
entry maps again, byte for byte as the releases before the columns did."""

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
from journal.framing import decode_frame
from journal.records import pack, unpack
from journal.syncer import Syncer
from policy.state.replay import ReplayError
from tests.actors.store_helpers import cause, open_store, share_pool, shared_container
from tests.journal.helpers import FakeClock
from tests.policy.state.checkpoint_fixture_state import fixture_events, fixture_state
from tests.topologies import SYNTH_16_2_4

OLD_FORM = Path(__file__).parents[1] / "fixtures" / "checkpoint-entry-maps"


def newest_checkpoint(directory: Path) -> str:
    return list_checkpoints(OsFileOps(), str(directory))[-1][1]


def written_store(directory: Path, **settings: Any) -> StateStoreCore:
    store = open_store(directory, **settings)
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


def test_the_entries_form_writes_entry_maps_that_open_to_the_state_it_closed_with(
    tmp_path: Path,
) -> None:
    store = written_store(tmp_path / "j", checkpoint_form="entries")
    live = store.snapshot.state
    store.close()
    saved = load_checkpoint(OsFileOps(), newest_checkpoint(tmp_path / "j"))
    containers = saved.state["sections"]["cpu"]["containers"]
    assert isinstance(containers, list) and len(containers) == 3
    assert all(isinstance(entry, dict) for entry in containers)
    assert [entry["pod_uid"] for entry in containers] == ["pod-a", "pod-b", "pod-c"]
    reopened = open_store(tmp_path / "j")  # a columns store reads it too
    assert reopened.snapshot.state == live
    assert reopened.snapshot.state.cpu.indexes == live.cpu.indexes
    reopened.close(checkpoint=False)


def state_bytes(path: str) -> bytes:
    """A checkpoint file's state payload, as written (the frame after the header's)."""
    data = OsFileOps().read_file(path)
    _, header_end = decode_frame(data, 0)
    return decode_frame(data, header_end)[0]


def keys_ordered_as(value: Any, model: Any) -> Any:
    """``value`` with every map's keys in ``model``'s order (the same keys, or it fails).

    A map's key order follows the hash order of the ``immutables.Map`` it was written from,
    which changes with ``PYTHONHASHSEED`` (in the releases before the columns too); msgpack
    readers ignore it, so the bytes are compared with the fixture's order."""
    if isinstance(value, dict):
        assert isinstance(model, dict) and sorted(value) == sorted(model)
        return {key: keys_ordered_as(value[key], model[key]) for key in model}
    if isinstance(value, list):
        assert isinstance(model, list) and len(value) == len(model)
        return [keys_ordered_as(v, m) for v, m in zip(value, model, strict=True)]
    return value


def test_the_entries_form_writes_the_fixture_state_as_the_release_before_the_columns_did(
    tmp_path: Path,
) -> None:
    # The fixture was written by qrmd before the columns: a release of then reads these bytes.
    config = StoreConfig(
        str(tmp_path / "j"), "fixture-node", durability="none", checkpoint_form="entries"
    )
    store = StateStoreCore.open(config, SYNTH_16_2_4, clock=FakeClock())
    store.commit(fixture_events(), cause("Fixture"))
    assert store.snapshot.state == fixture_state()
    store.close()
    old = state_bytes(newest_checkpoint(OLD_FORM))
    written = unpack(state_bytes(newest_checkpoint(tmp_path / "j")))
    assert pack(keys_ordered_as(written, unpack(old)), "state") == old


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
