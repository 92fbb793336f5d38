"""Container ramp-up: how a container enters, settles in and leaves its CPUs (cpu-policy §9.6).

* A new **shared_cores** container *ramps up* when its pod is Pending or unknown to the pod
  source (§7.3 3a), or when its target pool does not exist yet: it runs on all pooled CPUs,
  belongs to no pool and does not count toward pool sizes. A shared container whose pod is
  already running goes straight to its pool.
* Ramp-up ends lazily in GetResourcesAllocation once the transition period (30 s, §14) has
  passed since the container's ``init_timestamp`` (§10.1): the container joins its pool.
* An unreadable or empty ``init_timestamp`` re-ramps a shared container (§10.1); for the other
  levels the timestamp is only reset to now, which for a ramping dedicated container restarts
  its transition period.
* A **dedicated_cores** (NUMA-binding) container is placed on its own CPUs at once and carries
  the ramp-up flag, without moving, until the first applied advisor result (§11.8) or the end of
  the transition period (§10.1). Re-allocated with a larger request, it is placed anew and
  carries the flag again (§7.5.1 step 1). Its sidecar mirrors the main container's CPUs and
  never ramps (§7.5.2).
* A **reclaimed_cores** container is placed directly on the reclaim pool (§7.4).
* Allocate for a container that already holds enough CPUs only replies (§7.1 step 8) and fires
  nothing; re-allocating a shared or reclaimed one with a larger request keeps its state
  (§7.3 3b/3c, §7.4).
* Removal of the container or of its pod ends every state (§10.6, §12.4).

The events named here are the container's lifecycle events; a decision may commit more
(pool resizes, for example) alongside them. The guards are answered by ``policy/``:

* ``pod_pending_or_unknown`` — the pod source says Pending, or cannot find the pod (§7.3 3a);
* ``target_pool_missing`` — the container's pool does not exist (§7.3 3a, "switch to ramp-up");
* ``transition_period_passed`` — ``now > init_timestamp + transition period`` (§10.1);
* ``numa_bound`` — at the v0.5.47 reference level, a shared container bound to one NUMA node
  (SNB): an unreadable timestamp is only reset (cpu-policy-v0.5.47 (c) 10).
"""

from __future__ import annotations

from functools import cache

from machines.lifecycle import Lifecycle
from machines.table import MachineTable, Transition

NEW = "new"
RAMPING = "ramping"
POOLED = "pooled"
DEDICATED_RAMPING = "dedicated_ramping"
DEDICATED = "dedicated"
RECLAIMED = "reclaimed"
REMOVED = "removed"

#: Every state an allocated container can be in (what removal ends).
LIVE = (RAMPING, POOLED, DEDICATED_RAMPING, DEDICATED, RECLAIMED)

CONTAINER_ALLOCATED = "ContainerAllocated"
RAMP_UP_FINISHED = "RampUpFinished"
CONTAINER_RE_RAMPED = "ContainerReRamped"
TIMESTAMP_RESET = "TimestampReset"
CONTAINER_REMOVED = "ContainerRemoved"
POD_REMOVED = "PodRemoved"

_SHOULD_RAMP = ("pod_pending_or_unknown", "target_pool_missing")

