"""``qrmd diagrams``: draw every state machine of qrmd from its transition table.

Mermaid needs nothing installed: one ``<machine>.mmd`` file per machine plus a ``README.md``
that embeds them all, which code review tools render inline. The committed copies live in
``docs/diagrams`` (the default output directory) and a test fails when they are stale.
SVG pipes each machine's DOT text (from :mod:`machines.diagram`) through Graphviz ``dot``; that
program call lives here because ``machines/`` stays free of I/O.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from machines.catalog import TABLES, table_named
from machines.diagram import to_dot, to_markdown, to_mermaid
from machines.table import MachineTable

DEFAULT_OUT = "docs/diagrams"
INDEX_FILE = "README.md"
DOT_TIMEOUT_S = 60.0


class GraphvizNotFoundError(OSError):
    """``--format svg`` was asked for but Graphviz's ``dot`` is not on PATH."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diagrams",
        help="draw the state machines (Mermaid; SVG when Graphviz is installed)",
        description=(
            "Render every state machine from its transition table in machines/: one file per "
            "machine. Mermaid output also gets a README.md embedding every diagram."
        ),
    )
    p.add_argument(
        "--format",
        choices=("mermaid", "svg"),
        default="mermaid",
        help="mermaid (.mmd, needs nothing) or svg (needs Graphviz 'dot'); default mermaid",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"directory to write into (created if missing; default {DEFAULT_OUT}); "
        "'-' prints to stdout instead",
    )
    p.add_argument(
        "--machine",
        action="append",
        metavar="NAME",
        help="only this machine (repeatable; default all: "
        + ", ".join(t.name for t in TABLES)
        + ")",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    tables = TABLES if not args.machine else tuple(table_named(n) for n in args.machine)
    to_stdout = args.out == "-"
    files = render(tables, args.format, with_index=not args.machine and not to_stdout)
    if to_stdout:
        for name, text in files.items():
            sys.stdout.write(f"{_banner(args.format, name)}\n{text}\n")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
        print(out / name)
    return 0


def render(tables: Sequence[MachineTable], fmt: str, *, with_index: bool = True) -> dict[str, str]:
    """Render ``tables`` as ``{file name: content}``, in table order.

    Args:
        tables: the machines to draw.
        fmt: ``mermaid`` or ``svg``.
        with_index: add the ``README.md`` page embedding every diagram (Mermaid only).

    Returns:
        One entry per machine (``ramp_up.mmd`` or ``ramp_up.svg``), then the index if asked.

    Raises:
        GraphvizNotFoundError: ``svg`` without ``dot`` on PATH.
        OSError: ``dot`` failed; the message names the machine and quotes ``dot``.
        ValueError: unknown format.
    """
    if fmt == "mermaid":
        files = {f"{t.name}.mmd": to_mermaid(t) for t in tables}
        if with_index:
            files[INDEX_FILE] = to_markdown(tables)
        return files
    if fmt == "svg":
        dot = shutil.which("dot")
        if dot is None:
            raise GraphvizNotFoundError(
                "Graphviz 'dot' is not on PATH: install graphviz (apt-get install graphviz) "
                "for --format svg, or use --format mermaid, which needs nothing"
            )
        return {f"{t.name}.svg": _svg(dot, t) for t in tables}
    raise ValueError(f"unknown diagram format {fmt!r} (formats: mermaid, svg)")


def _svg(dot: str, table: MachineTable) -> str:
    done = subprocess.run(
        [dot, "-Tsvg"],
        input=to_dot(table),
        capture_output=True,
        text=True,
        timeout=DOT_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise OSError(
            f"Graphviz dot failed for machine {table.name!r} (exit {done.returncode}): {reason}"
        )
    return done.stdout


def _banner(fmt: str, name: str) -> str:
    """A comment line naming the file, so several diagrams on stdout stay apart."""
    return f"%% file: {name}" if fmt == "mermaid" else f"<!-- file: {name} -->"
