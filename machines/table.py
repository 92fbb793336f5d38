"""A lifecycle as a table: its states and ONE list of plain transition records.

Every state machine of qrmd is written as a :class:`MachineTable` in its own module. The
table is the single source of truth: :mod:`machines.lifecycle` builds the ``transitions``
machine from it, and :mod:`machines.diagram` draws the diagrams from it and nothing else, so
no transition can hide in a callback (STYLE.md, "State machines"; DESIGN.md, "State machines").

A record names, as plain strings:

* ``trigger`` — what happens (``finish_ramp_up``);
* ``source`` — the state(s) it may happen in, ``dest`` — the state it leads to;
* ``conditions`` / ``unless`` — guards that must all be true / all be false. Guards are
  questions answered by the caller (``policy/`` or ``actors/``) as attributes or methods of
  its model; a table never implements one;
* ``events`` — the journal events the transition commits (``RampUpFinished``);
* ``actions`` — side effects the caller carries out when the transition is taken
  (``reset_backoff``); the machine only names them.

Records with the same trigger and source are tried in table order, the first whose guards hold
wins (the ``transitions`` rule). Construction validates the table, so a typo in a state name or
a record that can never fire is an error at import time, not a silent dead edge.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Names a model bound by ``transitions`` already uses for its own purposes.
_RESERVED_NAMES = frozenset({"state", "trigger", "may_trigger"})
_SNAKE = re.compile(r"[a-z][a-z0-9_]*\Z")
_CAMEL = re.compile(r"[A-Z][A-Za-z0-9]*\Z")


class TableError(ValueError):
    """A machine table is inconsistent; the message names the machine and the record."""


@dataclass(frozen=True, slots=True)
class Transition:
    """One edge of a lifecycle, as plain data (see the module docstring)."""

    trigger: str
    source: tuple[str, ...]
    dest: str
    conditions: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()

    @property
    def guards(self) -> tuple[str, ...]:
        """Every guard name the record consults, conditions first."""
        return self.conditions + self.unless

    def describe(self) -> str:
        """The record in one line, for error messages."""
        return f"{self.trigger}: {'|'.join(self.source)} -> {self.dest}"


@dataclass(frozen=True, slots=True)
class MachineTable:
    """A whole lifecycle: states, where a new model starts, where it ends, and its edges.

    Attributes:
        name: file-name-safe identifier (``ramp_up``); diagrams are written as ``<name>.mmd``.
        title: heading for diagrams and documentation.
        states: every state, in the order diagrams list them.
        initial: the state a new model starts in.
        final: states a model never leaves.
        transitions: the ONE list of transition records.
        summary: one paragraph saying what the machine governs and citing the spec.
        glossary: ``(name, meaning)`` for every guard, action and event the records name, so
            the caller knows exactly what to answer, do or commit (shown on the index page).
    """

    name: str
    title: str
    states: tuple[str, ...]
    initial: str
    final: tuple[str, ...]
    transitions: tuple[Transition, ...]
    summary: str = ""
    glossary: tuple[tuple[str, str], ...] = ()
    _by_trigger: dict[str, tuple[Transition, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        _validate(self)
        index: dict[str, list[Transition]] = {}
        for record in self.transitions:
            index.setdefault(record.trigger, []).append(record)
        self._by_trigger.update({t: tuple(rs) for t, rs in index.items()})

    @property
    def triggers(self) -> tuple[str, ...]:
        """Trigger names in first-use order."""
        return tuple(self._by_trigger)

    @property
    def guards(self) -> tuple[str, ...]:
        """Guard names the caller's models must answer, in first-use order."""
        return _ordered(g for r in self.transitions for g in r.guards)

    @property
    def events(self) -> tuple[str, ...]:
        """Journal event names the machine commits, in first-use order."""
        return _ordered(e for r in self.transitions for e in r.events)

    def meaning(self, name: str) -> str:
        """What a guard, action or event means, from the glossary.

        Raises:
            LookupError: ``name`` is not in the glossary.
        """
        for entry, text in self.glossary:
            if entry == name:
                return text
        raise LookupError(f"machine {self.name!r} has no glossary entry {name!r}")

    @property
    def actions(self) -> tuple[str, ...]:
        """Action names the caller carries out, in first-use order."""
        return _ordered(a for r in self.transitions for a in r.actions)

    def candidates(self, trigger: str, state: str) -> tuple[Transition, ...]:
        """The records ``trigger`` tries from ``state``, in order; empty when it is illegal."""
        return tuple(r for r in self._by_trigger.get(trigger, ()) if state in r.source)

    def select(self, trigger: str, state: str, answer: Callable[[str], bool]) -> Transition | None:
        """The record ``trigger`` takes from ``state``: the first candidate whose guards hold.

        This is the ``transitions`` rule (records tried in table order; all ``conditions``
        true, all ``unless`` false), read straight off the table, so a caller that only needs
        to know which row fires does not have to run a machine to find out.

        Args:
            trigger: one of the table's triggers.
            state: the model's state.
            answer: ``guard name -> bool``; asked only for the guards of the records tried.

        Returns:
            The record, or ``None`` when every candidate's guards refuse, or when ``trigger``
            is not legal in ``state`` (tell the two apart with :meth:`candidates`).
        """
        for record in self.candidates(trigger, state):
            if all(answer(g) for g in record.conditions) and not any(
                answer(g) for g in record.unless
            ):
                return record
        return None

    def triggers_from(self, state: str) -> tuple[str, ...]:
        """The triggers that are legal in ``state``, in table order."""
        return _ordered(r.trigger for r in self.transitions if state in r.source)


