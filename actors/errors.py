"""The root of the actors' errors: what went wrong between a decision and its answer.

The policy's errors say a decision was refused (``policy.errors``); the actors' say the
decision could not be carried out or answered: a commit not made durable, an actor starting,
restarting or stopped, a journal that cannot be replayed, a sample that cannot be read. Each
derives from :class:`ActorError` and says what it is with the same
:class:`~policy.errors.ErrorKind` as the policy's, so the wire layer answers both from one
table (``wire.errors``).

Each class stays in the module of the protocol that raises it, where its callers import it:

* ``UNAVAILABLE`` (the call may be retried; every kubelet call is idempotent):
  ``actors.store_messages.CommitRefused`` and its ``StoreUnavailable`` (nothing persisted),
  ``actors.store_messages.CommitOutcomeUnknown`` (perhaps persisted; also exported by
  ``actors.ports.commit``), ``actors.allocator_messages.AllocatorUnavailable``,
  ``actors.balancer_messages.BalancerUnavailable``, ``actors.supervisor.ActorUnavailable``,
  ``actors.ports.balancer.AnonMemoryUnavailable``, ``actors.ports.cgroups.CpusetUnavailable``;
* ``INTERNAL`` (retrying will not help; the operator must look):
  ``actors.supervisor.SupervisorError``, ``actors.ports.cgroups.CpuIdleError``. (A journal
  that cannot be replayed or a cause that cannot be decoded is the policy's to say:
  ``policy.state.replay.ReplayError``, ``policy.cpu.cause.CauseError``, both ``INTERNAL``.)
"""

from __future__ import annotations

from typing import ClassVar

from policy.errors import ErrorKind

__all__ = ["ActorError"]


class ActorError(Exception):
    """An actor could not carry out or answer a command; the message names what and why.

    Attributes:
        kind: what the error is (class attribute, set by each subclass).
    """

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL
