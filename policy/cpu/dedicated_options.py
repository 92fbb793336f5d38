"""Dedicated allocation options: what a dedicated NUMA-binding pod asks of its CPUs (v0.5.47).

Katalyst v0.5.43 (PR #1063) added five options for ``dedicated_cores`` with ``numa_binding``
(cpu-policy-v0.5.47 (b)). They go in the ``katalyst.kubewharf.io/cpu_enhancement`` JSON and
are flattened with the other enhancement pairs (``policy.cpu.enhancements``)::

    katalyst.kubewharf.io/cpu_enhancement: '{"distribute_evenly_across_numa": "true",
                                             "katalyst.kubewharf.io/numa_number": "2"}'

* ``align_by_socket``, ``distribute_evenly_across_numa``, ``full_pcpus_pairing``: on iff the
  value is exactly ``"true"`` (``qosutil.AnnotationsIndicate*``).
* the NUMA count, under ``katalyst.kubewharf.io/numa_number`` (``--numa-number-annotation-key``):
  absent or ``""`` is 0; otherwise Go's ``strconv.Atoi`` of the value, in [0, #NUMA nodes]
  (``AnnotationsGetNUMANumber``, ``pkg/util/qos/cpu_enhancement.go``).
* the NUMA ids, under ``katalyst.kubewharf.io/numa_ids`` (``--numa-ids-annotation-key``):
  absent or ``""`` is none; otherwise the reference's cpuset ``Parse`` (a piece with more
  than one ``-`` is silently skipped, as there) and a subset of the machine's NUMA nodes
  (``AnnotationsGetNUMAIDs``).

Errors carry the reference's texts, Go's ``strconv`` wording included, so a refusal reads as
the reference's would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policy.errors import ErrorKind, PolicyError

__all__ = [
    "ALIGN_BY_SOCKET_KEY",
    "DEFAULT_NUMA_IDS_ANNOTATION_KEY",
    "DEFAULT_NUMA_NUMBER_ANNOTATION_KEY",
    "DISTRIBUTE_EVENLY_KEY",
    "FULL_PCPUS_PAIRING_KEY",
    "DedicatedOptions",
    "OptionError",
    "go_atoi",
    "numa_ids",
    "numa_number",
    "read_options",
]

ALIGN_BY_SOCKET_KEY = "align_by_socket"
DISTRIBUTE_EVENLY_KEY = "distribute_evenly_across_numa"
FULL_PCPUS_PAIRING_KEY = "full_pcpus_pairing"
DEFAULT_NUMA_NUMBER_ANNOTATION_KEY = "katalyst.kubewharf.io/numa_number"
DEFAULT_NUMA_IDS_ANNOTATION_KEY = "katalyst.kubewharf.io/numa_ids"

_ENABLED = "true"
_INT64_MAX = (1 << 63) - 1


class OptionError(PolicyError):
    """An option annotation that does not parse; the message is the reference's.

    ``INVALID``: the pod's annotations are bad input, whatever the node's state.
    """

    kind = ErrorKind.INVALID


def go_atoi(text: str) -> int:
    """Go's ``strconv.Atoi``: an optional sign and decimal digits, within int64.

    Raises:
        OptionError: ``strconv.Atoi: parsing "<text>": invalid syntax`` or ``value out of
            range``, as Go words them.
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not body.isascii() or not body.isdigit():
        raise OptionError(f'strconv.Atoi: parsing "{_go_quote(text)}": invalid syntax')
    value = -int(body) if text[:1] == "-" else int(body)
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise OptionError(f'strconv.Atoi: parsing "{_go_quote(text)}": value out of range')
    return value


def _go_quote(text: str) -> str:
    # strconv's errors quote the input with %q; the escapes that matter for annotations.
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def numa_number(annotations: Mapping[str, str], max_numas: int, key: str) -> int:
    """``AnnotationsGetNUMANumber``: how many NUMA nodes the pod asks for (0: not asked).

    Raises:
        OptionError: "failed to parse numa number: <strconv error>", or "numa number %d out
            of range, lowest 0 and highest: %d".
    """
    text = annotations.get(key, "")
    if text == "":
        return 0
    try:
        value = go_atoi(text)
    except OptionError as err:
        raise OptionError(f"failed to parse numa number: {err}") from err
    if value < 0 or value > max_numas:
        raise OptionError(f"numa number {value} out of range, lowest 0 and highest: {max_numas}")
    return value


