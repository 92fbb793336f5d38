"""Real file-system faults for tests: a small tmpfs (a disk that fills up) and a read-only bind
mount (a copy that must not be written).

Mounting needs privilege. Where it is refused the test skips with the reason — except under
``CI=true``, where the machine is known to allow it and a refusal fails the test instead of
hiding it (the fault suite must run in CI).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        reason = f"cannot mount {what}: {' '.join(argv)}: {done.stderr.strip() or done.returncode}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: mounting must work here)")
        pytest.skip(reason)


def _unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextlib.contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[Path]:
    """A tmpfs of ``size_bytes`` mounted at ``path`` (created), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    _mount(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)], "a tmpfs")
    try:
        yield path
    finally:
        _unmount(path)


@contextlib.contextmanager
def read_only_view(source: Path, path: Path) -> Iterator[Path]:
    """``source`` bind-mounted read-only at ``path`` (created), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    _mount(["mount", "--bind", str(source), str(path)], "a bind mount")
    try:
        _mount(["mount", "-o", "remount,ro,bind", str(path)], "a read-only bind mount")
        yield path
    finally:
        _unmount(path)
