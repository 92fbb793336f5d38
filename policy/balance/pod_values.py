"""A pod and its containers as a balance round reads them (memory-balancer §4.2, §4.5).

``Container`` is a regular container of a pod with its anonymous memory per NUMA node, and
``Pod`` a pod listed in a pool through its main container; each checks its values on
construction, every refusal naming the pod or the container. A round holds its pods as
columns (``policy.balance.pod_table``), made of these values only where something asks for
one; ``policy.balance.inputs`` holds them in ``RoundInputs`` and reads their JSON form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policy import names as k8s_names
from policy.balance.amounts import NumaAmounts, numa_index
from policy.balance.decode import amounts_in_bulk, anon_by_numa, as_str, in_numa_order
from policy.balance.errors import BalanceError

__all__ = ["Container", "Pod"]


def _bounded(value: str, where: str, limit: int) -> None:
    """Kubernetes' bound on a name (``policy.names``): no pod carries a longer one."""
    if len(value) * 4 <= limit:  # no code point takes more than 4 bytes in UTF-8
        return
    reason = k8s_names.too_long(value, where, limit)
    if reason is not None:
        raise BalanceError(reason)


@dataclass(frozen=True, slots=True)
class Container:
    """A regular container of a pod: its name and anonymous memory per NUMA, in bytes (§4.2).

    ``container_id`` is the runtime ID the pod source listed (``containerd://...``) when the
    figure is the container's own cgroup's; "" when there was no pod source and the figure
    comes from the pod's cgroup. An input, not state: it changes on every container restart.
    """

    name: str
    anon: Mapping[int, float]
    container_id: str = ""

    def __post_init__(self) -> None:
        # Thousands of containers per round: each message's path is built only on a refusal.
        as_str(self.name, "container name", non_empty=True)
        _bounded(self.name, "container name", k8s_names.MAX_CONTAINER_NAME_BYTES)
        if not isinstance(self.container_id, str):
            as_str(self.container_id, f"container {self.name!r} id")
        # Held columnar (``policy.balance.amounts``), in NUMA order. The bulk check gives
        # that order; only the per-value path, which names a refused value, is ordered here.
        if type(self.anon) is NumaAmounts:
            return  # checked and ordered when it was made, and read-only
        bulk = amounts_in_bulk(self.anon)
        if bulk is None:
            checked = in_numa_order(anon_by_numa(self.anon, f"container {self.name!r} anon"))
            bulk = tuple(checked), tuple(checked.values())
        object.__setattr__(self, "anon", NumaAmounts(numa_index(bulk[0]), bulk[1]))


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod listed in a pool through its main container (§4.5)."""

    uid: str
    namespace: str
    name: str
    pool: str
    containers: tuple[Container, ...]

    def __post_init__(self) -> None:
        # Thousands of pods per round: the common case is checked without building the
        # messages, each naming the pod, that only the per-field checks below need.
        uid, namespace, name = self.uid, self.namespace, self.name
        if not (
            type(uid) is str
            and type(namespace) is str
            and type(name) is str
            and type(self.pool) is str
            and uid
            and len(uid) * 4 <= k8s_names.MAX_POD_UID_BYTES
            and len(namespace) * 4 <= k8s_names.MAX_NAMESPACE_BYTES
            and len(name) * 4 <= k8s_names.MAX_POD_NAME_BYTES
        ):
            self._check_names()
        object.__setattr__(self, "containers", tuple(self.containers))
        if not self.containers:
            raise BalanceError(f"pod {self.uid!r} has no containers")
        names = [c.name for c in self.containers]
        if len(set(names)) != len(names):
            raise BalanceError(f"pod {self.uid!r} names a container twice: {names}")

    def _check_names(self) -> None:
        """The per-field checks, each refusal naming the pod and the field."""
        as_str(self.uid, "pod uid", non_empty=True)
        _bounded(self.uid, "pod uid", k8s_names.MAX_POD_UID_BYTES)
        as_str(self.namespace, f"pod {self.uid!r} namespace")
        _bounded(self.namespace, f"pod {self.uid!r} namespace", k8s_names.MAX_NAMESPACE_BYTES)
        as_str(self.name, f"pod {self.uid!r} name")
        _bounded(self.name, f"pod {self.uid!r} name", k8s_names.MAX_POD_NAME_BYTES)
        as_str(self.pool, f"pod {self.uid!r} pool")

    def anon_on(self, numa_id: int) -> float | None:
        """Pod-level anon on a NUMA node: the sum over its containers in pod-spec order, or None
        when any container has no sample there (§4.2; the caller then skips the pod)."""
        total = 0.0
        for container in self.containers:
            value = container.anon.get(numa_id)
            if value is None:
                return None
            total += value
        return total
