"""What a balance round reads, gathered from the ports into ``RoundInputs`` (memory-balancer §4).

* **Pods in pools** (§4.5) come from the StateStore's latest CPU section, through the pure
  query ``policy.state.pool_pods.pods_in_pools`` (asked again only when the section is new).
* **Container IDs** are round inputs, not state (they change on every container restart):
  with a pod source, each round takes them from its latest listing (``with_container_ids``),
  for every pod the listing shows with an ID for each of its regular containers. The IDs
  used are in the round's inputs (each ``Container.container_id``), so the journal shows
  which cgroups a round read, and the executor migrates by the same IDs
  (``container_ids_of``). A pod the listing misses, or shows with a container not started,
  keeps no IDs this round and is read as without a pod source.
* **Anonymous memory** (§4.2) is read per pod, only for the pools a round can use (``reclaim``
  and the supported pools). With container IDs, each container gets its own cgroup's figure
  (``memory.numa_stat`` of the container's cgroup, §4.2). Without them (no pod source, or
  the pod not fully listed) a container's cgroup cannot be told from the sandbox's, so the
  pod's own (hierarchical) figure is given to its first container and the others hold zero
  on the same nodes: a round only ever uses the per-pod sum (§4.2), which is then exact, and
  the advice still names every container. A pod whose memory cannot be read is listed with
  no sample on any node, so the round skips it (§4.2) and the journaled inputs show it.
* **Metrics** (§4.1) are sampled for every node of the distance map; **distances** (§4.4) are
  read and checked once, when the balancer starts (``checked_distances``).

A round reads pods only once it needs them: ``metric_inputs`` builds the inputs without pods,
and ``with_pods`` adds them when the façade's ``round_reads_pods`` says the round on the first
found pressure to act on (the reference, too, lists pods only from step 7 on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from actors.ports.balancer import (
    AnonMemoryUnavailable,
    BatchedContainerMemoryReader,
    ContainerMemoryReader,
    NumaMetricSource,
)
from actors.ports.commit import Committer
from actors.ports.pod_source import PodListSnapshot
from policy.balance import (
    BalanceError,
    BalanceInfo,
    BalancerConfig,
    Container,
    NumaDistance,
    Pod,
    RoundInputs,
)
from policy.balance.amounts import NumaAmounts
from policy.balance.config import POOL_RECLAIM
from policy.balance.distances import DistanceLists
from policy.balance.pod_table import PodTable
from policy.state.cpu_state import CPUState
from policy.state.pool_pods import PodsInPools, PoolPod, pods_in_pools

__all__ = [
    "ContainerIdsMemo",
    "PodsProvider",
    "checked_distances",
    "container_ids_of",
    "metric_inputs",
    "store_pods",
    "with_container_ids",
    "with_pods",
]

_log = logging.getLogger(__name__)

#: Gives the pods in pools now; called once per computed round.
PodsProvider = Callable[[], PodsInPools]


def store_pods(committer: Committer) -> PodsProvider:
    """A ``PodsProvider`` on the StateStore's latest snapshot: one ``GetSnapshot`` per round,
    so each round sees the CPU state the Allocator last committed.

    ``pods_in_pools`` is a pure query on the CPU section, an immutable value that a commit to
    another section (the balancer's own rounds) leaves as it is: its answer for the last
    section seen is kept and given again while the snapshot holds that very section.

    The provider raises ``StoreUnavailable`` when the store cannot answer (the round fails).
    """
    last: list[tuple[CPUState, PodsInPools]] = []

    def pods() -> PodsInPools:
        cpu = committer.latest().state.cpu
        if not last or last[0][0] is not cpu:
            last[:] = [(cpu, pods_in_pools(cpu))]
        return last[0][1]

    return pods


def checked_distances(
    distances: Mapping[int, tuple[NumaDistance, ...]],
) -> Mapping[int, tuple[NumaDistance, ...]]:
    """The distance lists read at start, checked once for every round to come
    (``policy.balance.distances``: they cannot change, so no round checks them again).

    Lists the check refuses are kept as read: each round's inputs then refuse them and the
    round fails with the reason, as it would if they were checked per round.
    """
    try:
        return DistanceLists(distances)
    except BalanceError:
        return dict(distances)


def metric_inputs(
    *,
    now: float,
    distances: Mapping[int, tuple[NumaDistance, ...]],
    metrics: NumaMetricSource,
    config: BalancerConfig,
    cpu_vendor: str,
    last: BalanceInfo | None,
) -> RoundInputs:
    """A round's inputs without pods: the metrics sampled now, the distances, the settings.

    Args:
        now: the round's time.
        distances: the distance map read at start.
        metrics: the NUMA metric source.
        config: the balancer configuration.
        cpu_vendor: the CPUID vendor string.
        last: the last emitted round.

    Raises:
        BalanceError: the source gave a value the inputs refuse; the round fails with it.
    """
    return RoundInputs(
        now=now,
        numa_metrics=dict(metrics.sample(sorted(distances))),
        distances=distances,
        pools={},
        pods=(),
        config=config,
        cpu_vendor=cpu_vendor,
        last=last,
    )


def with_container_ids(pods: PodsInPools, listing: PodListSnapshot | None) -> PodsInPools:
    """The pods in pools with their container IDs from the pod source's latest listing.

    A pod gets IDs only when the listing shows it with a non-empty ID for every one of its
    regular containers (the per-pod figure is the sum over all of them, §4.2); otherwise it
    keeps the IDs it had (none, from the CPU state), and is read by its pod cgroup.

    Args:
        pods: the pods in pools (``pods_in_pools``).
        listing: the pod source's latest listing, or None before its first.

    Returns:
        The same pools and pods, IDs filled in where the listing has them all.
    """
    if listing is None:
        return pods
    filled: list[PoolPod] = []
    for pod in pods.pods:
        listed = listing.pods.get(pod.uid)
        ids = None if listed is None else [listed.container_ids.get(c) for c in pod.containers]
        if ids is None or not all(ids):
            filled.append(pod)
            continue
        listed_ids = tuple(cid for cid in ids if cid)
        filled.append(
            PoolPod(pod.uid, pod.namespace, pod.name, pod.pool, pod.containers, listed_ids)
        )
    return PodsInPools(pods.pools, tuple(filled))


class ContainerIdsMemo:
    """``with_container_ids`` once per change of its inputs.

    Both are immutable values: the pods in pools (``store_pods`` gives the same value while
    the CPU section is the same) and the pod source's snapshot (a new one per fetch). A round
    reads them every tick while kubelet is listed once per fetch period, so the answer for
    the last pair seen is given again while both are the very same values.
    """

    def __init__(self) -> None:
        self._last: tuple[PodsInPools, PodListSnapshot | None, PodsInPools] | None = None

    def __call__(self, pods: PodsInPools, listing: PodListSnapshot | None) -> PodsInPools:
        """``with_container_ids(pods, listing)``."""
        last = self._last
        if last is not None and last[0] is pods and last[1] is listing:
            return last[2]
        filled = with_container_ids(pods, listing)
        self._last = (pods, listing, filled)
        return filled


def with_pods(
    inputs: RoundInputs, pods: PodsInPools, memory: ContainerMemoryReader
) -> tuple[RoundInputs, int]:
    """``inputs`` with the pools and the pods a round can use, their memory read now.

    Only pods of ``reclaim`` and the supported pools are read (no other pool is listed by
    a round, §7.8, §7.10). Every pod is read first, then the values go into the round's
    columns at once (``PodTable.gathered``, checked in bulk). When something needs a closer
    look (a long name, an amount the bulk check refuses), each pod is made a ``Pod`` in
    turn, whose checks refuse the first bad one naming it, as they did pod by pod; the reads
    of the pods after it were then made for nothing (only their "skips pod" lines show it).

    Returns:
        The inputs, and how many pods' memory could not be read (they have no samples).

    Raises:
        BalanceError: the reader gave a value the inputs refuse (a negative amount).
    """
    used_pools = {POOL_RECLAIM, *inputs.config.supported_pools}
    wanted = [pod for pod in pods.pods if pod.pool in used_pools and pod.containers]
    read: list[PoolPod] = []
    figures: list[Sequence[Mapping[int, float]]] = []
    ids: list[tuple[str, ...]] = []
    unreadable = 0
    failure: Exception | None = None
    for pod, answer in zip(wanted, _read(wanted, memory), strict=False):
        if isinstance(answer, Exception):  # raised after the pods before it are checked
            failure = answer
            break
        pod_figures, pod_ids, readable = answer
        read.append(pod)
        figures.append(pod_figures)
        ids.append(pod_ids)
        unreadable += not readable
    table = None
    if failure is None:
        columns = (
            [p.uid for p in read],
            [p.namespace for p in read],
            [p.name for p in read],
            [p.pool for p in read],
        )
        table = PodTable.gathered(columns, [p.containers for p in read], ids, figures)
    if table is None:
        made = tuple(map(_pod, read, ids, figures))
        if failure is not None:
            raise failure
        return replace(inputs, pools=pods.pools, pods=made), unreadable
    return replace(inputs, pools=pods.pools, pods=table), unreadable


def _pod(pod: PoolPod, ids: Sequence[str], figures: Sequence[Mapping[int, float]]) -> Pod:
    """A pod read, made with the checks of ``Pod`` and ``Container`` one by one.

    Raises:
        BalanceError: a value they refuse, naming the pod or the container.
    """
    containers = tuple(
        Container(name, figure, cid)
        for name, figure, cid in zip(pod.containers, figures, ids, strict=True)
    )
    return Pod(pod.uid, pod.namespace, pod.name, pod.pool, containers)


#: The figure of a container that has no sample on any node.
_NO_SAMPLE: Mapping[int, float] = MappingProxyType({})


#: A pod's read: its containers' figures, the IDs they were read by ("" for none), and
#: whether it could be read.
_Read = tuple[Sequence[Mapping[int, float]], tuple[str, ...], bool]


def _read(pods: list[PoolPod], memory: ContainerMemoryReader) -> list[_Read | Exception]:
    """Each pod's read, in order: the pods with container IDs in one call to a reader that
    reads them so (``BatchedContainerMemoryReader``), the others one by one. The list ends
    early, with the exception, at a pod whose read raised anything but the port's
    ``AnonMemoryUnavailable`` (the round fails on it, after the pods before it)."""
    batched: Iterator[tuple[Mapping[int, float], ...] | AnonMemoryUnavailable] | None = None
    if isinstance(memory, BatchedContainerMemoryReader):
        listed = [(p.uid, p.container_ids) for p in pods if p.container_ids is not None]
        batched = iter(memory.containers_anon_by_numa(listed))
    reads: list[_Read | Exception] = []
    for pod in pods:
        if batched is not None and pod.container_ids is not None:
            answer = next(batched)
            if isinstance(answer, AnonMemoryUnavailable):
                _log.info("balance round skips pod %s: %s", pod.uid, answer)
                reads.append(([_NO_SAMPLE] * len(pod.containers), pod.container_ids, False))
            else:
                reads.append((answer, pod.container_ids, True))
            continue
        try:
            reads.append(_figures(pod, memory))
        except Exception as err:
            reads.append(err)
            break
    return reads


def _figures(pod: PoolPod, memory: ContainerMemoryReader) -> _Read:
    """A pod's containers' anon per NUMA and the IDs they were read by ("" for none), and
    whether the pod could be read."""
    ids = pod.container_ids or ("",) * len(pod.containers)
    try:
        read = memory.anon_by_numa(pod.uid, pod.container_ids)
    except AnonMemoryUnavailable as err:
        _log.info("balance round skips pod %s: %s", pod.uid, err)
        return [_NO_SAMPLE] * len(pod.containers), ids, False
    if pod.container_ids is not None:
        by_id = read.containers
        return [by_id.get(cid, _NO_SAMPLE) for cid in ids], ids, True
    others = len(pod.containers) - 1
    figure = read.pod
    if type(figure) is NumaAmounts:  # checked when it was made (``PodAnonMemory``)
        return [figure, *[NumaAmounts(figure.index, (0.0,) * len(figure))] * others], ids, True
    zeros = dict.fromkeys(figure, 0.0)
    return [{n: float(v) for n, v in figure.items()}, *[zeros] * others], ids, True


def container_ids_of(pods: Sequence[Pod]) -> dict[tuple[str, str], str]:
    """``(pod UID, container name)`` → container ID, from a round's inputs: the IDs the round
    read its figures by, so the executor migrates the cgroups the journal names."""
    if isinstance(pods, PodTable):  # a round's pods are (``RoundInputs``)
        return pods.container_ids()
    return {
        (pod.uid, c.name): c.container_id for pod in pods for c in pod.containers if c.container_id
    }
