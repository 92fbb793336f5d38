"""clearResidualState's evidence (policy.cpu.residual_check, cpu-policy §12.4) with an injected
clock: removal exactly at the N-th consecutive sighting, never after a failed fetch in
between, never for pool entries, ascending uid order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from policy.cpu.residual_check import (
    Listing,
    ResidualEvidence,
    listing_fingerprint,
    observe_listing,
)
from policy.state.sections import State
from tests.policy.pool_fixtures import fresh_state, ramping, with_events

PERIOD_S = 30.0
T0 = 1_715_180_645.0


def _state(*pods: str) -> State:
    state = fresh_state()
    for pod in pods:
        state = with_events(state, ramping(state, pod))
    return state


def _listing(round_no: int, *uids: str) -> Listing:
    return Listing(frozenset(uids), T0 + round_no * PERIOD_S)


def test_a_forgotten_pod_is_due_exactly_at_the_tenth_consecutive_sighting() -> None:
    state = _state("pod-a", "pod-b")
    evidence = ResidualEvidence()
    for n in range(1, 10):
        evidence = observe_listing(evidence, state.cpu, _listing(n, "pod-a", "other"), 10)
        assert evidence.due == () and evidence.sightings["pod-b"].count == n
    evidence = observe_listing(evidence, state.cpu, _listing(10, "pod-a", "other"), 10)
    assert evidence.due == ("pod-b",)
    sighting = evidence.sightings["pod-b"]
    assert (sighting.first_at, sighting.last_at) == (T0 + PERIOD_S, T0 + 10 * PERIOD_S)
    assert "pod-a" not in evidence.sightings


def test_a_failed_fetch_counts_nothing_and_resets_nothing() -> None:
    state = _state("pod-b")
    evidence = ResidualEvidence()
    for n in range(1, 10):
        evidence = observe_listing(evidence, state.cpu, _listing(n, "other"), 10)
    failed = observe_listing(evidence, state.cpu, None, 10)
    assert not failed.counted and failed.due == ()
    assert failed.sightings == evidence.sightings  # nine sightings kept
    after = observe_listing(failed, state.cpu, _listing(11, "other"), 10)
    assert after.due == ("pod-b",) and after.sightings["pod-b"].count == 10


def test_the_same_listing_twice_is_one_sighting() -> None:
    state = _state("pod-b")
    listing = _listing(1, "other")
    once = observe_listing(ResidualEvidence(), state.cpu, listing, 10)
    twice = observe_listing(once, state.cpu, listing, 10)
    assert not twice.counted and twice.sightings["pod-b"].count == 1


def test_an_empty_listing_removes_nothing_and_counts_nothing() -> None:
    state = _state("pod-b")
    evidence = ResidualEvidence()
    for n in range(1, 10):
        evidence = observe_listing(evidence, state.cpu, _listing(n, "other"), 10)
    empty = observe_listing(evidence, state.cpu, _listing(10), 10)
    assert not empty.counted and empty.due == () and empty.sightings["pod-b"].count == 9


def test_a_pod_listed_again_starts_from_zero() -> None:
    state = _state("pod-b")
    evidence = ResidualEvidence()
    for n in range(1, 6):
        evidence = observe_listing(evidence, state.cpu, _listing(n, "other"), 10)
    evidence = observe_listing(evidence, state.cpu, _listing(6, "pod-b"), 10)
    assert "pod-b" not in evidence.sightings
    evidence = observe_listing(evidence, state.cpu, _listing(7, "other"), 10)
    assert evidence.sightings["pod-b"].count == 1
    assert evidence.sightings["pod-b"].first_at == T0 + 7 * PERIOD_S


def test_pool_entries_are_never_residual_and_due_pods_come_in_ascending_uid_order() -> None:
    state = _state("pod-c", "pod-a", "pod-b")
    assert state.cpu.pools  # reserve, reclaim, share: never in any listing
    evidence = ResidualEvidence()
    for n in range(1, 4):
        evidence = observe_listing(evidence, state.cpu, _listing(n, "other"), 3)
    assert evidence.due == ("pod-a", "pod-b", "pod-c")
    assert set(evidence.sightings) == {"pod-a", "pod-b", "pod-c"}


def test_the_evidence_is_plain_data_with_the_listings_fingerprint() -> None:
    state = _state("pod-b")
    evidence = observe_listing(ResidualEvidence(), state.cpu, _listing(1, "x", "y"), 1)
    plain = evidence.to_plain()
    assert plain == {
        "listing": {
            "fingerprint": listing_fingerprint(["y", "x"]),
            "pods": 2,
            "fetched_at": T0 + 30,
        },
        "sightings": {"pod-b": {"first_at": T0 + 30, "last_at": T0 + 30, "count": 1}},
        "due": ["pod-b"],
    }
    assert listing_fingerprint(["x", "y"]) != listing_fingerprint(["x"])


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.integers(1, 12))
def test_due_only_after_n_consecutive_counted_absences(rounds: list[bool], n: int) -> None:
    """Each round the fetch succeeds (True) or fails (False); the pod is never listed. It is
    due exactly when n successful rounds have been seen, failures in between not counting."""
    state = _state("pod-b")
    evidence = ResidualEvidence()
    ok = 0
    for i, succeeded in enumerate(rounds, start=1):
        listing = _listing(i, "other") if succeeded else None
        evidence = observe_listing(evidence, state.cpu, listing, n)
        ok += succeeded
        assert (evidence.due == ("pod-b",)) == (succeeded and ok >= n)
