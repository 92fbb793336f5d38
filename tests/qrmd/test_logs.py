"""Log lines: text or one JSON object per line (``--log-format``), at ``--log-level``."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from qrmd.logs import configure_logging


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_time_level_logger_message_and_exception() -> None:
    out = io.StringIO()
    configure_logging("info", "json", out)
    log = logging.getLogger("qrmd.daemon")
    log.debug("hidden below info")
    log.info("qrmd serving: %d sockets", 2)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("a plugin server failed to stop")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["level"], d["logger"], d["message"]) for d in lines] == [
        ("info", "qrmd.daemon", "qrmd serving: 2 sockets"),
        ("error", "qrmd.daemon", "a plugin server failed to stop"),
    ]
    assert lines[0]["time"].endswith("Z")
    assert "RuntimeError: boom" in lines[1]["exception"]


def test_text_lines_and_pykka_asks_only_at_debug() -> None:
    out = io.StringIO()
    configure_logging("warning", "text", out)
    logging.getLogger("qrmd.daemon").info("hidden below warning")
    logging.getLogger("pykka").info("Exception returned from actor to caller")
    logging.getLogger("actors.supervisor").error("actor store died")
    (line,) = out.getvalue().splitlines()
    assert line.endswith(" ERROR actors.supervisor: actor store died")
