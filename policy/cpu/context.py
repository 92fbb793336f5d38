"""The CPU decisions' settings: the machine, the reserve and the options, fixed for a run.

Built once at start-up by the composition root and passed to every policy call as the
``settings`` of the one decision shape (DESIGN.md); immutable. What varies from decision to
decision (the call, the pod source's answer) is the decision's ``inputs`` instead
(``policy.cpu.commands``). Spec cpu-policy §3 (reserve), §4.3 (QoS configuration), §9.6
(transition period), §14 (options), and the hint limits of the reduced hints answer (§8).
The reference level (``policy.cpu.reference``) picks v0.5.3's rules or v0.5.47's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from policy.cpu.qos import QoSConfig
from policy.cpu.reference import DEFAULT_REFERENCE_VERSION, ReferenceOptions, is_v0_5_47
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = [
    "DEFAULT_MAX_FULL_HINT_NUMA_NODES",
    "DEFAULT_MAX_HINTS",
    "DEFAULT_TRANSITION_PERIOD_S",
    "PolicyContext",
    "RequestedMilliCPULookup",
]

DEFAULT_TRANSITION_PERIOD_S = 30.0
DEFAULT_MAX_FULL_HINT_NUMA_NODES = 8
DEFAULT_MAX_HINTS = 64

#: ``(pod_uid, container_name) -> cpu request in millicores, or None when unknown`` (§5.5).
RequestedMilliCPULookup = Callable[[str, str], float | None]


def _unknown_request(_pod_uid: str, _container: str) -> float | None:
    return None


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """Fixed inputs of the CPU policy.

    Attributes:
        topology: the machine.
        reserved: the system reserve (§3), computed once at start-up.
        qos: QoS selectors, enhancement aliases and defaults (§4.3).
        enable_reclaim: the dynamic ``enable_reclaim`` option (§9.4 step 7).
        advisor_enabled: whether sys-advisor drives pool sizes (§9.1 step 3, §9.7).
        transition_period_s: ramp-up length (§9.6), 30 s by default.
        max_full_hint_numa_nodes: up to this many NUMA nodes hints are the reference's full
            enumeration; beyond it, the reduced answer (cpu-policy §8).
        max_hints: the most hints the reduced answer returns.
        requested_millicpu: the pod-spec seam of §5.5 (unknown by default). No source
            answers it yet; when one does, its answers belong in the decisions' inputs.
        residual_sightings: consecutive rounds a pod is missing from the pod list before its
            state goes (§12.4 step 3; ``--residual-max-age`` over ``--residual-check-period``,
            10 with the reference's 5 min and 30 s).
        reference_version: the Katalyst release reproduced, ``v0.5.3`` (the default) or
            ``v0.5.47`` (``policy.cpu.reference``).
        reference: the v0.5.47 options (their defaults at v0.5.3).
        reclaim_relative_root_cgroup_path: the reclaimed pods' root cgroup
            (``--reclaim-relative-root-cgroup-path``); the v0.5.47 suppression eviction
            samples it and its per-NUMA ``<root>-<numa>`` siblings.
        at_v0_5_47: whether the v0.5.47 rules apply (spec cpu-policy-v0.5.47), derived from
            ``reference_version``. Kept as a value, not a property: a kubelet call's
            decision asks it a dozen times, and each property call was two Python calls.
    """

    topology: CPUTopology
    reserved: CPUSet
    qos: QoSConfig = field(default_factory=QoSConfig)
    enable_reclaim: bool = False
    advisor_enabled: bool = False
    transition_period_s: float = DEFAULT_TRANSITION_PERIOD_S
    max_full_hint_numa_nodes: int = DEFAULT_MAX_FULL_HINT_NUMA_NODES
    max_hints: int = DEFAULT_MAX_HINTS
    requested_millicpu: RequestedMilliCPULookup = _unknown_request
    residual_sightings: int = 10
    reference_version: str = DEFAULT_REFERENCE_VERSION
    reference: ReferenceOptions = field(default_factory=ReferenceOptions)
    reclaim_relative_root_cgroup_path: str = "/kubepods/besteffort"
    at_v0_5_47: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived once (``dataclasses.replace`` runs this again with the new version).
        object.__setattr__(self, "at_v0_5_47", is_v0_5_47(self.reference_version))
