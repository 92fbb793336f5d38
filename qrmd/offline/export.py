"""``qrmd journal export DIR --parquet OUT``: one row per event, for fleet-wide queries.

Journals copied from many nodes are queried together (DuckDB on a laptop, Spark or Trino at
scale: ``read_parquet('nodes/*.parquet')``), so each row carries its node (the segment
header's name) and needs no join: seq, time, the event's kind and the cause's, the pod (UID
and ``namespace/name``), container, pool, the cpuset the event left it with (derived from the
state after the record, as kubelet saw it), the NUMA nodes of that cpuset, and the whole cause
as JSON text. A record without events (a daemon start, a refused advisor response) is one row
whose event kind is null, so it is counted too. Replay gives the cpusets, hence ``--topology``.

pyarrow is an optional dependency (``pip install 'qrmd[forensics]'``): the daemon never needs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from policy.state.cpu_state import CPUState
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from qrmd.offline.changes import touched_containers
from qrmd.offline.journal_view import cause_target
from qrmd.offline.renderers import cause_kind
from qrmd.offline.state_view import container_view
from qrmd.offline.walk import ForensicsError, JournalWalk, Step

__all__ = ["COLUMNS", "event_rows", "write_parquet"]

#: The columns, in order, with their Arrow types (``pyarrow`` type names).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "string"),
    ("seq", "int64"),
    ("time", "timestamp[ms, tz=UTC]"),
    ("event_index", "int32"),
    ("kind", "string"),
    ("cause_kind", "string"),
    ("pod_uid", "string"),
    ("pod", "string"),
    ("container", "string"),
    ("pool", "string"),
    ("cpuset", "string"),
    ("cpus", "int32"),
    ("numa", "list<int32>"),
    ("cause", "string"),
)


def _numas(topology: CPUTopology, cpus: CPUSet) -> list[int]:
    return [n for n in topology.numa_nodes() if cpus.intersection(topology.cpus_in_numa(n))]


def _row_target(raw: Any, after: CPUState) -> dict[str, Any]:
    """Pod, container, pool and cpuset of one event, in the state after its record."""
    if not isinstance(raw, dict):
        return {}
    nested = raw.get("entry")
    entry: dict[Any, Any] = nested if isinstance(nested, dict) else raw
    uid, container = entry.get("pod_uid"), entry.get("container_name")
    if isinstance(uid, str) and uid:
        row: dict[str, Any] = {"pod_uid": uid}
        if isinstance(container, str) and container:
            row["container"] = container
            view = container_view(after, (uid, container))
            if view is not None:
                row.update(pod=view.pod, pool=view.pool or None, cpuset=view.cpuset)
        return row
    if raw.get("kind") == "RampCPUsSet" and after.ramp_cpus is not None:
        return {"cpuset": after.ramp_cpus}
    name = raw.get("name")
    if isinstance(name, str) and name and raw.get("kind", "").startswith("Pool"):
        cpus = after.pools.get(name)
        return {"pool": name, "cpuset": cpus if cpus is not None else CPUSet()}
    return {}


def event_rows(walk: JournalWalk, node: str) -> Iterator[dict[str, Any]]:
    """Every row of the export (module docstring), in seq order.

    Raises:
        ForensicsError: replay failed (see ``JournalWalk.steps``).
    """
    topology = walk.topology
    for step in walk.steps(what="exporting"):
        yield from _rows_of(step, node, topology)


def _rows_of(step: Step, node: str, topology: CPUTopology) -> Iterator[dict[str, Any]]:
    record = step.record
    base = {
        "node": node,
        "seq": record.seq,
        "time": record.wall_time,
        "cause_kind": cause_kind(record.cause),
        "cause": json.dumps(record.cause, sort_keys=True, default=str),
    }
    cause_pod = cause_target(record.cause)[1]
    events = list(record.events)
    if not events:
        yield _finish({**base, "pod_uid": cause_pod or None}, topology)
        return
    names = {}
    for key in touched_containers(step.before.cpu, step.after.cpu):
        view = container_view(step.after.cpu, key) or container_view(step.before.cpu, key)
        if view is not None:
            names[key[0]] = view.pod
    for index, raw in enumerate(events):
        row = {
            **base,
            "event_index": index,
            "kind": raw.get("kind") if isinstance(raw, dict) else None,
        }
        row.update(_row_target(raw, step.after.cpu))
        uid = row.get("pod_uid")
        if "pod" not in row and isinstance(uid, str) and uid in names:
            row["pod"] = names[uid]
        yield _finish(row, topology)


def _finish(row: dict[str, Any], topology: CPUTopology) -> dict[str, Any]:
    cpus = row.pop("cpuset", None)
    full = {name: row.get(name) for name, _ in COLUMNS}
    if isinstance(cpus, CPUSet):
        full["cpuset"] = str(cpus)
        full["cpus"] = len(cpus)
        full["numa"] = _numas(topology, cpus)
    return full


def write_parquet(rows: Iterator[dict[str, Any]], path: str) -> int:
    """Write ``rows`` to a Parquet file at ``path``; returns how many.

    Raises:
        ForensicsError: pyarrow is not installed (says how to install it).
        OSError: the file cannot be written.
    """
    try:
        # An optional extra (qrmd[forensics]): imported only when exporting. One statement
        # binds ``pyarrow`` with its ``parquet`` module loaded.
        import pyarrow.parquet  # noqa: PLC0415
    except ImportError as err:
        raise ForensicsError("export needs pyarrow: pip install 'qrmd[forensics]'") from err
    types = {
        "string": pyarrow.string(),
        "int64": pyarrow.int64(),
        "int32": pyarrow.int32(),
        "timestamp[ms, tz=UTC]": pyarrow.timestamp("ms", tz="UTC"),
        "list<int32>": pyarrow.list_(pyarrow.int32()),
    }
    schema = pyarrow.schema([(name, types[kind]) for name, kind in COLUMNS])
    columns: dict[str, list[Any]] = {name: [] for name, _ in COLUMNS}
    count = 0
    for row in rows:
        for name, _ in COLUMNS:
            value = row[name]
            if name == "time":
                value = round(value * 1000)
            columns[name].append(value)
        count += 1
    table = pyarrow.table(
        {
            name: pyarrow.array(values, type=schema.field(name).type)
            for name, values in columns.items()
        },
        schema=schema,
    )
    pyarrow.parquet.write_table(table, path)
    return count
