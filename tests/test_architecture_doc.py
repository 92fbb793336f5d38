"""docs/architecture.md names code by ``path.py:name``: every such hop must still exist.

The page follows one Allocate through the code file by file; a rename that the page does not
follow would send a reader to a function that is gone, so the page is checked like code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# `wire/convert.py:allocate_command`, `actors/allocator.py:AllocatorCore.handle`
HOP = re.compile(r"`([\w/]+\.py):([A-Za-z_][\w.]*)`")


def _defined_names(path: Path) -> set[str]:
    """Top-level names and ``Class.method`` names defined in a module."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


HOPS = sorted(set(HOP.findall(DOC.read_text())))


def test_the_page_names_hops() -> None:
    assert len(HOPS) >= 15


@pytest.mark.parametrize(("module", "name"), HOPS, ids=[f"{m}:{n}" for m, n in HOPS])
def test_every_hop_on_the_page_exists(module: str, name: str) -> None:
    path = ROOT / module
    assert path.is_file(), f"{module} does not exist"
    assert name in _defined_names(path), f"{module} defines no {name}"
