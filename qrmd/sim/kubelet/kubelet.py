"""The kubelet's QoS resource manager: admission, reconcile and pod removal against QRM plugins.

It drives the plugins registered in its ``EndpointTable`` as the kubelet fork does:

* **Admission** (§9.1): containers one at a time, init containers first. For each container
  that requests a resource mapped to a registered plugin: garbage-collect stale pods (the pod
  being admitted counts as active, as kubelet's "pending admission" pod does), ask
  ``GetTopologyHints`` (when the plugin declared ``with_topology_alignment`` and the policy asks
  for hints; a cached allocation with hints large enough is reused instead), choose the
  affinity (``topology_manager``), then ``Allocate`` with it, unless a cached scalar allocation
  already covers the request; then ``PreStartContainer`` when the plugin asked for it and the
  container holds an allocation (init containers get none from the reference plugin). An
  error rejects the pod; an answer without ``allocation_result`` records nothing.
* **Reconcile** (§9.2, every 3 s by default): garbage-collect, then for each endpoint with
  ``need_reconcile`` call ``GetResourcesAllocation``; every app container of an active pod takes
  its entry from the answer, or, when the answer lacks it, is allocated again; then its
  QRM-provided properties (``CpusetCpus``) are written to the runtime as CRI
  ``UpdateContainerResources`` would, every pass.
* **Removal** (§9.3): a pod the kubelet holds allocations for that is no longer active gets
  ``RemovePod`` on every running endpoint; it leaves the checkpoint only when all succeed, and is
  retried on the next garbage collection otherwise. Every ``RemovePod`` sent is recorded
  (``removals_sent``), so a user of the simulator can check its story against it. A pod leaves
  ``/pods`` either with ``delete_pod`` (at once, as once the API server has deleted it) or in
  two steps, as a kubelet's pod manager lets a deleted pod go: ``stop_pod`` (its containers
  have exited: no longer active, still listed) and ``delete_pod`` after its ``RemovePod``.
  ``forget_pod`` is the failure a real kubelet has (a restart that lost its checkpoint): the pod
  goes without any ``RemovePod``, so the plugin keeps residual state that only its
  residual-state checker cleans (cpu-policy §12.4).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from qrmd.sim.kubelet.endpoints import Endpoint, EndpointTable
from qrmd.sim.kubelet.pods import CPU, RECLAIMED_MILLICPU, ContainerSlot, Pod, resource_request
from qrmd.sim.kubelet.topology_manager import (
    Hint,
    TopologyAffinityError,
    TopologyPolicy,
    choose_affinity,
)
from wire.kubelet_client import PluginCallError, PluginConnection
from wire.kubelet_convert import AllocationInfo, PodAllocations

__all__ = [
    "DEFAULT_RESOURCE_NAMES",
    "AdmissionError",
    "Kubelet",
    "ReconcileReport",
    "RemovePodSent",
]

log = logging.getLogger(__name__)

# kubelet `qosResourceManagerResourceNamesMap`: extended resources served by the cpu plugin.
DEFAULT_RESOURCE_NAMES: Mapping[str, str] = {RECLAIMED_MILLICPU: CPU}

ContainerKey = tuple[str, str]  # (pod UID, container name)


def _covers(cached: AllocationInfo, slot: ContainerSlot) -> bool:
    """Whether a cached allocation is large enough for the container's request (§9.1)."""
    assert slot.container.request is not None
    return math.ceil(cached.allocated_quantity) >= int(slot.container.request[1])


class AdmissionError(Exception):
    """The kubelet rejects a pod; the message names the pod, the container and why."""


@dataclass(slots=True)
class ReconcileReport:
    """What one reconcile pass saw and did."""

    # endpoint name → its GetResourcesAllocation answer
    answers: dict[str, PodAllocations] = field(default_factory=dict)
    reallocated: list[ContainerKey] = field(default_factory=list)
    removed_pods: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RemovePodSent:
    """One ``RemovePod`` the kubelet sent, as it went: to which plugin, and how it ended."""

    pod_uid: str
    plugin: str
    error: str | None  # None: the plugin answered OK


