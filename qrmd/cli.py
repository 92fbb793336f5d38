"""The ``qrmd`` command line: one sub-command per module, under ``qrmd/commands`` or, for the
tools that read a journal directory, ``qrmd/offline/commands``.

Every sub-command reports a failure as one line on stderr naming what is wrong (exit status
2), never a traceback; ``QRMD_DEBUG=1`` shows the traceback for a bug report.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from qrmd.commands import CommandError, run_dataclasses
from qrmd.version import VERSION

# Each command's module (``qrmd.commands.NAME``, or ``qrmd.offline.commands.NAME`` for the
# tools that read a journal directory) exposes ``register(subparsers)``, which adds its parser
# and sets ``run``. A command imports only its own module: `qrmd run` starts without loading
# the demo, its simulators, rich or the offline tools, and `qrmd journal` without the daemon.
COMMANDS: tuple[str, ...] = (
    "demo",
    "run",
    "topology",
    "diagrams",
    "balance",
    "eviction",
    "journal",
    "sim",
)

#: The commands whose module is one of the offline tools' (DESIGN.md "Layout").
OFFLINE_COMMANDS: frozenset[str] = frozenset({"journal", "eviction"})

__all__ = [
    "COMMANDS",
    "OFFLINE_COMMANDS",
    "CommandError",
    "build_parser",
    "command_module",
    "main",
]

EXIT_USAGE_OR_INPUT = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command killed by it


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command, or, with ``command``, of that one alone.

    The other sub-commands then get a bare parser (name and help only), so their names stay
    valid choices.
    """
    parser = argparse.ArgumentParser(
        prog="qrmd",
        description=(
            "CPU and NUMA-memory QoS resource manager for Kubernetes nodes "
            "(Katalyst QRM 'dynamic' policy, wire-compatible with kubelet and sys-advisor)."
        ),
    )
    parser.add_argument("--version", action="version", version=f"qrmd {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        if command is None or name == command:
            importlib.import_module(command_module(name)).register(sub)
        else:
            sub.add_parser(name)
    return parser


def command_module(name: str) -> str:
    """The module that registers command ``name``."""
    package = "qrmd.offline.commands" if name in OFFLINE_COMMANDS else "qrmd.commands"
    return f"{package}.{name}"


def _command_named(argv: Sequence[str]) -> str | None:
    """The sub-command ``argv`` names; None when it names none (top-level help, a typo)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    command = _command_named(argv)
    if command != "run":
        return _main(argv, command)
    # `qrmd run` starts without the cyclic garbage collector: its imports and its recovery
    # build the daemon's whole heap (some 95,000 objects at 5,000 pods, a few hundred of them
    # garbage), which every collection would walk again. ``qrmd.daemon.run_daemon`` freezes
    # what start-up built and turns the collector on once the daemon serves; this turns it
    # on whatever happened (a bad flag, a failed start).
    # Its dataclasses' generated methods come compiled from the previous start
    # (``qrmd.commands.run_dataclasses``: a quarter of a restart's CPU was compiling them);
    # ``qrmd run`` saves the new ones once it serves.
    gc.disable()
    run_dataclasses.install()
    try:
        return _main(argv, command)
    finally:
        run_dataclasses.uninstall()
        gc.enable()


def _main(argv: Sequence[str], command: str | None) -> int:
    parser = build_parser(command)
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`qrmd topology --json | head`): not an error of ours. Point
        # stdout at /dev/null so the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except (CommandError, ValueError, OSError, LookupError) as exc:
        if os.environ.get("QRMD_DEBUG"):
            traceback.print_exc()
        # A command whose actions are parsers of their own names the action (`qrmd journal
        # state`), as argparse's usage errors do.
        prefix = getattr(args, "error_prefix", f"qrmd {args.command}")
        print(f"{prefix}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE_OR_INPUT
    return code


if __name__ == "__main__":
    sys.exit(main())
