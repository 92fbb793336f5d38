"""The table validation: a table whose diagram would lie is refused at construction."""

from __future__ import annotations

import pytest

from machines.catalog import TABLES, table_named
from machines.table import MachineTable, TableError, Transition


def _table(
    transitions: tuple[Transition, ...],
    *,
    final: tuple[str, ...] = ("c",),
    glossary: tuple[tuple[str, str], ...] = (),
) -> MachineTable:
    return MachineTable(
        name="toy",
        title="Toy",
        states=("a", "b", "c"),
        initial="a",
        final=final,
        transitions=transitions,
        glossary=glossary,
    )


GOOD = (Transition("go", ("a",), "b"), Transition("end", ("b",), "c"))


def test_a_consistent_table_is_accepted() -> None:
    t = _table(GOOD)
    assert t.triggers == ("go", "end")
    assert t.triggers_from("a") == ("go",)
    assert t.triggers_from("c") == ()
    assert t.candidates("go", "b") == ()


@pytest.mark.parametrize(
    ("transitions", "final", "message"),
    [
        pytest.param(
            (Transition("go", ("a",), "x"), Transition("end", ("a",), "c")),
            ("c",),
            "unknown state 'x'",
            id="an unknown destination state",
        ),
        pytest.param(
            (*GOOD, Transition("back", ("c",), "a")),
            ("c",),
            "leaves final state 'c'",
            id="a transition out of a final state",
        ),
        pytest.param(
            (Transition("go", ("a",), "c"),),
            ("c",),
            "cannot be reached",
            id="a state nothing leads to",
        ),
        pytest.param(
            (Transition("go", ("a",), "b"), Transition("x", ("a",), "c")),
            ("c",),
            "have no way out",
            id="a non-final state with no way out",
        ),
        pytest.param(
            (*GOOD, Transition("go", ("a",), "c", conditions=("ready",))),
            ("c",),
            "can never fire",
            id="a record shadowed by an earlier unguarded one",
        ),
        pytest.param(
            (*GOOD, Transition("go", ("a",), "b")),
            ("c",),
            "same trigger, source and guards",
            id="a duplicated record",
        ),
        pytest.param(
            (Transition("go", ("a",), "b", conditions=("end",)), Transition("end", ("b",), "c")),
            ("c",),
            "both a trigger and a guard",
            id="a guard named like a trigger",
        ),
        pytest.param(
            (Transition("go", ("a",), "b", conditions=("g",), unless=("g",)), GOOD[1]),
            ("c",),
            "both required and forbidden",
            id="a guard both required and forbidden",
        ),
        pytest.param(
            (Transition("go", ("a",), "b", events=("not_camel",)), GOOD[1]),
            ("c",),
            "event name 'not_camel'",
            id="an event not in CamelCase",
        ),
        pytest.param(
            (Transition("state", ("a",), "b"), GOOD[1]),
            ("c",),
            "trigger name 'state'",
            id="a trigger that clobbers the model's state",
        ),
        pytest.param(
            (Transition("go", (), "b"), GOOD[1]),
            ("c",),
            "no source state",
            id="a record without a source",
        ),
        pytest.param(GOOD, ("z",), "'z' is not one of its states", id="an unknown final state"),
    ],
)
def test_an_inconsistent_table_is_refused(
    transitions: tuple[Transition, ...], final: tuple[str, ...], message: str
) -> None:
    with pytest.raises(TableError, match=message):
        _table(transitions, final=final)


GUARDED = (Transition("go", ("a",), "b", conditions=("ready",), events=("Went",)), GOOD[1])


@pytest.mark.parametrize(
    ("glossary", "message"),
    [
        pytest.param((("ready", "r"),), r"misses \['Went'\]", id="an event left unexplained"),
        pytest.param(
            (("ready", "r"), ("Went", "w"), ("gone", "g")), r"explains unused \['gone'\]",
            id="an entry for a name no record uses",
        ),
        pytest.param(
            (("ready", "r"), ("Went", "w"), ("ready", "again")), r"explains twice \['ready'\]",
            id="a name explained twice",
        ),
        pytest.param(
            (("ready", "a | b"), ("Went", "w")), "need a one-line meaning",
            id="a meaning that would break the index page's table",
        ),
    ],
)  # fmt: skip
def test_the_glossary_explains_every_name_once(
    glossary: tuple[tuple[str, str], ...], message: str
) -> None:
    with pytest.raises(TableError, match=message):
        _table(GUARDED, glossary=glossary)


def test_a_glossary_entry_can_be_looked_up() -> None:
    t = _table(GUARDED, glossary=(("ready", "it is ready"), ("Went", "it went")))
    assert t.meaning("Went") == "it went"
    with pytest.raises(LookupError, match="no glossary entry 'nope'"):
        t.meaning("nope")


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_machine_names_its_vocabulary(table: MachineTable) -> None:
    assert table.summary, "the index page shows the summary"
    assert set(table.guards).isdisjoint(table.triggers)
    assert table_named(table.name) is table


def test_an_unknown_machine_name_lists_the_known_ones() -> None:
    with pytest.raises(LookupError, match="ramp_up, balance_round"):
        table_named("nope")


# -- which record fires, read off the table -----------------------------------------------------

_TOY = MachineTable(
    name="lamp",
    title="Lamp",
    states=("off", "on", "broken"),
    initial="off",
    final=("broken",),
    transitions=(
        Transition("press", ("off",), "on", conditions=("powered",), events=("LampLit",)),
        Transition("press", ("off",), "broken", conditions=("wet",), unless=("powered",)),
        Transition("press", ("on",), "off"),
    ),
    glossary=(("powered", "the plug is in"), ("wet", "water got in"), ("LampLit", "light")),
)


@pytest.mark.parametrize(
    ("state", "answers", "dest"),
    [
        pytest.param("off", {"powered": True, "wet": True}, "on", id="the first record that holds"),
        pytest.param("off", {"powered": False, "wet": True}, "broken", id="unless is honoured"),
        pytest.param("off", {"powered": False, "wet": False}, None, id="no record holds"),
        pytest.param("on", {}, "off", id="an unguarded record asks nothing"),
        pytest.param("broken", {}, None, id="an illegal trigger selects nothing"),
    ],
)
def test_select_names_the_record_the_machine_takes(
    state: str, answers: dict[str, bool], dest: str | None
) -> None:
    asked: list[str] = []

    def answer(guard: str) -> bool:
        asked.append(guard)
        return answers[guard]

    record = _TOY.select("press", state, answer)
    assert (record.dest if record is not None else None) == dest
    assert set(asked) <= set(answers)  # only the guards of the records tried are asked