class Kubelet:
    """The QoS resource manager of one simulated kubelet.

    Thread-safe: admission, reconcile and removal take one lock, so a background reconcile
    loop and a caller admitting pods can share it. ``endpoints`` is the plugin handler the
    plugin watcher registers plugins with.

    Args:
        numa_nodes: the machine's NUMA nodes (the topology manager's default affinity).
        topology_policy: the topology-manager policy.
        resource_names: requested resource name → plugin resource name, for extended resources.
        dial: opens a connection to an endpoint socket.
    """

    def __init__(
        self,
        numa_nodes: Sequence[int],
        *,
        topology_policy: TopologyPolicy = TopologyPolicy.BEST_EFFORT,
        resource_names: Mapping[str, str] = DEFAULT_RESOURCE_NAMES,
        dial: Callable[[str], PluginConnection] = PluginConnection,
    ) -> None:
        self.numa_nodes = tuple(numa_nodes)
        self.topology_policy = topology_policy
        self._resource_names = dict(resource_names)
        self.endpoints = EndpointTable(dial)
        self._lock = threading.RLock()
        self._active: dict[str, Pod] = {}
        # The pod being admitted counts as active for garbage collection, as kubelet's
        # "pending admission" pod does: its first containers' allocations must survive.
        self._admitting: str | None = None
        # What ``/pods`` lists, by UID: (pod, phase). Its own lock, since admission holds the
        # main one across gRPC calls and the pod list must answer meanwhile (Pending).
        self._list_lock = threading.Lock()
        self._listed: dict[str, tuple[Pod, str]] = {}
        # The kubelet's checkpoint: container → resource → allocation; and chosen affinities.
        self._allocations: dict[ContainerKey, dict[str, AllocationInfo]] = {}
        self._affinity: dict[ContainerKey, Hint | None] = {}
        # What the container runtime was told: container → OCI property → value.
        self._runtime: dict[ContainerKey, dict[str, str]] = {}
        # Every RemovePod sent, in order (what the kubelet did, for its users to check).
        self._removals: list[RemovePodSent] = []

    # -- admission (wire.md §9.1) --------------------------------------------------------------

    def _plugin_for(self, slot: ContainerSlot) -> str | None:
        if not slot.container.requests_resource:
            return None
        assert slot.container.request is not None
        requested = slot.container.request[0]
        return self._resource_names.get(requested, requested)

    def admit(self, pod: Pod) -> dict[str, dict[str, AllocationInfo]]:
        """Admit a pod: every container in order, hints then Allocate with the chosen hint.

        Args:
            pod: the pod; its UID must not be active already.

        Returns:
            Container name → resource → allocation, for the containers that got one.

        Raises:
            AdmissionError: a plugin is missing or stopped, the topology policy rejects the
                pod, or ``Allocate`` failed. Allocations made for earlier containers stay in
                the checkpoint and are removed by garbage collection (RemovePod).
        """
        with self._lock:
            if pod.uid in self._active:
                raise AdmissionError(f"pod {pod.namespace}/{pod.name} ({pod.uid}) already admitted")
            granted: dict[str, dict[str, AllocationInfo]] = {}
            self._admitting = pod.uid
            self._set_listed(pod.uid, (pod, "Pending"))
            try:
                for slot in pod.admission_order():
                    plugin = self._plugin_for(slot)
                    if plugin is None:
                        continue
                    allocation = self._admit_container(pod, slot, plugin)
                    if allocation is not None:
                        granted[slot.container.name] = allocation
            except BaseException:
                self._set_listed(pod.uid, None)  # a rejected pod is not kept (kubelet fails it)
                raise
            finally:
                self._admitting = None
            self._active[pod.uid] = pod
            self._set_listed(pod.uid, (pod, "Running"))
            return granted

    def _admit_container(
        self, pod: Pod, slot: ContainerSlot, plugin: str
    ) -> dict[str, AllocationInfo] | None:
        where = f"pod {pod.namespace}/{pod.name} container {slot.container.name}"
        endpoint = self.endpoints.running(plugin)
        if endpoint is None:
            raise AdmissionError(f"{where}: no running plugin for resource {plugin!r}")
        self.collect_garbage()
        key = (pod.uid, slot.container.name)
        cached = self._allocations.get(key, {}).get(plugin)
        hint: Hint | None = None
        if endpoint.options.with_topology_alignment:
            try:
                hint = self._affinity_for(endpoint, pod, slot, cached)
            except TopologyAffinityError as exc:
                raise AdmissionError(f"{where}: {exc}") from None
        self._affinity[key] = hint
        if cached is not None and cached.is_scalar_resource and _covers(cached, slot):
            return self._allocations[key]
        try:
            answer = endpoint.connection.allocate(resource_request(pod, slot, plugin, hint))
            self._record(key, answer)
            if endpoint.options.pre_start_required and plugin in self._allocations.get(key, {}):
                # Before the container is created, for the resources it holds (§9.1 step 4).
                endpoint.connection.pre_start_container(
                    pod.uid, pod.namespace, pod.name, slot.container.name
                )
        except PluginCallError as exc:
            raise AdmissionError(f"{where}: {exc}") from None
        return answer

    def _affinity_for(
        self, endpoint: Endpoint, pod: Pod, slot: ContainerSlot, cached: AllocationInfo | None
    ) -> Hint:
        hints: tuple[Hint, ...] | None = ()
        if self.topology_policy.asks_for_hints:
            if cached is not None and cached.hints and _covers(cached, slot):
                hints = cached.hints  # the kubelet reuses cached hints (wire.md §9.1 step 1)
            else:
                try:
                    hints = endpoint.connection.get_topology_hints(
                        resource_request(pod, slot, endpoint.name, None)
                    )
                except PluginCallError as exc:
                    log.warning(
                        "pod %s/%s container %s: %s; counted as no feasible placement",
                        pod.namespace,
                        pod.name,
                        slot.container.name,
                        exc,
                    )
        return choose_affinity(self.topology_policy, hints, self.numa_nodes)

    def _record(self, key: ContainerKey, answer: Mapping[str, AllocationInfo] | None) -> None:
        if not answer:
            return  # no allocation_result: nothing recorded (wire.md §9.1 step 3)
        self._allocations.setdefault(key, {}).update(answer)
        # At container creation the runtime receives the QRM-provided properties.
        self._write_runtime(key)

    def _write_runtime(self, key: ContainerKey) -> None:
        properties = {
            info.oci_property_name: info.allocation_result
            for info in self._allocations.get(key, {}).values()
            if info.oci_property_name
        }
        if properties:
            self._runtime[key] = properties

    # -- removal (wire.md §9.3) ----------------------------------------------------------------

    def delete_pod(self, pod_uid: str) -> bool:
        """The pod stops being active; its allocations go at the next garbage collection.

        Returns:
            Whether the pod was active.
        """
        with self._lock:
            self._set_listed(pod_uid, None)
            return self._active.pop(pod_uid, None) is not None

    def stop_pod(self, pod_uid: str) -> bool:
        """The pod's containers have all exited: it is no longer active, so the next garbage
        collection sends ``RemovePod``, but ``/pods`` still lists it (phase ``Succeeded``) until
        ``delete_pod``, as a kubelet's pod manager keeps a deleted pod until it is cleaned up.

        Returns:
            Whether the pod was active.
        """
        with self._lock:
            pod = self._active.pop(pod_uid, None)
            if pod is None:
                return False
            self._set_listed(pod_uid, (pod, "Succeeded"))
            return True

    def forget_pod(self, pod_uid: str) -> bool:
        """The pod goes from the kubelet *without* ``RemovePod``: not active, not checkpointed.

        Returns:
            Whether the kubelet knew the pod.
        """
        with self._lock:
            self._set_listed(pod_uid, None)
            known = self._active.pop(pod_uid, None) is not None
            for key in [k for k in self._allocations if k[0] == pod_uid]:
                known = True
                del self._allocations[key]
                self._affinity.pop(key, None)
                self._runtime.pop(key, None)
            return known

    def collect_garbage(self) -> list[str]:
        """``RemovePod`` for every checkpointed pod that is no longer active.

        Returns:
            The UIDs removed from the checkpoint (every running endpoint answered OK); the
            others stay and are retried on the next call.
        """
        with self._lock:
            checkpointed = {uid for uid, _ in self._allocations}
            removed = []
            for uid in sorted(checkpointed - self._active.keys() - {self._admitting}):
                failures = []
                for endpoint in self.endpoints.all_running():
                    try:
                        endpoint.connection.remove_pod(uid)
                    except PluginCallError as exc:
                        failures.append(f"{endpoint.name}: {exc}")
                        self._removals.append(RemovePodSent(uid, endpoint.name, str(exc)))
                    else:
                        self._removals.append(RemovePodSent(uid, endpoint.name, None))
                if failures:
                    log.warning("RemovePod %s failed, retrying next pass: %s", uid, failures)
                    continue
                for key in [k for k in self._allocations if k[0] == uid]:
                    del self._allocations[key]
                    self._affinity.pop(key, None)
                    self._runtime.pop(key, None)
                removed.append(uid)
            return removed

    # -- reconcile (wire.md §9.2) --------------------------------------------------------------

    def reconcile_once(self) -> ReconcileReport:
        """One reconcile pass: garbage collection, GetResourcesAllocation, re-Allocate, CRI update.

        Returns:
            The answers seen, containers allocated again, pods removed and errors logged.
        """
        with self._lock:
            report = ReconcileReport(removed_pods=self.collect_garbage())
            for endpoint in self.endpoints.all_running():
                if not endpoint.options.need_reconcile:
                    continue
                try:
                    answer = endpoint.connection.get_resources_allocation()
                except PluginCallError as exc:
                    # An error only skips this plugin for this pass.
                    report.errors.append(str(exc))
                    continue
                report.answers[endpoint.name] = answer
                self._reconcile_endpoint(endpoint, answer, report)
            return report

    def _reconcile_endpoint(
        self,
        endpoint: Endpoint,
        answer: Mapping[str, Mapping[str, Mapping[str, AllocationInfo]]],
        report: ReconcileReport,
    ) -> None:
        for pod in list(self._active.values()):
            for slot in pod.app_containers():
                if self._plugin_for(slot) != endpoint.name:
                    continue
                key = (pod.uid, slot.container.name)
                entry = answer.get(pod.uid, {}).get(slot.container.name)
                if entry is not None:
                    # Every entry replaces the cached one, hints included (absent → dropped).
                    self._allocations.setdefault(key, {}).update(entry)
                else:
                    self._allocations.get(key, {}).pop(endpoint.name, None)
                    try:
                        again = endpoint.connection.allocate(
                            resource_request(pod, slot, endpoint.name, self._affinity.get(key))
                        )
                    except PluginCallError as exc:
                        report.errors.append(
                            f"re-Allocate {pod.namespace}/{pod.name}/{slot.container.name}: {exc}"
                        )
                    else:
                        self._record(key, again)
                        report.reallocated.append(key)
                # CRI UpdateContainerResources, every pass even when nothing changed.
                self._write_runtime(key)

    # -- what the kubelet holds ----------------------------------------------------------------

    def active_pods(self) -> list[Pod]:
        """The active pods, in admission order."""
        with self._lock:
            return list(self._active.values())

    def listed_pods(self) -> list[tuple[Pod, str]]:
        """What the kubelet's ``/pods`` lists: each active pod ``Running``, and the pod being
        admitted ``Pending``."""
        with self._list_lock:
            return list(self._listed.values())

    def _set_listed(self, pod_uid: str, listing: tuple[Pod, str] | None) -> None:
        with self._list_lock:
            if listing is None:
                self._listed.pop(pod_uid, None)
            else:
                self._listed[pod_uid] = listing

    def allocations(self) -> dict[ContainerKey, dict[str, AllocationInfo]]:
        """The checkpoint: container → resource → allocation."""
        with self._lock:
            return {k: dict(v) for k, v in self._allocations.items() if v}

    def runtime_properties(self) -> dict[ContainerKey, dict[str, str]]:
        """What the container runtime was last told: container → OCI property → value."""
        with self._lock:
            return {k: dict(v) for k, v in self._runtime.items()}

    def affinity(self, pod_uid: str, container_name: str) -> Hint | None:
        """The affinity chosen for a container at admission (None: no topology alignment)."""
        with self._lock:
            return self._affinity.get((pod_uid, container_name))

    def removals_sent(self) -> list[RemovePodSent]:
        """Every ``RemovePod`` sent so far, in order."""
        with self._lock:
            return list(self._removals)

    def checkpointed_pods(self) -> set[str]:
        """Pod UIDs the kubelet holds allocations for (RemovePod candidates once inactive)."""
        with self._lock:
            return {uid for uid, _ in self._allocations}