def _ordered(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _check_name(table: str, kind: str, name: str, pattern: re.Pattern[str]) -> None:
    if not pattern.match(name) or keyword.iskeyword(name) or name in _RESERVED_NAMES:
        raise TableError(f"machine {table!r}: {kind} name {name!r} is not allowed")


def _validate(t: MachineTable) -> None:
    """Reject a table whose diagram would lie about the machine built from it."""
    _check_name(t.name, "machine", t.name, _SNAKE)
    states = set(t.states)
    if len(states) != len(t.states):
        raise TableError(f"machine {t.name!r}: a state is listed twice in {t.states}")
    for s in t.states:
        _check_name(t.name, "state", s, _SNAKE)
    for s in (t.initial, *t.final):
        if s not in states:
            raise TableError(f"machine {t.name!r}: {s!r} is not one of its states {t.states}")
    triggers = {r.trigger for r in t.transitions}
    seen: set[tuple[str, str, tuple[str, ...], tuple[str, ...]]] = set()
    for r in t.transitions:
        where = f"machine {t.name!r}, transition {r.describe()}"
        _check_name(t.name, "trigger", r.trigger, _SNAKE)
        for g in (*r.guards, *r.actions):
            _check_name(t.name, "guard/action", g, _SNAKE)
            if g in triggers:
                # add_model binds a method per trigger onto the model, hiding the guard.
                raise TableError(f"{where}: {g!r} is both a trigger and a guard/action")
        if set(r.conditions) & set(r.unless):
            raise TableError(f"{where}: a guard is both required and forbidden")
        for e in r.events:
            _check_name(t.name, "event", e, _CAMEL)
        if not r.source:
            raise TableError(f"{where}: no source state")
        for s in (*r.source, r.dest):
            if s not in states:
                raise TableError(f"{where}: unknown state {s!r}")
        for s in r.source:
            if s in t.final:
                raise TableError(f"{where}: leaves final state {s!r}")
            key = (r.trigger, s, r.conditions, r.unless)
            if key in seen:
                raise TableError(f"{where}: same trigger, source and guards as an earlier record")
            seen.add(key)
    _check_shadowing(t)
    _check_reachability(t)
    _check_glossary(t)


def _check_glossary(t: MachineTable) -> None:
    """Every guard, action and event is explained once, and nothing else is."""
    explained = [name for name, _ in t.glossary]
    named = {*t.guards, *t.actions, *t.events}
    missing = [n for n in (*t.guards, *t.actions, *t.events) if n not in explained]
    unused = [n for n in explained if n not in named]
    twice = sorted({n for n in explained if explained.count(n) > 1})
    if missing or unused or twice:
        raise TableError(
            f"machine {t.name!r}: glossary misses {missing}, explains unused {unused}, "
            f"explains twice {twice}"
        )
    # Meanings are Markdown table cells on the index page: one line, no column separator.
    bad = [n for n, text in t.glossary if not text.strip() or "|" in text or "\n" in text]
    if bad:
        raise TableError(f"machine {t.name!r}: glossary entries {bad} need a one-line meaning")


def _check_shadowing(t: MachineTable) -> None:
    """An unguarded record wins every time, so a later record for the same move never fires."""
    for trigger in {r.trigger for r in t.transitions}:
        for state in t.states:
            records = [r for r in t.transitions if r.trigger == trigger and state in r.source]
            for earlier_index, earlier in enumerate(records[:-1]):
                if not earlier.guards:
                    dead = records[earlier_index + 1]
                    raise TableError(
                        f"machine {t.name!r}: {dead.describe()} can never fire from {state!r}: "
                        f"the unguarded {earlier.describe()} comes first"
                    )


def _check_reachability(t: MachineTable) -> None:
    """Every state is reachable from the initial one and every non-final state has a way out."""
    reached = {t.initial}
    frontier = [t.initial]
    while frontier:
        state = frontier.pop()
        for r in t.transitions:
            if state in r.source and r.dest not in reached:
                reached.add(r.dest)
                frontier.append(r.dest)
    unreachable = [s for s in t.states if s not in reached]
    if unreachable:
        raise TableError(f"machine {t.name!r}: states {unreachable} cannot be reached")
    stuck = [s for s in t.states if s not in t.final and not t.triggers_from(s)]
    if stuck:
        raise TableError(f"machine {t.name!r}: non-final states {stuck} have no way out")
