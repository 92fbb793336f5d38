"""The shared Lifecycle: fire/step agree, errors name the machine, state and trigger."""

from __future__ import annotations

import itertools
import threading

import pytest

from machines.catalog import TABLES
from machines.lifecycle import InvalidTransition, Lifecycle, MissingGuardError, Step
from machines.table import MachineTable, Transition
from tests.machines.checks import Model

TOY = MachineTable(
    name="toy",
    title="Toy",
    states=("idle", "busy", "done"),
    initial="idle",
    final=("done",),
    transitions=(
        Transition("work", ("idle",), "busy", conditions=("ready",), events=("WorkStarted",)),
        Transition("work", ("idle",), "done", unless=("ready",), actions=("give_up",)),
        Transition("work", ("busy",), "busy"),
        Transition("finish", ("busy",), "done", events=("WorkFinished", "Cleaned")),
    ),
    glossary=(
        ("ready", "the worker is ready"),
        ("give_up", "log that the work was abandoned"),
        ("WorkStarted", "work began"),
        ("WorkFinished", "work ended"),
        ("Cleaned", "the desk was cleared"),
    ),
)


@pytest.fixture(name="toy")
def _toy() -> Lifecycle:
    return Lifecycle(TOY)


def test_step_names_events_and_actions_of_the_record_that_fired(toy: Lifecycle) -> None:
    assert toy.step("idle", "work", {"ready": True}) == Step(
        "work", "idle", "busy", ("WorkStarted",), ()
    )
    assert toy.step("idle", "work", {"ready": False}) == Step(
        "work", "idle", "done", (), ("give_up",)
    )
    finish = toy.step("busy", "finish")
    assert finish is not None and finish.events == ("WorkFinished", "Cleaned")
    assert finish.changed_state
    loop = toy.step("busy", "work")
    assert loop is not None and not loop.changed_state


def test_guards_may_be_methods_properties_or_values(toy: Lifecycle) -> None:
    class Method:
        state = "idle"

        def ready(self) -> bool:
            return True

    class Prop:
        state = "idle"

        @property
        def ready(self) -> bool:
            return False

    method, prop = Method(), Prop()
    assert toy.fire(method, "work") == Step("work", "idle", "busy", ("WorkStarted",), ())
    assert toy.fire(prop, "work") == Step("work", "idle", "done", (), ("give_up",))
    assert (method.state, prop.state) == ("busy", "done")


def test_step_without_a_needed_guard_answer_names_it(toy: Lifecycle) -> None:
    with pytest.raises(
        MissingGuardError, match=r"'work' from 'idle' needs guard answers \['ready'\]"
    ):
        toy.step("idle", "work")


def test_fire_on_a_model_without_the_guard_raises_attribute_error(toy: Lifecycle) -> None:
    model = Model("idle")
    with pytest.raises(AttributeError, match="ready"):
        toy.fire(model, "work")
    assert model.state == "idle"


def test_an_illegal_trigger_is_refused_with_what_is_legal(toy: Lifecycle) -> None:
    model = Model("busy")
    with pytest.raises(InvalidTransition) as caught:
        toy.fire(model, "nonsense")
    err = caught.value
    assert (err.machine, err.trigger, err.state, err.allowed) == (
        "toy", "nonsense", "busy", ("work", "finish")
    )  # fmt: skip
    assert str(err) == "toy: cannot 'nonsense' in state 'busy' (legal there: work, finish)"
    assert err.value == str(err)
    with pytest.raises(InvalidTransition, match="none, it is final"):
        toy.fire(Model("done"), "work")


def test_a_state_the_machine_does_not_know_is_refused(toy: Lifecycle) -> None:
    with pytest.raises(ValueError, match="'lost' is not a state"):
        toy.fire(Model("lost"), "work")
    with pytest.raises(ValueError, match="'lost' is not a state"):
        toy.step("lost", "work")


