"""The node files the memory balancer reads, written by the demo as a host would provide them.

``qrmd run`` reads the balancer's inputs from files (spec memory-balancer §4.1, §4.2), so the
demo plays the node around it rather than reaching into the daemon:

* **the collector** (``NumaMetricsCollector``): the JSON file of ``--numa-metrics-source
  file:PATH`` (format in ``qrmd.host.metrics_file``), rewritten atomically (a temporary file
  renamed over the old one, so the daemon never reads half of it). The values follow the
  thresholds the daemon will use on this CPU (vendor-aware, §3.1): quiet nodes sit well below
  the grace threshold; a node under pressure is above the force threshold with the highest
  bandwidth, so its own memory is to be relieved (bandwidth level ``high``, §7.6). Both
  vendors' latency names are written, so the file means the same on an Intel and an AMD host;
* **the kernel** (``write_pod_cgroups``): a cgroup v2 tree under ``--memory-cgroup-root`` with
  one pod cgroup per pod, named as kubelet's cgroupfs driver names it
  (``kubepods[/burstable|/besteffort]/pod<uid>``, ``qrmd.host.kube_cgroups``), and beneath it
  one cgroup per regular container, named by its container ID as containerd names it (the
  balancer reads each container's own figure by the IDs the simulator's ``/pods`` lists,
  memory-balancer §4.2). Each holds a ``memory.numa_stat`` (``anon N0=<bytes> ...``; the
  pod's memory is its first container's, the pod cgroup's figure is their sum, as v2 counts
  hierarchically) and an empty ``cgroup.procs``: the demo's pods have no processes, which a
  dry-run advice shows as no PIDs to migrate;
* **the container runtime** (``write_container_cpusets``): under ``--cpuset-cgroup-root`` one
  cgroup per container beneath its pod's, named by its container ID as containerd names it
  with the cgroupfs driver, holding the ``cpuset.cpus`` the kubelet last gave the runtime
  (the ``CpusetCpus`` property): what qrmd's checkCPUSet compares with its allocations
  (cpu-policy §12.5).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from policy.balance import BalancerConfig, ResolvedConfig
from qrmd.host.kube_cgroups import CgroupDriver, pod_cgroup_paths
from qrmd.host.metric_sources import BANDWIDTH_METRIC
from qrmd.sim.kubelet import Pod
from qrmd.sim.kubelet.pods_endpoint import container_id

__all__ = ["NumaMetricsCollector", "NumaReading", "write_container_cpusets", "write_pod_cgroups"]

#: The OCI property holding a container's cpuset (cpu-policy §14).
_CPUSET_PROPERTY = "CpusetCpus"

# Quiet read latency per node, as a fraction of the grace threshold: no node is near it, and
# no gap to a neighbour exceeds the gap threshold (§7.4), so a round finds nothing to do.
_QUIET_LATENCY = (0.6, 0.65, 0.55, 0.7)
_QUIET_BANDWIDTH = (300.0, 350.0, 250.0, 400.0)
# Under pressure: half as much again as the force threshold, and the node's bandwidth the
# highest of all (the latency is its own traffic's).
_PRESSURE_LATENCY = 1.5
_PRESSURE_BANDWIDTH = 900.0


@dataclass(frozen=True, slots=True)
class NumaReading:
    """One node's metrics as the collector writes them."""

    read_latency: float
    bandwidth: float


