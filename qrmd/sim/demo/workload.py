"""The demo's workload: one pod of each kind the CPU plugin treats differently.

On the demo's machine (``synthetic:cpus=96,sockets=2,numas=4``: 24 CPUs per NUMA node, two
reserved CPUs) this gives a picture with every pool in it:

* two dedicated_cores pods bound exclusively to a NUMA node each (``numa_binding`` and
  ``numa_exclusive``): each takes a whole node;
* a dedicated_cores pod bound to a NUMA node without exclusivity, with a sidecar that mirrors
  its CPUs (cpu-policy §7.5.2);
* two shared_cores pods, one with init containers (never allocated, cpu-policy §4.7) and one
  with a sidecar: they ramp up on every pooled CPU, then move to the ``share`` pool;
* two reclaimed_cores pods asking ``reclaimed_millicpu``: they run in the ``reclaim`` pool.

Then one exclusive pod, one shared pod and one reclaimed pod are deleted, which hands their
CPUs back to the pools. The kubelet "forgets" the reclaimed one (``FORGOTTEN``): it drops the
pod without ever calling ``RemovePod``, as a kubelet that lost its checkpoint does, and qrmd's
residual-state checker removes it once the pod list has missed it long enough
(cpu-policy §12.4).

For the memory balancer's phase each pod also has anonymous memory per NUMA node (what its
cgroup's ``memory.numa_stat`` says, ``ANON_MEMORY``), and ``PRESSURED_NUMA`` is the node put
under latency pressure. After the deletions the ``share`` and ``reclaim`` pools have CPUs on
NUMA 1 and 3 (NUMA 0 is the exclusive pod's, NUMA 2 the NUMA-bound ``cache``'s), so the shared
and reclaimed pods' memory sits there; on NUMA 3 ``batch-1`` is the only reclaimed pod (the
eviction choice), and both it and ``web`` hold more than the 128 MiB worth migrating
(memory-balancer §3).
"""

from __future__ import annotations

from dataclasses import replace

from qrmd.sim.kubelet import Pod, dedicated_pod, reclaimed_pod, shared_pod
from qrmd.sim.kubelet.pods import QOS_LEVEL_ANNOTATION

__all__ = [
    "ANON_MEMORY",
    "DELETED",
    "FORGOTTEN",
    "NAMESPACE",
    "PRESSURED_NUMA",
    "RESERVED_CPU_CORES",
    "TOPOLOGY",
    "WORKLOAD",
]

TOPOLOGY = "synthetic:cpus=96,sockets=2,numas=4"
RESERVED_CPU_CORES = 2
NAMESPACE = "demo"
CPU_ENHANCEMENT = "katalyst.kubewharf.io/cpu_enhancement"
TOLERANCE_03 = '{"suppression_tolerance_rate": "0.3"}'

WORKLOAD: tuple[Pod, ...] = (
    dedicated_pod("uid-db-primary", "db-primary", 16, numa_exclusive=True, namespace=NAMESPACE),
    dedicated_pod("uid-db-replica", "db-replica", 16, numa_exclusive=True, namespace=NAMESPACE),
    dedicated_pod(
        "uid-cache",
        "cache",
        8,
        numa_exclusive=False,
        sidecars={"exporter": 0.5},
        namespace=NAMESPACE,
    ),
    shared_pod(
        "uid-web",
        "web",
        4,
        init={"migrate": 1, "warm-up": 1},
        namespace=NAMESPACE,
    ),
    shared_pod("uid-api", "api", 2, sidecars={"envoy": 1}, namespace=NAMESPACE),
    replace(
        reclaimed_pod("uid-batch-1", "batch-1", 2000, namespace=NAMESPACE),
        # Tolerates a reclaim pool oversubscribed up to 0.3 × (the CPU suppression plugin).
        annotations={QOS_LEVEL_ANNOTATION: "reclaimed_cores", CPU_ENHANCEMENT: TOLERANCE_03},
    ),
    reclaimed_pod("uid-batch-2", "batch-2", 4000, namespace=NAMESPACE),
)

#: The pods deleted in the demo's third phase.
DELETED: tuple[str, ...] = ("uid-db-replica", "uid-api", "uid-batch-2")
#: The deleted pod whose RemovePod the kubelet never sends: qrmd cleans it up by itself.
FORGOTTEN = "uid-batch-2"

MIB = 1 << 20
GIB = 1 << 30

#: Pod UID → NUMA node → anonymous bytes there (the pod cgroup's ``memory.numa_stat``).
ANON_MEMORY: dict[str, dict[int, int]] = {
    "uid-db-primary": {0: 12 * GIB},
    "uid-db-replica": {1: 6 * GIB},
    "uid-cache": {2: 2 * GIB},
    "uid-web": {1: 2 * GIB, 3: 3 * GIB},
    "uid-api": {1: 512 * MIB, 3: 64 * MIB},
    "uid-batch-1": {1: 256 * MIB, 3: 1 * GIB},
    "uid-batch-2": {1: 128 * MIB, 3: 1536 * MIB},
}

#: The NUMA node the balancer phase puts under read-latency pressure.
PRESSURED_NUMA = 3
