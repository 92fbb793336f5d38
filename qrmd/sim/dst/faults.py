"""The faults the seed injects, one function per kind (DESIGN.md "Subsystems and simulation").

Kinds (``--faults`` takes a comma-separated subset; the default is all):

* ``crash``: the process dies, now or inside one of the next few disk operations (between a
  write and its fsync, a rename and its directory sync); the disk keeps what was written.
* ``power_loss``: the node loses power: the process dies and the disk keeps only what was
  synced, the last unsynced append possibly torn.
* ``disk_full``: for a while every write fails with ENOSPC after a short write.
* ``write_eio`` / ``fsync_eio``: for a while writes (fsyncs) fail with EIO now and then.
* ``slow_fsync``: for a while every fsync takes seconds (longer than kubelet's deadline at
  times, so answers come late and commits go unanswered).
* ``clock_jump``: the wall clock steps by up to an hour either way (monotonic time does not).
* ``kubelet_restart``: kubelet restarts: its calls in flight are lost, it registers the
  plugin again and asks for its options and allocations.
* ``pod_source``: the pod source turns stale, failing or empty for a while.
* ``actor_crash``: the StateStore, the Allocator, the CPU pressure actor or the memory
  balancer is told a message it cannot handle and dies; the Supervisor restarts it and the
  actors after it (rest-for-one), the store recovering from the disk.
* ``load_source``: the CPU load source reports missing samples, or absurd ones, for a while
  (``qrmd.sim.dst.metrics``).
* ``numa_metrics``: the memory balancer's NUMA metric source reports missing samples, or
  absurd ones (10¹², or a zero), for a while (``qrmd.sim.dst.numa_host``).
* ``advisor``: sys-advisor turns slow, stalled, disconnecting, garbage-speaking or refusing
  for a while (``qrmd.sim.dst.advisor``).
* ``cpuset_drift``: a running container's real cpuset (its cgroup) drifts to every CPU for a
  while; checkCPUSet reports it and changes nothing.

A timed fault lasts a number of steps the seed picks, then clears. To add a kind: write a
function ``(sim) -> str`` here (it arms the fault and returns what it did, for the trace) and
add it to ``FAULTS``; clearing a timed one goes in ``clear``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from qrmd.sim.dst.advisor import ADVISOR_MODES
from qrmd.sim.dst.metrics import LOAD_MODES
from qrmd.sim.dst.node import CRASHABLE
from qrmd.sim.dst.numa_host import METRIC_MODES
from qrmd.sim.dst.pod_source import MODES

if TYPE_CHECKING:
    from qrmd.sim.dst.simulation import Simulation

__all__ = ["FAULTS", "FAULT_KINDS", "clear", "parse_kinds"]


def _crash(sim: Simulation) -> str:
    if not sim.node.up or sim.rng.random() < 0.5:
        sim.crash_process()
        return "crash now"
    sim.disk.faults.crash_in_ops = sim.rng.randrange(8)
    return f"crash armed in {sim.disk.faults.crash_in_ops} disk operations"


def _power_loss(sim: Simulation) -> str:
    sim.crash_process()
    sim.disk.power_loss()
    return "power loss"


def _disk_full(sim: Simulation) -> str:
    sim.disk.faults.full = True
    return f"disk full for {sim.hold('disk_full')} steps"


def _write_eio(sim: Simulation) -> str:
    sim.disk.faults.write_eio_p = 0.3
    return f"write EIO for {sim.hold('write_eio')} steps"


def _fsync_eio(sim: Simulation) -> str:
    sim.disk.faults.fsync_eio_p = 0.3
    return f"fsync EIO for {sim.hold('fsync_eio')} steps"


def _slow_fsync(sim: Simulation) -> str:
    sim.disk.faults.slow_fsync_s = sim.rng.choice((0.5, 3.0, 12.0))
    return f"fsync takes {sim.disk.faults.slow_fsync_s} s for {sim.hold('slow_fsync')} steps"


def _clock_jump(sim: Simulation) -> str:
    jump = sim.rng.choice((-3600.0, -30.0, 45.0, 3600.0))
    sim.clock.jump_wall(jump)
    return f"wall clock jumps {jump:+} s"


def _kubelet_restart(sim: Simulation) -> str:
    sim.kubelet.connection_lost()
    sim.kubelet.restarted(sim.plugin if sim.node.up else None)
    return "kubelet restarts and registers the plugin again"


def _actor_crash(sim: Simulation) -> str:
    name = sim.rng.choice(CRASHABLE)
    if sim.node.crash_actor(name):
        return f"the {name} actor is told a message it cannot handle"
    return f"the {name} actor is not running"


def _cpuset_drift(sim: Simulation) -> str:
    running = sorted(uid for uid, p in sim.kubelet.pods.items() if p.phase == "running")
    if not running:
        return "no running pod to drift"
    uid = running[sim.rng.randrange(len(running))]
    sim.cgroups.drifted.add(uid)
    return f"cpuset of {uid} drifts for {sim.hold('cpuset_drift')} steps"


def _pod_source(sim: Simulation) -> str:
    mode = MODES[1 + sim.rng.randrange(len(MODES) - 1)]
    sim.pod_source.mode = mode
    # Long enough, at times, for several residual rounds to see it.
    return f"pod source {mode} for {sim.hold('pod_source', 80)} steps"


def _load_source(sim: Simulation) -> str:
    mode = LOAD_MODES[1 + sim.rng.randrange(len(LOAD_MODES) - 1)]
    sim.loads.mode = mode
    return f"load source {mode} for {sim.hold('load_source', 60)} steps"


def _numa_metrics(sim: Simulation) -> str:
    mode = METRIC_MODES[1 + sim.rng.randrange(len(METRIC_MODES) - 1)]
    sim.numa_metrics.mode = mode
    return f"NUMA metrics {mode} for {sim.hold('numa_metrics', 60)} steps"


def _advisor(sim: Simulation) -> str:
    if not sim.cpu_advisor:
        return "sys-advisor is not enabled on this node"
    mode = ADVISOR_MODES[1 + sim.rng.randrange(len(ADVISOR_MODES) - 1)]
    sim.advisor.mode = mode
    return f"sys-advisor {mode} for {sim.hold('advisor', 60)} steps"


FAULTS: dict[str, Callable[[Simulation], str]] = {
    "crash": _crash,
    "power_loss": _power_loss,
    "disk_full": _disk_full,
    "write_eio": _write_eio,
    "fsync_eio": _fsync_eio,
    "slow_fsync": _slow_fsync,
    "clock_jump": _clock_jump,
    "kubelet_restart": _kubelet_restart,
    "pod_source": _pod_source,
    "actor_crash": _actor_crash,
    "cpuset_drift": _cpuset_drift,
    "load_source": _load_source,
    "advisor": _advisor,
    "numa_metrics": _numa_metrics,
}
FAULT_KINDS = tuple(FAULTS)


def clear(sim: Simulation, kind: str) -> None:
    """End a timed fault."""
    faults = sim.disk.faults
    if kind == "disk_full":
        faults.full = False
        faults.free_bytes = None
    elif kind == "write_eio":
        faults.write_eio_p = 0.0
    elif kind == "fsync_eio":
        faults.fsync_eio_p = 0.0
    elif kind == "slow_fsync":
        faults.slow_fsync_s = 0.0
    elif kind == "pod_source":
        sim.pod_source.mode = "healthy"
    elif kind == "advisor":
        sim.advisor.mode = "healthy"
    elif kind == "load_source":
        sim.loads.mode = "healthy"
    elif kind == "numa_metrics":
        sim.numa_metrics.mode = "healthy"
    elif kind == "cpuset_drift":
        sim.cgroups.drifted.clear()


def parse_kinds(text: str) -> tuple[str, ...]:
    """``--faults``' value: comma-separated kinds, ``all``, or ``none``.

    Raises:
        ValueError: an unknown kind (the message lists the known ones).
    """
    text = text.strip()
    if text == "all":
        return FAULT_KINDS
    if text in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in FAULTS]
    if unknown:
        raise ValueError(
            f"unknown fault kind {', '.join(unknown)}; known: {', '.join(FAULT_KINDS)}, all, none"
        )
    return kinds
