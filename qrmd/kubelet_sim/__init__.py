"""A kubelet simulator that drives a QRM plugin over its real gRPC wire, without a cluster.

It reproduces what the kubewharf kubelet fork does with a QRM plugin (wire.md §8.1, §9): the
plugin-watcher handshake, admission in kubelet order with topology hints, the periodic
reconcile and pod removal. ``qrmd demo`` and the integration tests use it as a library:

    sim = KubeletSimulator([socket_dir], numa_nodes=[0, 1, 2, 3], reconcile_period_s=1.0)
    with sim:
        sim.kubelet.endpoints.wait_registered("cpu", timeout_s=10)
        sim.kubelet.admit(shared_pod("uid-1", "web", 2))

Modules: ``pods`` (the pod model), ``client`` (gRPC calls and their deadlines, the only module
that touches protobuf), ``registration`` (the plugin watcher), ``topology_manager`` (choosing
the affinity), ``endpoints`` (registered plugins), ``kubelet`` (admission, reconcile,
removal), ``simulator`` (background loops).
"""

from qrmd.kubelet_sim.client import (
    AllocationInfo,
    Hint,
    NUMAQuantity,
    PluginCallError,
    PluginConnection,
    PluginInfo,
    PluginOptions,
    TopologyAwareResource,
)
from qrmd.kubelet_sim.endpoints import Endpoint, EndpointTable
from qrmd.kubelet_sim.kubelet import AdmissionError, Kubelet, ReconcileReport
from qrmd.kubelet_sim.pods import (
    Container,
    ContainerKind,
    Pod,
    dedicated_pod,
    reclaimed_pod,
    shared_pod,
)
from qrmd.kubelet_sim.registration import PluginWatcher, RegistrationError, RegistrationOutcome
from qrmd.kubelet_sim.simulator import KubeletSimulator
from qrmd.kubelet_sim.topology_manager import TopologyPolicy, choose_affinity

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
    "TopologyAwareResource",
    "TopologyPolicy",
    "choose_affinity",
    "dedicated_pod",
    "reclaimed_pod",
    "shared_pod",
]
