"""The CPU pressure plugins' answers, in the protocol's words (evictionplugin v1alpha1).

Domain values the wire layer turns into protobuf (``wire.eviction_convert``): enum values are
their names (``HARD_MET``, ``GREATER_THAN``), pods are named by UID and by their position in
the request's ``active_pods``.

``to_json`` gives the plain form the eviction plan prints and the journal keeps: the response
message the plugin sends, field for field, under the proto's field names (``wire/protos/
evictionplugin.proto``), with enums by name, a message field that is not set as ``null``, and
each pod object by its UID (``EvictPod.pod`` as ``pod_uid``, ``target_pods`` as
``pod_uids``). What is not on the wire (the pool an answer was chosen from, an offer's
position in the request) is not in it: ``pool`` and ``active_index`` are attributes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from policy.balance.eviction import EvictOffer
from policy.cpu.pressure.settings import EVICTION_NAME_LOAD, EVICTION_NAME_SUPPRESSION

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
        pool: the pool that met the threshold (not on the wire: for the logs, the journaled
            cause's ``pool`` and the plan's ``answer_pools``).
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
        """``ThresholdMetResponse`` as plain values (the module docstring)."""
        return {
            "threshold_value": self.threshold_value,
            "observed_value": self.observed_value,
            "threshold_operator": self.threshold_operator,
            "met_type": self.met_type,
            "eviction_scope": self.eviction_scope,
            "grace_period_seconds": self.grace_period_seconds,
            "condition": None if self.condition is None else self.condition.to_json(),
        }


@dataclass(frozen=True, slots=True)
class TopEvictionAnswer:
    """``GetTopEvictionPodsResponse``: target pods by UID, in order, and deletion options.

    Attributes:
        pod_uids: the targets.
        grace_period_seconds: ``DeletionOptions.GracePeriodSeconds``; None sends none.
        pool: the pool they were chosen from (not on the wire: for the logs, the journaled
            cause's ``pool`` and the plan's ``answer_pools``).
    """

    pod_uids: tuple[str, ...] = ()
    grace_period_seconds: int | None = None
    pool: str = ""

    def to_json(self) -> dict[str, Any]:
        """``GetTopEvictionPodsResponse`` as plain values (the module docstring)."""
        options = self.grace_period_seconds
        return {
            "pod_uids": list(self.pod_uids),
            "deletion_options": None if options is None else {"grace_period_seconds": options},
        }


@dataclass(frozen=True, slots=True)
class EvictPodsAnswer:
    """``GetEvictPodsResponse``: the offers, in order.

    The suppression plugin never sets the response's condition. At v0.5.3 it sets no deletion
    options on an ``EvictPod`` either (``pressure_suppression.go`` fills ``Pod`` and ``Reason``
    only): ``null`` in ``to_json``. At v0.5.47 each offer carries ``DeletionOptions`` with the
    grace period when ``--eviction-cpu-grace-period`` is positive (``evictPodsByReclaimMetrics``).

    Attributes:
        offers: the offers, in order.
        grace_period_seconds: every offer's ``DeletionOptions.GracePeriodSeconds``; None sends
            none.
    """

    offers: tuple[EvictOffer, ...] = ()
    grace_period_seconds: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``GetEvictPodsResponse`` as plain values (the module docstring)."""
        grace = self.grace_period_seconds
        options = None if grace is None else {"grace_period_seconds": grace}
        return {
            "evict_pods": [
                {
                    "pod_uid": o.pod_uid,
                    "reason": o.reason,
                    "deletion_options": options,
                    "force_evict": o.force_evict,
                    "eviction_plugin_name": o.eviction_plugin_name,
                }
                for o in self.offers
            ],
            "condition": None,
        }
