"""CPU pressure eviction: the load and suppression eviction plugins (spec cpu-policy §12.7).

For this component the reference code is normative: katalyst-core v0.5.3
``pkg/agent/qrm-plugins/cpu/dynamicpolicy/cpueviction/`` (``strategy/pressure_load.go``,
``pressure_load_metric.go``, ``pressure_suppression.go``, ``pod_pool_getter.go``).

* ``load``: ``cpu-pressure-load-plugin``: collections into load rings, ``ThresholdMet``
  (the ``CPUPressure`` node condition) and ``GetTopEvictionPods``;
* ``suppression``: ``cpu-pressure-suppression-plugin``: ``GetEvictPods`` of reclaimed pods
  over their suppression tolerance for longer than the minimum duration;
* ``inputs``, ``pods``: what the decisions read; ``answers``: what they answer;
  ``settings``: the reference's options and defaults; ``shared_limit``: the shared pools'
  limit from a CPU state.

What the plugins remember between calls is the ``cpu_pressure`` state section
(``policy.state.pressure``); every decision returns a ``Decision`` of its events.
"""

import importlib
from typing import TYPE_CHECKING, Any

from policy.cpu.pressure.settings import (
    EVICTION_NAME_LOAD,
    EVICTION_NAME_SUPPRESSION,
    PressureSettings,
    PressureSettingsError,
)

if TYPE_CHECKING:
    from policy.cpu.pressure.answers import (
        Condition,
        EvictPodsAnswer,
        ThresholdMetAnswer,
        TopEvictionAnswer,
    )
    from policy.cpu.pressure.inputs import (
        ContainerPool,
        InputError,
        LoadInputs,
        PoolMap,
        SuppressionInputs,
        TopInputs,
    )
    from policy.cpu.pressure.load import (
        CollectReport,
        collect_load,
        threshold_met,
        top_eviction_pods,
    )
    from policy.cpu.pressure.pods import ActivePod, PodError, parse_quantity
    from policy.cpu.pressure.suppression import SuppressionError, evict_pods

#: The decisions, their inputs and answers and the pods they read load on first use: the
#: settings (``qrmd run`` parses them whether or not CPU pressure eviction is enabled) need
#: only ``settings``, and a node's restart pays for every module it imports and every regex
#: and table it builds (``pods``' quantities).
_ON_FIRST_USE = {
    **dict.fromkeys(
        ("Condition", "EvictPodsAnswer", "ThresholdMetAnswer", "TopEvictionAnswer"),
        "policy.cpu.pressure.answers",
    ),
    **dict.fromkeys(("ActivePod", "PodError", "parse_quantity"), "policy.cpu.pressure.pods"),
    **dict.fromkeys(
        ("ContainerPool", "InputError", "LoadInputs", "PoolMap", "SuppressionInputs", "TopInputs"),
        "policy.cpu.pressure.inputs",
    ),
    **dict.fromkeys(
        ("CollectReport", "collect_load", "threshold_met", "top_eviction_pods"),
        "policy.cpu.pressure.load",
    ),
    **dict.fromkeys(("SuppressionError", "evict_pods"), "policy.cpu.pressure.suppression"),
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'policy.cpu.pressure' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


__all__ = [
    "EVICTION_NAME_LOAD",
    "EVICTION_NAME_SUPPRESSION",
    "ActivePod",
    "CollectReport",
    "Condition",
    "ContainerPool",
    "EvictPodsAnswer",
    "InputError",
    "LoadInputs",
    "PodError",
    "PoolMap",
    "PressureSettings",
    "PressureSettingsError",
    "SuppressionError",
    "SuppressionInputs",
    "ThresholdMetAnswer",
    "TopEvictionAnswer",
    "TopInputs",
    "collect_load",
    "evict_pods",
    "parse_quantity",
    "threshold_met",
    "top_eviction_pods",
]
