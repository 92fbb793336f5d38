"""``qrmd run``: the node daemon (DESIGN.md "Who uses it"; flags in ``qrmd.config``, wiring in
``qrmd.daemon``).

It recovers its state from ``--state-dir``, serves kubelet on one unix socket per
``--socket-dir`` and metrics/health on ``--metrics-address``, until SIGTERM or SIGINT. A bad
setting, or a failure before serving, is one error line and exit status 2.
"""

from __future__ import annotations

import argparse

from qrmd.commands import CommandError, run_dataclasses
from qrmd.config import RUN_USAGE, SUMMARY_WIDTH, add_arguments, config_from_args
from qrmd.daemon import DaemonError, run_daemon
from qrmd.logs import configure_logging

__all__ = ["register", "run"]

_DESCRIPTION = """\
Run the CPU plugin daemon: recover the state from the journal in --state-dir, then serve
kubelet's QoS resource manager on <socket-dir>/qrm_cpu_plugin_dynamic.sock (one per
--socket-dir) and Prometheus metrics and /healthz on --metrics-address. SIGTERM or SIGINT
stop it cleanly. Settings come from --config (YAML or TOML; keys are the flag names),
QRMD_<FLAG> environment variables and flags, which win. The flags below are grouped by
subsystem; docs/flags.md gives each one's meaning, default, environment variable and the
katalyst-agent flag it maps to.
"""


#: The longest flag with its value (``--balanced-reclaimed-pod-single-round-total-rss-threshold
#: BYTES``) fits in the first column, so every flag is one line a reader scans for a name.
_FLAG_COLUMN = 68


def _one_line_help(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(
        prog, max_help_position=_FLAG_COLUMN, width=_FLAG_COLUMN + 2 + SUMMARY_WIDTH
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the daemon: serve kubelet on unix sockets, metrics and health on HTTP",
        description=_DESCRIPTION,
        usage=RUN_USAGE,
        formatter_class=_one_line_help,
    )
    add_arguments(p, one_line=True)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    configure_logging(config.log_level, config.log_format)
    try:
        # Once it serves, the methods compiled for this start's dataclasses are kept for the
        # next start (qrmd.commands.run_dataclasses; installed by qrmd.cli).
        return run_daemon(config, serving=run_dataclasses.finish)
    except DaemonError as err:
        raise CommandError(str(err)) from err
