"""The undo of an Allocate that sys-advisor refused (cpu-policy §7.2, the advisor half of the
finaliser).

While the advisor link is watching, the Allocator commits an Allocate's decision, then calls
the advisor's ``AddContainer``. If the advisor *refuses* the container (it answered with an
error status other than UNAVAILABLE), the reference drops the response, answers "add container
to qos aware server failed with error: %v" and runs ``remove_container(pod, container)``. qrmd
keeps that behaviour for a refusal (a *sick* advisor is the issue's deliberate deviation and
never reaches this decision): the removal is its own decision, committed in the same mailbox
turn as the Allocate, so no other decision slips between the two records. Like the
reference's ``remove_container`` it removes the entry only and runs no pool adjustment.

The decision's input, :class:`AddContainerRefused`, holds the container and the advisor's
message, so the journal says why the container went and a re-run gives the same events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from policy.cpu.context import PolicyContext
from policy.cpu.remove import remove_container
from policy.cpu.txn import Txn
from policy.decision import Decision
from policy.errors import ErrorKind, PolicyError
from policy.state.sections import State

__all__ = ["ADD_CONTAINER_FAILED", "AddContainerRefused", "AdvisorRefusedError", "undo_allocate"]

#: §7.2: the reference's message for a failed ``AddContainer``.
ADD_CONTAINER_FAILED: Final = "add container to qos aware server failed with error: {}"


@dataclass(frozen=True, slots=True)
class AddContainerRefused:
    """The advisor refused ``AddContainer`` of one container just allocated.

    Attributes:
        pod_uid: the container's pod.
        container_name: the container.
        reason: the advisor's error (status code and message).
    """

    pod_uid: str
    container_name: str
    reason: str


class AdvisorRefusedError(PolicyError):
    """The error the refused Allocate fails with (the reference's §7.2 message)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=ErrorKind.REFUSED)


def undo_allocate(
    state: State, inputs: AddContainerRefused, settings: PolicyContext, now: float
) -> Decision[None]:
    """Remove the container the advisor refused, and fail its Allocate (§7.2).

    Args:
        state: the durable state, holding the Allocate just committed.
        inputs: the container and the advisor's reason.
        settings: the CPU context (unused by the removal, as the reference's).
        now: the decision's wall time (unused).

    Returns:
        ``ContainerRemoved`` (none when the container has no entry), and ``error`` set to the
        reference's message: commit the events, then fail the Allocate with it.
    """
    del now
    txn = Txn(state)
    remove_container(txn, settings, inputs.pod_uid, inputs.container_name)
    error = AdvisorRefusedError(ADD_CONTAINER_FAILED.format(inputs.reason))
    return Decision(txn.events, None, error=error)