class NumaMetricsCollector:
    """Writes the metrics file for a node of ``numa_count`` NUMA nodes.

    Args:
        path: the file ``qrmd run`` reads (``--numa-metrics-source file:PATH``).
        numa_count: the machine's NUMA nodes.
        cpu_vendor: the CPUID vendor the daemon resolves its thresholds with.
    """

    def __init__(self, path: Path, numa_count: int, cpu_vendor: str) -> None:
        self.path = path
        self.numa_count = numa_count
        self.cpu_vendor = cpu_vendor
        self.config: ResolvedConfig = BalancerConfig().resolve(cpu_vendor)
        defaults = BalancerConfig().read_latency_metric
        self._latency_names = sorted({value for _, value in defaults.items})

    def quiet(self) -> dict[int, NumaReading]:
        """Every node well below the grace threshold."""
        grace = self.config.grace_balance_read_latency_threshold
        return {
            n: NumaReading(
                round(grace * _QUIET_LATENCY[n % len(_QUIET_LATENCY)]),
                _QUIET_BANDWIDTH[n % len(_QUIET_BANDWIDTH)],
            )
            for n in range(self.numa_count)
        }

    def under_pressure(self, numa: int) -> dict[int, NumaReading]:
        """``numa`` above the force threshold with the highest bandwidth, the others quiet."""
        if not 0 <= numa < self.numa_count:
            raise ValueError(f"NUMA {numa} is not on this machine (0-{self.numa_count - 1})")
        readings = self.quiet()
        force = self.config.force_balance_read_latency_threshold
        readings[numa] = NumaReading(round(force * _PRESSURE_LATENCY), _PRESSURE_BANDWIDTH)
        return readings

    def write(self, readings: Mapping[int, NumaReading]) -> None:
        """Replace the file with these readings (no timestamp: they never expire, §4.3).

        Raises:
            OSError: the file cannot be written; the message names it.
        """
        numas = {
            str(n): {
                **{name: r.read_latency for name in self._latency_names},
                BANDWIDTH_METRIC: r.bandwidth,
            }
            for n, r in sorted(readings.items())
        }
        _replace(self.path, json.dumps({"numas": numas}, indent=2) + "\n")


def write_pod_cgroups(root: Path, pods: Iterable[Pod], anon: Mapping[str, Mapping[int, int]],
                      numa_count: int) -> list[Path]:  # fmt: skip
    """Write (or rewrite) each pod's cgroup with its anonymous memory per NUMA node.

    Args:
        root: the memory controller's mount the daemon is given (``--memory-cgroup-root``).
        pods: the pods; one without an ``anon`` entry gets zero bytes on every node.
        anon: pod UID → NUMA node → bytes.
        numa_count: the machine's NUMA nodes; every node is listed (a missing one would read
            as "no sample", §4.2, not zero).

    Returns:
        The pod cgroup directories written.

    Raises:
        OSError: a directory or file cannot be written.
    """
    written: list[Path] = []
    for pod in pods:
        guaranteed, burstable, besteffort = pod_cgroup_paths(pod.uid, CgroupDriver.CGROUPFS)
        relative = {"Guaranteed": guaranteed, "Burstable": burstable}.get(
            pod.native_qos_class, besteffort
        )
        directory = root / relative
        figures = anon.get(pod.uid, {})
        _write_memory_cgroup(directory, figures, numa_count)
        for index, container in enumerate(pod.containers):
            bare = container_id(pod.uid, container.name).removeprefix("containerd://")
            _write_memory_cgroup(directory / bare, figures if index == 0 else {}, numa_count)
        written.append(directory)
    return written


def _write_memory_cgroup(directory: Path, figures: Mapping[int, int], numa_count: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    nodes = " ".join(f"N{n}={figures.get(n, 0)}" for n in range(numa_count))
    _replace(directory / "memory.numa_stat", f"anon {nodes}\n")
    _replace(directory / "cgroup.procs", "")


def _pod_relative(pod: Pod) -> Path:
    guaranteed, burstable, besteffort = pod_cgroup_paths(pod.uid, CgroupDriver.CGROUPFS)
    return Path({"Guaranteed": guaranteed, "Burstable": burstable}.get(
        pod.native_qos_class, besteffort
    ))  # fmt: skip


def write_container_cpusets(
    root: Path, pods: Iterable[Pod], runtime: Mapping[tuple[str, str], Mapping[str, str]]
) -> int:
    """Write each container's ``cpuset.cpus`` as the runtime applied it.

    Args:
        root: the cpuset controller's mount the daemon is given (``--cpuset-cgroup-root``).
        pods: the pods whose containers are written.
        runtime: (pod UID, container name) → OCI property → value, the kubelet's
            ``runtime_properties()``; a container without ``CpusetCpus`` is skipped.

    Returns:
        How many containers were written.

    Raises:
        OSError: a directory or file cannot be written.
    """
    written = 0
    for pod in pods:
        for container in (*pod.init_containers, *pod.containers):
            cpus = runtime.get((pod.uid, container.name), {}).get(_CPUSET_PROPERTY)
            if cpus is None:
                continue
            bare = container_id(pod.uid, container.name).removeprefix("containerd://")
            directory = root / _pod_relative(pod) / bare
            directory.mkdir(parents=True, exist_ok=True)
            _replace(directory / "cpuset.cpus", f"{cpus}\n")
            written += 1
    return written


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}") from None
