"""Log output of the daemon: text lines or one JSON object per line (``--log-format``).

Text: ``2026-11-30T00:12:56.123Z INFO qrmd.daemon: message``. JSON: an object with ``time``,
``level``, ``logger``, ``message`` and, for an exception, ``exception``: what log collectors on
a node parse without a pattern. pykka's per-ask exception lines (an error returned to a caller
is not the actor's failure) and transitions' per-callback lines are shown only at ``debug``.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import TextIO

__all__ = ["configure_logging"]


def _timestamp(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def configure_logging(level: str, log_format: str, stream: TextIO | None = None) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr) in ``log_format``.

    Args:
        level: ``debug``, ``info``, ``warning`` or ``error``.
        log_format: ``text`` or ``json``.
        stream: where lines go (default stderr).
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JSONFormatter() if log_format == "json" else _TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Chatty libraries speak at debug only: pykka logs every error returned to an asker,
    # transitions every callback of every state change.
    quiet = logging.DEBUG if level == "debug" else logging.WARNING
    for name in ("pykka", "transitions"):
        logging.getLogger(name).setLevel(quiet)
