"""The reference's ``cpu_plugin_state`` layouts, v0.5.0 to v0.5.47, as one table (spec §13).

A *layout* is the set of Go structs a katalyst-agent release marshals and checksums: the JSON keys
it writes, their order, and the deep-hash DUMP its checksum is computed over (§13.4). Releases
that share the structs share a layout. Read from ``kubewharf/katalyst-core`` at each tag,
``pkg/agent/qrm-plugins/cpu/dynamicpolicy/state/checkpoint.go`` and ``state.go`` (and, from
v0.5.12, ``pkg/agent/qrm-plugins/commonstate/state.go``); the checksum code is kubelet's
``checkpointmanager/checksum`` (k8s.io/kubernetes v1.24.6 at every tag, spew ``%#v`` then
FNV-1a-32), unchanged across them:

==================  =====================================================================
releases            what the layout adds to the previous one
==================  =====================================================================
v0.5.0 – v0.5.4     the §13.2 layout qrmd was written against
v0.5.5 – v0.5.11    ``allow_shared_cores_overlap_reclaimed_cores`` (bool, always written)
                    after ``pod_entries``
v0.5.12 – v0.5.15   the pod fields move into an embedded ``commonstate.AllocationMeta``:
                    the same JSON keys in another order, another DUMP
v0.5.16 – v0.5.33   ``numa_headroom`` (``map[int]float64``, always written) after
                    ``machineState``
v0.5.34 – v0.5.47   each NUMA state gains ``pre_occ_pod_entries`` (always written)
==================  =====================================================================

Pure data: no checksum or bytes here (``policy.state.katalyst_file``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from policy.errors import CodecError

__all__ = [
    "DEFAULT_VERSION",
    "LAYOUTS",
    "RELEASES",
    "V0_5_0",
    "V0_5_5",
    "V0_5_12",
    "V0_5_16",
    "V0_5_34",
    "KatalystLayout",
    "layout_of_version",
    "normalize_version",
]


@dataclass(frozen=True, slots=True)
class KatalystLayout:
    """The structs one range of katalyst-agent releases writes.

    Attributes:
        first: the first release tag with this layout.
        last: the last release tag with it (v0.5.47 is the newest qrmd knows).
        change: what this layout changed, in one phrase.
        overlap_flag: the checkpoint holds ``allow_shared_cores_overlap_reclaimed_cores``.
        allocation_meta: the pod fields sit in an embedded ``commonstate.AllocationMeta``.
        numa_headroom: the checkpoint holds ``numa_headroom``.
        pre_occupation: each NUMA state holds ``pre_occ_pod_entries``.
    """

    first: str
    last: str
    change: str
    overlap_flag: bool
    allocation_meta: bool
    numa_headroom: bool
    pre_occupation: bool

    @property
    def name(self) -> str:
        """``v0.5.16–v0.5.33``: the release range, as messages and docs name the layout."""
        return f"{self.first}–{self.last}"


V0_5_0: Final = KatalystLayout(
    "v0.5.0", "v0.5.4", "the layout of spec §13.2", False, False, False, False
)
V0_5_5: Final = KatalystLayout(
    "v0.5.5",
    "v0.5.11",
    "adds allow_shared_cores_overlap_reclaimed_cores",
    True,
    False,
    False,
    False,
)
V0_5_12: Final = KatalystLayout(
    "v0.5.12",
    "v0.5.15",
    "moves the pod fields into commonstate.AllocationMeta",
    True,
    True,
    False,
    False,
)
V0_5_16: Final = KatalystLayout("v0.5.16", "v0.5.33", "adds numa_headroom", True, True, True, False)
V0_5_34: Final = KatalystLayout(
    "v0.5.34", "v0.5.47", "adds pre_occ_pod_entries to each NUMA state", True, True, True, True
)

#: Every layout, newest first: the order detection tries them in.
LAYOUTS: Final = (V0_5_34, V0_5_16, V0_5_12, V0_5_5, V0_5_0)

#: The katalyst-core release tags of the v0.5 line up to v0.5.47 (v0.5.14, v0.5.25, v0.5.35
#: and v0.5.36 were never tagged).
RELEASES: Final = tuple(f"v0.5.{n}" for n in range(48) if n not in (14, 25, 35, 36))

#: The release qrmd reproduces; its layout is what ``export-katalyst`` writes by default.
DEFAULT_VERSION: Final = "v0.5.3"


def _number(tag: str) -> int:
    return int(tag.rsplit(".", 1)[1])


def normalize_version(version: str) -> str:
    """``0.5.16`` or ``v0.5.16`` as the release tag ``v0.5.16``.

    Raises:
        CodecError: not a v0.5 release tag qrmd knows (the message lists the range).
    """
    tag = version if version.startswith("v") else f"v{version}"
    if tag not in RELEASES:
        raise CodecError(
            f"katalyst version {version!r} is not a release qrmd knows: name a tag from "
            f"{RELEASES[0]} to {RELEASES[-1]} (e.g. {DEFAULT_VERSION})"
        )
    return tag


def layout_of_version(version: str) -> KatalystLayout:
    """The layout release ``version`` writes.

    Raises:
        CodecError: ``version`` is not a release qrmd knows.
    """
    number = _number(normalize_version(version))
    for layout in LAYOUTS:
        if _number(layout.first) <= number:
            return layout
    raise AssertionError("v0.5.0 starts the oldest layout")  # pragma: no cover
