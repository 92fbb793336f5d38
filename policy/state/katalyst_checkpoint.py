"""Between qrmd's CPU state and the reference's ``cpu_plugin_state`` document (spec §13, §5).

**Export** writes what the reference would hold for this state: every container's §5.1 record
and every pool entry (§5.3) under ``pod_entries``, the machine state regenerated as
``generate_machine_state`` does (§5.4), policy ``dynamic`` and the §13.4 checksum, in the
layout of the katalyst release the caller names (``policy.state.katalyst_layouts``; v0.5.3 by
default). The fields later layouts add take the values a freshly started reference holds: no
overlap, no NUMA headroom (``null``), no pre-occupation.

**Import** is the reference's restore (§13.3) followed by a translation into events:

1. the checksum must match one layout's (step 3; ``policy.state.katalyst_detect``) and the
   policy be ``dynamic`` (step 4), unless the caller skips corruption, as the reference's
   ``skip-cpu-state-corruption`` does (the layout is then told by the fields the file names);
   what that layout's release wrote and qrmd does not model is refused by pod and feature
   (``policy.state.katalyst_unmodelled``), skip or not;
2. every CPU named must exist on this machine and every NUMA id be one of its NUMA nodes (the
   reference would hand such CPUs to containers that cannot have them);
3. the machine state is regenerated from the pod entries and only compared with the stored
   one (step 5): a difference is reported, never an error, since the reference rewrites it;
4. pool entries (§5.2 ``is_pool_entry``) become ``PoolSet``; a container whose owner pool
   exists and whose two results are that pool's CPUs is placed ``InPool`` (it follows the
   pool, as §9.8 step 6 re-copies it); shared containers ramping on one common cpuset follow
   the ramp-up cpuset (§9.6); every other container holds its CPUs as ``OwnCPUs``.

qrmd derives the topology fields from the results (``policy.state.entries``); a container whose
stored topology fields are not the NUMA split of its results cannot be represented and is
refused by name. Export then import gives back the same reference records (pools, and every
container's §5.1 fields); what the file cannot say — a ramp-up cpuset no container is on — is
not carried.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from policy.errors import CodecError, StateError
from policy.state.cpu_apply import apply_cpu_event
from policy.state.cpu_state import CPUState
from policy.state.entries import (
    RAMPING,
    AllocationInfo,
    ContainerEntry,
    InPool,
    OwnCPUs,
    Placement,
)
from policy.state.events import ContainerAllocated, CPUEvent, PoolSet, RampCPUsSet
from policy.state.katalyst_detect import layout_by_checksum, layout_by_fields
from policy.state.katalyst_file import (
    AI_FIELDS,
    HEADROOM_KEY,
    OVERLAP_KEY,
    POLICY_NAME,
    Document,
    checksum_of,
)
from policy.state.katalyst_layouts import (
    DEFAULT_VERSION,
    V0_5_0,
    KatalystLayout,
    layout_of_version,
    normalize_version,
)
from policy.state.katalyst_unmodelled import dropped_notes, unexportable, unmodelled_features
from policy.state.machine_state import NUMANodeState, generate_machine_state
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = [
    "CheckpointCorruptedError",
    "CheckpointMismatchError",
    "CheckpointUnmodelledError",
    "ImportPlan",
    "export_document",
    "imported_state",
    "plan_import",
]

#: The reference's message when the checksum does not match (§13.3 step 3).
CORRUPTED_MESSAGE: Final = "checkpoint is corrupted"


class CheckpointCorruptedError(CodecError):
    """The checksum does not match, or the policy name is not ``dynamic`` (§13.3 steps 3–4)."""


class CheckpointMismatchError(CodecError):
    """The checkpoint names CPUs or NUMA nodes this machine lacks, or what qrmd cannot hold."""


class CheckpointUnmodelledError(CheckpointMismatchError):
    """Entries use a feature of a later katalyst release that qrmd does not model (by pod)."""


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What importing a document commits, and what the operator should be told.

    Attributes:
        events: the CPU events that build the imported state from an empty CPU section.
        notes: findings that are not errors (skipped corruption, machine state rewritten,
            null entries dropped), one line each.
        containers: how many container entries are imported.
        pools: the pool names imported.
        layout: the release layout the file is in.
        layout_verified: True when its checksum verified under ``layout``; False when
            corruption was skipped and the layout was told by the fields the file names.
    """

    events: tuple[CPUEvent, ...]
    notes: tuple[str, ...]
    containers: int
    pools: tuple[str, ...]
    layout: KatalystLayout = V0_5_0
    layout_verified: bool = True


