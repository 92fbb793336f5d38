"""Read a machine file (YAML or JSON) into a CPUTopology.

The format and its validation live in ``policy.topology.machine_file``; this module only reads the
file and parses its syntax: ``.json`` as JSON, ``.yaml``/``.yml`` as YAML, anything else as
JSON when it starts with ``{`` and as YAML otherwise. A key given twice in one mapping is an
error in both syntaxes (PyYAML and ``json`` would silently keep the last one, hiding a typo
such as two ``id: 3`` nodes' worth of cores under one key).

Every failure is one ``MachineFileReadError`` whose message starts with the file's path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from policy.topology.machine_file import topology_from_machine
from policy.topology.model import CPUTopology, TopologyError

__all__ = [
    "MACHINE_FILE_SUFFIXES",
    "MachineFileReadError",
    "parse_machine_text",
    "read_machine_file",
]

MACHINE_FILE_SUFFIXES = (".yaml", ".yml", ".json")


class MachineFileReadError(TopologyError):
    """A machine file that cannot be read, parsed or built into a topology."""


def read_machine_file(path: Path | str) -> CPUTopology:
    """Read and validate a machine file.

    Args:
        path: a ``.yaml``, ``.yml`` or ``.json`` file (other names are sniffed).

    Returns:
        The topology the file describes.

    Raises:
        MachineFileReadError: the file is unreadable, not valid YAML/JSON, or not a valid
            machine description; the message names the file and, for content, the key path.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise MachineFileReadError(
            f"cannot read machine file {file}: {exc.strerror or exc}"
        ) from None
    except UnicodeDecodeError:
        raise MachineFileReadError(f"machine file {file}: not UTF-8 text") from None
    document = parse_machine_text(text, file)
    try:
        return topology_from_machine(document)
    except TopologyError as exc:
        raise MachineFileReadError(f"machine file {file}: {exc}") from None


def parse_machine_text(text: str, file: Path) -> object:
    """Parse a machine file's text as JSON or YAML, choosing by suffix, else by content.

    Raises:
        MachineFileReadError: a syntax error or a duplicate key, with its line.
    """
    suffix = file.suffix.lower()
    as_json = suffix == ".json" or (
        suffix not in MACHINE_FILE_SUFFIXES and text.lstrip().startswith("{")
    )
    return _parse_json(text, file) if as_json else _parse_yaml(text, file)


def _parse_json(text: str, file: Path) -> object:
    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise MachineFileReadError(f"machine file {file}: duplicate key {key!r}")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise MachineFileReadError(
            f"machine file {file}: not valid JSON: {exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}"
        ) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool | None):
            continue  # unhashable keys: construct_mapping reports them
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


def _parse_yaml(text: str, file: Path) -> object:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # SafeLoader subclass: plain data
    except yaml.MarkedYAMLError as exc:
        where = ""
        if exc.problem_mark is not None:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = exc.problem or exc.context or "syntax error"
        raise MachineFileReadError(
            f"machine file {file}: not valid YAML: {problem}{where}"
        ) from None
    except yaml.YAMLError as exc:
        raise MachineFileReadError(f"machine file {file}: not valid YAML: {exc}") from None
