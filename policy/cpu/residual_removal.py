"""clearResidualState's removal, decided on the checker's evidence (spec cpu-policy §12.4 step 4).

The residual checker counts the sightings (``policy.cpu.residual_check``, the only count) and
hands the Allocator its evidence once a pod is due. The removal is one decision whose input is
that evidence, so the journal shows *why* a pod's state went (the listing that last missed it,
by fingerprint, size and time; each pod's first and last sighting and count) and a re-run
needs nothing else:

1. The candidates are the evidence's due pods that the state still holds, by ascending uid
   (a pod kubelet removed after the listing is gone already; pool entries are never pods).
2. With sys-advisor, its RemovePod goes first for each candidate (the caller's, through the
   path kubelet's RemovePod takes); the pods it *refused* are part of the inputs and are
   kept until the next round, as the reference keeps them ("failure → keep it (log) and
   continue"). A sick advisor refuses nothing: the link leaves watching and the removal goes
   ahead (``AdvisorCalls.residual_removals``).
3. The other candidates go (``PodRemoved``), then the pools are re-sized; the adjustment runs
   whenever there were candidates, even if the advisor refused them all, as in the reference.
   A failed adjustment is a warning (the handler then reports NotReady), not an error.

No candidates: nothing to decide, no events.
"""

from __future__ import annotations

from dataclasses import dataclass

from policy.cpu import remove as removal
from policy.cpu.context import PolicyContext
from policy.cpu.residual_check import ResidualEvidence
from policy.cpu.txn import Txn
from policy.decision import Decision
from policy.state.cpu_state import CPUState
from policy.state.sections import State

__all__ = ["ResidualOutcome", "ResidualPods", "remove_residual_pods", "residual_candidates"]


@dataclass(frozen=True, slots=True)
class ResidualPods:
    """The inputs of a residual removal: the checker's evidence and the advisor's refusals.

    Attributes:
        evidence: the residual checker's evidence of the round that made pods due.
        advisor_refused: candidates whose removal sys-advisor refused (kept this round), by
            ascending uid; empty without an advisor.
    """

    evidence: ResidualEvidence
    advisor_refused: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResidualOutcome:
    """What a residual removal did.

    Attributes:
        removed: the pods removed, by ascending uid.
        kept: the candidates kept because sys-advisor refused their removal.
    """

    removed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


def residual_candidates(cpu: CPUState, evidence: ResidualEvidence) -> tuple[str, ...]:
    """Step 1: the evidence's due pods that the state still holds, by ascending uid.

    Args:
        cpu: the CPU state now.
        evidence: the checker's evidence.

    Returns:
        The candidates (pool entries are never among them: the state keeps them apart).
    """
    return tuple(sorted(uid for uid in set(evidence.due) if cpu.pod_containers(uid)))


def remove_residual_pods(
    state: State, inputs: ResidualPods, settings: PolicyContext, now: float
) -> Decision[ResidualOutcome]:
    """Remove the residual pods the evidence calls due (§12.4 step 4; module docstring).

    Args:
        state: the current state.
        inputs: the evidence and the advisor's refusals.
        settings: the pool engine's settings.
        now: the decision's wall time (unused: the evidence carries the listing's time).

    Returns:
        ``PodRemoved`` for each candidate not refused, then the pool adjustment's events;
        the reply names the removed and kept pods; a failed adjustment is in ``warnings``.

    Raises:
        RampUpError: a candidate's container has a QoS level with no lifecycle.
    """
    del now
    candidates = residual_candidates(state.cpu, inputs.evidence)
    if not candidates:
        return Decision((), ResidualOutcome())
    refused = set(inputs.advisor_refused)
    removed = tuple(uid for uid in candidates if uid not in refused)
    kept = tuple(uid for uid in candidates if uid in refused)
    txn = Txn(state)
    warnings = removal.remove_residual_pods(txn, settings, removed)
    return Decision(txn.events, ResidualOutcome(removed, kept), warnings=warnings)