# -- export --------------------------------------------------------------------------------


def _record(info: AllocationInfo) -> dict[str, Any]:
    """A §5.1 record under its JSON keys (the document's form, ``katalyst_file``)."""
    values = {
        "pod_uid": info.pod_uid,
        "pod_namespace": info.pod_namespace,
        "pod_name": info.pod_name,
        "container_name": info.container_name,
        "container_type": info.container_type,
        "container_index": info.container_index,
        "ramp_up": info.ramp_up,
        "owner_pool_name": info.owner_pool_name,
        "pod_role": info.pod_role,
        "pod_type": info.pod_type,
        "allocation_result": info.allocation_result,
        "original_allocation_result": info.original_allocation_result,
        "topology_aware_assignments": _assign(info.topology_aware_assignments),
        "original_topology_aware_assignments": _assign(info.original_topology_aware_assignments),
        "init_timestamp": info.init_timestamp,
        "labels": None if info.labels is None else dict(info.labels),
        "annotations": None if info.annotations is None else dict(info.annotations),
        "qosLevel": info.qos_level,
        "request_quantity": info.request_quantity,
    }
    assert tuple(values) == tuple(key for key, *_ in AI_FIELDS)
    return values


def _assign(split: Mapping[int, CPUSet] | None) -> dict[int, CPUSet] | None:
    return None if split is None else dict(split)


def _pods(infos: Iterable[AllocationInfo]) -> dict[str, dict[str, Any]]:
    pods: dict[str, dict[str, Any]] = {}
    for info in infos:
        pods.setdefault(info.pod_uid, {})[info.container_name] = _record(info)
    return pods


def _numa(node: NUMANodeState) -> dict[str, Any]:
    pods = None
    if node.pod_entries is not None:
        pods = {
            pod: {name: _record(info) for name, info in containers.items()}
            for pod, containers in node.pod_entries.items()
        }
    return {
        "default_cpuset": node.default_cpuset,
        "allocated_cpuset": node.allocated_cpuset,
        "pod_entries": pods,
    }


def _machine_state(state: CPUState) -> dict[int, Any]:
    return {numa: _numa(node) for numa, node in generate_machine_state(state).items()}


def export_document(state: CPUState, version: str = DEFAULT_VERSION) -> Document:
    """The reference's checkpoint for ``state``, checksum included (§13.2, §13.4).

    Args:
        state: the CPU section.
        version: the katalyst release to write for, e.g. ``v0.5.47``; its layout decides the
            fields and the checksum (``katalyst_layouts``).

    Returns:
        The document; ``katalyst_file.encode_document(document, layout_of_version(version))``
        gives its bytes.

    Raises:
        CodecError: ``version`` is not a release qrmd knows.
        CheckpointUnmodelledError: an entry that release would read as a feature qrmd does not
            model (a shared_cores container with ``numa_binding``, from v0.5.4).
    """
    version = normalize_version(version)
    layout = layout_of_version(version)
    refusal = unexportable(state.allocation_infos(), version)
    if refusal is not None:
        raise CheckpointUnmodelledError(refusal)
    pods = _pods(state.allocation_infos())
    for pool in state.pool_entries():
        pods[pool.pod_uid] = {"": _record(pool)}
    document: Document = {
        "policyName": POLICY_NAME,
        "machineState": _machine_state(state),
        HEADROOM_KEY: None,
        "pod_entries": pods,
        OVERLAP_KEY: False,
        "checksum": 0,
    }
    document["checksum"] = checksum_of(document, layout)
    return document


# -- import --------------------------------------------------------------------------------


def _check_cpus(cpus: CPUSet, topology: CPUTopology, where: str) -> None:
    foreign = cpus - topology.cpu_details.cpus()
    if foreign:
        raise CheckpointMismatchError(
            f"{where}: CPUs {foreign} do not exist on this machine "
            f"(it has {topology.cpu_details.cpus()})"
        )


def _check_assign(split: Mapping[int, CPUSet] | None, topology: CPUTopology, where: str) -> None:
    numas = set(topology.numa_nodes())
    for numa, cpus in (split or {}).items():
        if numa not in numas:
            raise CheckpointMismatchError(
                f"{where}: NUMA node {numa} does not exist on this machine (it has {sorted(numas)})"
            )
        _check_cpus(cpus, topology, f"{where}.{numa}")


def _split(cpus: CPUSet, topology: CPUTopology) -> dict[int, CPUSet]:
    return {
        numa: part for numa in topology.numa_nodes() if (part := cpus & topology.cpus_in_numa(numa))
    }


