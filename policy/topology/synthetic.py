"""Synthetic CPU topologies for tests, the demo and simulations (spec cpu-policy §1.3).

The numbering is the reference's ``GenerateDummyCPUTopology``: core ``k`` holds CPUs ``k`` and
``k + num_cpus/2``, NUMA node ``n`` holds cores ``n*half .. (n+1)*half-1``. Distances are
qrmd's rule (the reference generator has none): 10 to itself, 12 within a socket, 21 across.
Each NUMA node is one L3 cache whose id is the node's (``L3CacheID: j`` at v0.5.47).
"""

from __future__ import annotations

from policy.topology.model import CPUInfo, CPUTopology, NUMADistances, TopologyError

__all__ = [
    "LOCAL_DISTANCE",
    "REMOTE_SOCKET_DISTANCE",
    "SAME_SOCKET_DISTANCE",
    "generate_dummy_cpu_topology",
    "parse_synthetic_spec",
]

LOCAL_DISTANCE = 10
SAME_SOCKET_DISTANCE = 12
REMOTE_SOCKET_DISTANCE = 21

_SPEC_PREFIX = "synthetic:"
_SPEC_KEYS = ("cpus", "sockets", "numas")


def generate_dummy_cpu_topology(num_cpus: int, num_sockets: int, num_numas: int) -> CPUTopology:
    """Build the reference's synthetic topology.

    Matches the reference's numbering when a NUMA node has an odd CPU count: the generator
    then silently leaves CPUs out while ``num_cpus`` keeps the requested value (§1.3, §15.10).

    Raises:
        TopologyError: with the reference's messages for impossible shapes.
    """
    if num_cpus <= 0 or num_sockets <= 0 or num_numas <= 0:
        raise TopologyError(
            f"synthetic topology needs positive counts, got cpus={num_cpus}, "
            f"sockets={num_sockets}, numas={num_numas}"
        )
    if num_numas % num_sockets != 0:
        raise TopologyError(f"invalid NUMA number: {num_numas} and socket number: {num_sockets}")
    if num_cpus % num_numas != 0 or num_cpus % 2 != 0:
        raise TopologyError(f"invalid cpu number: {num_cpus} and NUMA number: {num_numas}")
    numa_per_socket = num_numas // num_sockets
    cpus_per_numa = num_cpus // num_numas
    half = cpus_per_numa // 2
    sibling_offset = num_cpus // 2
    details: dict[int, CPUInfo] = {}
    numa_socket: dict[int, int] = {}
    for s in range(num_sockets):
        for n in range(s * numa_per_socket, (s + 1) * numa_per_socket):
            numa_socket[n] = s
            for k in range(n * half, (n + 1) * half):
                details[k] = CPUInfo(numa_id=n, socket_id=s, core_id=k)
                details[k + sibling_offset] = CPUInfo(numa_id=n, socket_id=s, core_id=k)
    matrix = {
        a: {
            b: LOCAL_DISTANCE
            if a == b
            else SAME_SOCKET_DISTANCE
            if numa_socket[a] == numa_socket[b]
            else REMOTE_SOCKET_DISTANCE
            for b in range(num_numas)
        }
        for a in range(num_numas)
    }
    return CPUTopology(
        num_cpus=num_cpus,
        num_cores=num_cpus // 2,
        num_sockets=num_sockets,
        num_numa_nodes=num_numas,
        cpu_details=details,
        distances=NUMADistances.of(matrix),
        l3_caches=None,  # one L3 per NUMA node (the model's default)
    )


def parse_synthetic_spec(spec: str) -> CPUTopology:
    """Build a topology from ``synthetic:cpus=16,sockets=2,numas=4``.

    Raises:
        TopologyError: naming the bad or missing key.
    """
    if not spec.startswith(_SPEC_PREFIX):
        raise TopologyError(f"not a synthetic topology spec: {spec!r}")
    values: dict[str, int] = {}
    body = spec[len(_SPEC_PREFIX) :]
    for piece in filter(None, body.split(",")):
        key, sep, raw = piece.partition("=")
        if not sep:
            raise TopologyError(f"synthetic spec {spec!r}: {piece!r} is not key=value")
        if key not in _SPEC_KEYS:
            raise TopologyError(
                f"synthetic spec {spec!r}: unknown key {key!r} (expected cpus, sockets, numas)"
            )
        try:
            values[key] = int(raw)
        except ValueError:
            raise TopologyError(
                f"synthetic spec {spec!r}: {key}={raw!r} is not an integer"
            ) from None
    missing = [k for k in _SPEC_KEYS if k not in values]
    if missing:
        raise TopologyError(f"synthetic spec {spec!r}: missing {', '.join(missing)}")
    return generate_dummy_cpu_topology(values["cpus"], values["sockets"], values["numas"])
