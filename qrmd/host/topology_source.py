"""Resolve a ``--topology`` SPEC into a CPUTopology: sysfs, synthetic, or a machine file.

SPEC forms (spec cpu-policy §1.2, §1.3):

- ``sysfs`` (the default): this host, read from ``/sys``; ``sysfs:ROOT`` reads a tree laid
  out like ``/sys`` under ROOT (a copy taken from another host, or a test fixture).
- ``synthetic:cpus=N,sockets=S,numas=M``: the reference's generated layout.
- a path ending in ``.yaml``, ``.yml`` or ``.json``, or ``file:PATH`` for any name: a
  machine file (format in ``policy.topology.machine_file`` and docs/topology.md).
"""

from __future__ import annotations

from policy.topology.model import CPUTopology, TopologyError
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.host.sysfs_topology import DEFAULT_SYSFS_ROOT, read_sysfs_topology

__all__ = ["DEFAULT_TOPOLOGY_SPEC", "SPEC_FORMS", "load_topology"]

DEFAULT_TOPOLOGY_SPEC = "sysfs"

SPEC_FORMS = (
    "'sysfs' (this host), 'sysfs:ROOT', 'synthetic:cpus=N,sockets=S,numas=M', "
    "a machine file (.yaml, .yml, .json) or 'file:PATH'"
)


def load_topology(spec: str) -> CPUTopology:
    """Build the topology a SPEC names.

    Args:
        spec: one of the forms in the module docstring.

    Returns:
        The topology, with its NUMA distances.

    Raises:
        TopologyError: the spec is not one of the forms, or what it names is invalid or
            unreadable (the message names the file, key or value).
    """
    if spec == "sysfs" or spec.startswith("sysfs:"):
        return read_sysfs_topology(
            DEFAULT_SYSFS_ROOT if spec == "sysfs" else _nonempty(spec, "sysfs:")
        )
    if spec.startswith("synthetic:"):
        return parse_synthetic_spec(spec)
    # The one form whose reader loads a parser (YAML): imported only when --topology names a
    # file, so ``qrmd run`` on a host, and ``qrmd.config`` that lists the forms, never load it.
    from qrmd.host.machine_file import (  # noqa: PLC0415
        MACHINE_FILE_SUFFIXES,
        read_machine_file,
    )

    if spec.startswith("file:"):
        return read_machine_file(_nonempty(spec, "file:"))
    if spec.lower().endswith(MACHINE_FILE_SUFFIXES):
        return read_machine_file(spec)
    raise TopologyError(f"unknown topology spec {spec!r}: expected {SPEC_FORMS}")


def _nonempty(spec: str, prefix: str) -> str:
    rest = spec[len(prefix) :]
    if not rest:
        raise TopologyError(f"topology spec {spec!r} names no path after {prefix!r}")
    return rest
