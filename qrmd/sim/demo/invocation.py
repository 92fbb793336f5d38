"""How the user runs this qrmd again, for the commands the demo suggests.

After ``make demo`` qrmd lives in the checkout's ``.venv/bin``, which is not on the shell's
PATH: a suggested ``qrmd journal show ...`` would answer "command not found". The demo prints
commands that work as pasted, from the directory it was started in.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["qrmd_command"]


def _as_typed(path: Path, cwd: Path) -> str:
    """``path`` relative to ``cwd`` when it lies under it (``.venv/bin/qrmd``), else absolute."""
    absolute = path.absolute()
    try:
        relative = absolute.relative_to(cwd)
    except ValueError:
        return str(absolute)
    text = str(relative)
    return text if "/" in text else f"./{text}"  # a bare name would be looked up on the PATH


def qrmd_command(
    argv0: str | None = None,
    *,
    executable: str | None = None,
    cwd: Path | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> str:
    """The command that runs this qrmd, as a user pastes it into the shell it was started from.

    Args:
        argv0: how this process was invoked (default ``sys.argv[0]``).
        executable: this interpreter (default ``sys.executable``).
        cwd: the directory the commands will be pasted in (default the current one).
        which: looks a command up on the PATH.

    Returns:
        ``qrmd`` when the PATH finds this very script; else the script's path
        (``.venv/bin/qrmd``); else this interpreter with ``-m qrmd`` (a ``python -m qrmd``
        run). Quoted for the shell.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    cwd = Path.cwd() if cwd is None else cwd
    script = Path(argv0)
    if script.name == "qrmd" and script.is_file():
        found = which("qrmd")
        if found is not None and os.path.samefile(found, script):
            return "qrmd"
        return shlex.quote(_as_typed(script, cwd))
    return f"{shlex.quote(_as_typed(Path(executable), cwd))} -m qrmd"
