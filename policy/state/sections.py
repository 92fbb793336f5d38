"""The whole persistent state: one section per owner, and the one pure ``apply`` (DESIGN.md).

The StateStore keeps a ``State`` and applies committed events to it with :func:`apply`. Each
event names its section (``Event.section``); each section is an immutable value with its own
apply function, registered in ``SECTION_APPLY``: the CPU section (``CPUState``, written by the
Allocator) and the balance section (``BalancerState``, the memory balancer's ``current`` and
``last`` rounds, written by the MemoryBalancer; ``policy.balance.events``), the advisor
section (``AdvisorState``: who sizes the pools and the last sys-advisor response's outcome,
written by the Allocator; ``policy.state.advisor_section``) and the ``cpu_pressure`` section
(``PressureHistory``, the CPU pressure eviction plugins' load rings and timers, written by the
CPU pressure actor; ``policy.state.pressure``). Replaying the
journal's events from :func:`empty_state` gives the live state, and ``==`` compares states
section by section.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import immutables

from policy.balance import BalancerState
from policy.balance.events import BALANCE_SECTION, apply_balance_event
from policy.errors import StateError
from policy.state.advisor_section import ADVISOR_SECTION, AdvisorState, apply_advisor_event
from policy.state.cpu_apply import apply_cpu_event
from policy.state.cpu_state import CPUState
from policy.state.events import Event
from policy.state.pressure import PRESSURE_SECTION, PressureHistory, apply_pressure_event
from policy.topology.model import CPUTopology

__all__ = [
    "ADVISOR_SECTION",
    "BALANCE_SECTION",
    "CPU_SECTION",
    "PRESSURE_SECTION",
    "SECTION_APPLY",
    "State",
    "apply",
    "apply_all",
    "apply_to_sections",
    "empty_state",
    "remember_applied",
]

CPU_SECTION: Final = "cpu"

#: How each section applies its events: ``(section value, event) -> new section value``.
SECTION_APPLY: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    CPU_SECTION: apply_cpu_event,
    BALANCE_SECTION: apply_balance_event,
    PRESSURE_SECTION: apply_pressure_event,
    ADVISOR_SECTION: apply_advisor_event,
}


@dataclass(frozen=True, slots=True)
class State:
    """Named, immutable state sections (``"cpu"``: a ``CPUState``; ``"balance"``: a
    ``BalancerState``; ``"advisor"``: an ``AdvisorState``; ``"cpu_pressure"``: a
    ``PressureHistory``)."""

    sections: immutables.Map[str, object]

    def section(self, name: str) -> object:
        """The section value called ``name``.

        Raises:
            StateError: there is no such section.
        """
        try:
            return self.sections[name]
        except KeyError:
            raise StateError(f"state has no section {name!r}") from None

    @property
    def cpu(self) -> CPUState:
        """The CPU section."""
        section = self.section(CPU_SECTION)
        assert isinstance(section, CPUState)
        return section

    @property
    def balance(self) -> BalancerState:
        """The balance section."""
        section = self.section(BALANCE_SECTION)
        assert isinstance(section, BalancerState)
        return section

    @property
    def cpu_pressure(self) -> PressureHistory:
        """The CPU pressure eviction plugins' section."""
        section = self.section(PRESSURE_SECTION)
        assert isinstance(section, PressureHistory)
        return section

    @property
    def advisor(self) -> AdvisorState:
        """The advisor section."""
        section = self.section(ADVISOR_SECTION)
        assert isinstance(section, AdvisorState)
        return section

    def with_section(self, name: str, value: object) -> State:
        """This state with section ``name`` replaced by ``value``."""
        return State(self.sections.set(name, value))


def empty_state(topology: CPUTopology) -> State:
    """The state of a node nothing has happened on: every section empty."""
    return State(
        immutables.Map(
            {
                CPU_SECTION: CPUState.empty(topology),
                BALANCE_SECTION: BalancerState(),
                PRESSURE_SECTION: PressureHistory(),
                ADVISOR_SECTION: AdvisorState(),
            }
        )
    )


def apply(state: State, event: Event) -> State:
    """The state after one event; ``state`` is unchanged.

    Raises:
        StateError: the event's section is unknown, or the event does not fit the state.
    """
    name = type(event).section
    section_apply = SECTION_APPLY.get(name)
    if section_apply is None:
        raise StateError(f"{type(event).__name__} belongs to unknown state section {name!r}")
    return state.with_section(name, section_apply(state.section(name), event))


class _Applied:
    """The last state a decision in progress reached: ``(base, events, result)``.

    A decision applies its events as it builds them (``policy.cpu.txn``), and the StateStore
    applies the same events to the same state again when it commits them; ``apply_all``
    gives the remembered result when the state and every event are the very objects it was
    computed from. States and events are immutable and applying is a pure function, so the
    answer is the one applying again would give; anything else (another state, an equal but
    distinct event, a replay) applies as usual. Holding the objects keeps their identities
    from being reused while they are remembered.
    """

    __slots__ = ("entry",)

    def __init__(self) -> None:
        self.entry: tuple[State, tuple[Event, ...], State] | None = None


_APPLIED = _Applied()


def remember_applied(base: State, events: tuple[Event, ...], result: State) -> None:
    """Remember that ``events`` applied in order to ``base`` give ``result``.

    Only for a caller that got ``result`` by applying exactly those events to ``base`` with
    :func:`apply` (a decision's working state, ``policy.cpu.txn``).
    """
    _APPLIED.entry = (base, events, result)


def _remembered(state: State, events: tuple[Event, ...]) -> State | None:
    entry = _APPLIED.entry
    if entry is None or entry[0] is not state or len(entry[1]) != len(events):
        return None
    if all(map(operator.is_, entry[1], events)):
        return entry[2]
    return None


def apply_all(state: State, events: Iterable[Event]) -> State:
    """The state after every event in order, or an error and no state (all or nothing).

    Raises:
        StateError: an event does not fit; the message says which one (by position).
    """
    events = tuple(events)
    remembered = _remembered(state, events)
    if remembered is not None:
        return remembered
    for position, event in enumerate(events):
        try:
            state = apply(state, event)
        except StateError as err:
            raise _at_position(position, event, err) from err
    return state


def apply_to_sections(sections: dict[str, object], events: Iterable[Event]) -> None:
    """Apply every event in order to a working copy of a state's sections, in place.

    What :func:`apply_all` does, for a caller that applies many records in a row (replay):
    the sections are kept in a plain dict between records, and ``State(immutables.Map(
    sections))`` at the end is the state ``apply_all`` would have given, record after record,
    since a state is nothing but its sections.

    Args:
        sections: section values by name (``dict(state.sections)``), updated in place.
        events: the events, in order.

    Raises:
        StateError: an event does not fit, with the message :func:`apply_all` gives; the
            events before it were applied, so the caller drops ``sections``.
    """
    for position, event in enumerate(events):
        name = type(event).section
        try:
            section_apply = SECTION_APPLY.get(name)
            if section_apply is None:
                raise StateError(
                    f"{type(event).__name__} belongs to unknown state section {name!r}"
                )
            if name not in sections:
                raise StateError(f"state has no section {name!r}")
            sections[name] = section_apply(sections[name], event)
        except StateError as err:
            raise _at_position(position, event, err) from err


def _at_position(position: int, event: Event, err: StateError) -> StateError:
    return StateError(f"event {position} ({type(event).__name__}): {err}", kind=err.kind)
