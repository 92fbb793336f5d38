"""``--max-connections`` and the open-file limit (the connection cap)."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from qrmd.commands.run_flags import flags_reference
from qrmd.config import ConfigError, load_config
from qrmd.cpu_plugin.connection_cap import OpenFileLimit, check_connection_cap, log_open_file_limit
from tests.integration.daemon_process import REPO


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        pytest.param({}, 1024, id="the default cap is 1024"),
        pytest.param({"max-connections": "64"}, 64, id="a cap given on the command line"),
    ],
)
def test_max_connections_is_read(flags: dict[str, object], want: int) -> None:
    assert load_config(flags).max_connections == want


def test_a_cap_below_one_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match="--max-connections: 0 is below the minimum 1"):
        load_config({"max-connections": "0"})


@pytest.mark.parametrize(
    ("cap", "sockets", "soft", "refused"),
    [
        pytest.param(1024, 1, 4096, False, id="1024 connections fit under 4096 descriptors"),
        pytest.param(1024, 2, 2048, True, id="two sockets of 1024 do not fit under 2048"),
        pytest.param(900, 1, 1024, True, id="900 plus the daemon's own do not fit under 1024"),
    ],
)
def test_a_cap_the_open_file_limit_cannot_hold_is_refused(
    cap: int, sockets: int, soft: int, refused: bool
) -> None:
    limit = OpenFileLimit(soft_before=soft, soft=soft, hard=soft)
    if not refused:
        check_connection_cap([cap] * sockets, limit)
        return
    with pytest.raises(ValueError, match=rf"--max-connections {cap} .* open-file limit {soft}"):
        check_connection_cap([cap] * sockets, limit)


def test_the_soft_limit_is_raised_to_the_hard_limit() -> None:
    script = (
        "import logging, resource; logging.basicConfig(level=logging.INFO);"
        "from qrmd.cpu_plugin.connection_cap import log_open_file_limit, raise_open_file_limit;"
        "limit = raise_open_file_limit(); log_open_file_limit(limit);"
        "print(limit.soft_before, limit.soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    done = subprocess.run(
        ["prlimit", "--nofile=300:2000", "--", sys.executable, "-c", script],
        capture_output=True, text=True, cwd=REPO, check=True, timeout=60,
    )  # fmt: skip
    assert done.stdout.split() == ["300", "2000", "2000"]
    assert "from 300 to the hard limit 2000" in done.stderr


@pytest.mark.parametrize(
    ("limit", "level", "line"),
    [
        pytest.param(
            OpenFileLimit(1024, 4096, 4096),
            logging.INFO,
            "raised the open-file limit (soft nofile) from 1024 to the hard limit 4096",
            id="a raised limit says from what to what",
        ),
        pytest.param(
            OpenFileLimit(4096, 4096, 4096),
            logging.INFO,
            "open-file limit 4096 (soft = hard), nothing to raise",
            id="a soft limit already at the hard one says so",
        ),
        pytest.param(
            OpenFileLimit(1024, 1024, -1, error="Operation not permitted"),
            logging.WARNING,
            "could not raise the open-file limit from 1024 to the hard limit -1: "
            "Operation not permitted",
            id="a limit that could not be raised is a warning with the reason",
        ),
    ],
)
def test_the_limit_is_logged_as_it_was_left(
    limit: OpenFileLimit, level: int, line: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="qrmd.limits"):
        log_open_file_limit(limit)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(level, line)]


def test_help_names_the_cap_and_the_reference_explains_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "run", "--help"],
        capture_output=True, text=True, cwd=REPO, check=True, timeout=60,
    )  # fmt: skip
    assert "--max-connections N" in done.stdout
    reference = " ".join(flags_reference().split())
    assert "grpc.max_allowed_incoming_connections" in reference
