"""The JSON input file of an offline ``plan`` command (``qrmd balance plan``, ``qrmd eviction
plan``): read from a path or stdin, bounded in size, parsed, every error naming the file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["MAX_INPUT_BYTES", "input_name", "read_json_input"]

#: A plan or round file larger than this is not one (it would only exhaust memory).
MAX_INPUT_BYTES = 256 << 20


def input_name(file: str) -> str:
    """How errors name ``file``: ``<stdin>`` for ``-``."""
    return "<stdin>" if file == "-" else file


def read_json_input(file: str, kind: str) -> object:
    """The JSON document of ``file`` (a path, or ``-`` for stdin).

    Args:
        file: a path, or ``-`` for stdin.
        kind: what the file should be, for the size error (``plan``, ``round``).

    Raises:
        OSError: the file cannot be read; the message names it.
        ValueError: larger than ``MAX_INPUT_BYTES`` or not JSON; the message names the file.
    """
    name = input_name(file)
    if file == "-":
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    else:
        try:
            with Path(file).open("rb") as f:
                raw = f.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise OSError(f"cannot read {file}: {exc.strerror or exc}") from None
    if len(raw) > MAX_INPUT_BYTES:
        raise ValueError(f"{name}: larger than {MAX_INPUT_BYTES} bytes; not a {kind} file")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{name}: not JSON: {exc}") from None