def test_can_fire_checks_legality_and_guards(toy: Lifecycle) -> None:
    assert toy.can_fire(Model("idle", {"ready": True}), "work")
    assert not toy.can_fire(Model("done"), "work")
    assert not toy.can_fire(Model("idle"), "finish")


def test_threads_firing_on_one_shared_machine_do_not_mix_up_steps(toy: Lifecycle) -> None:
    """The fired record is tracked per context, so concurrent callers each get their own step."""
    errors: list[str] = []

    def drive(ready: bool) -> None:
        for _ in range(300):
            model = Model("idle", {"ready": ready})
            step = toy.fire(model, "work")
            want = "busy" if ready else "done"
            if step is None or step.dest != want or model.state != want:
                errors.append(f"{ready}: {step}")

    threads = [threading.Thread(target=drive, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_step_from_the_table_agrees_with_transitions_on_every_move(table: MachineTable) -> None:
    # Every (state, trigger, guard answers) of every machine: the row the table names is the
    # edge the transitions machine takes when it moves a model.
    lifecycle = Lifecycle(table)
    for state in table.states:
        for trigger in table.triggers_from(state):
            guards = sorted({g for r in table.candidates(trigger, state) for g in r.guards})
            for values in itertools.product([False, True], repeat=len(guards)):
                answers = dict(zip(guards, values, strict=True))
                model = Model(state, dict(answers))
                assert lifecycle.step(state, trigger, answers) == lifecycle.fire(model, trigger)
                step = lifecycle.step(state, trigger, answers)
                assert model.state == (step.dest if step is not None else state)


def test_a_guard_that_changes_its_answer_mid_fire_is_reported(toy: Lifecycle) -> None:
    class Fickle:
        state = "idle"
        answers = iter([True, False, False])

        def ready(self) -> bool:
            return next(self.answers)

    with pytest.raises(RuntimeError, match="the table names work: idle -> busy"):
        toy.fire(Fickle(), "work")


@pytest.mark.parametrize(
    ("state", "trigger", "answers", "refusal"),
    [
        ("idle", "work", {}, MissingGuardError),
        ("idle", "finish", {"ready": True}, InvalidTransition),
        ("lost", "work", {"ready": True}, ValueError),
    ],
    ids=[
        "a missing guard answer is refused after the answered question was remembered",
        "an illegal trigger is refused after a legal one was remembered",
        "an unknown state is refused after a known one was remembered",
    ],
)
def test_remembered_steps_do_not_hide_refusals(
    toy: Lifecycle, state: str, trigger: str, answers: dict[str, bool], refusal: type[Exception]
) -> None:
    first = toy.step("idle", "work", {"ready": True})
    with pytest.raises(refusal):
        toy.step(state, trigger, answers)
    with pytest.raises(refusal):
        toy.step(state, trigger, answers)
    assert toy.step("idle", "work", {"ready": True}) is first


@pytest.mark.parametrize(
    ("answers", "dest"),
    [
        ({"ready": [1]}, "busy"),
        ({"ready": []}, "done"),
        ({"ready": 1}, "busy"),
        ({"ready": 0}, "done"),
    ],
    ids=[
        "an unhashable truthy answer takes the conditioned row",
        "an unhashable falsy answer takes the unless row",
        "a truthy non-bool answer takes the conditioned row",
        "a falsy non-bool answer takes the unless row",
    ],
)
def test_step_reads_answers_by_truth_whatever_their_type(
    toy: Lifecycle, answers: dict[str, object], dest: str
) -> None:
    for _ in range(2):
        step = toy.step("idle", "work", answers)  # type: ignore[arg-type]
        assert step is not None and step.dest == dest


def test_the_step_memo_stays_bounded(toy: Lifecycle) -> None:
    for i in range(Lifecycle.STEP_MEMO_SIZE * 2 + 5):
        step = toy.step("idle", "work", {"ready": i % 3 != 0, f"unused-{i}": True})
        assert step is not None and step.dest == ("busy" if i % 3 else "done")
    assert len(toy._steps) <= Lifecycle.STEP_MEMO_SIZE
