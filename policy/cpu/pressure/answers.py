"""The CPU pressure plugins' answers, in the protocol's words (evictionplugin v1alpha1).

Domain values the wire layer turns into protobuf (``wire.eviction_convert``): enum values are
their names (``HARD_MET``, ``GREATER_THAN``), pods are named by UID and by their position in
the request's ``active_pods``. ``to_json`` gives the plain form the eviction plan prints and
the journal keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from policy.balance.eviction import EvictOffer

__all__ = [
    "CPU_PRESSURE_CONDITION",
    "EVICTION_NAME_LOAD",
    "EVICTION_NAME_SUPPRESSION",
    "Condition",
    "EvictOffer",
    "EvictPodsAnswer",
    "ThresholdMetAnswer",
    "TopEvictionAnswer",
]

#: The plugins' names, in ``GetInfo`` and their socket names (``EvictionNameLoad``,
#: ``EvictionNameSuppression``).
EVICTION_NAME_LOAD: Final = "cpu-pressure-load-plugin"
EVICTION_NAME_SUPPRESSION: Final = "cpu-pressure-suppression-plugin"

#: ``evictionConditionCPUPressure``.
CPU_PRESSURE_CONDITION: Final = "CPUPressure"


@dataclass(frozen=True, slots=True)
class Condition:
    """A node condition the agent reports (and taints by) while the threshold is met."""

    condition_type: str = "NODE_CONDITION"
    effects: tuple[str, ...] = ("NoSchedule",)
    condition_name: str = CPU_PRESSURE_CONDITION
    met_condition: bool = True

    def to_json(self) -> dict[str, Any]:
        """The condition as plain values."""
        return {
            "condition_type": self.condition_type,
            "effects": list(self.effects),
            "condition_name": self.condition_name,
            "met_condition": self.met_condition,
        }


@dataclass(frozen=True, slots=True)
class ThresholdMetAnswer:
    """``ThresholdMetResponse``; all defaults is NOT_MET.

    Attributes:
        threshold_value: the reference puts the *observed* over-bound ratio here...
        observed_value: ...and the configured ``load_threshold_met_percentage`` here (the two
            are swapped in ``pressure_load.go``; kept, as the agent reads them so).
        threshold_operator: ``GREATER_THAN`` when met.
        met_type: ``NOT_MET``, ``SOFT_MET`` or ``HARD_MET``.
        eviction_scope: ``cpu.load.1min.container`` when met.
        grace_period_seconds: never set by these plugins.
        condition: the ``CPUPressure`` node condition when met.
        pool: the pool that met the threshold (not on the wire: for logs and the journal).
    """

    threshold_value: float = 0.0
    observed_value: float = 0.0
    threshold_operator: str = "LESS_THAN"
    met_type: str = "NOT_MET"
    eviction_scope: str = ""
    grace_period_seconds: int = 0
    condition: Condition | None = None
    pool: str = ""

    def to_json(self) -> dict[str, Any]:
        """The answer as plain values."""
        return {
            "met_type": self.met_type,
            "threshold_value": self.threshold_value,
            "observed_value": self.observed_value,
            "threshold_operator": self.threshold_operator,
            "eviction_scope": self.eviction_scope,
            "grace_period_seconds": self.grace_period_seconds,
            "condition": None if self.condition is None else self.condition.to_json(),
            "pool": self.pool,
        }


@dataclass(frozen=True, slots=True)
class TopEvictionAnswer:
    """``GetTopEvictionPodsResponse``: target pods by UID, in order, and deletion options.

    Attributes:
        pod_uids: the targets.
        grace_period_seconds: ``DeletionOptions.GracePeriodSeconds``; None sends none.
        pool: the pool they were chosen from (not on the wire).
    """

    pod_uids: tuple[str, ...] = ()
    grace_period_seconds: int | None = None
    pool: str = ""

    def to_json(self) -> dict[str, Any]:
        """The answer as plain values."""
        return {
            "pod_uids": list(self.pod_uids),
            "grace_period_seconds": self.grace_period_seconds,
            "pool": self.pool,
        }


@dataclass(frozen=True, slots=True)
class EvictPodsAnswer:
    """``GetEvictPodsResponse``: the offers, in order, no condition."""

    offers: tuple[EvictOffer, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The answer as plain values."""
        return {
            "evict_pods": [
                {"pod_uid": o.pod_uid, "active_index": o.active_index, "reason": o.reason}
                for o in self.offers
            ]
        }
