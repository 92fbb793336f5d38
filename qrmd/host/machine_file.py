"""Read a machine file (YAML or JSON) into a CPUTopology.

The format and its validation live in ``policy.topology.machine_file``; this module only reads the
file and parses its syntax: ``.json`` as JSON, ``.yaml``/``.yml`` as YAML, anything else as
JSON when it starts with ``{`` and as YAML otherwise. A key given twice in one mapping is an
error in both syntaxes (PyYAML and ``json`` would silently keep the last one, hiding a typo
such as two ``id: 3`` nodes' worth of cores under one key).

``qrmd topology --json`` output (``"format": "qrmd-topology/1"``) is accepted wherever a
machine file is: save it on a node, use it on a laptop (``qrmd journal verify --topology
node.json``). It carries every core's siblings per NUMA node, each socket's CPUs, the
distance rows and the L3 caches, which is all a machine file says; a document without
``l3_caches`` (written before the key existed, or of a machine where some CPU has no L3) reads
with one L3 per NUMA node. The topology built from it must have the fingerprint the document
states, so an edited document is refused rather than trusted.

Every failure is one ``MachineFileReadError`` whose message starts with the file's path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from policy.topology.build import parse_cpu_list
from policy.topology.machine_file import topology_from_machine
from policy.topology.model import CPUTopology, TopologyError

__all__ = [
    "MACHINE_FILE_SUFFIXES",
    "TOPOLOGY_DOCUMENT_FORMAT",
    "MachineFileReadError",
    "machine_from_topology_document",
    "parse_machine_text",
    "read_machine_file",
]

#: The ``format`` of ``qrmd topology --json`` documents.
TOPOLOGY_DOCUMENT_FORMAT = "qrmd-topology/1"

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
    stated: object = None
    document_cpus: object = None
    source: object = None
    placed: object = None
    if isinstance(document, dict) and "format" in document:
        if document["format"] != TOPOLOGY_DOCUMENT_FORMAT:
            raise MachineFileReadError(
                f"machine file {file}: format {document['format']!r} is not "
                f"{TOPOLOGY_DOCUMENT_FORMAT!r} (`qrmd topology --json` output); a machine file "
                f"has no 'format' key"
            )
        stated = document.get("fingerprint")
        document_cpus, source = document.get("num_cpus"), document.get("source")
        placed = document.get("cpus")
        document = machine_from_topology_document(document, file)
    try:
        topology = topology_from_machine(document)
    except TopologyError as exc:
        raise MachineFileReadError(f"machine file {file}: {exc}") from None
    claimed = document_cpus if isinstance(document_cpus, int) else topology.num_cpus
    if claimed != topology.num_cpus and str(topology.cpus()) == placed:
        raise MachineFileReadError(
            f"machine file {file}: the document counts {claimed} CPUs but places "
            f"{topology.num_cpus} (the synthetic generator's odd-count quirk, cpu-policy §1.3): "
            f"no machine file describes that shape; pass its source spec ({source}) instead"
        )
    if stated is not None and stated != topology.fingerprint():
        raise MachineFileReadError(
            f"machine file {file}: the document states fingerprint {stated!r} but describes "
            f"topology {topology.fingerprint()}: it was edited after `qrmd topology --json` "
            f"wrote it"
        )
    return topology


def machine_from_topology_document(document: dict[str, Any], file: Path) -> dict[str, object]:
    """The machine document a ``qrmd topology --json`` document describes.

    Each core goes under the socket whose CPUs hold it and the NUMA node that lists it; the
    distance rows are taken as they are (the same form a machine file has).

    Raises:
        MachineFileReadError: a key missing or of the wrong type (named), or a core in no
            socket.
    """
    where = f"machine file {file} (a {TOPOLOGY_DOCUMENT_FORMAT} document)"

    def need(parent: dict[str, Any], key: str, kind: type, path: str) -> Any:
        value = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(value, kind):
            raise MachineFileReadError(f"{where}: {path}{key} missing or not a {kind.__name__}")
        return value

    socket_cpus: dict[int, frozenset[int]] = {}
    for i, socket in enumerate(need(document, "sockets", list, "")):
        try:
            cpus = parse_cpu_list(str(need(socket, "cpus", str, f"sockets[{i}].")))
        except TopologyError as exc:
            raise MachineFileReadError(f"{where}: sockets[{i}].cpus: {exc}") from None
        socket_cpus[need(socket, "id", int, f"sockets[{i}].")] = frozenset(cpus.ids())
    placement: dict[int, dict[int, list[list[int]]]] = {s: {} for s in socket_cpus}
    for i, numa in enumerate(need(document, "numa_nodes", list, "")):
        numa_id = need(numa, "id", int, f"numa_nodes[{i}].")
        for j, core in enumerate(need(numa, "cores", list, f"numa_nodes[{i}].")):
            siblings = need(core, "cpus", list, f"numa_nodes[{i}].cores[{j}].")
            homes = [s for s, cpus in socket_cpus.items() if siblings and siblings[0] in cpus]
            if not homes:
                raise MachineFileReadError(
                    f"{where}: numa_nodes[{i}].cores[{j}] {siblings} is in no socket's cpus"
                )
            placement[homes[0]].setdefault(numa_id, []).append(list(siblings))
    machine: dict[str, object] = {
        "sockets": [
            {
                "id": socket_id,
                "numa_nodes": [
                    {"id": n, "cores": cores} for n, cores in sorted(placement[socket_id].items())
                ],
            }
            for socket_id in sorted(placement)
            if placement[socket_id]
        ],
        "distances": need(need(document, "distances", dict, ""), "rows", dict, "distances."),
    }
    memory_only = document.get("memory_only_numa_nodes")
    if memory_only:
        machine["memory_only_numa_nodes"] = memory_only
    if "l3_caches" in document:
        # Validated as a machine file's ``l3_caches`` (each CPU in exactly one cache).
        machine["l3_caches"] = document["l3_caches"]
    return machine


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
