"""Removing pods and containers, and residual-pod clean-up (cpu-policy §7.2, §10.6, §12.4).

* ``remove_pod`` (kubelet's RemovePod): the pod's entries go (``PodRemoved``), then the pools
  are re-sized; an adjustment error is only reported. For a pod the state does not know there
  is no ``PodRemoved`` (kubelet retries removals; events.py), but the pools are re-sized all
  the same, as the reference does (§10.6 step 3) — which commits nothing when they are already
  as the containers want them. sys-advisor's ``RemovePod`` is the caller's to make first: if
  it fails, the caller must not call this (§10.6 step 1).
* ``remove_container`` (§7.2, after a failed Allocate): the entry goes, nothing else. Machine
  state is derived from the entries here, so it can never go stale as in the reference (§15.7:
  the recommended fix holds by construction).
* Residual pods (§12.4): pods in the state that the node's pod source has not listed for ten
  consecutive 30-s rounds. ``residual_round`` counts sightings; ``remove_residual_pods``
  removes the candidates (ascending uid) and re-sizes the pools.

Every removal goes through the ramp-up machine (``remove_pod``/``remove_container``), which
names the events committed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Final

from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import adjust_allocation_entries
from policy.cpu.ramp_steps import container_phase, emit_step, fire
from policy.cpu.txn import Txn
from policy.errors import PolicyError
from policy.state.cpu_state import CPUState
from policy.state.events import ContainerRemoved, PodRemoved

__all__ = [
    "MAX_RESIDUAL_TIME_S",
    "RESIDUAL_CHECK_PERIOD_S",
    "RESIDUAL_SIGHTINGS",
    "remove_container",
    "remove_pod",
    "remove_residual_pods",
    "residual_round",
]

#: clearResidualState runs every 30 s and removes pods absent for 5 minutes (§12.4, §14).
RESIDUAL_CHECK_PERIOD_S: Final = 30
MAX_RESIDUAL_TIME_S: Final = 300
#: Consecutive sightings that make a pod residual with the reference's numbers: 10.
RESIDUAL_SIGHTINGS: Final = MAX_RESIDUAL_TIME_S // RESIDUAL_CHECK_PERIOD_S


def _remove_pod_entries(txn: Txn, ctx: PolicyContext, pod_uid: str) -> None:
    """``PodRemoved`` for a known pod, checked against every container's lifecycle."""
    containers = txn.cpu.pod_containers(pod_uid)
    if not containers:
        return
    # Every container's lifecycle must allow it; they all name the one PodRemoved.
    step = None
    for name in sorted(containers):
        phase = container_phase(containers[name], system_cores=ctx.at_v0_5_47)
        step = fire(phase, "remove_pod")
    assert step is not None  # removal has no guards
    emit_step(txn, step, PodRemoved(pod_uid))


def _remove_pods_and_adjust(
    txn: Txn, ctx: PolicyContext, pod_uids: Sequence[str]
) -> tuple[str, ...]:
    """Forget each known pod in turn, then re-size the pools; an adjustment error is returned."""
    for pod_uid in pod_uids:
        _remove_pod_entries(txn, ctx, pod_uid)
    try:
        adjust_allocation_entries(txn, ctx)
    except PolicyError as err:
        return (str(err),)
    return ()


def remove_pod(txn: Txn, ctx: PolicyContext, pod_uid: str) -> tuple[str, ...]:
    """Kubelet's RemovePod (§10.6 steps 2–3): forget the pod if known, then re-size the pools.

    Args:
        txn: the decision in progress.
        ctx: the pool engine's settings.
        pod_uid: the pod to forget.

    Returns:
        Errors that did not fail the call (a failed pool adjustment), for the caller to log.

    Raises:
        RampUpError: a container's QoS level has no lifecycle (nothing is emitted).
    """
    return _remove_pods_and_adjust(txn, ctx, [pod_uid])


def remove_container(txn: Txn, ctx: PolicyContext, pod_uid: str, container_name: str) -> None:
    """Forget one container after its Allocate failed (§7.2); unknown → nothing.

    No pool adjustment follows (the reference runs none here).
    """
    entry = txn.cpu.entry(pod_uid, container_name)
    if entry is None:
        return
    step = fire(container_phase(entry, system_cores=ctx.at_v0_5_47), "remove_container")
    assert step is not None  # removal has no guards
    emit_step(txn, step, ContainerRemoved(pod_uid, container_name))


def residual_round(
    hit_map: Mapping[str, int],
    known_pod_uids: Collection[str],
    state: CPUState,
    sightings: int = RESIDUAL_SIGHTINGS,
) -> tuple[dict[str, int], list[str]]:
    """One clearResidualState count (§12.4 steps 2–3).

    A pod of the state that the pod source did not list is seen once more; a pod listed again
    (or gone from the state) is forgotten; a pod seen ``sightings`` times in a row (the first
    N with N × period ≥ max residual time: ten with the reference's 30 s and 5 minutes) is a
    candidate. Pool entries are never pods here (the state keeps them apart).

    Args:
        hit_map: consecutive sightings so far, by pod uid.
        known_pod_uids: every pod uid the node's pod source lists now.
        state: the CPU state.
        sightings: consecutive sightings that make a pod a candidate (at least 1).

    Returns:
        ``(new hit map, candidates by ascending uid)``.
    """
    known = known_pod_uids if isinstance(known_pod_uids, (set, frozenset)) else set(known_pod_uids)
    hits = {pod: hit_map.get(pod, 0) + 1 for pod in state.pods if pod not in known}
    candidates = sorted(pod_uid for pod_uid, n in hits.items() if n >= max(1, sightings))
    return hits, candidates


def remove_residual_pods(
    txn: Txn, ctx: PolicyContext, candidates: Sequence[str]
) -> tuple[str, ...]:
    """Remove residual pods, then re-size the pools (§12.4 step 4).

    With sys-advisor the caller first asks it to remove each candidate and passes only those
    it removed; the adjustment runs even when none is left, as in the reference.

    Args:
        txn: the decision in progress.
        ctx: the pool engine's settings.
        candidates: pod uids from ``residual_round``; removed in ascending order, unknown ones
            skipped.

    Returns:
        The adjustment's error, if any (the handler then reports NotReady).

    Raises:
        RampUpError: a candidate's container has a QoS level with no lifecycle.
    """
    return _remove_pods_and_adjust(txn, ctx, sorted(candidates))
