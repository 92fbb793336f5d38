"""The CPU pressure eviction plugins' state section (katalyst-core v0.5.3 ``cpueviction``).

* ``history``: the section value, ``PressureHistory`` (load rings, eviction pool, cool-down,
  tolerance timers);
* ``events``: its events and how they apply;
* ``codec``: both as msgpack-able primitives.

It lives in ``policy.state`` because the state registers it; the decisions that produce its
events are ``policy.cpu.pressure``.
"""

from policy.state.pressure.events import PRESSURE_SECTION, apply_pressure_event
from policy.state.pressure.history import ContainerKey, LoadSample, MetricRing, PressureHistory

__all__ = [
    "PRESSURE_SECTION",
    "ContainerKey",
    "LoadSample",
    "MetricRing",
    "PressureHistory",
    "apply_pressure_event",
]
