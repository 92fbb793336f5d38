"""The suppression plugin's tolerance timers across the reference's early returns, as a table
shared by the policy's, the actor's and ``qrmd eviction plan``'s tests.

katalyst-core v0.5.3 ``pressure_suppression.go`` answers early when suppression is disabled,
when the state has no reclaim pool (an error), when the pool has no CPUs and when no active
pod is reclaimed_cores; only the full pass stops the timers of pods that are no longer over
their tolerance. So a pod over its tolerance keeps its start time through an early return,
and is offered at the next full pass once it has been over for longer than the minimum.

Each case is a timeline of steps; a step moves the clock, sets the node (reclaim pool,
whether suppression is enabled, which pods are active), asks ``GetEvictPods`` and names what
it must answer and which timers must run (as seconds after the case's start).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policy.cpu.pressure import ActivePod, PressureSettings

__all__ = [
    "MIN_DURATION_S",
    "PODS",
    "RECLAIM_CPUS",
    "SETTINGS",
    "TIMELINES",
    "Step",
    "Timeline",
]

#: The minimum suppression duration: a pod is offered once over for longer than this.
MIN_DURATION_S = 60.0
#: The reclaim pool's size when it is there.
RECLAIM_CPUS = 4
SETTINGS = PressureSettings(
    enable_suppression_eviction=True, min_suppression_tolerance_duration_s=MIN_DURATION_S
)

_RECLAIMED = "katalyst.kubewharf.io/qos_level"
_ENHANCEMENT = "katalyst.kubewharf.io/cpu_enhancement"


def _reclaimed(name: str, cpus: str, rate: str) -> ActivePod:
    annotations = {
        _RECLAIMED: "reclaimed_cores",
        _ENHANCEMENT: f'{{"suppression_tolerance_rate": "{rate}"}}',
    }
    return ActivePod(name, "batch", name, annotations, None, (("main", {"cpu": cpus}),))


#: The pods a step may list: etl is 8 CPUs on 4 (rate 2 over its 1); calm tolerates 9; web is
#: shared_cores, never a candidate.
PODS = {
    "web": ActivePod(
        "web", "shop", "web", {_RECLAIMED: "shared_cores"}, None, (("main", {"cpu": "2"}),)
    ),
    "etl": _reclaimed("etl", "8", "1"),
    "calm": _reclaimed("calm", "1", "9"),
}

#: What the state's missing reclaim pool answers, as the reference's gRPC status message.
NO_POOL = "get reclaim pool failed: pool not found"


@dataclass(frozen=True, slots=True)
class Step:
    """One ``GetEvictPods`` call.

    Attributes:
        advance_s: seconds the clock moves before the call.
        reclaim_pool: the reclaim pool's CPUs; None: the state has no reclaim pool.
        pods: the active pods (keys of ``PODS``), in request order.
        enabled: suppression eviction enabled.
        offered: the pod UIDs answered, in order.
        error: the error's text, "" for an answer.
        timers: pod ``namespace/name`` → seconds after the start its timer started.
    """

    advance_s: float
    reclaim_pool: int | None = RECLAIM_CPUS
    pods: tuple[str, ...] = ("web", "etl")
    enabled: bool = True
    offered: tuple[str, ...] = ()
    error: str = ""
    timers: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Timeline:
    id: str
    steps: tuple[Step, ...]


_STARTED = Step(0, timers={"batch/etl": 0})

TIMELINES = (
    Timeline(
        "a missing reclaim pool is the reference's error and keeps the timer, so the pod is "
        "offered when the pool is back",
        (
            _STARTED,
            Step(40, reclaim_pool=None, error=NO_POOL, timers={"batch/etl": 0}),
            Step(30, offered=("etl",), timers={"batch/etl": 0}),
        ),
    ),
    Timeline(
        "an empty reclaim pool answers no pods and keeps the timer",
        (
            _STARTED,
            Step(40, reclaim_pool=0, timers={"batch/etl": 0}),
            Step(30, offered=("etl",), timers={"batch/etl": 0}),
        ),
    ),
    Timeline(
        "suppression disabled answers no pods and keeps the timer",
        (
            _STARTED,
            Step(40, enabled=False, timers={"batch/etl": 0}),
            Step(30, offered=("etl",), timers={"batch/etl": 0}),
        ),
    ),
    Timeline(
        "no reclaimed pod among the active pods answers no pods and keeps the timer",
        (
            _STARTED,
            Step(40, pods=("web",), timers={"batch/etl": 0}),
            Step(30, offered=("etl",), timers={"batch/etl": 0}),
        ),
    ),
    Timeline(
        "a full pass without the pod stops its timer, which starts again when it is back",
        (
            _STARTED,
            Step(40, pods=("web", "calm")),
            Step(30, timers={"batch/etl": 70}),
        ),
    ),
    Timeline(
        "exactly the minimum is not longer than it: the pod is offered only after",
        (
            _STARTED,
            Step(MIN_DURATION_S, timers={"batch/etl": 0}),
            Step(0.5, offered=("etl",), timers={"batch/etl": 0}),
        ),
    ),
)