def _check_record(record: Mapping[str, Any], topology: CPUTopology, where: str) -> None:
    for key in ("allocation_result", "original_allocation_result"):
        _check_cpus(record[key], topology, f"{where}.{key}")
    for key, cpus_key in (
        ("topology_aware_assignments", "allocation_result"),
        ("original_topology_aware_assignments", "original_allocation_result"),
    ):
        _check_assign(record[key], topology, f"{where}.{key}")
        stored = {n: c for n, c in (record[key] or {}).items() if c}
        if stored != _split(record[cpus_key], topology):
            raise CheckpointMismatchError(
                f"{where}.{key}: {_show(record[key])} is not the NUMA split of "
                f"{cpus_key} {record[cpus_key]}; qrmd derives it from the cpuset and cannot "
                f"keep a different one"
            )


def _show(split: Mapping[int, CPUSet] | None) -> str:
    if split is None:
        return "null"
    return "{" + ", ".join(f"{n}: {c}" for n, c in sorted(split.items())) + "}"


def _verify(document: Document, skip_corruption: bool, notes: list[str]) -> KatalystLayout | None:
    """§13.3 steps 3–4, under each layout; the layout whose checksum verifies, if any."""
    layout = layout_by_checksum(document)
    if layout is None:
        guess = layout_by_fields(document)
        found = (
            f"checksum {document['checksum']} stored, {checksum_of(document, guess)} computed "
            f"for the katalyst {guess.name} layout its fields suggest, and no layout from "
            f"v0.5.0 to v0.5.47 gives it"
        )
        if not skip_corruption:
            raise CheckpointCorruptedError(f"{CORRUPTED_MESSAGE}: {found}")
        notes.append(
            f"{CORRUPTED_MESSAGE} ({found}): used anyway, as skip-cpu-state-corruption does"
        )
    if document["policyName"] != POLICY_NAME:
        message = (
            f'[cpu_plugin] configured policy "{POLICY_NAME}" differs from state checkpoint '
            f'policy "{document["policyName"]}"'
        )
        if not skip_corruption:
            raise CheckpointCorruptedError(message)
        notes.append(f"{message}: used anyway, as skip-cpu-state-corruption does")
    return layout


def _refuse_unmodelled(document: Document, layout: KatalystLayout) -> None:
    found = unmodelled_features(document, layout)
    if found:
        more = f" (and {len(found) - 3} more)" if len(found) > 3 else ""
        raise CheckpointUnmodelledError(
            f"the katalyst {layout.name} checkpoint uses what qrmd does not model: "
            f"{'; '.join(found[:3])}{more}; drain those pods (or wait for the advisor to "
            f"clear the flag) and take the checkpoint again"
        )


def _placement(
    record: Mapping[str, Any], pools: Mapping[str, CPUSet], ramp: CPUSet | None
) -> Placement:
    result: CPUSet = record["allocation_result"]
    original: CPUSet = record["original_allocation_result"]
    owner = record["owner_pool_name"]
    if owner in pools and result == pools[owner] and original == pools[owner]:
        return InPool(owner)
    if ramp is not None and _is_ramping_shared(record) and result == original == ramp:
        return RAMPING
    return OwnCPUs(result, original)


def _is_ramping_shared(record: Mapping[str, Any]) -> bool:
    return (
        bool(record["ramp_up"])
        and not record["owner_pool_name"]
        and (record["qosLevel"] == "shared_cores")
    )


def _entry(record: Mapping[str, Any], placement: Placement) -> ContainerEntry:
    return ContainerEntry(
        pod_uid=record["pod_uid"],
        pod_namespace=record["pod_namespace"],
        pod_name=record["pod_name"],
        container_name=record["container_name"],
        container_type=record["container_type"],
        container_index=record["container_index"],
        ramp_up=record["ramp_up"],
        owner_pool_name=record["owner_pool_name"],
        pod_role=record["pod_role"],
        pod_type=record["pod_type"],
        placement=placement,
        init_timestamp=record["init_timestamp"],
        labels=record["labels"],
        annotations=record["annotations"],
        qos_level=record["qosLevel"],
        request_quantity=record["request_quantity"],
    )


