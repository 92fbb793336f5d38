"""The reference's ``cpu_plugin_state`` file as a document: decoding, Go's bytes, checksum (§13).

The rule: a checkpoint is read into one *document* with the §13.2 decoding defaults applied,
and both the bytes written (``encode_document``) and the checksum (``checksum_of``) are
computed from that same document, so writer and reader always agree (§13.4, "recommended
implementation").

The document is plain data:

* ``{"policyName": str, "machineState": {numa: NUMA | None} | None,
  "pod_entries": PODS | None, "checksum": int}``, and the fields later layouts add
  (``policy.state.katalyst_layouts``): ``"allow_shared_cores_overlap_reclaimed_cores": bool``,
  ``"numa_headroom": {numa: float} | None``; a document without them holds their zero values;
* a NUMA is ``{"default_cpuset": CPUSet, "allocated_cpuset": CPUSet, "pod_entries": PODS|None}``,
  from v0.5.34 also ``"pre_occ_pod_entries": PODS | None``;
* PODS is ``{pod: {container: AI | None} | None}`` and an AI holds every §5.1 field under its
  JSON key, in ``AI_FIELDS`` order, CPU sets as ``CPUSet`` (the uninitialized set kept),
  topology fields as ``{numa: CPUSet} | None`` and labels/annotations as ``{str: str} | None``.

Bytes are those of Go's ``encoding/json`` as the reference writes them (§13.2): compact, struct
keys in field order, map keys sorted as strings, whole floats without a fraction, ``<``, ``>``,
``&`` (and U+2028/U+2029) escaped, the omission rules of §5.1. Control characters other than
``\\n``, ``\\r``, ``\\t`` are written as ``\\u00XX`` — what the Go releases katalyst-agent
v0.5.3 was built with write (Go 1.22 later spells ``\\b`` and ``\\f`` short; both decode alike).

Every function takes the layout to write or checksum (default: v0.5.0–v0.5.4, qrmd's own). The
layouts differ in which fields exist, the JSON order of a record's fields and the DUMP's
struct nesting; the checksum algorithm is the same for all (kubelet v1.24.6's).

Reading a file into a document is ``policy.state.katalyst_decode``. No file access here: the
commands in ``qrmd.offline.commands.katalyst_checkpoint`` read and write.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from policy.errors import CodecError
from policy.state.katalyst_layouts import V0_5_0, KatalystLayout
from policy.topology.cpuset import CPUSet

__all__ = [
    "AI_FIELDS",
    "HEADROOM_KEY",
    "META_KEYS",
    "OVERLAP_KEY",
    "POLICY_NAME",
    "PRESENT_KEY",
    "PRE_OCC_KEY",
    "checksum_of",
    "dump_of",
    "encode_document",
    "fnv1a_32",
    "go_float",
]

#: The only policy qrmd reproduces (§13.3 step 4).
POLICY_NAME: Final = "dynamic"

Document = dict[str, Any]

# (JSON key, DUMP name, kind, omitted when zero) in the reference's field order (§5.1, §13.4).
AI_FIELDS: Final[tuple[tuple[str, str, str, bool], ...]] = (
    ("pod_uid", "PodUid", "str", True),
    ("pod_namespace", "PodNamespace", "str", True),
    ("pod_name", "PodName", "str", True),
    ("container_name", "ContainerName", "str", True),
    ("container_type", "ContainerType", "str", True),
    ("container_index", "ContainerIndex", "uint", True),
    ("ramp_up", "RampUp", "bool", True),
    ("owner_pool_name", "OwnerPoolName", "str", True),
    ("pod_role", "PodRole", "str", True),
    ("pod_type", "PodType", "str", True),
    ("allocation_result", "AllocationResult", "cpuset", False),
    ("original_allocation_result", "OriginalAllocationResult", "cpuset", False),
    ("topology_aware_assignments", "TopologyAwareAssignments", "assign", False),
    ("original_topology_aware_assignments", "OriginalTopologyAwareAssignments", "assign", False),
    ("init_timestamp", "InitTimestamp", "str", False),
    ("labels", "Labels", "smap", False),
    ("annotations", "Annotations", "smap", False),
    ("qosLevel", "QoSLevel", "str", False),
    ("request_quantity", "RequestQuantity", "float", True),
)

#: From v0.5.12 these fields are those of the embedded ``commonstate.AllocationMeta``, which
#: comes first; the others follow it, each group in ``AI_FIELDS`` order (state.go and
#: commonstate/state.go at v0.5.12–v0.5.47).
META_KEYS: Final = frozenset(
    {
        "pod_uid",
        "pod_namespace",
        "pod_name",
        "container_name",
        "container_type",
        "container_index",
        "owner_pool_name",
        "pod_role",
        "pod_type",
        "labels",
        "annotations",
        "qosLevel",
    }
)
_META_FIELDS: Final = tuple(f for f in AI_FIELDS if f[0] in META_KEYS)
_OWN_FIELDS: Final = tuple(f for f in AI_FIELDS if f[0] not in META_KEYS)
#: Top-level keys of the later layouts (``katalyst_layouts``).
OVERLAP_KEY: Final = "allow_shared_cores_overlap_reclaimed_cores"
HEADROOM_KEY: Final = "numa_headroom"
PRE_OCC_KEY: Final = "pre_occ_pod_entries"
#: The document key ``katalyst_decode`` lists the later layouts' keys a file named under; it is
#: never written.
PRESENT_KEY: Final = "present_layout_keys"

_FNV_OFFSET: Final = 0x811C9DC5
_FNV_PRIME: Final = 0x01000193


# -- Go's encoding/json bytes (§13.2) ----------------------------------------------------------

_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HTML: Final = frozenset("<>&\u2028\u2029")


def _go_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch in _HTML:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _go_json_float(value: float) -> str:
    """A float64 as encoding/json writes it: ``%f``-like within [1e-6, 1e21), else ``%e``."""
    if not math.isfinite(value):
        raise CodecError(f"request_quantity: {value} cannot be written as JSON")
    if value == 0:
        return "0" if math.copysign(1, value) > 0 else "-0"
    magnitude = abs(value)
    if 1e-6 <= magnitude < 1e21:
        digits, exponent = _shortest_digits(magnitude)
        body = _plain(digits, exponent)
    else:
        body = _exponent_form(*_shortest_digits(magnitude), min_digits=2)
        # encoding/json writes e-07 as e-7 (Go's floatEncoder "clean up e-09 to e-9").
        if body[-4:-1] == "e-0":
            body = body[:-2] + body[-1]
    return ("-" if value < 0 else "") + body


def _shortest_digits(magnitude: float) -> tuple[str, int]:
    """Shortest round-trip digits ``d1..dn`` and exponent ``e``: value = d1.d2..dn × 10^e.

    Python's ``repr`` is the shortest string that reads back as the same float, the digits
    Go's formatting with precision -1 chooses.
    """
    sign_bit, digit_tuple, exp = decimal.Decimal(repr(magnitude)).as_tuple()
    del sign_bit
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple)).lstrip("0") or "0"
    stripped = digits.rstrip("0") or "0"
    exp += len(digits) - len(stripped)
    return stripped, exp + len(stripped) - 1


def _plain(digits: str, exponent: int) -> str:
    if exponent < 0:
        return "0." + "0" * (-exponent - 1) + digits
    whole = digits[: exponent + 1].ljust(exponent + 1, "0")
    frac = digits[exponent + 1 :]
    return whole + ("." + frac if frac else "")


def _exponent_form(digits: str, exponent: int, *, min_digits: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    sign = "-" if exponent < 0 else "+"
    return f"{mantissa}e{sign}{abs(exponent):0{min_digits}d}"


def go_float(value: float) -> str:
    """A float as the reference's deep-hash printer writes it: Go's shortest ``%g`` (§13.4)."""
    if value == 0:
        return "0"
    digits, exponent = _shortest_digits(abs(value))
    sign = "-" if value < 0 else ""
    if exponent < -4 or exponent >= 6:
        return sign + _exponent_form(digits, exponent, min_digits=2)
    return sign + _plain(digits, exponent)


def _json_cpuset(cpus: CPUSet) -> str:
    return _go_string(cpus.to_json())


def _json_map(items: Mapping[Any, Any] | None, value: Callable[[Any], str]) -> str:
    if items is None:
        return "null"
    keyed = sorted((str(k), v) for k, v in items.items())
    return "{" + ",".join(f"{_go_string(k)}:{value(v)}" for k, v in keyed) + "}"


def _record_fields(layout: KatalystLayout) -> tuple[tuple[str, str, str, bool], ...]:
    """A record's fields in the order ``layout`` marshals them (JSON and DUMP alike)."""
    return _META_FIELDS + _OWN_FIELDS if layout.allocation_meta else AI_FIELDS


