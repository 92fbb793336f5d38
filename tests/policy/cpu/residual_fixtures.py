"""Residual checker evidence for tests of the removal (spec cpu-policy §12.4): what the checker
would hand the Allocator after ``count`` consecutive 30-s listings that missed ``due``."""

from __future__ import annotations

from collections.abc import Collection

from policy.cpu.residual_check import (
    Listing,
    ListingSummary,
    ResidualEvidence,
    Sighting,
    listing_fingerprint,
)

__all__ = ["evidence"]


def evidence(
    *due: str,
    at: float,
    listed: Collection[str] = ("pod-a",),
    count: int = 10,
    missing: Collection[str] = (),
) -> ResidualEvidence:
    """Evidence of a round at ``at`` whose listing held ``listed``: ``due`` missed ``count``
    times (the first ``(count - 1) * 30`` s before), ``missing`` missed once, not yet due."""
    summary: ListingSummary = Listing(frozenset(listed), at).summary()
    assert summary.fingerprint == listing_fingerprint(listed)
    sightings = {uid: Sighting(at - 30.0 * (count - 1), at, count) for uid in due}
    sightings |= {uid: Sighting(at, at, 1) for uid in missing}
    return ResidualEvidence(sightings, tuple(sorted(due)), summary, counted=True)
