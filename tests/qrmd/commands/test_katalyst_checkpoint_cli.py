"""``qrmd journal import-katalyst|export-katalyst`` on files and journals (cpu-policy §13)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from journal import OsFileOps, read_records
from journal.lock import lock_directory
from policy.state.katalyst_decode import decode_document
from qrmd.cli import main
from tests.actors.store_helpers import NODE, node_history, open_store
from tests.qrmd.commands.katalyst_fixture import TOPOLOGY_SPEC, file_bytes

FIXTURE = Path(__file__).parents[2] / "fixtures" / "katalyst" / "cpu_plugin_state"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["journal", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def imported(capsys: pytest.CaptureFixture[str], state: Path, file: Path, *extra: str) -> int:
    code, _, _ = run(
        capsys,
        "import-katalyst",
        str(state),
        str(file),
        "--topology",
        TOPOLOGY_SPEC,
        "--node-name",
        NODE,
        *extra,
    )
    return code


def corrupted(tmp_path: Path) -> Path:
    doc = json.loads(FIXTURE.read_bytes())
    doc["pod_entries"]["uid-web"]["app"]["request_quantity"] = 3  # checksum not updated
    path = tmp_path / "corrupted"
    path.write_text(json.dumps(doc))
    return path


def test_the_committed_fixture_is_what_the_spec_layout_gives() -> None:
    if os.environ.get("QRMD_UPDATE_GOLDEN") == "1":
        FIXTURE.write_bytes(file_bytes())
    assert FIXTURE.read_bytes() == file_bytes()


def test_import_then_export_gives_the_reference_file_back_byte_for_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    out = tmp_path / "cpu_plugin_state"
    code, said, _ = run(
        capsys, "export-katalyst", str(state), str(out), "--topology", TOPOLOGY_SPEC
    )
    assert code == 0 and "3 containers" in said
    assert out.read_bytes() == FIXTURE.read_bytes()


def test_the_import_is_one_record_whose_cause_is_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    (record,) = list(read_records(str(state)))
    assert record.cause["command"] == "import-katalyst"
    assert record.cause["checkpoint"] == FIXTURE.read_text()
    assert {e["kind"] for e in record.events} == {"PoolSet", "ContainerAllocated"}


def test_a_corrupted_file_is_refused_with_the_reference_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    code, _, err = run(
        capsys,
        "import-katalyst",
        str(state),
        str(corrupted(tmp_path)),
        "--topology",
        TOPOLOGY_SPEC,
        "--node-name",
        NODE,
    )
    assert code == 2
    assert "could not restore state from checkpoint: checkpoint is corrupted" in err
    assert "--skip-corruption" in err
    assert not (state.exists() and any(read_records(str(state))))


def test_a_corrupted_file_is_accepted_with_skip_corruption(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, corrupted(tmp_path), "--skip-corruption") == 0
    out = tmp_path / "out"
    assert run(capsys, "export-katalyst", str(state), str(out), "--topology", TOPOLOGY_SPEC)[0] == 0
    doc = decode_document(out.read_bytes())
    assert doc["pod_entries"]["uid-web"]["app"]["request_quantity"] == 3
    assert doc["checksum"] != json.loads(FIXTURE.read_bytes())["checksum"]  # rewritten, valid


def test_a_journal_holding_containers_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    for events, cause in node_history(2):
        store.commit(events, cause)
    store.close()
    before = len(list(read_records(str(state))))
    code, _, err = run(
        capsys,
        "import-katalyst",
        str(state),
        str(FIXTURE),
        "--topology",
        TOPOLOGY_SPEC,
        "--node-name",
        NODE,
    )
    assert code == 2 and "already holds CPU state" in err
    assert len(list(read_records(str(state)))) == before


def test_import_takes_the_writer_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    fd = lock_directory(OsFileOps(), str(state))  # as a running qrmd holds it
    try:
        code, _, err = run(
            capsys,
            "import-katalyst",
            str(state),
            str(FIXTURE),
            "--topology",
            TOPOLOGY_SPEC,
            "--node-name",
            NODE,
        )
    finally:
        os.close(fd)
    assert code == 2 and "in use by another process" in err


def test_export_reads_beside_a_lock_holder_and_from_a_read_only_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    fd = lock_directory(OsFileOps(), str(state))
    mode = state.stat().st_mode
    try:
        os.chmod(state, stat.S_IRUSR | stat.S_IXUSR)
        out = tmp_path / "out"
        code, _, err = run(
            capsys, "export-katalyst", str(state), str(out), "--topology", TOPOLOGY_SPEC
        )
    finally:
        os.chmod(state, mode)
        os.close(fd)
    assert code == 0, err
    assert out.read_bytes() == FIXTURE.read_bytes()


def test_export_at_a_seq_gives_the_state_then(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = open_store(state, checkpoint_every_records=3)
    for events, cause in node_history(4):
        store.commit(events, cause)
    store.close(checkpoint=False)
    counts = []
    for seq in ("1", "4", "7"):
        out = tmp_path / f"at-{seq}"
        code, _, err = run(
            capsys,
            "export-katalyst",
            str(state),
            str(out),
            "--seq",
            seq,
            "--topology",
            TOPOLOGY_SPEC,
        )
        assert code == 0, err
        pods = decode_document(out.read_bytes())["pod_entries"]
        counts.append(sum(1 for containers in pods.values() if "" not in containers))
    assert counts == [0, 3, 4]  # start; three pods; four pods + db, one removed
    code, _, err = run(
        capsys,
        "export-katalyst",
        str(state),
        str(tmp_path / "x"),
        "--seq",
        "99",
        "--topology",
        TOPOLOGY_SPEC,
    )
    assert code == 2 and "no record 99" in err


def test_export_refuses_another_topology(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    code, _, err = run(
        capsys,
        "export-katalyst",
        str(state),
        str(tmp_path / "o"),
        "--topology",
        "synthetic:cpus=8,sockets=1,numas=1",
    )
    assert code == 2 and "was written for topology" in err


def test_a_journal_holding_only_start_up_pools_takes_the_file_pools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    store = open_store(state)
    events, cause = node_history(0)[0]  # qrmd run's start-up: pools, no container
    store.commit(events, cause)
    store.close()
    assert imported(capsys, state, FIXTURE) == 0
    out = tmp_path / "out"
    assert run(capsys, "export-katalyst", str(state), str(out), "--topology", TOPOLOGY_SPEC)[0] == 0
    assert out.read_bytes() == FIXTURE.read_bytes()
