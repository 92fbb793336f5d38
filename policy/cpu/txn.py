"""A decision in progress: the working state and the events that produced it.

Policy steps compose (an Allocate stores an entry, then resizes pools, then cleans pools),
and each step must see the state the previous ones left. A ``Txn`` holds that working state
and the ordered events; ``emit`` applies an event at once, so a step that emits something the
state refuses fails right there, with the same ``StateError`` the StateStore would raise.
Nothing is committed here: the caller hands ``txn.events`` to the StateStore, and the state
it gets back equals ``txn.state`` (replay equals live).
"""

from __future__ import annotations

from policy.state.cpu_state import CPUState
from policy.state.events import Event
from policy.state.sections import State, apply, remember_applied

__all__ = ["Txn"]


class Txn:
    """Working state plus the events emitted so far; discard it to abandon the decision."""

    __slots__ = ("_cpu", "_events", "_state", "base")

    def __init__(self, state: State) -> None:
        self.base = state
        self._state = state
        self._events: list[Event] = []
        # The working state's CPU section, looked up once per state (a decision asks for it
        # at every step; the lookup is three Python calls).
        self._cpu: CPUState | None = None

    @property
    def state(self) -> State:
        return self._state

    @property
    def cpu(self) -> CPUState:
        """The CPU section of the working state."""
        cpu = self._cpu
        if cpu is None:
            cpu = self._cpu = self._state.cpu
        return cpu

    @property
    def events(self) -> tuple[Event, ...]:
        return tuple(self._events)

    def emit(self, *events: Event) -> None:
        """Apply events to the working state and record them.

        Raises:
            StateError: an event does not fit; the working state and the recorded events
                are left as they were before this call.
        """
        state = self._state
        for event in events:
            state = apply(state, event)
        self._state = state
        self._cpu = None
        self._events.extend(events)
        # The StateStore applies the same events to the same state when it commits them:
        # it gets this state back instead of working it out again (policy.state.sections).
        remember_applied(self.base, tuple(self._events), state)

    def __len__(self) -> int:
        return len(self._events)
