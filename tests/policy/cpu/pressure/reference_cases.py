"""Every table case of katalyst-core v0.5.3's CPU pressure eviction tests, as eviction plans.

Provenance: ``pkg/agent/qrm-plugins/cpu/dynamicpolicy/cpueviction/strategy/`` at tag v0.5.3,

* ``pressure_load_test.go``: ``TestThresholdMet`` (3 cases), ``TestGetTopEvictionPods``
  (3 cases), ``TestCPUPressureLoadEviction_collectMetrics`` (4 cases);
* ``pressure_suppression_test.go``: ``TestCPUPressureSuppression_GetEvictPods`` (2 cases).

Each case is the plan of ``qrmd eviction plan`` (``policy.cpu.pressure.plan``), so the same
table runs in-process and through the command. The Go tests' fixtures become plan fields:

* ``makeConf(1, -1, 1.8, 0.8, reclaim, allocate, system)``: ring size 1, no grace period,
  ratio 1.8, percentage 0.8; load eviction enabled; the CPU of
  ``ReservedResourceForAllocate`` and ``MinReclaimedResourceForAllocate`` as given.
* The machine is ``GenerateDummyCPUTopology(16, 2, 4)``: 16 CPUs, 4 NUMA nodes. The share
  pool ``1,3-6,9,11-14`` is 10 CPUs, ``3-6,11-14`` is 8; the reclaim pool ``7-8,10,15`` is 4.
* ``shared_pools_limit`` is what ``accumulateSharedPoolsLimit`` computes for the
  collectMetrics cases: 16 CPUs − ``ReservedCPUCores`` − one CPU per NUMA node reserved for
  reclaim (``GetCoreNumReservedForReclaim(4, 4)``; pod4 is dedicated without NUMA binding, so
  every NUMA node counts as shared): 16 − 4 − 4 = 8 with 4 reserved CPUs, 16 − 0 − 4 = 12
  without. (pod4's ``NewCPUSet(0-1, 8-9)`` is Go arithmetic, the set {-1}; it is in the
  dedicated pool, skipped, so it changes nothing.)
* The suppression cases run ``GetEvictPods`` twice, 10 ms apart with a 10 ms minimum
  duration (``time.Sleep(defaultCPUMinSuppressionToleranceDuration)``); the plan's two ticks
  are 11 ms apart, since the reference's duration must be *longer than* the minimum and its
  sleep always oversleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHARED = {"katalyst.kubewharf.io/qos_level": "shared_cores"}
RECLAIMED = {"katalyst.kubewharf.io/qos_level": "reclaimed_cores"}
DEDICATED = {"katalyst.kubewharf.io/qos_level": "dedicated_cores"}

CONDITION = {
    "condition_type": "NODE_CONDITION",
    "effects": ["NoSchedule"],
    "condition_name": "CPUPressure",
    "met_condition": True,
}


def load_settings(
    *, allocate: float = 4, reclaim: float = 4, enable_reclaim: bool = False
) -> dict[str, Any]:
    """``makeConf`` of ``pressure_load_test.go`` (the reserved CPUs for system are the
    plan's ``shared_pools_limit``)."""
    return {
        "enable_load_eviction": True,
        "load_metric_ring_size": 1,
        "grace_period_s": -1,
        "load_upper_bound_ratio": 1.8,
        "load_threshold_met_percentage": 0.8,
        "reserved_cpu_for_allocate": allocate,
        "reserved_cpu_for_reclaimed_cores": reclaim,
        "enable_reclaim": enable_reclaim,
        "skip_pools": ["reclaim", "dedicated", "fallback", "reserve"],
    }


def pod(
    uid: str, pool: str, load: float | None, qos: dict[str, str], **extra: Any
) -> dict[str, Any]:
    """A test pod of the Go tables: namespace and name ``test``, one container ``test``."""
    container: dict[str, Any] = {"name": extra.pop("container", "test"), "pool": pool}
    if load is not None:
        container["load"] = load
    if "requests" in extra:
        container["requests"] = extra.pop("requests")
    return {
        "uid": uid,
        "namespace": extra.pop("namespace", "test"),
        "name": extra.pop("name", "test"),
        "annotations": {**qos, **extra.pop("annotations", {})},
        "containers": [container],
    }


@dataclass(frozen=True)
class ReferenceCase:
    """A Go table case: the plan, and what its last tick must answer per call."""

    test: str  # the Go test function
    name: str  # the case's name in the Go table
    plan: dict[str, Any]
    want: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.test}: {self.name}"