def _json_allocation_info(info: Mapping[str, Any] | None, layout: KatalystLayout) -> str:
    if info is None:
        return "null"
    parts = []
    for key, _, kind, omit_zero in _record_fields(layout):
        value = info[key]
        if omit_zero and not value:
            continue
        if kind == "str":
            text = _go_string(value)
        elif kind == "uint":
            text = str(value)
        elif kind == "bool":
            text = "true" if value else "false"
        elif kind == "float":
            text = _go_json_float(value)
        elif kind == "cpuset":
            text = _json_cpuset(value)
        elif kind == "assign":
            text = _json_map(value, _json_cpuset)
        else:
            text = _json_map(value, _go_string)
        parts.append(f"{_go_string(key)}:{text}")
    return "{" + ",".join(parts) + "}"


def _json_pods(pods: Mapping[str, Any] | None, layout: KatalystLayout) -> str:
    return _json_map(
        pods, lambda containers: _json_map(containers, lambda i: _json_allocation_info(i, layout))
    )


def _json_numa(numa: Mapping[str, Any] | None, layout: KatalystLayout) -> str:
    if numa is None:
        return "null"
    pre_occ = ""
    if layout.pre_occupation:
        pre_occ = f',"{PRE_OCC_KEY}":{_json_pods(numa.get(PRE_OCC_KEY), layout)}'
    return (
        f'{{"default_cpuset":{_json_cpuset(numa["default_cpuset"])},'
        f'"allocated_cpuset":{_json_cpuset(numa["allocated_cpuset"])},'
        f'"pod_entries":{_json_pods(numa["pod_entries"], layout)}{pre_occ}}}'
    )


