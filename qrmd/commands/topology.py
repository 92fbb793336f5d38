"""``qrmd topology``: show the machine as qrmd sees it, before qrmd runs on it.

An operator checks here that sockets, NUMA nodes, cores and thread siblings, and the NUMA
distances are what they expect (spec cpu-policy §1.2, §1.3). The human view is a tree
(socket → NUMA node → cores with their siblings) and a distance table with memory-only nodes
marked; ``--json`` prints every fact of that view as one stable document (``format``
``qrmd-topology/1``: keys are only ever added, never renamed), plus the L3 caches the v0.5.47
dedicated allocation orders by (``l3_caches``, one CPU list per cache, as a machine file has
them), so a document read back as a machine file keeps a non-default L3 layout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from policy.topology.cpuset import CPUSet
from policy.topology.model import NO_L3_CACHE, CPUTopology
from qrmd.console import make_console
from qrmd.host.machine_file import TOPOLOGY_DOCUMENT_FORMAT
from qrmd.host.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS, load_topology

__all__ = [
    "DOCUMENT_FORMAT",
    "document_json",
    "register",
    "run",
    "summary_line",
    "topology_document",
]

#: Also read back as a machine file (``qrmd.host.machine_file``).
DOCUMENT_FORMAT = TOPOLOGY_DOCUMENT_FORMAT

_WIDEST_TABLE = 10_000  # characters; only bounds the measurement of the distance table

_SPREAD_NUMBERS = re.compile(r"\[\n\s*(\d+(?:,\n\s*\d+)*)\n\s*\]")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("topology", help="print the CPU/NUMA topology qrmd would use")
    p.add_argument(
        "--topology",
        default=DEFAULT_TOPOLOGY_SPEC,
        metavar="SPEC",
        help=f"{SPEC_FORMS}; default: %(default)s",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    if args.json:
        sys.stdout.write(document_json(topology_document(topology, args.topology)))
    else:
        _render(topology, args.topology, make_console())
    return 0


# -- the JSON document -------------------------------------------------------------------------


def topology_document(topology: CPUTopology, source: str) -> dict[str, object]:
    """Every fact ``qrmd topology`` shows, as plain JSON-ready data.

    CPU sets are Linux list strings (``"0-3,8"``); a core's siblings are a list of CPU ids;
    distance rows follow ``distances.nodes`` (memory-only nodes included); ``l3_caches`` lists
    every L3 cache's CPUs by ascending L3 id, and is left out when some CPU has no L3. A
    document without it (or written before it existed) reads back with one L3 per NUMA node.

    Args:
        topology: the machine.
        source: the SPEC it came from, echoed back.

    Returns:
        The ``qrmd-topology/1`` document.
    """
    details = topology.cpu_details
    core_numa = topology.core_numa()
    cores_by_numa: dict[int, list[dict[str, object]]] = {n: [] for n in topology.numa_nodes()}
    for core_id in topology.core_masks():
        cores_by_numa[core_numa[core_id]].append(
            {"id": core_id, "cpus": list(topology.cpus_in_core(core_id).ids())}
        )
    document: dict[str, object] = {
        "format": DOCUMENT_FORMAT,
        "source": source,
        "fingerprint": topology.fingerprint(),
        "num_cpus": topology.num_cpus,
        "num_cores": topology.num_cores,
        "num_sockets": topology.num_sockets,
        "num_numa_nodes": topology.num_numa_nodes,
        "cpus_per_core": topology.cpus_per_core,
        "threads_per_core": _thread_counts(topology),
        "cpus": str(topology.cpus()),
        "sockets": [
            {
                "id": s,
                "cpus": str(topology.cpus_in_socket(s)),
                "numa_nodes": list(details.numa_nodes_in_sockets(s).ids()),
                "num_cores": len(details.cores_in_sockets(s)),
            }
            for s in topology.sockets()
        ],
        "numa_nodes": [
            {
                "id": n,
                "sockets": list(details.sockets_in_numa_nodes(n).ids()),
                "cpus": str(topology.cpus_in_numa(n)),
                "cores": cores_by_numa[n],
            }
            for n in topology.numa_nodes()
        ],
        "memory_only_numa_nodes": _memory_only(topology),
        "distances": {
            "nodes": topology.distances.nodes(),
            "rows": {str(n): row for n, row in topology.distances.as_lists().items()},
        },
    }
    l3_masks = topology.l3_masks()
    # A machine file lists every CPU in exactly one cache and has no form for "no L3", so a
    # machine where some CPU has none (no ``cache/index3`` in sysfs) leaves the key out and
    # reads back with one L3 per NUMA node rather than not at all.
    if NO_L3_CACHE not in l3_masks:
        document["l3_caches"] = [str(CPUSet.from_mask(bits)) for bits in l3_masks.values()]
    return document


def document_json(document: dict[str, object]) -> str:
    """The document as indented JSON with lists of numbers kept on one line."""
    text = json.dumps(document, indent=2)
    # Only lists the indenter spread over lines match: a JSON string holds no raw newline.
    text = _SPREAD_NUMBERS.sub(
        lambda m: "[" + ", ".join(re.findall(r"\d+", m.group(1))) + "]", text
    )
    return text + "\n"


def _thread_counts(topology: CPUTopology) -> list[int]:
    """The distinct numbers of threads per core (one value unless the CPU is hybrid)."""
    return sorted({mask.bit_count() for mask in topology.core_masks().values()})


def _memory_only(topology: CPUTopology) -> list[int]:
    return sorted(set(topology.distances.nodes()) - set(topology.numa_nodes()))


# -- the human view ------------------------------------------------------------------------------


def summary_line(topology: CPUTopology) -> str:
    """The counts an operator checks first, on one line."""
    counts = _thread_counts(topology)
    threads = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]} (mixed)"
    placed = len(topology.cpu_details)
    cpus = _count(topology.num_cpus, "CPU")
    if placed != topology.num_cpus:
        cpus += f" ({placed} placed)"
    memory_only = _memory_only(topology)
    extra = f" + {len(memory_only)} memory-only" if memory_only else ""
    return (
        f"{cpus} · {_count(topology.num_cores, 'core')} · "
        f"{_count(topology.num_sockets, 'socket')} · "
        f"{_count(topology.num_numa_nodes, 'NUMA node')}{extra} · "
        f"{threads} {'thread' if threads == '1' else 'threads'} per core"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _render(topology: CPUTopology, source: str, console: Console) -> None:
    console.print(Text(f"Topology from {source}", style="bold"))
    # soft_wrap: a long summary is left to the terminal to wrap, never cut mid-word by rich.
    console.print(Text(summary_line(topology)), soft_wrap=True)
    console.print(Text(f"fingerprint {topology.fingerprint()}"))
    console.print()
    console.print(_layout_tree(topology))
    console.print()
    console.print(Text("NUMA distances (row → column)", style="bold"))
    table = _distance_table(topology)
    # Never squeeze a wide matrix (many nodes) into the terminal: cut-off distances are
    # worse than long lines.
    unbounded = console.options.update_width(_WIDEST_TABLE)
    console.width = max(console.width, Measurement.get(console, unbounded, table).maximum)
    console.print(table)
    if _memory_only(topology):
        console.print(
            Text("* memory-only NUMA node: memory, no CPUs; not a NUMA node of the CPU topology"),
            soft_wrap=True,
        )


def _layout_tree(topology: CPUTopology) -> Tree:
    details = topology.cpu_details
    tree = Tree(Text(f"machine · CPUs {topology.cpus()}"), guide_style="dim")
    for s in topology.sockets():
        socket_cpus = topology.cpus_in_socket(s)
        branch = tree.add(
            Text(
                f"socket {s} · CPUs {socket_cpus} · "
                f"{_count(len(details.cores_in_sockets(s)), 'core')}",
                style="bold",
            )
        )
        for n in details.numa_nodes_in_sockets(s).ids():
            # A NUMA node spanning sockets (AMD NPS0) shows each socket's share under it.
            cores = details.keep_only(socket_cpus).cores_in_numa_nodes(n).ids()
            node_cpus = topology.cpus_in_numa(n).intersection(socket_cpus)
            node = branch.add(Text(f"NUMA {n} · CPUs {node_cpus} · {_count(len(cores), 'core')}"))
            groups = "  ".join(f"({_siblings(topology.cpus_in_core(c))})" for c in cores)
            node.add(Text(f"cores (thread siblings): {groups}", style="dim"))
    return tree


def _siblings(cpus: CPUSet) -> str:
    return ",".join(map(str, cpus.ids()))


def _distance_table(topology: CPUTopology) -> Table:
    nodes = topology.distances.nodes()
    memory_only = set(_memory_only(topology))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("node", no_wrap=True)
    table.add_column("socket", no_wrap=True)
    for n in nodes:
        table.add_column(f"{n}*" if n in memory_only else str(n), justify="right", no_wrap=True)
    for n in nodes:
        if n in memory_only:
            label, sockets = f"{n}*", "memory-only"
        else:
            label, sockets = str(n), str(topology.cpu_details.sockets_in_numa_nodes(n))
        row = topology.distances.matrix[n]
        table.add_row(
            label,
            sockets,
            *(Text(str(row[m]), style="bold" if m == n else "") for m in nodes),
        )
    return table