def _load_plan(
    pods: list[dict[str, Any]],
    pools: dict[str, int],
    calls: list[str],
    settings: dict[str, Any] | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    tick: dict[str, Any] = {"time": 1000.0, "pools": pools, "pods": pods, "calls": calls}
    if limit is not None:
        tick["shared_pools_limit"] = limit
    return {"settings": settings or load_settings(), "ticks": [tick]}


_THRESHOLD_CALLS = ["collect", "threshold_met"]
_TOP_CALLS = ["collect", "threshold_met", "top_eviction_pods"]
_SHARE_10 = {"share": 10}
_SHARE_RECLAIM = {"share": 10, "reclaim": 4}

NOT_MET = {
    "met_type": "NOT_MET",
    "threshold_value": 0.0,
    "observed_value": 0.0,
    "threshold_operator": "LESS_THAN",
    "eviction_scope": "",
    "grace_period_seconds": 0,
    "condition": None,
}


def _met(kind: str) -> dict[str, Any]:
    # ThresholdValue is the observed ratio (1 of 1 sample over), ObservedValue the configured
    # percentage: swapped in the reference, kept.
    return {
        "met_type": kind,
        "threshold_value": 1.0,
        "observed_value": 0.8,
        "threshold_operator": "GREATER_THAN",
        "eviction_scope": "cpu.load.1min.container",
        "grace_period_seconds": 0,
        "condition": CONDITION,
    }


NO_TARGETS: dict[str, Any] = {"pod_uids": [], "deletion_options": None}
#: The pool a met threshold names (not on the wire: the plan's ``answer_pools``).
MET_IN_SHARE = {"threshold_met": "share"}

THRESHOLD_MET_CASES = [
    ReferenceCase(
        "TestThresholdMet",
        "not met load threshold",
        _load_plan([pod("pod1", "share", 1, SHARED)], _SHARE_10, _THRESHOLD_CALLS),
        {"threshold_met": NOT_MET},
    ),
    ReferenceCase(
        "TestThresholdMet",
        "met soft threshold",
        _load_plan([pod("pod1", "share", 11, SHARED)], _SHARE_10, _THRESHOLD_CALLS),
        {"threshold_met": _met("SOFT_MET"), "answer_pools": MET_IN_SHARE},
    ),
    ReferenceCase(
        "TestThresholdMet",
        "met hard threshold",
        _load_plan([pod("pod1", "share", 50, SHARED)], _SHARE_10, _THRESHOLD_CALLS),
        {"threshold_met": _met("HARD_MET"), "answer_pools": MET_IN_SHARE},
    ),
]

TOP_EVICTION_CASES = [
    ReferenceCase(
        "TestGetTopEvictionPods",
        "not met load threshold",
        _load_plan([pod("pod1", "share", 1, SHARED)], _SHARE_10, _TOP_CALLS),
        {"top_eviction_pods": NO_TARGETS},
    ),
    ReferenceCase(
        "TestGetTopEvictionPods",
        "met soft threshold",
        _load_plan([pod("pod1", "share", 11, SHARED)], _SHARE_10, _TOP_CALLS),
        {"top_eviction_pods": NO_TARGETS},
    ),
    ReferenceCase(
        "TestGetTopEvictionPods",
        "met hard threshold",
        # share: 20 + 50 = 70 > 18 = 10 × 1.8; pod3's 200 is in the skipped reclaim pool.
        # topN 1 of pod1 (20) and pod2 (50): pod2. Grace period -1: no deletion options.
        _load_plan(
            [
                pod("pod1", "share", 20, SHARED),
                pod("pod2", "share", 50, SHARED),
                pod("pod3", "reclaim", 200, RECLAIMED),
            ],
            _SHARE_RECLAIM,
            _TOP_CALLS,
        ),
        {
            "threshold_met": _met("HARD_MET"),
            "top_eviction_pods": {"pod_uids": ["pod2"], "deletion_options": None},
            "answer_pools": {"threshold_met": "share", "top_eviction_pods": "share"},
        },
    ),
]


def _collect_pods(share_loads: tuple[float, float], dedicated: bool) -> list[dict[str, Any]]:
    pods = [
        pod("pod1", "share", share_loads[0], SHARED),
        pod("pod2", "share", share_loads[1], SHARED),
        pod("pod3", "reclaim", 5, RECLAIMED),
    ]
    if dedicated:
        pods.append(pod("pod4", "dedicated", 8, DEDICATED))
    return pods


def _share_sample(value: float, upper: float, lower: float) -> dict[str, Any]:
    return {
        "pools": {"share": {"value": value, "upper_bound": upper, "lower_bound": lower}},
        "unsampled_pools": [],
    }


COLLECT_CASES = [
    ReferenceCase(
        "TestCPUPressureLoadEviction_collectMetrics",
        "use default bound, without dedicated core pod",
        _load_plan(_collect_pods((1, 1.4), False), _SHARE_RECLAIM, ["collect"]),
        {"collect": _share_sample(2.4, 18, 10)},
    ),
    ReferenceCase(
        "TestCPUPressureLoadEviction_collectMetrics",
        "use default bound, with dedicated core pod",
        _load_plan(_collect_pods((1, 2.4), True), {"share": 8, "reclaim": 3}, ["collect"]),
        {"collect": _share_sample(3.4, 8 * 1.8, 8)},
    ),
    ReferenceCase(
        "TestCPUPressureLoadEviction_collectMetrics",
        "use dynamic bound, has pressure, with dedicated core pod",
        _load_plan(
            _collect_pods((1, 2.4), True),
            {"share": 8, "reclaim": 3},
            ["collect"],
            load_settings(allocate=0, enable_reclaim=True),
            limit=8,  # 16 - 4 reserved for system - 4 for reclaim: the share pool's 8 fill it
        ),
        {"collect": _share_sample(3.4, 8 * 1.8, 1)},
    ),
    ReferenceCase(
        "TestCPUPressureLoadEviction_collectMetrics",
        "use dynamic bound, no pressure, with dedicated core pod",
        _load_plan(
            _collect_pods((1, 2.4), True),
            {"share": 8, "reclaim": 3},
            ["collect"],
            load_settings(allocate=0, enable_reclaim=True),
            limit=12,  # 16 - 0 - 4: the share pool may still grow
        ),
        {"collect": _share_sample(3.4, 4.4 * 1.8, 4.4)},
    ),
]


def _suppression_plan(pods: list[dict[str, Any]]) -> dict[str, Any]:
    settings = {
        "enable_suppression_eviction": True,
        "max_suppression_tolerance_rate": 5.0,
        "min_suppression_tolerance_duration_s": 0.010,
    }
    tick = {"pools": {"reclaim": 10}, "pods": pods, "calls": ["evict_pods"]}
    return {"settings": settings, "ticks": [{"time": 1000.0, **tick}, {"time": 1000.011, **tick}]}


def _reclaimed(uid: str, name: str, cpus: int) -> dict[str, Any]:
    # The Go pods request reclaimed_millicpu as resource.NewQuantity(RequestQuantity*1000).
    return pod(
        uid,
        "reclaim",
        None,
        RECLAIMED,
        namespace=name,
        name=name,
        container=name,
        annotations={
            "katalyst.kubewharf.io/cpu_enhancement": '{"suppression_tolerance_rate": "1.2"}'
        },
        requests={"resource.katalyst.kubewharf.io/reclaimed_millicpu": str(cpus * 1000)},
    )


SUPPRESSION_CASES = [
    ReferenceCase(
        "TestCPUPressureSuppression_GetEvictPods",
        "no over tolerance rate pod",
        # 2 CPUs on the 10 of 1,3-6,9,11-14: rate 0.2, under the pod's 1.2.
        _suppression_plan([_reclaimed("pod1", "pod-1", 2)]),
        {"evict_pods": {"evict_pods": [], "condition": None}},
    ),
    ReferenceCase(
        "TestCPUPressureSuppression_GetEvictPods",
        "over tolerance rate",
        # 15 + 4 = 19 CPUs on 10: rate 1.9 > 1.2 for both. pod-1 (15, larger) goes first and,
        # past the minimum duration, is offered; 4 remain: rate 0.4, pod-2 is kept.
        _suppression_plan([_reclaimed("pod1", "pod-1", 15), _reclaimed("pod2", "pod-2", 4)]),
        {
            "evict_pods": {
                "evict_pods": [
                    {
                        "pod_uid": "pod1",
                        "reason": "current pool suppression rate 1.90 is over than the "
                        "pod suppression tolerance rate 1.20",
                        # EvictPod{Pod, Reason}: the rest of the message is left unset.
                        "deletion_options": None,
                        "force_evict": False,
                        "eviction_plugin_name": "",
                    }
                ],
                "condition": None,
            }
        },
    ),
]

ALL_CASES = THRESHOLD_MET_CASES + TOP_EVICTION_CASES + COLLECT_CASES + SUPPRESSION_CASES
