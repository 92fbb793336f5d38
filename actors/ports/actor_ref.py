"""The actor-ref port: what a caller needs of an actor it asks (DESIGN.md, "Actors and messages").

gRPC handlers ``ask`` the Allocator or the MemoryBalancer with the RPC's remaining deadline as
timeout, and a writer's committer ``ask``s the StateStore and waits (the one blocking call
between actors). Each needs only pykka's blocking ``ask``, so each takes this protocol, not
``pykka.ActorRef``: a ``SupervisedRef`` (which follows a child across restarts) and a test's
fake serve as well as a real ref.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ActorRef"]


class ActorRef(Protocol):
    """An actor that can be asked, as pykka's ``ActorRef.ask``: blocking with a timeout, or with
    ``block=False`` answering a future of the reply."""

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        """Send ``message`` and wait up to ``timeout`` seconds for the reply (pykka); with
        ``block=False``, return a future of it at once.

        Raises:
            Exception: whatever the actor raised for ``message``; ``pykka.Timeout`` when no
                answer came in time; ``pykka.ActorDeadError`` (or a supervised child's
                unavailability error) when it cannot be asked.
        """
        ...
