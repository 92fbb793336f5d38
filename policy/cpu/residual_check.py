"""clearResidualState's evidence: which pods of the state the pod list has been missing, since
when, and which are due for removal (spec cpu-policy §12.4 steps 1–3).

A *sighting* is one successful pod listing that does not hold a pod the state holds. The
rules, on top of the count of ``policy.cpu.remove.residual_round`` (the one place the count
is kept):

* only a successful, non-empty listing that is newer than the last one counted is evidence.
  A failed fetch is no round at all: it counts nothing and resets nothing, so a pod missing
  before and after a failed fetch keeps its count. An empty listing removes nothing either
  (a restarting kubelet answers empty, and then every pod would look residual);
* a pod listed again, or gone from the state, loses its sightings (they must be consecutive);
* a pod is due at its N-th consecutive sighting, N being ``--residual-max-age`` over
  ``--residual-check-period`` rounded up (10 with the reference's 5 min and 30 s); due pods
  come in ascending uid order (the spec's recommended order), pool entries are never pods.

The evidence is plain data: the listing's fingerprint (a hash of its sorted uids, so a reader
can tell two listings apart without the list), its time and size, and each missing pod's
first and last sighting and count. This count is the only one: the Allocator keeps none, it
removes what the evidence calls due (``policy.cpu.residual_removal``), and the evidence is
the removal's journaled input. ``to_plain`` is what a journal record or log line holds.
Pure: time comes in with the listing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policy.cpu.remove import residual_round
from policy.state.cpu_state import CPUState

__all__ = [
    "Listing",
    "ListingSummary",
    "ResidualEvidence",
    "Sighting",
    "listing_fingerprint",
    "observe_listing",
]


def listing_fingerprint(pod_uids: Collection[str]) -> str:
    """A short hash of a listing's pod uids (order does not matter)."""
    digest = hashlib.sha256()
    for uid in sorted(pod_uids):
        digest.update(uid.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Listing:
    """One successful pod listing as the checker saw it.

    Attributes:
        pod_uids: every pod uid listed.
        fetched_at: wall time of the fetch.
    """

    pod_uids: frozenset[str]
    fetched_at: float

    @property
    def fingerprint(self) -> str:
        """``listing_fingerprint`` of the uids."""
        return listing_fingerprint(self.pod_uids)

    def summary(self) -> ListingSummary:
        """What the evidence keeps of the listing: its fingerprint, size and time."""
        return ListingSummary(self.fingerprint, len(self.pod_uids), self.fetched_at)


@dataclass(frozen=True, slots=True)
class ListingSummary:
    """A listing as the evidence (and the journal) holds it: enough to tell two listings
    apart and to date them, without the uids of every pod of the node.

    Attributes:
        fingerprint: ``listing_fingerprint`` of its uids.
        pods: how many pods it listed.
        fetched_at: wall time of the fetch.
    """

    fingerprint: str
    pods: int
    fetched_at: float


@dataclass(frozen=True, slots=True)
class Sighting:
    """A pod's consecutive absences from the pod list.

    Attributes:
        first_at: fetch time of the first listing that missed it.
        last_at: fetch time of the latest.
        count: how many listings in a row missed it.
    """

    first_at: float
    last_at: float
    count: int


@dataclass(frozen=True, slots=True)
class ResidualEvidence:
    """What the residual checker knows after a round.

    Attributes:
        sightings: pod uid → its absences, for every pod of the state the listings miss.
        due: pods missing for the configured number of rounds, by ascending uid.
        listing: the last listing that counted (``None`` before the first).
        counted: whether this round was evidence.
    """

    sightings: Mapping[str, Sighting] = field(default_factory=dict)
    due: tuple[str, ...] = ()
    listing: ListingSummary | None = None
    counted: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sightings", MappingProxyType(dict(self.sightings)))

    def to_plain(self) -> dict[str, Any]:
        """The evidence as plain data (journal cause, log line)."""
        listing = self.listing
        return {
            "listing": None
            if listing is None
            else {
                "fingerprint": listing.fingerprint,
                "pods": listing.pods,
                "fetched_at": listing.fetched_at,
            },
            "sightings": {
                uid: {"first_at": s.first_at, "last_at": s.last_at, "count": s.count}
                for uid, s in sorted(self.sightings.items())
            },
            "due": list(self.due),
        }


def observe_listing(
    previous: ResidualEvidence,
    state: CPUState,
    listing: Listing | None,
    sightings_to_removal: int,
) -> ResidualEvidence:
    """One clearResidualState round's count (§12.4 steps 2–3).

    Args:
        previous: the evidence after the last round (``ResidualEvidence()`` at start: a
            restart starts counting again, as the reference's in-memory hit map does).
        state: the CPU state now.
        listing: this round's successful listing, or ``None`` when the fetch failed.
        sightings_to_removal: consecutive sightings that make a pod due (at least 1).

    Returns:
        The new evidence; ``counted`` is False (and the sightings are kept as they were)
        when the round is no evidence: no listing, the same listing as last counted, or an
        empty one.
    """
    last = previous.listing
    if (
        listing is None
        or not listing.pod_uids
        or (last is not None and listing.fetched_at <= last.fetched_at)
    ):
        return ResidualEvidence(previous.sightings, (), last, counted=False)
    hits = {uid: s.count for uid, s in previous.sightings.items()}
    counts, due = residual_round(hits, listing.pod_uids, state, sightings_to_removal)
    sightings: dict[str, Sighting] = {}
    for uid, n in counts.items():
        before = previous.sightings.get(uid)
        first = before.first_at if before is not None and n > 1 else listing.fetched_at
        sightings[uid] = Sighting(first, listing.fetched_at, n)
    return ResidualEvidence(sightings, tuple(due), listing.summary(), counted=True)
