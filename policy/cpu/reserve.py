"""Reserved CPUs: the system's share of the node, fixed at start (spec cpu-policy §3).

1. Quantity: with ``use_kubelet_reserved_config``, the kubelet's ``kubeReserved["cpu"]`` plus
   ``systemReserved["cpu"]`` (Kubernetes quantities, a missing key counts 0), summed exactly,
   rounded up to milli-CPUs and then up to whole CPUs; otherwise the ``reserved_cpu_cores``
   option.
2. CPUs: ``take_ht_by_numa_balance(all CPUs, quantity)`` (§2.1), one per NUMA node per round.

The result is the static pool ``reserve``. Reading the kubelet configuration is I/O and
happens outside ``policy/``: these functions take its two quantity strings.

3. Room: a reserve that holds every CPU of the node leaves nothing for the reclaim pool, which
   must exist (§6.1, §6.2 step 6); :func:`require_cpus_outside_reserve` refuses it with the
   numbers, before any state is read (the reference fails later, inside ``initReclaimPool``,
   with a message that names no setting).

Failures raise ``ReserveError`` shaped like the reference's construction error,
"GetCoresReservedForSystem for reservedCPUsNum: %d failed with error: %v", where, as in the
reference, the outer number is the configured ``reserved_cpu_cores`` and the inner message
names the quantity actually used.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from policy.errors import ErrorKind, PolicyError
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.selection import SelectionError, take_ht_by_numa_balance

if TYPE_CHECKING:
    from fractions import Fraction

__all__ = [
    "ReserveChangeRefused",
    "ReserveError",
    "kubelet_reserved_cores",
    "most_reservable_cpus",
    "parse_cpu_quantity",
    "require_cpus_outside_reserve",
    "reserved_cpu_count",
    "reserved_cpus",
]


class ReserveError(PolicyError):
    """The reserved CPUs cannot be determined; the plugin must not start.

    A bad quantity is ``INVALID``; a reserve larger than the node can hold is raised as a
    ``SHORTAGE``.
    """

    kind = ErrorKind.INVALID


class ReserveChangeRefused(ReserveError):  # noqa: N818 (a refusal, like CommitRefused)
    """The reserve differs from the one the recovered state was planned for, and the state
    cannot be re-planned for it (a dedicated container holds CPUs of the new reserve, or the
    pools do not fit beside it); the plugin must not start.

    Attributes:
        previous: the reserve the state holds.
        reserved: the reserve asked for now.
    """

    kind = ErrorKind.REFUSED

    def __init__(self, reason: str, *, previous: CPUSet, reserved: CPUSet) -> None:
        super().__init__(reason)
        self.previous = previous
        self.reserved = reserved


# Kubernetes quantity: sign, decimal number, then one suffix — binary SI (Ki..Ei), a decimal
# exponent (e3, E-2) or decimal SI (n, u, m, none, k, M, G, T, P, E). Compiled (by ``re``'s
# cache) and ``fractions`` imported at the first quantity parsed: the kubelet's reserved
# quantities and SNB pods' aggregated requests only, never on a start with
# --reserved-cpu-cores (bench/bench_startup.py).
_QUANTITY = (
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE]?)"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
# Beyond exa nothing is a CPU count; the bound keeps "1e999999999" from building a huge int.
_MAX_EXPONENT = 18
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_cpu_quantity(text: str) -> Fraction:
    """Parse a Kubernetes CPU quantity ("500m", "1", "1.5", "2e3") into exact cores.

    Args:
        text: the quantity as written in the kubelet configuration.

    Returns:
        The number of cores, exactly.

    Raises:
        ReserveError: the text is not a Kubernetes quantity.
    """
    from fractions import Fraction  # noqa: PLC0415 (lazy, see _QUANTITY)

    match = re.fullmatch(_QUANTITY, text)
    if match is None:
        raise ReserveError(f"{text!r} is not a Kubernetes CPU quantity (e.g. '500m', '1.5')")
    value = Fraction(match["number"])
    suffix = match["suffix"]
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ReserveError(f"{text!r}: exponent {exponent} is out of range")
        value *= Fraction(10) ** exponent
    else:
        value *= Fraction(10) ** _DECIMAL[suffix]
    return -value if match["sign"] == "-" else value


def _ceil(value: Fraction | int) -> int:
    return -((-value.numerator) // value.denominator)


def kubelet_reserved_cores(kube_reserved_cpu: str | None, system_reserved_cpu: str | None) -> int:
    """Whole CPUs the kubelet reserves: ceil(milli(kube + system) / 1000) (§3 step 1).

    Args:
        kube_reserved_cpu: ``kubeReserved["cpu"]``, or None when the key is absent.
        system_reserved_cpu: ``systemReserved["cpu"]``, or None when the key is absent.

    Returns:
        The reserved CPU count.

    Raises:
        ReserveError: a quantity does not parse or is negative, naming which one.
    """
    total: Fraction | int = 0
    for field, text in (
        ("kube-reserved", kube_reserved_cpu),
        ("system-reserved", system_reserved_cpu),
    ):
        if text is None:
            continue
        try:
            cores = parse_cpu_quantity(text)
        except ReserveError as err:
            raise ReserveError(f"parse cpu quantity for {field} failed with error: {err}") from None
        if cores < 0:
            raise ReserveError(f"cpu quantity for {field} is negative: {text!r}")
        total += cores
    # Kubernetes' MilliValue rounds the exact sum up to milli-CPUs; then up to whole CPUs.
    milli = _ceil(total * 1000)
    return -(-milli // 1000)


def reserved_cpu_count(
    *,
    use_kubelet_reserved_config: bool,
    reserved_cpu_cores: int,
    kube_reserved_cpu: str | None = None,
    system_reserved_cpu: str | None = None,
) -> int:
    """How many CPUs to reserve (§3 step 1).

    Args:
        use_kubelet_reserved_config: take the quantity from the kubelet's configuration.
        reserved_cpu_cores: the ``cpu-resource-plugin-reserved`` option, used otherwise.
        kube_reserved_cpu: the kubelet's ``kubeReserved["cpu"]`` (None: absent).
        system_reserved_cpu: the kubelet's ``systemReserved["cpu"]`` (None: absent).

    Returns:
        The reserved CPU count.

    Raises:
        ReserveError: a negative option, or a kubelet quantity that does not parse.
    """
    if reserved_cpu_cores < 0:
        raise _construction_error(
            reserved_cpu_cores, f"reserved_cpu_cores must not be negative, got {reserved_cpu_cores}"
        )
    if not use_kubelet_reserved_config:
        return reserved_cpu_cores
    try:
        return kubelet_reserved_cores(kube_reserved_cpu, system_reserved_cpu)
    except ReserveError as err:
        raise _construction_error(
            reserved_cpu_cores, f"GetKubeletReservedQuantity failed with error: {err}"
        ) from None


def reserved_cpus(
    topology: CPUTopology,
    *,
    use_kubelet_reserved_config: bool,
    reserved_cpu_cores: int,
    kube_reserved_cpu: str | None = None,
    system_reserved_cpu: str | None = None,
) -> CPUSet:
    """The reserved CPUs of a node (§3): the count of step 1, placed as in step 2.

    Args:
        topology: the node's topology; every CPU of it is a candidate.
        use_kubelet_reserved_config: take the quantity from the kubelet's configuration.
        reserved_cpu_cores: the ``cpu-resource-plugin-reserved`` option, used otherwise.
        kube_reserved_cpu: the kubelet's ``kubeReserved["cpu"]`` (None: absent).
        system_reserved_cpu: the kubelet's ``systemReserved["cpu"]`` (None: absent).

    Returns:
        The reserved CPUs (empty for a count of 0).

    Raises:
        ReserveError: a bad quantity, or more CPUs asked than the node has.
    """
    # 1. Quantity.
    count = reserved_cpu_count(
        use_kubelet_reserved_config=use_kubelet_reserved_config,
        reserved_cpu_cores=reserved_cpu_cores,
        kube_reserved_cpu=kube_reserved_cpu,
        system_reserved_cpu=system_reserved_cpu,
    )
    # 2. CPUs, one per NUMA node per round.
    try:
        taken, _rest = take_ht_by_numa_balance(topology, topology.cpus(), count)
    except SelectionError as err:
        raise _construction_error(
            reserved_cpu_cores,
            f"takeByNUMABalance for reservedCPUsNum: {count} failed with error: {err}",
            kind=err.kind,
        ) from None
    return taken


def _construction_error(
    reserved_cpu_cores: int, cause: str, kind: ErrorKind | None = None
) -> ReserveError:
    return ReserveError(
        f"GetCoresReservedForSystem for reservedCPUsNum: {reserved_cpu_cores} "
        f"failed with error: {cause}",
        kind=kind,
    )


def most_reservable_cpus(topology: CPUTopology) -> int:
    """The largest reserve the node can start with (module rule 3): all CPUs but one.

    The reclaim pool must exist (§6.1); on a fresh state start-up takes ``min(4, available)``
    of the CPUs outside the reserve (§6.2 step 6c), so one left outside is enough. (Over a
    state whose containers hold those CPUs, start-up re-plans or refuses on its own terms.)
    """
    return topology.cpus().size() - 1


def require_cpus_outside_reserve(topology: CPUTopology, reserved: CPUSet) -> None:
    """Refuse a reserve that leaves no CPU of the node outside it (module rule 3).

    Args:
        topology: the node.
        reserved: the reserved CPUs.

    Raises:
        ReserveError: every CPU is reserved; the message gives both counts and the most the
            node can reserve.
    """
    total = topology.cpus().size()
    if reserved.size() < total:
        return
    raise ReserveError(
        f"the reserve ({reserved}) holds all {total} CPUs of the node: none is left for the "
        f"reclaim pool, which needs at least one (cpu-policy §6.2 step 6); reserve at most "
        f"{most_reservable_cpus(topology)}",
        kind=ErrorKind.SHORTAGE,
    )
