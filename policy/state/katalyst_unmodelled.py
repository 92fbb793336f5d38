"""What a katalyst checkpoint may hold that qrmd does not model, found by pod and feature.

qrmd reproduces katalyst v0.5.3 (spec cpu-policy.md). Later releases write the same kinds of
entries, but some mean things v0.5.3 never did (cpu-policy-v0.5.47.md). Importing one of them
as if it were a v0.5.3 entry would hand its CPUs to the wrong pool, so each is refused, naming
the pod (or pool) and the feature:

* **shared_cores NUMA binding (SNB, v0.5.4+)**: pools ``<base>-NUMA<id>`` and the shared_cores
  containers in them. A container is SNB when it is ``shared_cores`` with ``numa_binding=true``
  and either carries the ``numa_hint`` the reference records for it, sits in a ``-NUMA`` pool,
  or was written by a release that has SNB (any layout after v0.5.0–v0.5.4; v0.5.3 itself
  ignored ``numa_binding`` on shared_cores, so its files import as plain shared entries);
* **reclaimed_cores NUMA binding (RNB)**: a reclaimed_cores container carrying ``numa_hint``;
* **system_cores (v0.5.12+)** containers and ``system*`` pools, and the ``interrupt`` pool
  (v0.5.32+): v0.5.3 answered "not supported yet";
* **multi-NUMA dedicated_cores without numa_exclusive** (``numa_number``/``numa_ids``,
  v0.5.43): v0.5.3 bound a non-exclusive dedicated container to one NUMA node;
* **pre-occupation (v0.5.34+)**: entries under a NUMA state's ``pre_occ_pod_entries``;
* **shared/reclaimed overlap (v0.5.5+)**: ``allow_shared_cores_overlap_reclaimed_cores`` true,
  set by the advisor, makes the reclaim pool overlap shared pools; qrmd keeps them disjoint.

Export has the converse check (``unexportable``): from v0.5.4 the reference reads a
shared_cores container with ``numa_binding=true`` as SNB, while qrmd, as v0.5.3 did, holds it in
a plain shared pool; writing it for such a release would misplace it.

``numa_headroom`` (v0.5.16+) is the advisor's per-NUMA reclaimed headroom, re-sent on every
advisor round and used only for reclaimed NUMA binding: it is dropped with a note.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from policy.state.entries import AllocationInfo
from policy.state.katalyst_file import HEADROOM_KEY, OVERLAP_KEY, PRE_OCC_KEY, Document
from policy.state.katalyst_layouts import DEFAULT_VERSION, V0_5_0, KatalystLayout

__all__ = ["dropped_notes", "unexportable", "unmodelled_features"]

# Annotation keys and values as the reference stores them in a record (katalyst-api consts,
# cpu/consts/consts.go): the enhancements are flattened into the annotations.
_NUMA_BINDING: Final = "numa_binding"
_NUMA_EXCLUSIVE: Final = "numa_exclusive"
_NUMA_HINT: Final = "numa_hint"
_TRUE: Final = "true"
_NUMA_POOL_INFIX: Final = "-NUMA"  # commonstate.NUMAPoolInfix
_SYSTEM_POOL_PREFIX: Final = "system"
_INTERRUPT_POOL: Final = "interrupt"


def _who(record: Mapping[str, Any]) -> str:
    container = f"container {record['container_name']!r}"
    if not (record["pod_namespace"] or record["pod_name"]):
        return f"pod uid {record['pod_uid']} {container}"
    pod = f"{record['pod_namespace']}/{record['pod_name']}"
    return f"pod {pod} (uid {record['pod_uid']}) {container}"


def _annotation(record: Mapping[str, Any], key: str) -> str | None:
    annotations = record["annotations"] or {}
    value = annotations.get(key)
    return value if isinstance(value, str) else None


def _record_feature(record: Mapping[str, Any], layout: KatalystLayout) -> str | None:
    """The unmodelled feature a container record uses, or None."""
    qos = record["qosLevel"]
    owner = record["owner_pool_name"]
    binding = _annotation(record, _NUMA_BINDING) == _TRUE
    hinted = _annotation(record, _NUMA_HINT) is not None
    if qos == "shared_cores" and (
        _NUMA_POOL_INFIX in owner or (binding and (hinted or layout != V0_5_0))
    ):
        return f"shared_cores NUMA binding (SNB, pool {owner or 'unset'}, katalyst v0.5.4+)"
    if qos == "reclaimed_cores" and hinted:
        return "reclaimed_cores NUMA binding (numa_hint set)"
    if qos == "system_cores" or owner.startswith(_SYSTEM_POOL_PREFIX):
        return "system_cores (katalyst v0.5.12+)"
    numas = record["topology_aware_assignments"] or {}
    if (
        qos == "dedicated_cores"
        and binding
        and _annotation(record, _NUMA_EXCLUSIVE) != _TRUE
        and sum(1 for cpus in numas.values() if cpus) > 1
    ):
        return (
            f"dedicated_cores bound to NUMA nodes {sorted(numas)} without numa_exclusive "
            f"(numa_number/numa_ids, katalyst v0.5.43)"
        )
    return None


def _pool_feature(name: str) -> str | None:
    if _NUMA_POOL_INFIX in name:
        return "shared_cores NUMA binding pool (SNB, katalyst v0.5.4+)"
    if name.startswith(_SYSTEM_POOL_PREFIX):
        return "system_cores pool (katalyst v0.5.12+)"
    if name == _INTERRUPT_POOL:
        return "interrupt pool (katalyst v0.5.32+)"
    return None


def _records(pods: Mapping[str, Any] | None) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for pod, containers in sorted((pods or {}).items()):
        for name, record in sorted((containers or {}).items()):
            if record is not None:
                yield pod, name, record


def unmodelled_features(document: Document, layout: KatalystLayout) -> list[str]:
    """One line per entry or field of ``document`` that qrmd does not model (module docstring).

    Args:
        document: a decoded checkpoint (``katalyst_decode.decode_document``).
        layout: the layout it was written in (verified, or told by its fields).

    Returns:
        The findings, pool and pod named in each; empty when qrmd models all of it.
    """
    found: list[str] = []
    if document.get(OVERLAP_KEY):
        found.append(
            f"{OVERLAP_KEY} is true: the advisor let the reclaim pool overlap shared_cores "
            f"pools (katalyst v0.5.5+), which qrmd keeps disjoint"
        )
    for pod, name, record in _records(document["pod_entries"]):
        if name == "" and len(document["pod_entries"][pod]) == 1:  # a pool entry (§5.2)
            if (feature := _pool_feature(pod)) is not None:
                found.append(f"pool {pod}: {feature}")
            continue
        if (feature := _record_feature(record, layout)) is not None:
            found.append(f"{_who(record)}: {feature}")
    for numa, state in sorted((document["machineState"] or {}).items()):
        for _, _, record in _records((state or {}).get(PRE_OCC_KEY)):
            found.append(
                f"machineState.{numa}.{PRE_OCC_KEY}: {_who(record)} holds a pre-occupation "
                f"(katalyst v0.5.34+)"
            )
    return found


def dropped_notes(document: Document) -> list[str]:
    """Fields qrmd drops on import because the reference re-derives them."""
    headroom = document.get(HEADROOM_KEY)
    if not headroom:
        return []
    shown = ", ".join(f"{numa}: {value:g}" for numa, value in sorted(headroom.items()))
    return [
        f"{HEADROOM_KEY} {{{shown}}} dropped: the advisor re-sends it every round and qrmd "
        f"does not model reclaimed NUMA binding, the only user of it"
    ]


#: The first release that reads ``numa_binding`` on shared_cores as SNB (state.go at v0.5.4,
#: ``CheckSharedNUMABinding``).
_FIRST_SNB_RELEASE: Final = 4


def unexportable(infos: Iterable[AllocationInfo], version: str) -> str | None:
    """Why release ``version`` would misread one of ``infos``, or None when it reads them all.

    Args:
        infos: qrmd's container records.
        version: a release tag, normalized (``katalyst_layouts.normalize_version``).
    """
    if int(version.rsplit(".", 1)[1]) < _FIRST_SNB_RELEASE:
        return None
    for info in infos:
        annotations = info.annotations or {}
        if info.qos_level == "shared_cores" and annotations.get(_NUMA_BINDING) == _TRUE:
            return (
                f"pod {info.pod_namespace}/{info.pod_name} (uid {info.pod_uid}) container "
                f"{info.container_name!r} is shared_cores with numa_binding=true: qrmd holds it "
                f"in pool {info.owner_pool_name!r} as v0.5.3 did, but katalyst {version} would "
                f"read it as shared_cores NUMA binding (SNB) without its NUMA pool; export "
                f"with --katalyst-version {DEFAULT_VERSION}, or remove the pod first"
            )
    return None
