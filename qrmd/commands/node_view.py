"""A node as more than one command shows it: a placement drawn per NUMA node and as a table,
and the roles NUMA nodes play in a balance round.

A *holder* is CPUs held together: a pool with its containers, or a container on CPUs of its
own. The map lays each NUMA node out by physical core: one column per core, one row per thread
sibling, so a whole-core placement reads as a full column. Each CPU shows its id and the code
of its holder (``+`` when several hold it, as while shared containers ramp up over every
pooled CPU; ``·`` when none does), coloured by holder on a terminal. The pool table lists each
holder's cpuset, size and CPUs per NUMA node, and ends with the CPUs nobody holds.

Shared by ``qrmd demo`` (holders inferred from the kubelet's answers, ``qrmd.sim.demo.view``;
its balance rounds, ``qrmd.sim.demo.balance_view``) and the journal's readers (``qrmd journal
state``, ``qrmd balance plan``), so they show a node alike. It sits with the commands because
the demo may not import the offline tools, nor they the demo (import contracts in
pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.columns import Columns
from rich.console import RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from policy.balance import BalanceInfo
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = ["CORES_PER_ROW", "Holder", "numa_roles", "render_numa_map", "render_pools"]

#: Cores per row of a NUMA node's panel.
CORES_PER_ROW = 12
_OVERLAP_STYLE = "black on bright_white"
_IDLE_STYLE = "dim"


@dataclass(frozen=True, slots=True)
class Holder:
    """CPUs held together: a pool with its containers, or a container on CPUs of its own."""

    code: str  # one character on the map
    name: str  # "share", "reclaim", or the dedicated pod's name
    qos: str
    cpus: CPUSet
    containers: tuple[str, ...]  # "pod/container"
    style: str


def _cell(cpu: int, owners: list[Holder]) -> Text:
    if not owners:
        return Text(f"{cpu:>2}·", style=_IDLE_STYLE)
    if len(owners) == 1:
        return Text(f"{cpu:>2}{owners[0].code}", style=owners[0].style)
    return Text(f"{cpu:>2}+", style=_OVERLAP_STYLE)


def render_numa_map(topology: CPUTopology, held: Sequence[Holder]) -> RenderableType:
    """One panel per NUMA node: its cores as columns, thread siblings as rows.

    Args:
        topology: the machine.
        held: the holders to draw.

    Returns:
        A renderable of all NUMA panels, side by side where the terminal is wide enough.
    """
    panels = []
    for numa in topology.numa_nodes():
        cpus = topology.cpus_in_numa(numa)
        cores = sorted({topology.core_of(c) for c in cpus})
        grid = Table.grid(padding=(0, 1))
        for start in range(0, len(cores), CORES_PER_ROW):
            chunk = cores[start : start + CORES_PER_ROW]
            siblings = [topology.cpus_in_core(core).intersection(cpus).ids() for core in chunk]
            for thread in range(max(len(s) for s in siblings)):
                row = []
                for ids in siblings:
                    if thread < len(ids):
                        cpu = ids[thread]
                        row.append(_cell(cpu, [h for h in held if cpu in h.cpus]))
                    else:
                        row.append(Text(""))
                grid.add_row(*row)
        busy = sum(1 for c in cpus if any(c in h.cpus for h in held))
        title = f"NUMA {numa} · socket {topology.socket_of_numa(numa)} · {busy}/{len(cpus)} held"
        panels.append(Panel(grid, title=title, title_align="left", expand=False))
    return Columns(panels, padding=(0, 1))


def _per_numa(topology: CPUTopology, cpus: CPUSet) -> str:
    counts = []
    for numa in topology.numa_nodes():
        n = len(cpus.intersection(topology.cpus_in_numa(numa)))
        if n:
            counts.append(f"{numa}:{n}")
    return " ".join(counts)


def render_pools(topology: CPUTopology, held: Sequence[Holder]) -> RenderableType:
    """The pool table: code, pool, QoS, cpuset, size, CPUs per NUMA node, containers.

    Args:
        topology: the machine.
        held: the holders.

    Returns:
        The table, with a last row for the CPUs nobody holds.
    """
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("", "pool", "QoS", "cpuset", "size", "per NUMA", "containers"):
        table.add_column(column, justify="right" if column == "size" else "left")
    for h in held:
        table.add_row(
            Text(h.code, style=h.style),
            h.name,
            h.qos,
            str(h.cpus) or "-",
            str(len(h.cpus)),
            _per_numa(topology, h.cpus),
            ", ".join(h.containers),
        )
    idle = topology.cpus().difference(CPUSet.union_all(h.cpus for h in held))
    table.add_row(
        Text("·", style=_IDLE_STYLE),
        "unheld",
        "",
        str(idle) or "-",
        str(len(idle)),
        _per_numa(topology, idle),
        "the reserve, and CPUs kept for NUMA-bound pods",
    )
    return table


def numa_roles(record: BalanceInfo, numa_id: int, *, source: str = "source") -> list[str]:
    """What NUMA node ``numa_id`` is in a round: max latency, max bandwidth, source,
    destination (with its distance); empty for a bystander.

    Args:
        record: the round's record.
        numa_id: the node.
        source: the label of the source node (the demo marks it up).

    Returns:
        The roles, in that order.
    """
    dest = {n.numa_id: n.distance for n in record.dest_numas or ()}
    roles: list[str] = []
    if record.max_latency_numa and record.max_latency_numa.numa_id == numa_id:
        roles.append("max latency")
    if record.max_bandwidth_numa and record.max_bandwidth_numa.numa_id == numa_id:
        roles.append("max bandwidth")
    if record.source_numa and record.source_numa.numa_id == numa_id:
        roles.append(source)
    if numa_id in dest:
        roles.append(f"destination (distance {dest[numa_id]})")
    return roles
