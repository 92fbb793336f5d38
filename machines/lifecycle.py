"""One ``transitions`` machine per table, shared by every model that follows the lifecycle.

A node holds thousands of containers, so qrmd never builds a ``Machine`` per container. A
:class:`Lifecycle` builds ONE ``transitions.Machine`` from a :class:`~machines.table.MachineTable`
and drives any number of models through it in one of two ways:

* :meth:`Lifecycle.fire` runs a trigger on any object with a ``state`` attribute and the guard
  names as attributes or methods. The model is *not* registered with the machine, so it costs
  nothing but itself: this is the way for per-container state.
* :meth:`Lifecycle.step` is the pure form for ``policy/``: it takes a state name and a mapping of
  guard answers and returns the step without touching any caller object. It looks the record
  up in the table (:meth:`~machines.table.MachineTable.select`), which is the same rule the
  machine applies, so no throw-away model has to be run through ``transitions`` to learn
  which row fired.
  A lifecycle remembers each step it worked out, keyed by the state, the trigger and the
  guard answers it was given: the table is frozen, so the same question has the same answer,
  and a decision asks the same few questions for every container (each Allocate of a new
  shared container asks ``allocate_shared`` from ``new`` with the same two answers).
* :meth:`Lifecycle.add` registers a long-lived model (a link, a socket) the ``transitions`` way,
  which binds one method per trigger (``model.finish_ramp_up()``), ``is_<state>`` and
  ``may_<trigger>`` onto it. Convenient for a handful of models, not for containers: measured
  with ``bench/bench_machines.py`` on the ramp-up machine, a registered model costs about
  7.4 KB and registering is linear in the models already registered (``transitions`` checks
  ``model not in machine.models``: 60 us at 500 models, 150 us at 5,000, 460 us at 20,000),
  while :meth:`fire` adds no memory per model and takes 10-15 us per trigger at any count.
  ``transitions`` finds registered models by ``==``, so give them identity equality
  (``@dataclass(eq=False)``), or ``remove`` may drop an equal twin.

Both :meth:`fire` and :meth:`step` return a :class:`Step` naming the events to commit and the
actions to carry out, or ``None`` when the guards refuse. An illegal trigger raises
:class:`InvalidTransition` and changes nothing. The ``transitions`` machine remains what moves
models (``fire``, ``add``) and what ``qrmd diagrams`` draws from the same table.

The machine is built, and ``transitions`` imported, when a model is first fired, added or
removed: the daemon only ever takes :meth:`Lifecycle.step`, and ``transitions`` (with ``six``)
was some 2 ms of CPU of every restart (bench/bench_startup.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from machines.table import MachineTable, Transition

if TYPE_CHECKING:
    from transitions.core import Machine, MachineError


class Stateful(Protocol):
    """A model: anything with a ``state`` attribute holding one of the table's state names."""

    state: str


class InvalidTransition(Exception):  # noqa: N818 - the name STYLE.md and callers use
    """A trigger that is not legal in the model's current state; the model is unchanged.

    It is not a ``transitions.core.MachineError`` (whose ``value`` it keeps): raising it must
    not need ``transitions`` loaded, which :meth:`Lifecycle.step` never uses.

    Attributes:
        machine: the machine's name.
        trigger: the trigger that was refused.
        state: the state the model is (still) in.
        allowed: the triggers that are legal in that state.
        value: the message.
    """

    def __init__(self, machine: str, trigger: str, state: str, allowed: tuple[str, ...]) -> None:
        self.machine = machine
        self.trigger = trigger
        self.state = state
        self.allowed = allowed
        legal = ", ".join(allowed) if allowed else "none, it is final"
        self.value = f"{machine}: cannot {trigger!r} in state {state!r} (legal there: {legal})"
        super().__init__(self.value)


class MissingGuardError(LookupError):
    """:meth:`Lifecycle.step` was not told the answer to a guard it has to evaluate."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one fired trigger did: where the model went, what to commit and to carry out."""

    trigger: str
    source: str
    dest: str
    events: tuple[str, ...]
    actions: tuple[str, ...]

    @property
    def changed_state(self) -> bool:
        """Whether the model is now in another state (self-loops keep it)."""
        return self.source != self.dest


