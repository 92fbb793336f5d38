"""``--journal-retention-size`` and ``--journal-retention-age`` (qrmd.store.settings): parsed,
validated naming the flag, and handed to the StateStore's journal."""

from __future__ import annotations

import pytest

from journal import Retention
from qrmd.config import ConfigError, load_config
from qrmd.store.settings import journal_retention, retention_age, retention_size
from qrmd.store.subsystem import StoreWiring
from tests.qrmd.test_daemon import Harness, harness  # noqa: F401 (the fixture)


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