# fmt: off
TRANSITIONS = (
    # Allocate, shared_cores (§7.3): ramp when the pod may not be running yet or has no pool.
    Transition("allocate_shared", (NEW,), RAMPING, conditions=("pod_pending_or_unknown",),
               events=(CONTAINER_ALLOCATED,)),
    Transition("allocate_shared", (NEW,), RAMPING, conditions=("target_pool_missing",),
               events=(CONTAINER_ALLOCATED,)),
    Transition("allocate_shared", (NEW,), POOLED, unless=_SHOULD_RAMP,
               events=(CONTAINER_ALLOCATED,)),
    # Re-allocation of an existing shared container keeps it where it is (§7.3 3b, 3c).
    Transition("allocate_shared", (RAMPING,), RAMPING, events=(CONTAINER_ALLOCATED,)),
    Transition("allocate_shared", (POOLED,), POOLED, events=(CONTAINER_ALLOCATED,)),
    # Allocate, dedicated_cores with NUMA binding (§7.5.1): own CPUs at once, ramp-up flag set.
    # A grown request re-creates the entry, flag included (§7.5.1 step 1).
    Transition("allocate_dedicated", (NEW, DEDICATED_RAMPING, DEDICATED), DEDICATED_RAMPING,
               events=(CONTAINER_ALLOCATED,)),
    # A sidecar of a dedicated pod mirrors its main container's CPUs, without ramp-up (§7.5.2).
    Transition("allocate_dedicated_sidecar", (NEW, DEDICATED), DEDICATED,
               events=(CONTAINER_ALLOCATED,)),
    # Allocate, reclaimed_cores (§7.4): straight onto the reclaim pool, no ramp-up.
    Transition("allocate_reclaimed", (NEW, RECLAIMED), RECLAIMED, events=(CONTAINER_ALLOCATED,)),
    # GetResourcesAllocation ends ramp-up once the transition period has passed (§10.1).
    Transition("finish_ramp_up", (RAMPING,), POOLED, conditions=("transition_period_passed",),
               events=(RAMP_UP_FINISHED,)),
    Transition("finish_ramp_up", (DEDICATED_RAMPING,), DEDICATED,
               conditions=("transition_period_passed",), events=(RAMP_UP_FINISHED,)),
    # The first applied advisor result clears a dedicated container's flag (§11.8 step 1).
    Transition("apply_advisor_result", (DEDICATED_RAMPING,), DEDICATED,
               events=(RAMP_UP_FINISHED,)),
    # An unreadable init_timestamp (§10.1): shared containers ramp again, others keep their place.
    # At v0.5.47 a shared container bound to one NUMA node (SNB) keeps its place instead.
    Transition("repair_timestamp", (POOLED,), POOLED, conditions=("numa_bound",),
               events=(TIMESTAMP_RESET,)),
    Transition("repair_timestamp", (RAMPING, POOLED), RAMPING, unless=("numa_bound",),
               events=(CONTAINER_RE_RAMPED,)),
    Transition("repair_timestamp", (DEDICATED_RAMPING,), DEDICATED_RAMPING,
               events=(TIMESTAMP_RESET,)),
    Transition("repair_timestamp", (DEDICATED,), DEDICATED, events=(TIMESTAMP_RESET,)),
    Transition("repair_timestamp", (RECLAIMED,), RECLAIMED, events=(TIMESTAMP_RESET,)),
    # Removal ends every state: kubelet's RemovePod (§10.6) or the residual clean-up (§12.4).
    Transition("remove_pod", LIVE, REMOVED, events=(POD_REMOVED,)),
    Transition("remove_container", LIVE, REMOVED, events=(CONTAINER_REMOVED,)),
)
# fmt: on

TABLE = MachineTable(
    name="ramp_up",
    title="Container ramp-up",
    states=(NEW, RAMPING, POOLED, DEDICATED_RAMPING, DEDICATED, RECLAIMED, REMOVED),
    initial=NEW,
    final=(REMOVED,),
    transitions=TRANSITIONS,
    glossary=(
        (
            "pod_pending_or_unknown",
            "the pod source says the pod is Pending, or cannot find it (§7.3 step 3a)",
        ),
        ("target_pool_missing", "the pool the container would join does not exist (§7.3 3a)"),
        (
            "numa_bound",
            "v0.5.47 only: the shared container is bound to one NUMA node (SNB, "
            "cpu-policy-v0.5.47 (c) 10)",
        ),
        (
            "transition_period_passed",
            "now > init_timestamp + transition period (30 s by default; §10.1)",
        ),
        (CONTAINER_ALLOCATED, "the container's entry was stored by Allocate"),
        (RAMP_UP_FINISHED, "the ramp-up flag was cleared (a shared container joins its pool)"),
        (
            CONTAINER_RE_RAMPED,
            "an unreadable init_timestamp put a shared container back on all pooled CPUs, "
            "timestamp now",
        ),
        (
            TIMESTAMP_RESET,
            "an unreadable init_timestamp of a non-shared container was reset to now",
        ),
        (POD_REMOVED, "the pod and all its containers were removed (RemovePod, residual clean-up)"),
        (
            CONTAINER_REMOVED,
            "one container was removed (failed Allocate or advisor AddContainer, §7.2)",
        ),
    ),
    summary=(
        "One container from Allocate to removal (cpu-policy.md §9.6, §7.3-§7.5, §10.1). "
        "A shared container ramps up on all pooled CPUs and joins its pool once the transition "
        "period has passed; a dedicated container holds its own CPUs with the ramp-up flag "
        "until the first advisor result or the end of the period; a reclaimed container is "
        "placed directly."
    ),
)


@cache
def lifecycle() -> Lifecycle:
    """The one ramp-up machine every container of the node shares."""
    return Lifecycle(TABLE)
