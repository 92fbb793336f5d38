"""Resolve a ``--topology`` SPEC into a CPUTopology: sysfs, synthetic, or a machine file."""

from __future__ import annotations

from policy.synthetic import parse_synthetic_spec
from policy.topology import CPUTopology, TopologyError

DEFAULT_TOPOLOGY_SPEC = "sysfs"


def load_topology(spec: str) -> CPUTopology:
    """Build the topology a SPEC names.

    Raises:
        TopologyError: the spec or what it points to is invalid.
    """
    if spec.startswith("synthetic:"):
        return parse_synthetic_spec(spec)
    raise TopologyError(f"unsupported topology spec {spec!r}")
