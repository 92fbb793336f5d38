"""Every daemon start is a journal record: version, settings fingerprint, recovery figures."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from journal import read_records
from qrmd.cli import main
from qrmd.store.start_record import START_KIND, policy_settings, settings_fingerprint
from tests.qrmd import test_daemon
from tests.qrmd.offline.scenario import write_scenario


@pytest.fixture
def harness() -> Iterator[test_daemon.Harness]:
    with tempfile.TemporaryDirectory(dir="/tmp") as root:  # short paths for the sockets
        yield test_daemon.Harness(Path(root))
    pykka.ActorRegistry.stop_all()


def starts(directory: Path) -> list[dict]:
    return [r.cause for r in read_records(str(directory)) if r.cause.get("kind") == START_KIND]


def test_each_start_records_version_settings_and_what_recovery_did(
    harness: test_daemon.Harness,
) -> None:
    for _ in range(2):
        daemon = harness.daemon()
        daemon.start()
        try:
            assert daemon.context is not None
            ctx = daemon.context
        finally:
            daemon.stop()
    first, second = starts(harness.root / "state")
    assert first["version"] and first["version"] == second["version"]
    assert first["settings"] == policy_settings(ctx) and first["settings"]["reserved"] == "0,2"
    assert first["settings_fingerprint"] == settings_fingerprint(first["settings"])
    assert first["recovery"]["last_seq"] == 0 and first["recovery"]["records_replayed"] == 0
    # the second start replayed the first run's records, its start record among them
    assert second["recovery"]["last_seq"] >= 2
    assert (
        second["recovery"]["records_replayed"] + (second["recovery"]["checkpoint_seq"] or 0)
        == (second["recovery"]["last_seq"])
    )


def test_show_renders_a_start_like_any_record(
    harness: test_daemon.Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = harness.daemon()
    daemon.start()
    daemon.stop()
    capsys.readouterr()
    code = main(["journal", "show", str(harness.root / "state"), "--kind", START_KIND])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"DaemonStarted: qrmd \S+ settings [0-9a-f]{16} checkpoint_seq=None", out)


def test_rerun_names_the_settings_a_start_ran_with_that_differ(
    harness: test_daemon.Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = harness.daemon()
    daemon.start()
    daemon.stop()
    capsys.readouterr()
    state = str(harness.root / "state")
    node = ["--topology", test_daemon.SYNTH]
    code = main(["journal", "rerun", state, *node, "--reserved-cpu-cores", "2"])
    out = capsys.readouterr().out
    assert code == 0 and "note:" not in out
    code = main(["journal", "rerun", state, *node, "--reserved-cpu-cores", "0"])
    out = capsys.readouterr().out
    assert code == 1
    assert "ran with other settings than these: reserved" in out


def test_a_copied_journal_needs_no_topology_its_start_records_the_machine(
    harness: test_daemon.Harness, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    daemon = harness.daemon()
    daemon.start()
    daemon.stop()
    copy = tmp_path / "copy"
    shutil.copytree(harness.root / "state", copy)
    capsys.readouterr()
    for argv in (["state", str(copy), "--seq", "1", "--json"], ["verify", str(copy)]):
        code = main(["journal", *argv])
        captured = capsys.readouterr()
        assert (code, captured.err) == (0, ""), argv
    assert starts(copy)[0]["machine"]["sockets"]


def test_without_a_recorded_machine_the_host_is_tried_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = write_scenario(tmp_path / "journal")  # the store alone: no daemon start
    code = main(["journal", "state", str(scenario.directory), "--seq", "1"])
    err = capsys.readouterr().err
    # this host is not the journal's 16-CPU synthetic node (or has no sysfs at all)
    assert code == 2 and "--topology journal" in err
    assert "no daemon start in it records its machine" in err


def test_a_start_records_its_reference_level_and_a_v0_5_3_fingerprint_stays_as_it_was(
    harness: test_daemon.Harness,
) -> None:
    for flags in ({}, {"reference-version": "v0.5.47", "cpu-numa-hint-prefer-policy": "packing"}):
        daemon = harness.daemon(**flags)
        daemon.start()
        daemon.stop()
    at_53, at_47 = starts(harness.root / "state")
    assert (at_53["reference_version"], at_47["reference_version"]) == ("v0.5.3", "v0.5.47")
    # v0.5.3 settings hold no reference key: a journal written before levels existed has the
    # same fingerprint, so `journal rerun` does not call its settings different
    assert "reference_version" not in at_53["settings"] and "reference" not in at_53["settings"]
    assert at_47["settings"]["reference_version"] == "v0.5.47"
    assert at_47["settings"]["reference"]["cpu_numa_hint_prefer_policy"] == "packing"
    assert at_47["settings_fingerprint"] != at_53["settings_fingerprint"]
