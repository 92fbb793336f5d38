"""``qrmd topology``: show the machine as qrmd sees it."""

from __future__ import annotations

import argparse

from qrmd.topology_source import DEFAULT_TOPOLOGY_SPEC, load_topology


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("topology", help="print the CPU/NUMA topology qrmd would use")
    p.add_argument(
        "--topology",
        default=DEFAULT_TOPOLOGY_SPEC,
        metavar="SPEC",
        help="'sysfs' (this host), 'synthetic:cpus=N,sockets=S,numas=M', or a machine file",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topo = load_topology(args.topology)
    print(topo)
    return 0