def encode_document(document: Document, layout: KatalystLayout = V0_5_0) -> bytes:
    """The bytes release ``layout`` writes for ``document``, its ``checksum`` field as given.

    Fields ``layout`` lacks are not written; fields it has that ``document`` lacks are written
    with their zero values.
    """
    headroom = ""
    if layout.numa_headroom:
        headroom = f',"{HEADROOM_KEY}":{_json_map(document.get(HEADROOM_KEY), _go_json_float)}'
    overlap = ""
    if layout.overlap_flag:
        overlap = f',"{OVERLAP_KEY}":{"true" if document.get(OVERLAP_KEY) else "false"}'
    machine = _json_map(document["machineState"], lambda n: _json_numa(n, layout))
    text = (
        f'{{"policyName":{_go_string(document["policyName"])},'
        f'"machineState":{machine}{headroom},'
        f'"pod_entries":{_json_pods(document["pod_entries"], layout)}{overlap},'
        f'"checksum":{document["checksum"]}}}'
    )
    return text.encode()


# -- the checksum (§13.4) ---------------------------------------------------------------------


def fnv1a_32(data: bytes) -> int:
    """FNV-1a, 32 bits (offset basis 0x811C9DC5, prime 0x01000193)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def _setbody(cpus: CPUSet) -> str:
    if not cpus.is_initialized:
        return "{Initialed:(bool)false elems:(map[int]struct {})<nil>}"
    elems = " ".join(f"{cpu}:{{}}" for cpu in cpus.to_sorted_list())
    return f"{{Initialed:(bool)true elems:(map[int]struct {{}})map[{elems}]}}"


def _dump_cpuset(cpus: CPUSet) -> str:
    return "(machine.CPUSet)" + _setbody(cpus)


def _dump_map(items: Mapping[Any, Any] | None, value: Callable[[Any], str]) -> str:
    if items is None:
        return "<nil>"
    return "map[" + " ".join(f"{k}:{value(items[k])}" for k in sorted(items)) + "]"


_DUMPERS: Final[dict[str, Callable[[Any], str]]] = {
    "str": str,
    "uint": str,
    "bool": lambda v: "true" if v else "false",
    "float": go_float,
    "cpuset": _dump_cpuset,
    "assign": lambda v: _dump_map(v, _setbody),
    "smap": lambda v: _dump_map(v, str),
}

_DUMP_TYPES: Final = {
    "str": "(string)",
    "uint": "(uint64)",
    "bool": "(bool)",
    "float": "(float64)",
    "cpuset": "",
    "assign": "(map[int]machine.CPUSet)",
    "smap": "(map[string]string)",
}


def _dump_fields(info: Mapping[str, Any], fields: tuple[tuple[str, str, str, bool], ...]) -> str:
    return " ".join(
        f"{name}:{_DUMP_TYPES[kind]}{_DUMPERS[kind](info[key])}" for key, name, kind, _ in fields
    )


def _dump_allocation_info(info: Mapping[str, Any] | None, layout: KatalystLayout) -> str:
    if info is None:
        return "<nil>"
    if layout.allocation_meta:
        # spew prints an embedded struct as a field named by its type.
        meta = _dump_fields(info, _META_FIELDS)
        own = _dump_fields(info, _OWN_FIELDS)
        return f"<*>{{AllocationMeta:(commonstate.AllocationMeta){{{meta}}} {own}}}"
    return "<*>{" + _dump_fields(info, AI_FIELDS) + "}"


def _dump_pods(pods: Mapping[str, Any] | None, layout: KatalystLayout) -> str:
    return _dump_map(
        pods, lambda containers: _dump_map(containers, lambda i: _dump_allocation_info(i, layout))
    )


def _dump_numa(numa: Mapping[str, Any] | None, layout: KatalystLayout) -> str:
    if numa is None:
        return "<nil>"
    pre_occ = ""
    if layout.pre_occupation:
        pre_occ = f" PreOccPodEntries:(state.PodEntries){_dump_pods(numa.get(PRE_OCC_KEY), layout)}"
    return (
        f"<*>{{DefaultCPUSet:{_dump_cpuset(numa['default_cpuset'])} "
        f"AllocatedCPUSet:{_dump_cpuset(numa['allocated_cpuset'])} "
        f"PodEntries:(state.PodEntries){_dump_pods(numa['pod_entries'], layout)}{pre_occ}}}"
    )


def dump_of(document: Document, layout: KatalystLayout = V0_5_0) -> str:
    """The deep-hash rendering release ``layout`` checksums ``document`` with (§13.4 DUMP).

    The checksum field is rendered as 0, as ``MarshalCheckpoint`` and ``VerifyChecksum`` zero
    it first; fields ``layout`` lacks are left out, fields it has take their zero values.
    """
    machine = _dump_map(document["machineState"], lambda n: _dump_numa(n, layout))
    headroom = ""
    if layout.numa_headroom:
        values = _dump_map(document.get(HEADROOM_KEY), go_float)
        headroom = f" NUMAHeadroom:(map[int]float64){values}"
    overlap = ""
    if layout.overlap_flag:
        flag = "true" if document.get(OVERLAP_KEY) else "false"
        overlap = f" AllowSharedCoresOverlapReclaimedCores:(bool){flag}"
    return (
        f"(*state.CPUPluginCheckpoint){{PolicyName:(string){document['policyName']}"
        f" MachineState:(state.NUMANodeMap){machine}{headroom}"
        f" PodEntries:(state.PodEntries){_dump_pods(document['pod_entries'], layout)}{overlap}"
        " Checksum:(checksum.Checksum)0}"
    )


def checksum_of(document: Document, layout: KatalystLayout = V0_5_0) -> int:
    """The §13.4 checksum release ``layout`` gives ``document`` (its ``checksum`` is ignored)."""
    return fnv1a_32(dump_of(document, layout).encode())
