"""Which katalyst release layout wrote a checkpoint (``policy.state.katalyst_layouts``).

A file is of the layout whose checksum of its content is the one it stores: each layout's DUMP
differs (fields, nesting), so at most one verifies but by a 32-bit collision. The layouts are
tried newest first. When none verifies (a damaged file read with ``skip-cpu-state-corruption``)
the layout is told by the fields the file names: ``pre_occ_pod_entries`` (v0.5.34+),
``numa_headroom`` (v0.5.16+), ``allow_shared_cores_overlap_reclaimed_cores`` (v0.5.5+). The
v0.5.12 change reorders keys only, which JSON readers ignore, so fields cannot tell v0.5.5–v0.5.11
from v0.5.12–v0.5.15; both import alike.
"""

from __future__ import annotations

from policy.state.katalyst_file import (
    HEADROOM_KEY,
    OVERLAP_KEY,
    PRE_OCC_KEY,
    PRESENT_KEY,
    Document,
    checksum_of,
)
from policy.state.katalyst_layouts import LAYOUTS, V0_5_0, V0_5_5, V0_5_16, V0_5_34, KatalystLayout

__all__ = ["layout_by_checksum", "layout_by_fields"]


def layout_by_checksum(document: Document) -> KatalystLayout | None:
    """The newest layout whose checksum of ``document`` is the stored one, or None."""
    for layout in LAYOUTS:
        if checksum_of(document, layout) == document["checksum"]:
            return layout
    return None


def layout_by_fields(document: Document) -> KatalystLayout:
    """The oldest layout that has every later-layout field ``document`` names."""
    present = document.get(PRESENT_KEY, frozenset())
    if PRE_OCC_KEY in present:
        return V0_5_34
    if HEADROOM_KEY in present:
        return V0_5_16
    if OVERLAP_KEY in present:
        return V0_5_5
    return V0_5_0