class Lifecycle:
    """The ``transitions`` machine built from one table, shared by all its models.

    Args:
        table: the lifecycle's states and transition records.
    """

    #: Distinct (state, trigger, answers) questions remembered by :meth:`step`: a table of a
    #: dozen records and two or three boolean guards asks a few dozen; the bound only keeps
    #: callers passing unusual guard values from growing the memo without end.
    STEP_MEMO_SIZE = 1024

    def __init__(self, table: MachineTable) -> None:
        self.table = table
        self._steps: dict[tuple[str, str, tuple[tuple[str, object], ...]], Step | None] = {}
        self._machine: Machine | None = None

    @property
    def machine(self) -> Machine:
        """The ``transitions`` machine of the table, built on first use."""
        if self._machine is None:
            self._machine = self._build()
        return self._machine

    def _build(self) -> Machine:
        machine_class, _ = _transitions()
        table = self.table
        machine = machine_class(
            model=None,
            states=list(table.states),
            initial=table.initial,
            auto_transitions=False,
            ignore_invalid_triggers=False,
            send_event=False,
            name=table.name,
        )
        for record in table.transitions:
            for source in record.source:
                machine.add_transition(
                    record.trigger,
                    source,
                    record.dest,
                    conditions=list(record.conditions),
                    unless=list(record.unless),
                )
        return machine

    def add(self, model: object, state: str | None = None) -> None:
        """Register a long-lived model, binding the trigger methods onto it.

        Args:
            model: any object; ``transitions`` sets its ``state`` attribute.
            state: where it starts; the table's initial state when ``None`` (a model restored
                from the journal starts where it was).

        Raises:
            ValueError: ``state`` is not a state of this machine.
        """
        self._check_state(state or self.table.initial)
        self.machine.add_model(model, initial=state or self.table.initial)

    def remove(self, model: object) -> None:
        """Unregister a model added with :meth:`add` (linear in the number of models)."""
        self.machine.remove_model(model)

    def fire(self, model: Stateful, trigger: str) -> Step | None:
        """Run ``trigger`` on ``model``, which need not be registered.

        Args:
            model: has a ``state`` attribute and answers the guards as attributes or
                no-argument methods.
            trigger: one of the table's triggers.

        Returns:
            The step taken (``model.state`` is now ``step.dest``), or ``None`` when every
            candidate record's guards refused (the model is unchanged).

        Raises:
            InvalidTransition: ``trigger`` is unknown or illegal in the model's state; the
                model is unchanged.
            ValueError: the model's state is not a state of this machine.
            AttributeError: the model does not answer a guard the trigger consults.
            RuntimeError: ``transitions`` took another edge than the table names (a guard
                that answered differently when asked twice); the model has moved.
        """
        source = model.state
        self._check_state(source)
        event = self.machine.events.get(trigger)
        if event is None or not self.table.candidates(trigger, source):
            raise InvalidTransition(
                self.table.name, trigger, source, self.table.triggers_from(source)
            )
        # The table names the record; the machine moves the model by the same rule.
        record = self.table.select(trigger, source, lambda guard: _answer(model, guard))
        _, machine_error = _transitions()
        try:
            taken = event.trigger(model)
        except machine_error as exc:  # pragma: no cover - candidates() already ruled it out
            raise InvalidTransition(
                self.table.name, trigger, source, self.table.triggers_from(source)
            ) from exc
        dest = record.dest if record is not None else None
        if (model.state if taken else None) != dest:
            named = record.describe() if record is not None else "no record"
            raise RuntimeError(
                f"{self.table.name}: {trigger!r} from {source!r} took the model to "
                f"{model.state!r}, the table names {named}"
            )
        return None if record is None else _step(record, trigger, source)

    def step(
        self, state: str, trigger: str, guards: Mapping[str, bool] | None = None
    ) -> Step | None:
        """The pure form of :meth:`fire`: from a state and guard answers to the step.

        Args:
            state: the model's current state.
            trigger: one of the table's triggers.
            guards: the answer to every guard the trigger's records consult from ``state``.

        Returns:
            The step, or ``None`` when the guards refuse.

        Raises:
            InvalidTransition: ``trigger`` is unknown or illegal in ``state``.
            MissingGuardError: ``guards`` lacks a guard the trigger consults from ``state``.
            ValueError: ``state`` is not a state of this machine.
        """
        answers = guards or {}
        key = (state, trigger, tuple(answers.items()))
        try:
            return self._steps[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable guard value: work it out without the memo
            return self._work_out_step(state, trigger, answers)
        step = self._work_out_step(state, trigger, answers)
        if len(self._steps) >= self.STEP_MEMO_SIZE:
            self._steps.clear()
        self._steps[key] = step
        return step

    def _work_out_step(self, state: str, trigger: str, answers: Mapping[str, bool]) -> Step | None:
        """:meth:`step` without the memo: the table's row for the answers (or the error)."""
        self._check_state(state)
        # A trigger with a record from ``state`` is one of the machine's events (it is built
        # from the same records), so the table alone decides, without the machine.
        candidates = self.table.candidates(trigger, state)
        if not candidates:
            raise InvalidTransition(
                self.table.name, trigger, state, self.table.triggers_from(state)
            )
        needed = [g for r in candidates for g in r.guards]
        missing = sorted({g for g in needed if g not in answers})
        if missing:
            raise MissingGuardError(
                f"{self.table.name}: {trigger!r} from {state!r} needs guard answers {missing}"
            )
        record = self.table.select(trigger, state, lambda guard: bool(answers[guard]))
        return None if record is None else _step(record, trigger, state)

    def can_fire(self, model: Stateful, trigger: str) -> bool:
        """Whether ``trigger`` is legal in the model's state and some record's guards hold.

        Raises:
            AttributeError: the model does not answer a guard the trigger consults.
        """
        return self.table.select(trigger, model.state, lambda g: _answer(model, g)) is not None

    def _check_state(self, state: str) -> None:
        if state not in self.table.states:
            states = ", ".join(self.table.states)
            raise ValueError(f"{self.table.name}: {state!r} is not a state (states: {states})")


def _transitions() -> tuple[type[Machine], type[MachineError]]:
    """``transitions``' machine and error classes, imported when a machine is first needed."""
    from transitions.core import Machine, MachineError  # noqa: PLC0415 (see the module doc)

    return Machine, MachineError


def _step(record: Transition, trigger: str, source: str) -> Step:
    return Step(trigger, source, record.dest, record.events, record.actions)


def _answer(model: object, guard: str) -> bool:
    value = getattr(model, guard)
    return bool(value() if callable(value) else value)