def _collect(
    document: Document, topology: CPUTopology, notes: list[str]
) -> tuple[dict[str, CPUSet], list[dict[str, Any]]]:
    """Pools and container records of ``pod_entries``, checked against the machine."""
    pools: dict[str, CPUSet] = {}
    records: list[dict[str, Any]] = []
    for pod, containers in sorted((document["pod_entries"] or {}).items()):
        if containers is None:
            notes.append(f"pod_entries.{pod} is null: nothing to import for it")
            continue
        for name, record in sorted(containers.items()):
            where = f"pod_entries.{pod}.{name}" if name else f"pod_entries.{pod}"
            if record is None:
                notes.append(f"{where} is null: dropped, as the reference skips it")
                continue
            _check_record(record, topology, where)
            if name == "" and len(containers) == 1:  # is_pool_entry (§5.2)
                pools[pod] = record["allocation_result"]
                continue
            if record["pod_uid"] != pod or record["container_name"] != name:
                raise CheckpointMismatchError(
                    f"{where}: the record names pod {record['pod_uid']!r}, container "
                    f"{record['container_name']!r}; its keys say otherwise"
                )
            records.append(record)
    return pools, records


def _ramp_cpus(records: Iterable[Mapping[str, Any]]) -> CPUSet | None:
    """The one cpuset every ramping shared container is on, if they agree (§9.6)."""
    sets = {
        record["allocation_result"]
        for record in records
        if _is_ramping_shared(record)
        and record["allocation_result"] == record["original_allocation_result"]
    }
    return next(iter(sets)) if len(sets) == 1 else None


def plan_import(document: Document, topology: CPUTopology, *, skip_corruption: bool) -> ImportPlan:
    """The events that take over the reference's state (module docstring, steps 1–4).

    Args:
        document: a decoded ``cpu_plugin_state`` (``katalyst_file.decode_document``).
        topology: this machine.
        skip_corruption: accept a checksum or policy-name mismatch, as
            ``skip-cpu-state-corruption`` does; the finding is kept in ``notes``.

    Returns:
        The plan: events to apply to an empty CPU section, and notes.

    Raises:
        CheckpointCorruptedError: checksum or policy mismatch without ``skip_corruption``.
        CheckpointMismatchError: CPUs or NUMA nodes this machine lacks, keys that disagree with
            their record, or topology fields qrmd cannot represent.
        CheckpointUnmodelledError: entries or fields of a later release qrmd does not model
            (``katalyst_unmodelled``), named by pod and feature; skipping corruption does not
            lift it.
    """
    notes: list[str] = []
    verified = _verify(document, skip_corruption, notes)
    layout = verified or layout_by_fields(document)
    _refuse_unmodelled(document, layout)
    notes.extend(dropped_notes(document))
    for numa in document["machineState"] or {}:
        if numa not in topology.numa_nodes():
            raise CheckpointMismatchError(
                f"machineState.{numa}: NUMA node {numa} does not exist on this machine "
                f"(it has {topology.numa_nodes()})"
            )
    pools, records = _collect(document, topology, notes)
    ramp = _ramp_cpus(records)
    events: list[CPUEvent] = [PoolSet(name, cpus) for name, cpus in sorted(pools.items())]
    if ramp is not None:
        events.append(RampCPUsSet(ramp))
    events.extend(ContainerAllocated(_entry(r, _placement(r, pools, ramp))) for r in records)
    plan = ImportPlan(tuple(events), (), len(records), tuple(sorted(pools)))
    regenerated = _regenerated(plan, topology)
    if regenerated != _v0_5_3_machine_state(document["machineState"]):
        notes.append(
            "the stored machine state differs from the one regenerated from pod_entries; "
            "the regenerated one is used, as the reference does (§13.3 step 5)"
        )
    return ImportPlan(
        plan.events,
        tuple(notes),
        plan.containers,
        plan.pools,
        layout=layout,
        layout_verified=verified is not None,
    )


def _v0_5_3_machine_state(machine: Mapping[int, Any] | None) -> Mapping[int, Any] | None:
    """The stored machine state without what later layouts add (pre-occupation is refused)."""
    if machine is None:
        return None
    keys = ("default_cpuset", "allocated_cpuset", "pod_entries")
    return {
        numa: None if node is None else {key: node[key] for key in keys}
        for numa, node in machine.items()
    }


def imported_state(plan: ImportPlan, topology: CPUTopology) -> CPUState:
    """The CPU section the plan's events build from empty.

    Raises:
        CheckpointMismatchError: the entries do not fit together (the state model's error).
    """
    state = CPUState.empty(topology)
    try:
        for event in plan.events:
            state = apply_cpu_event(state, event)
    except StateError as err:
        raise CheckpointMismatchError(
            f"the checkpoint's entries do not fit together: {err}"
        ) from None
    return state


def _regenerated(plan: ImportPlan, topology: CPUTopology) -> dict[int, Any]:
    return _machine_state(imported_state(plan, topology))
