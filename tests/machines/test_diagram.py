"""Diagrams come from the transition table alone and are byte-for-byte stable."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from machines import diagram, ramp_up
from machines.catalog import TABLES
from machines.table import MachineTable, Transition

REPO = Path(__file__).resolve().parents[2]
EDGE = re.compile(r"^    (\w+) --> (\w+) : (.+)$")


@pytest.mark.parametrize(
    ("record", "label"),
    [
        pytest.param(Transition("go", ("a",), "b"), "go", id="a bare trigger"),
        pytest.param(
            Transition("finish_ramp_up", ("ramping",), "pooled",
                       conditions=("transition_period_passed",), events=("RampUpFinished",)),
            "finish_ramp_up [transition_period_passed] / commit RampUpFinished",
            id="guard in brackets, committed event after it",
        ),
        pytest.param(
            Transition("fail", ("a",), "b", conditions=("x",), unless=("y", "z"),
                       actions=("p", "q"), events=("E", "F")),
            "fail [x, not y, not z] / do p, q / commit E, F",
            id="unless guards negated, actions before events",
        ),
    ],
)  # fmt: skip
def test_edge_label(record: Transition, label: str) -> None:
    assert diagram.edge_label(record) == label


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_mermaid_has_one_edge_per_record_source_in_table_order(table: MachineTable) -> None:
    text = diagram.to_mermaid(table)
    assert text.startswith("stateDiagram-v2\n")
    edges = [m.groups() for line in text.splitlines() if (m := EDGE.match(line))]
    want = [(s, r.dest, diagram.edge_label(r)) for r in table.transitions for s in r.source]
    assert edges == want
    assert f"    [*] --> {table.initial}\n" in text
    for state in table.final:
        assert f"    {state} --> [*]\n" in text
    # Mermaid ends a label at ';' and '#' starts an entity: neither may appear.
    assert not set(";#") & set(text.split("\n", 2)[2])


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_rendering_is_deterministic(table: MachineTable) -> None:
    rebuilt = dataclasses.replace(table, transitions=tuple(table.transitions))
    for render in (diagram.to_mermaid, diagram.to_dot):
        assert render(table) == render(table) == render(rebuilt)


def test_the_diagram_follows_the_table_and_nothing_else() -> None:
    changed = dataclasses.replace(
        ramp_up.TABLE,
        transitions=(
            *ramp_up.TABLE.transitions,
            Transition("evict", ("reclaimed",), "removed", events=("ContainerEvicted",)),
        ),
        glossary=(*ramp_up.TABLE.glossary, ("ContainerEvicted", "evicted")),
    )
    assert "    reclaimed --> removed : evict / commit ContainerEvicted\n" in diagram.to_mermaid(
        changed
    )
    assert "evict" not in diagram.to_mermaid(ramp_up.TABLE)


def test_dot_quotes_labels_and_marks_final_states() -> None:
    table = MachineTable(
        name="toy", title='Say "hi"', states=("a", "b"), initial="a", final=("b",),
        transitions=(Transition("go", ("a",), "b", conditions=("ok",)),),
        glossary=(("ok", "all is well"),),
    )  # fmt: skip
    text = diagram.to_dot(table)
    assert 'label="Say \\"hi\\"";' in text
    assert '    "b" [peripheries=2];' in text
    assert '    "a" -> "b" [label="go [ok]"];' in text
    assert '    "__initial__" -> "a";' in text
    assert text.rstrip().endswith("}")


def test_the_index_embeds_every_machine() -> None:
    page = diagram.to_markdown(TABLES)
    assert page.count("```mermaid\n") == len(TABLES)
    for table in TABLES:
        assert f"## {table.title} (`{table.name}.mmd`)" in page
        assert diagram.to_mermaid(table) in page
    assert "| guard | `transition_period_passed` | now > init_timestamp + transition" in page
    assert "| event | `RampUpFinished` | the ramp-up flag was cleared" in page


def test_rendering_does_not_depend_on_hash_seeds() -> None:
    """Set or dict-of-set iteration would change with PYTHONHASHSEED; the output must not."""
    code = (
        "from machines.catalog import TABLES; from machines.diagram import to_markdown, to_dot;"
        "print(to_markdown(TABLES)); print(''.join(to_dot(t) for t in TABLES))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)},
            capture_output=True, text=True, check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }  # fmt: skip
    assert len(outputs) == 1
