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
from policy.state.katalyst_detect import layout_by_checksum
from policy.state.katalyst_file import checksum_of, encode_document
from policy.state.katalyst_layouts import V0_5_34, layout_of_version
from qrmd.cli import main
from tests.actors.store_helpers import NODE, node_history, open_store
from tests.qrmd.commands.katalyst_fixture import TOPOLOGY_SPEC, file_bytes, file_bytes_in

FIXTURE = Path(__file__).parents[3] / "fixtures" / "katalyst" / "cpu_plugin_state"


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


# -- rollback must not hand katalyst-agent a lie ------------------------------------------------


def export(
    capsys: pytest.CaptureFixture[str], state: Path, out: Path, *extra: str
) -> tuple[int, str, str]:
    return run(capsys, "export-katalyst", str(state), str(out), "--topology", TOPOLOGY_SPEC, *extra)


def empty_directory(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    return tmp_path / "state"


def directory_of_other_files(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "notes.txt").write_text("not a journal")
    return tmp_path / "state"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        pytest.param(
            empty_directory, "no journal in", id="an empty directory has no state to export"
        ),
        pytest.param(
            directory_of_other_files, "no journal in", id="a directory of other files has no state"
        ),
        pytest.param(
            lambda p: p / "missing", "not a directory", id="a missing directory is refused"
        ),
    ],
)
def test_export_refuses_a_directory_without_journal_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, said: str
) -> None:
    state = make(tmp_path)  # type: ignore[operator]
    out = tmp_path / "cpu_plugin_state"
    code, _, err = export(capsys, state, out)
    assert code == 2 and said in err
    assert not out.exists()


def test_export_refuses_to_replace_a_file_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    out = tmp_path / "cpu_plugin_state"
    out.write_text("katalyst-agent's own")
    out.chmod(0o600)
    code, _, err = export(capsys, state, out)
    assert code == 2 and "exists" in err and "--force" in err and ".bak" in err
    assert out.read_text() == "katalyst-agent's own" and not Path(f"{out}.bak").exists()


def test_export_with_force_keeps_the_old_file_as_bak(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    out = tmp_path / "cpu_plugin_state"
    out.write_text("katalyst-agent's own")
    out.chmod(0o640)
    code, said, err = export(capsys, state, out, "--force")
    assert code == 0, err
    backup = Path(f"{out}.bak")
    assert backup.read_text() == "katalyst-agent's own"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o640
    assert out.read_bytes() == FIXTURE.read_bytes() and str(backup) in said
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["under umask 022", "under umask 000"])
def test_export_writes_the_file_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], umask: int
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    out = tmp_path / "cpu_plugin_state"
    old = os.umask(umask)
    try:
        code, _, err = export(capsys, state, out)
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_export_into_a_missing_directory_or_a_file_says_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    code, _, err = export(capsys, state, tmp_path / "nowhere" / "cpu_plugin_state")
    assert code == 2 and f"directory {tmp_path / 'nowhere'} does not exist" in err
    assert "Errno" not in err
    (tmp_path / "a-file").write_text("")
    code, _, err = export(capsys, state, tmp_path / "a-file" / "cpu_plugin_state")
    assert code == 2 and f"{tmp_path / 'a-file'} is not a directory" in err


# -- import refuses what is not its to change ---------------------------------------------------


def test_import_refuses_a_directory_of_other_files_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = directory_of_other_files(tmp_path)
    state.chmod(0o755)
    code, _, err = run(
        capsys, "import-katalyst", str(state), str(FIXTURE),
        "--topology", TOPOLOGY_SPEC, "--node-name", NODE,
    )  # fmt: skip
    assert code == 2 and "no qrmd journal" in err and "notes.txt" in err
    assert sorted(p.name for p in state.iterdir()) == ["notes.txt"]
    assert stat.S_IMODE(state.stat().st_mode) == 0o755


@pytest.mark.parametrize("under", ["", "sub"], ids=["onto a file", "under a file"])
def test_import_through_a_file_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], under: str
) -> None:
    blocking = tmp_path / "state"
    blocking.write_text("")
    code, _, err = run(
        capsys, "import-katalyst", str(blocking / under if under else blocking), str(FIXTURE),
        "--topology", TOPOLOGY_SPEC, "--node-name", NODE,
    )  # fmt: skip
    assert code == 2 and f"{blocking} is a file, not a directory" in err and "Errno" not in err


def test_the_import_records_the_machine_so_state_needs_no_topology(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    code, said, err = run(capsys, "state", str(state), "--seq", "1", "--json")
    assert code == 0, err
    assert "uid-web" in said
    code, _, err = run(capsys, "verify", str(state))
    assert code == 0, err


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(v, id=f"a {v} file is imported and exported again byte for byte")
        for v in ("v0.5.3", "v0.5.5", "v0.5.12", "v0.5.16", "v0.5.47")
    ],
)
def test_each_layout_round_trips_through_the_journal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    layout = layout_of_version(version)
    source = tmp_path / "cpu_plugin_state"
    source.write_bytes(file_bytes_in(layout))
    state = tmp_path / "state"
    code, said, err = run(
        capsys,
        "import-katalyst",
        str(state),
        str(source),
        "--topology",
        TOPOLOGY_SPEC,
        "--node-name",
        NODE,
    )
    assert code == 0, err
    assert f"checkpoint layout: katalyst {layout.name} (its checksum verifies)" in said
    out = tmp_path / "out"
    code, _, err = run(
        capsys,
        "export-katalyst",
        str(state),
        str(out),
        "--topology",
        TOPOLOGY_SPEC,
        "--katalyst-version",
        version,
    )
    assert code == 0, err
    assert out.read_bytes() == source.read_bytes()
    assert layout_by_checksum(decode_document(out.read_bytes())) is layout


def test_export_refuses_a_release_it_does_not_know(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    assert imported(capsys, state, FIXTURE) == 0
    with pytest.raises(SystemExit) as exit_info:
        run(
            capsys,
            "export-katalyst",
            str(state),
            str(tmp_path / "out"),
            "--topology",
            TOPOLOGY_SPEC,
            "--katalyst-version",
            "v0.5.48",
        )
    assert exit_info.value.code == 2
    assert "'v0.5.48' is not a release qrmd knows" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_v0_5_47_file_with_a_shared_numa_binding_pod_is_refused_by_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = decode_document(file_bytes_in(V0_5_34))
    web = doc["pod_entries"]["uid-web"]["app"]
    web["annotations"].update(numa_binding="true", numa_hint="1")
    doc["checksum"] = checksum_of(doc, V0_5_34)
    source = tmp_path / "snb"
    source.write_bytes(encode_document(doc, V0_5_34))
    state = tmp_path / "state"
    code, _, err = run(
        capsys,
        "import-katalyst",
        str(state),
        str(source),
        "--topology",
        TOPOLOGY_SPEC,
        "--node-name",
        NODE,
    )
    assert code == 2
    assert (
        "pod default/name-uid-web (uid uid-web) container 'app': shared_cores NUMA binding" in err
    )
    assert "was not imported" in err
    assert not (state.exists() and any(read_records(str(state))))
