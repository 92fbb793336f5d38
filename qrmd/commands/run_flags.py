"""The flag reference of ``qrmd run``, ``docs/flags.md``, made from the option rows
(``qrmd.config.SECTIONS``): one table per subsystem, each flag with its whole help text, its
default, its environment variable and the katalyst-agent flag it maps to. ``--help`` lists the
same flags one line each.

Regenerate after changing an option (a test fails while the file is stale)::

    python -m qrmd.commands.run_flags > docs/flags.md
"""

from __future__ import annotations

import sys

from qrmd.config import SECTIONS, env_name
from qrmd.config_values import Option

__all__ = ["flags_reference", "main"]

_HEADER = """\
# `qrmd run` flags

Generated from the option rows of each subsystem's settings; do not edit by hand (regenerate
with `python -m qrmd.commands.run_flags > docs/flags.md`). Every flag is also a key of the
`--config` file (YAML or TOML, written with `-` or `_`) and an environment variable; a flag
wins over the environment, which wins over the file. `qrmd run --help` lists the same flags,
one line each.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _row(opt: Option) -> str:
    value = "[true\\|false]" if opt.switch else _cell(opt.metavar or opt.flag.upper())
    repeat = " (repeatable)" if opt.repeatable else ""
    return (
        f"| `--{opt.flag}` {value}{repeat} | {_cell(opt.help)} | `{_cell(opt.default)}` "
        f"| `{env_name(opt.flag)}` | {_cell(opt.reference) or '—'} |"
    )


def flags_reference() -> str:
    """The Markdown text of ``docs/flags.md``."""
    parts = [_HEADER]
    for name, options in SECTIONS:
        parts.append(f"\n## {name}\n\n")
        parts.append("| flag | what it does | default | environment | katalyst-agent |\n")
        parts.append("| --- | --- | --- | --- | --- |\n")
        parts.extend(_row(opt) + "\n" for opt in options)
    return "".join(parts)


def main() -> int:
    """Print the reference (``python -m qrmd.commands.run_flags > docs/flags.md``)."""
    sys.stdout.write(flags_reference())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
