"""A kubelet simulator that drives a QRM plugin over its real gRPC wire, without a cluster.

It reproduces what the kubewharf kubelet fork does with a QRM plugin (wire.md §8.1, §9): the
plugin-watcher handshake, admission in kubelet order with topology hints, the periodic
reconcile and pod removal. ``qrmd demo`` and the integration tests use it as a library:

    sim = KubeletSimulator([socket_dir], numa_nodes=[0, 1, 2, 3], reconcile_period_s=1.0)
    with sim:
        sim.kubelet.endpoints.wait_registered("cpu", timeout_s=10)
        sim.kubelet.admit(shared_pod("uid-1", "web", 2))

Modules: ``pods`` (the pod model, and each container's request as a plain value),
``registration`` (the plugin watcher), ``topology_manager`` (choosing the affinity),
``endpoints`` (registered plugins), ``kubelet`` (admission, reconcile, removal with a record
of every ``RemovePod`` sent, ``stop_pod``, and ``forget_pod``: a removal without
``RemovePod``), ``simulator`` (background loops), ``pods_endpoint`` (kubelet's ``/pods`` over
real HTTP, for qrmd's pod source). The gRPC calls, their deadlines and every protobuf message
are in ``wire.kubelet_client`` and ``wire.kubelet_convert``: the simulator deals in plain
values only (DESIGN.md, "protobuf types never leave wire"), and re-exports the client's for
its users.
"""

from policy.cpu.replies import PluginOptions
from qrmd.sim.kubelet.endpoints import Endpoint, EndpointTable
from qrmd.sim.kubelet.kubelet import AdmissionError, Kubelet, ReconcileReport, RemovePodSent
from qrmd.sim.kubelet.pods import (
    Container,
    ContainerKind,
    Pod,
    dedicated_pod,
    reclaimed_pod,
    resource_request,
    shared_pod,
)
from qrmd.sim.kubelet.registration import PluginWatcher, RegistrationError, RegistrationOutcome
from qrmd.sim.kubelet.simulator import KubeletSimulator
from qrmd.sim.kubelet.topology_manager import Hint, TopologyPolicy, choose_affinity
from wire.kubelet_client import PluginCallError, PluginConnection
from wire.kubelet_convert import (
    AllocationInfo,
    NUMAQuantity,
    PluginInfo,
    TopologyAwareResource,
)

__all__ = [
    "AdmissionError",
    "AllocationInfo",
    "Container",
    "ContainerKind",
    "Endpoint",
    "EndpointTable",
    "Hint",
    "Kubelet",
    "KubeletSimulator",
    "NUMAQuantity",
    "PluginCallError",
    "PluginConnection",
    "PluginInfo",
    "PluginOptions",
    "PluginWatcher",
    "Pod",
    "ReconcileReport",
    "RegistrationError",
    "RegistrationOutcome",
    "RemovePodSent",
    "TopologyAwareResource",
    "TopologyPolicy",
    "choose_affinity",
    "dedicated_pod",
    "reclaimed_pod",
    "resource_request",
    "shared_pod",
]
