"""The one place qrmd's commands get a rich ``Console``: the same width rule for every command.

On a terminal rich follows the terminal's width. Anywhere else (``make demo > log``, a CI log,
a pipe) rich falls back to 80 columns, which cuts tables and rules mid-word ("dedicated_…");
there is no terminal to fit, so the output gets ``NON_TERMINAL_WIDTH`` columns instead, wide
enough for every table qrmd draws. An explicit ``COLUMNS`` in the environment still wins, as
rich documents it.
"""

from __future__ import annotations

import os

from rich.console import Console

__all__ = ["NON_TERMINAL_WIDTH", "make_console"]

#: Columns for output that is not a terminal: the widest table qrmd draws fits.
NON_TERMINAL_WIDTH = 160


def make_console(
    *,
    stderr: bool = False,
    soft_wrap: bool = False,
    quiet: bool = False,
    highlight: bool = False,
) -> Console:
    """A console for a command's output.

    Args:
        stderr: write to stderr (for progress when stdout is the answer).
        soft_wrap: never wrap printed text (tables and rules still fit the width).
        quiet: print nothing (a ``--json`` run that prints its answer by itself).
        highlight: let rich colour numbers and paths (off for answers: they are not
            decoration).

    Returns:
        A console of the terminal's width on a terminal, else ``NON_TERMINAL_WIDTH`` columns
        unless ``COLUMNS`` says otherwise.
    """
    console = Console(highlight=highlight, stderr=stderr, soft_wrap=soft_wrap, quiet=quiet)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = NON_TERMINAL_WIDTH
    return console
