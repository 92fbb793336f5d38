"""The memory balancer's rounds as the demo shows them: compact rich tables of a round record.

A round is read back from the daemon's journal (``BalanceRoundRecorded``: the record with the
reference's fields, memory-balancer §5.5, and the inputs it was computed from), so what is shown
is what the daemon decided, not a recomputation. The advice is the record's ``GetAdvices``
answer (§8, ``policy.balance.advice_for`` on the record as it was stored, before the advice was
marked taken).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rich import box
from rich.table import Table

from policy.balance import BalanceInfo, RoundInputs
from policy.balance.gojson import format_float
from qrmd.commands.node_view import numa_roles
from qrmd.sim.demo.node_files import NumaReading

__all__ = ["Round", "numa_table", "pods_table", "verdict"]


@dataclass(frozen=True, slots=True)
class Round:
    """One journaled round: where it is in the journal, its record and its inputs."""

    seq: int
    record: BalanceInfo
    inputs: RoundInputs


def verdict(record: BalanceInfo, grace_threshold: float) -> str:
    """One line: what the round decided (rich markup)."""
    if not record.need_balance:
        top = record.max_latency_numa
        where = (
            f"no latency pressure (highest: NUMA {top.numa_id} at "
            f"{format_float(top.read_latency)}, grace threshold {format_float(grace_threshold)})"
            if top is not None
            else "no metrics"
        )
        return f"[bold]no balance[/]: {where}; status {record.status}"
    source = record.source_numa.numa_id if record.source_numa is not None else "none"
    dests = ", ".join(str(n.numa_id) for n in record.dest_numas or ()) or "none"
    text = (
        f"[bold]{record.balance_level}[/] · bandwidth level "
        f"{record.max_latency_numa_bandwidth_level} · source NUMA {source} → destinations "
        f"{dests} · status {record.status}"
    )
    if record.failed_reason:
        text += f" ({record.failed_reason})"
    return text


def numa_table(
    quiet: Mapping[int, NumaReading], pressure: Mapping[int, NumaReading], record: BalanceInfo
) -> Table:
    """Each node's metrics before and under pressure, and its role in the pressure round."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("NUMA", "latency quiet", "latency now", "bandwidth quiet", "bandwidth now"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("role in the round")
    for info in record.raw_numa_latency_info:
        roles = numa_roles(record, info.numa_id, source="[bold]source[/]")
        before = quiet.get(info.numa_id)
        table.add_row(
            str(info.numa_id),
            format_float(before.read_latency) if before else "",
            format_float(info.read_latency),
            format_float(before.bandwidth) if before else "",
            format_float(info.read_write_bandwidth),
            " · ".join(roles),
        )
    return table


def pods_table(found: Round) -> Table:
    """The pods of the balanced pools the round read: their memory on the source node, where
    their memory is to go, and the eviction choice."""
    record = found.record
    source = record.source_numa.numa_id if record.source_numa is not None else None
    moved = {p.uid: p for p in record.balance_pods}
    evicted = {p.uid for p in record.evict_pods}
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("pod", no_wrap=True)
    table.add_column("pool", no_wrap=True)
    table.add_column("containers", no_wrap=True)
    table.add_column(f"anon on NUMA {source}", justify="right", no_wrap=True)
    table.add_column("migrate to (pool NUMAs)", no_wrap=True)
    table.add_column("evict", no_wrap=True)
    for pod in found.inputs.pods:
        on_source = sum(c.anon.get(source, 0) for c in pod.containers) if source is not None else 0
        target = moved.get(pod.uid)
        table.add_row(
            f"{pod.namespace}/{pod.name}",
            pod.pool,
            ", ".join(c.name for c in pod.containers),
            _bytes(on_source),
            ",".join(map(str, target.dest_numas)) if target is not None else "-",
            "offered" if pod.uid in evicted else "",
        )
    table.add_row("", "", "total", _bytes(record.total_rss), "", "", style="bold")
    return table


def _bytes(amount: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if amount >= size:
            return f"{amount / size:.1f} {unit}"
    return f"{format_float(amount)} B"