def numa_ids(annotations: Mapping[str, str], numa_nodes: Sequence[int], key: str) -> frozenset[int]:
    """``AnnotationsGetNUMAIDs``: the NUMA nodes the pod names (empty: none named).

    Raises:
        OptionError: "failed to parse numa ids: <strconv error>", or "invalid numa ids: %v as
            they are not a subset of machine numa nodes: %v".
    """
    text = annotations.get(key, "")
    if text == "":
        return frozenset()
    # Kept as ranges: "0-99999999999" is one range to check, not a set to build.
    ranges: list[tuple[int, int]] = []
    try:
        for piece in text.split(","):
            bounds = piece.split("-")
            if len(bounds) == 1:
                value = go_atoi(bounds[0])
                ranges.append((value, value))
            elif len(bounds) == 2:
                lo, hi = go_atoi(bounds[0]), go_atoi(bounds[1])
                if lo <= hi:  # a reversed range adds nothing, as in the reference
                    ranges.append((lo, hi))
            # More than one "-": the reference's Parse skips the piece without a word.
    except OptionError as err:
        raise OptionError(f"failed to parse numa ids: {err}") from err
    machine = frozenset(numa_nodes)
    if any(lo < 0 or hi > max(machine, default=-1) for lo, hi in ranges) or any(
        n not in machine for lo, hi in ranges for n in range(lo, hi + 1)
    ):
        raise OptionError(
            f"invalid numa ids: {_ranges_text(ranges)} as they are not a subset of machine "
            f"numa nodes: {_ranges_text([(n, n) for n in machine])}"
        )
    return frozenset(n for lo, hi in ranges for n in range(lo, hi + 1))


def _ranges_text(ranges: Sequence[tuple[int, int]]) -> str:
    """Ranges of ids the way the reference's CPUSet prints their union (``0-2,5``)."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in merged)


@dataclass(frozen=True, slots=True)
class DedicatedOptions:
    """The options of one request, as the hint rule reads them.

    Attributes:
        align_by_socket: the hint must use as few sockets as the request needs.
        distribute_evenly: the request is split evenly over the hint's NUMA nodes.
        full_pcpus_pairing: the hint must hold enough whole free cores.
        numa_ids: the NUMA nodes the pod names (empty: none).
        numa_number: the NUMA count the hints are sized by: the number of ``numa_ids`` when
            named, else the annotated count (0: not asked).
    """

    align_by_socket: bool = False
    distribute_evenly: bool = False
    full_pcpus_pairing: bool = False
    numa_ids: frozenset[int] = frozenset()
    numa_number: int = 0


def read_options(
    annotations: Mapping[str, str],
    numa_nodes: Sequence[int],
    *,
    numa_number_key: str = DEFAULT_NUMA_NUMBER_ANNOTATION_KEY,
    numa_ids_key: str = DEFAULT_NUMA_IDS_ANNOTATION_KEY,
) -> DedicatedOptions:
    """Read the options of a request, as ``calculateHints`` does (policy_hint_handlers.go).

    The NUMA ids are read first; when named, their count is the NUMA number and the number
    annotation is not read at all (so a malformed one goes unnoticed, as in the reference).

    Raises:
        OptionError: "get NUMA IDs from annotations failed with error: ..." or "get NUMA
            number from annotations failed with error: ...".
    """
    try:
        ids = numa_ids(annotations, numa_nodes, numa_ids_key)
    except OptionError as err:
        raise OptionError(f"get NUMA IDs from annotations failed with error: {err}") from err
    if ids:
        count = len(ids)
    else:
        try:
            count = numa_number(annotations, len(numa_nodes), numa_number_key)
        except OptionError as err:
            raise OptionError(f"get NUMA number from annotations failed with error: {err}") from err
    return DedicatedOptions(
        align_by_socket=annotations.get(ALIGN_BY_SOCKET_KEY) == _ENABLED,
        distribute_evenly=annotations.get(DISTRIBUTE_EVENLY_KEY) == _ENABLED,
        full_pcpus_pairing=annotations.get(FULL_PCPUS_PAIRING_KEY) == _ENABLED,
        numa_ids=ids,
        numa_number=count,
    )
