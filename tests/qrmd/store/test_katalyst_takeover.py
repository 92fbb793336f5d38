"""``qrmd run`` on a Katalyst node: it never starts from nothing beside an un-imported
``cpu_plugin_state`` (``qrmd.store.katalyst_takeover``), imports it once when told, and ignores it
when told (docs/takeover.md). The rule as a table on real files, then the daemon and the CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.allocator_messages import GetResourcesAllocation
from journal import read_records
from policy.topology.model import CPUTopology
from qrmd.cli import main
from qrmd.host.topology_source import load_topology
from qrmd.store.katalyst_import import IMPORT_COMMAND, holds_journal, import_checkpoint
from qrmd.store.katalyst_takeover import TakeoverRefusedError, adopt_katalyst_state
from qrmd.store.takeover_settings import TakeoverSettings
from tests.qrmd.commands.katalyst_fixture import TOPOLOGY_SPEC
from tests.qrmd.test_daemon import Harness, harness  # noqa: F401 (the fixture)

FIXTURE = Path(__file__).parents[2] / "fixtures" / "katalyst" / "cpu_plugin_state"
NODE = "node-1"
#: The fixture's pods (tests/qrmd/commands/katalyst_fixture.py).
FIXTURE_PODS = {"uid-web", "uid-batch", "uid-db"}


def topology() -> CPUTopology:
    return load_topology(TOPOLOGY_SPEC)


def katalyst_file(root: Path) -> Path:
    path = root / "katalyst" / "cpu_plugin_state"
    path.parent.mkdir()
    shutil.copy(FIXTURE, path)
    return path


def corrupted_file(root: Path) -> Path:
    path = katalyst_file(root)
    doc = json.loads(path.read_bytes())
    doc["pod_entries"]["uid-web"]["app"]["request_quantity"] = 3  # checksum not updated
    path.write_text(json.dumps(doc))
    return path


def no_file(root: Path) -> Path:
    return root / "katalyst" / "cpu_plugin_state"


def imported_journal(root: Path, file: Path) -> None:
    import_checkpoint(str(root / "state"), str(file), topology(), NODE)


def empty_journal(root: Path, file: Path) -> None:
    return None


@pytest.mark.parametrize(
    ("make_file", "journal", "settings", "want_seq", "records_after"),
    [
        pytest.param(no_file, empty_journal, TakeoverSettings(), None, 0,
                     id="a node without katalyst starts from nothing"),
        pytest.param(no_file, empty_journal, TakeoverSettings(import_if_present=True), None, 0,
                     id="import if present imports nothing when nothing is present"),
        pytest.param(katalyst_file, empty_journal, TakeoverSettings(katalyst_checkpoint=None),
                     None, 0, id="ignore starts from nothing beside the file"),
        pytest.param(katalyst_file, empty_journal, TakeoverSettings(import_if_present=True), 1, 1,
                     id="import if present imports the file into an empty journal"),
        pytest.param(katalyst_file, imported_journal, TakeoverSettings(import_if_present=True),
                     None, 1, id="a journal holding records is not imported into again"),
        pytest.param(katalyst_file, imported_journal, TakeoverSettings(), None, 1,
                     id="a journal holding records starts beside the file it took over"),
    ],
)  # fmt: skip
def test_the_takeover_rule(
    tmp_path: Path,
    make_file: Callable[[Path], Path],
    journal: Callable[[Path, Path], None],
    settings: TakeoverSettings,
    want_seq: int | None,
    records_after: int,
) -> None:
    file = make_file(tmp_path)
    journal(tmp_path, file)
    if settings.katalyst_checkpoint is not None:
        settings = TakeoverSettings(str(file), settings.import_if_present)
    state = tmp_path / "state"
    assert adopt_katalyst_state(settings, str(state), NODE, topology()) == want_seq
    records = list(read_records(str(state))) if state.exists() else []
    assert len(records) == records_after


@pytest.mark.parametrize(
    ("make_file", "import_if_present", "said"),
    [
        pytest.param(katalyst_file, False, "--import-katalyst-if-present",
                     id="an un-imported checkpoint refuses the start and says how to go on"),
        pytest.param(corrupted_file, True, "checkpoint is corrupted",
                     id="a corrupted checkpoint is not imported and refuses the start"),
    ],
)  # fmt: skip
def test_a_refused_start_names_the_file_and_writes_nothing(
    tmp_path: Path, make_file: Callable[[Path], Path], import_if_present: bool, said: str
) -> None:
    file = make_file(tmp_path)
    state = tmp_path / "state"
    settings = TakeoverSettings(str(file), import_if_present)
    with pytest.raises(TakeoverRefusedError) as refused:
        adopt_katalyst_state(settings, str(state), NODE, topology())
    message = str(refused.value)
    assert str(file) in message and said in message and "docs/takeover.md" in message
    assert not holds_journal(str(state))


def test_the_refusal_offers_import_and_ignore(tmp_path: Path) -> None:
    file = katalyst_file(tmp_path)
    with pytest.raises(TakeoverRefusedError) as refused:
        adopt_katalyst_state(TakeoverSettings(str(file)), str(tmp_path / "s"), NODE, topology())
    message = str(refused.value)
    assert "qrmd journal import-katalyst" in message
    assert "--katalyst-checkpoint=ignore" in message


# -- through the daemon and the CLI -------------------------------------------------------------


def test_the_daemon_refuses_to_start_and_serves_nothing(harness: Harness) -> None:  # noqa: F811
    file = katalyst_file(harness.root)
    daemon = harness.daemon(**{"katalyst-checkpoint": str(file)})
    with pytest.raises(TakeoverRefusedError):
        daemon.start()
    assert harness.events == [] and not holds_journal(str(harness.root / "state"))


def test_the_daemon_imports_once_and_serves_the_imported_pods(harness: Harness) -> None:  # noqa: F811
    file = katalyst_file(harness.root)
    flags = {"katalyst-checkpoint": str(file), "import-katalyst-if-present": "true"}
    for _ in range(2):
        daemon = harness.daemon(**flags)
        daemon.start()
        try:
            answer = harness.servers[-1].allocator.ask(GetResourcesAllocation())
            assert set(answer.pod_resources) == FIXTURE_PODS
        finally:
            daemon.stop()
    records = list(read_records(str(harness.root / "state")))
    assert [r.cause.get("command") for r in records].count(IMPORT_COMMAND) == 1


def test_the_daemon_with_ignore_starts_beside_the_file(harness: Harness) -> None:  # noqa: F811
    katalyst_file(harness.root)
    daemon = harness.daemon(**{"katalyst-checkpoint": "ignore"})
    daemon.start()
    try:
        assert harness.events == ["serve k1"]
        answer = harness.servers[-1].allocator.ask(GetResourcesAllocation())
        assert not set(answer.pod_resources) & FIXTURE_PODS
    finally:
        daemon.stop()


def test_qrmd_run_exits_2_with_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = katalyst_file(tmp_path)
    code = main([
        "run", "--topology", TOPOLOGY_SPEC, "--state-dir", str(tmp_path / "state"),
        "--socket-dir", str(tmp_path / "k"), "--metrics-address", "off",
        "--katalyst-checkpoint", str(file),
    ])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    (line,) = [line for line in err.splitlines() if "error:" in line]
    assert line.startswith("qrmd run: error: katalyst-agent's checkpoint " + str(file))
    assert not (tmp_path / "k").exists()
