"""``--journal-retention-size``, ``--journal-retention-age`` and ``--checkpoint-form``
(qrmd.store.settings): parsed, validated naming the flag, and handed to the StateStore."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from journal import Retention
from journal.checkpoints import list_checkpoints, load_checkpoint
from journal.fileops import OsFileOps
from qrmd.config import ConfigError, load_config
from qrmd.config_values import settings_of
from qrmd.store.settings import StoreSettings, journal_retention, retention_age, retention_size
from qrmd.store.subsystem import StoreWiring
from tests.qrmd.test_daemon import Harness, harness  # noqa: F401 (the fixture)

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param("268435456", 268435456, id="plain bytes"),
        pytest.param("256Mi", 256 << 20, id="binary megabytes"),
        pytest.param("1G", 10**9, id="decimal gigabytes"),
        pytest.param("512KiB", 512 << 10, id="kibibytes spelled out"),
        pytest.param("0", 0, id="nothing beyond what recovery needs"),
        pytest.param("none", None, id="no size limit"),
        pytest.param(1024, 1024, id="a config file's number"),
    ],
)  # fmt: skip
def test_retention_sizes(raw: object, want: int | None) -> None:
    assert retention_size(raw) == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        pytest.param("7d", 7 * 86400.0, id="days"),
        pytest.param("36h", 36 * 3600.0, id="hours"),
        pytest.param("90m", 5400.0, id="minutes"),
        pytest.param("none", None, id="no age limit"),
        pytest.param(60, 60.0, id="a config file's seconds"),
    ],
)  # fmt: skip
def test_retention_ages(raw: object, want: float | None) -> None:
    assert retention_age(raw) == want


@pytest.mark.parametrize(
    ("flag", "raw", "message"),
    [
        pytest.param("journal-retention-size", "lots",
                     r"--journal-retention-size: 'lots' is not a size",
                     id="a size that is not one"),
        pytest.param("journal-retention-size", "5 parsecs", "is not a size", id="an unknown unit"),
        pytest.param("journal-retention-size", -1, "negative", id="a negative size"),
        pytest.param("journal-retention-age", "soon",
                     r"--journal-retention-age: 'soon' is not a duration",
                     id="an age that is not one"),
        pytest.param("journal-retention-age", -5, "0 or more", id="a negative age"),
    ],
)  # fmt: skip
def test_bad_values_name_the_flag(flag: str, raw: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config({flag: raw, "node-name": "n"})


def test_the_defaults_are_the_journals_own() -> None:
    config = load_config({"node-name": "n"})
    retention = journal_retention(
        config.journal_retention_max_bytes, config.journal_retention_max_age_s
    )
    assert retention == Retention()


def test_the_daemon_hands_the_limits_to_the_journal(harness: Harness) -> None:  # noqa: F811
    daemon = harness.daemon(**{"journal-retention-size": "1Mi", "journal-retention-age": "none"})
    daemon.start()
    try:
        assert daemon.find(StoreWiring) is not None
        assert daemon.find(StoreWiring).config.retention == Retention(
            max_bytes=1 << 20, max_age_s=None
        )
    finally:
        daemon.stop()


# -- --checkpoint-form ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        pytest.param({}, "columns", id="checkpoints are columns by default"),
        pytest.param({"checkpoint-form": "entries"}, "entries", id="entries for a rollback"),
        pytest.param({"checkpoint-form": "Columns"}, "columns", id="any case is read"),
    ],
)
def test_the_checkpoint_form_reaches_the_store_settings(
    flags: dict[str, object], want: str
) -> None:
    config = load_config({"node-name": "n", **flags})
    assert config.checkpoint_form == want
    assert settings_of(StoreSettings, config).checkpoint_form == want


def test_an_unknown_checkpoint_form_is_refused_naming_the_flag_and_the_forms() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({"checkpoint-form": "rows", "node-name": "n"})
    assert str(err.value) == "--checkpoint-form: 'rows' is not one of columns, entries"


def test_run_help_offers_the_checkpoint_form_and_says_when_to_use_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "run", "--help"],
        capture_output=True, text=True, cwd=ROOT, check=True, timeout=60,
    )  # fmt: skip
    text = " ".join(done.stdout.split())
    assert "--checkpoint-form columns|entries" in text
    assert "'entries' before a rollback" in text


def newest_containers(state_dir: Path) -> object:
    fs = OsFileOps()
    newest = list_checkpoints(fs, str(state_dir))[-1][1]
    return load_checkpoint(fs, newest).state["sections"]["cpu"]["containers"]


@pytest.mark.parametrize(
    ("flags", "written_as"),
    [
        pytest.param({}, dict, id="a daemon stopped writes a columns checkpoint by default"),
        pytest.param(
            {"checkpoint-form": "entries"},
            list,
            id="a daemon run with entries and stopped writes a list of entry maps",
        ),
    ],
)
def test_the_daemon_stops_with_a_checkpoint_in_its_form(
    harness: Harness,  # noqa: F811
    flags: dict[str, object],
    written_as: type,
) -> None:
    daemon = harness.daemon(**flags)
    daemon.start()
    try:
        wiring = daemon.find(StoreWiring)
        assert wiring is not None
        assert wiring.config.checkpoint_form == harness.config(**flags).checkpoint_form
    finally:
        daemon.stop()  # what SIGTERM does: the store closes with a checkpoint
    assert isinstance(newest_containers(harness.root / "state"), written_as)
