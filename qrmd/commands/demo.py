"""``qrmd demo``: the daemon and a built-in kubelet simulator, on a synthetic 96-CPU node.

The newcomer's first command (DESIGN.md, "Newcomers run qrmd demo"): it starts the real
``qrmd run`` and drives it over real gRPC through the plugin-watcher handshake, admission,
ramp-up, pod deletion, the NUMA memory balancer's rounds, advice and eviction offer with one
node under latency pressure, and a SIGKILL followed by recovery from the journal, showing after
each phase which pod holds which CPUs on each NUMA node (``qrmd.sim.demo.scenario``). The state
directory is kept, so the ``qrmd journal`` commands can be tried on it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from qrmd.commands import CommandError
from qrmd.console import make_console
from qrmd.sim.demo.scenario import DemoError, DemoSettings, run_demo
from qrmd.sim.demo.workload import TOPOLOGY

__all__ = ["register", "run"]

_DESCRIPTION = """\
Start `qrmd run` on a synthetic node (96 CPUs, 2 sockets, 4 NUMA nodes, 2 reserved CPUs) in
a temporary state directory, and drive it with a built-in kubelet simulator over its unix
socket: registration, a mixed workload (dedicated NUMA-bound pods, shared pods with init and
sidecar containers, reclaimed pods), ramp-up, pod deletion, the NUMA memory balancer with one
NUMA node under read-latency pressure (its rounds, dry-run advice and eviction offer, fed by a
metrics file and a cgroup tree the demo writes), then SIGKILL and a restart that recovers
every allocation from the journal. Prints a per-NUMA CPU map and the pools after each phase.
Each narrated step is checked against the journal and the simulator's record first: one that
did not happen stops the demo with an error naming the phase (exit status 2). Takes about 45 s
(about 20 s with --fast).
"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="run the daemon with a built-in kubelet simulator on a synthetic node",
        description=_DESCRIPTION,
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="leave the daemon running at the end and print how to reach and stop it",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="the daemon's state directory (default: a new one under /tmp, kept at the end)",
    )
    p.add_argument(
        "--fast",
        action="store_true",
        help="1 s reconcile and ramp-up (transition) periods instead of 3 s each, and a "
        "balance round every 0.5 s instead of 1 s",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    console = make_console()
    settings = DemoSettings(state_dir=args.state_dir, keep=args.keep, fast=args.fast)
    try:
        result = run_demo(settings, console)
    except DemoError as exc:
        raise CommandError(str(exc)) from None
    console.rule(f"[bold]done in {result.elapsed_s:.1f} s[/]")
    state = result.state_dir
    console.print(f"journal and checkpoints kept in {state}; try:")
    qrmd = result.qrmd_command  # as pasted from here: after `make demo` qrmd is not on the PATH
    for line in (
        f"{qrmd} journal show {state}",
        f"{qrmd} journal show --pod uid-web {state}",
        f"{qrmd} journal show {state} --kind BalanceRoundRecorded",
        f"{qrmd} journal stats {state}",
        f"{qrmd} journal verify --topology {TOPOLOGY} {state}",
    ):
        console.print(f"    {line}", soft_wrap=True)
    console.print(f"daemon log: {result.log_path}")
    if result.kept_pid is not None:
        metrics = result.metrics_address
        console.print(
            f"qrmd run is still running (--keep): pid {result.kept_pid}, "
            f"socket {result.socket_path}, state dir {state}"
            + (f", metrics http://{metrics}/metrics" if metrics != "off" else "")
        )
        console.print(f"stop it with: kill -TERM {result.kept_pid}")
    return 0
