"""A daemon start is a journal record: which qrmd started, with which policy settings, and
what recovery did (DESIGN.md, Journal: "restarts leave a trace").

After the StateStore has recovered and the Allocator has started, the daemon commits one record
with no events and this cause (msgpack-able plain data)::

    {"kind": "DaemonStarted", "version": "0.1.0", "reference_version": "v0.5.3",
     "settings_fingerprint": "3f9c…",
     "settings": {"topology": "eee915c2b69b16f5", "reserved": "0,2", "qos": {...},
                  "enable_reclaim": false, ...},
     "recovery": {"checkpoint_seq": 10000, "records_replayed": 742, "events_replayed": 901,
                  "last_seq": 10742, "bytes_truncated": 0, "skipped_checkpoints": [],
                  "elapsed_s": 0.041},
     "machine": {"sockets": [...], "distances": {...}}}

``machine`` is the node's topology as a machine file (``policy.topology.machine_file``), so
the forensic commands rebuild the state of a journal copied off the node without being told
its topology (``--topology journal``, their default). It is left out for the one shape no
machine file describes (the synthetic generator's odd CPU counts, cpu-policy §1.3).

``reference_version`` is the Katalyst release the node reproduced (``--reference-version``).
``settings`` are the Allocator's decision settings (``PolicyContext``, the topology by its
fingerprint); at v0.5.47 they also hold ``reference_version`` and the v0.5.47 options
(``reference``), which a v0.5.3 start leaves out so its fingerprint is the one it always was;
the balancer's configuration travels in every round's inputs. Their fingerprint
lets ``qrmd journal rerun`` say when the settings it was given are not the ones the node ran
with. The record changes no state, so replay is unaffected; a restarted StateStore actor (not
a daemon start) writes none.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from actors.store_report import RecoveryReport
from policy.cpu.cause import plain
from policy.cpu.context import PolicyContext
from policy.cpu.reference import ReferenceOptions
from policy.topology.machine_file import machine_from_topology, topology_from_machine
from policy.topology.model import CPUTopology, TopologyError
from qrmd.version import installed_version

__all__ = [
    "START_KIND",
    "machine_of",
    "policy_settings",
    "reference_settings",
    "settings_fingerprint",
    "start_cause",
    "topology_of_start",
]

#: The cause kind of a daemon start record.
START_KIND: Final = "DaemonStarted"


def qrmd_version() -> str:
    """The installed qrmd's version ("unknown" when it runs from a tree that is not installed)."""
    return installed_version() or "unknown"


def reference_settings(version: str, options: ReferenceOptions) -> dict[str, Any]:
    """A reference level and its options as plain data: ``{"reference_version": ...,
    "reference": {<option field>: <value>, ...}}``."""
    return {"reference_version": version, "reference": plain(options)}


def policy_settings(ctx: PolicyContext) -> dict[str, Any]:
    """The Allocator's decision settings as plain data (module docstring)."""
    settings = {
        "topology": ctx.topology.fingerprint(),
        "reserved": str(ctx.reserved),
        "qos": plain(ctx.qos),
        "enable_reclaim": ctx.enable_reclaim,
        "advisor_enabled": ctx.advisor_enabled,
        "transition_period_s": ctx.transition_period_s,
        "max_full_hint_numa_nodes": ctx.max_full_hint_numa_nodes,
        "max_hints": ctx.max_hints,
    }
    if ctx.at_v0_5_47:
        settings.update(reference_settings(ctx.reference_version, ctx.reference))
    return settings


def settings_fingerprint(settings: dict[str, Any]) -> str:
    """A short digest of ``settings`` (canonical JSON, SHA-256, 16 hex digits)."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def machine_of(topology: CPUTopology) -> dict[str, object] | None:
    """The topology as a machine document, or None when the document would describe another
    topology (module docstring)."""
    machine = machine_from_topology(topology)
    try:
        same = topology_from_machine(machine).fingerprint() == topology.fingerprint()
    except TopologyError:
        same = False
    return machine if same else None


def topology_of_start(cause: dict[Any, Any]) -> CPUTopology | None:
    """The topology a start record's ``machine`` describes; None when it has none.

    Raises:
        TopologyError: the record's machine document is not a valid one.
    """
    machine = cause.get("machine")
    return None if machine is None else topology_from_machine(machine)


def start_cause(ctx: PolicyContext, recovery: RecoveryReport) -> dict[str, Any]:
    """The cause of a daemon start record (module docstring)."""
    settings = policy_settings(ctx)
    cause: dict[str, Any] = {
        "kind": START_KIND,
        "version": qrmd_version(),
        "reference_version": ctx.reference_version,
        "settings_fingerprint": settings_fingerprint(settings),
        "settings": settings,
        "recovery": {
            "checkpoint_seq": recovery.checkpoint_seq,
            "records_replayed": recovery.records_replayed,
            "events_replayed": recovery.events_replayed,
            "last_seq": recovery.last_seq,
            "bytes_truncated": recovery.bytes_truncated,
            "skipped_checkpoints": list(recovery.skipped_checkpoints),
            "elapsed_s": round(recovery.elapsed_s, 6),
        },
    }
    machine = machine_of(ctx.topology)
    if machine is not None:
        cause["machine"] = machine
    return cause
