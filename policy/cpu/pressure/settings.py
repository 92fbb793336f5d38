"""What the CPU pressure eviction plugins read of katalyst-agent's configuration (v0.5.3).

The defaults are the reference's: ``cmd/katalyst-agent/app/options/qrm/cpu_plugin.go``
(``--load-pressure-eviction-skip-pools``),
``options/dynamic/adminqos/eviction/cpu_pressure_eviction.go`` (the ``--eviction-load-*`` and
``--eviction-suppression-*`` options, ``--eviction-cpu-grace-period``) and
``options/dynamic/adminqos/reclaimedresource/reclaimedresource_base.go`` (``enable-reclaim``,
the CPU of ``reserved-resource-for-allocate`` and of ``reserved-resource-for-reclaimed-cores``,
which the load plugin reads to choose its bounds). In the reference most of these are dynamic
(a KatalystCustomConfig may change them at run time); qrmd reads them at start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Final

from policy.errors import ErrorKind, PolicyError

__all__ = [
    "DEFAULT_SKIP_POOLS",
    "EVICTION_NAME_LOAD",
    "EVICTION_NAME_SUPPRESSION",
    "EVICTION_SCOPE_LOAD",
    "PressureSettings",
    "PressureSettingsError",
]

#: ``--load-pressure-eviction-skip-pools`` default: reclaim, dedicated, fallback, reserve.
DEFAULT_SKIP_POOLS: Final = ("reclaim", "dedicated", "fallback", "reserve")

#: The plugins' names, in ``GetInfo`` and their socket names (``EvictionNameLoad``,
#: ``EvictionNameSuppression``): here, with the settings, as ``qrmd run`` names the sockets
#: from them whether or not the plugins are enabled (``answers`` re-exports them).
EVICTION_NAME_LOAD: Final = "cpu-pressure-load-plugin"
EVICTION_NAME_SUPPRESSION: Final = "cpu-pressure-suppression-plugin"

#: The one metric the load plugin handles (``consts.MetricLoad1MinContainer``), also its
#: ``EvictionScope``.
EVICTION_SCOPE_LOAD: Final = "cpu.load.1min.container"


class PressureSettingsError(PolicyError):
    """A setting out of its range; the message names it and its value."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class PressureSettings:
    """The plugins' settings, reference option names in brackets.

    Attributes:
        skip_pools: pools the load plugin neither samples nor judges
            [``load-pressure-eviction-skip-pools``].
        enable_load_eviction: [``eviction-load-enable``], default false.
        load_upper_bound_ratio: the hard bound is the pool size times this
            [``eviction-load-upper-bound-ratio``], 1.8.
        load_threshold_met_percentage: the share of a ring's *size* (not of its filled
            samples) that must be over a bound [``eviction-load-threshold-met-percentage``], 0.8.
        load_metric_ring_size: samples a new ring holds [``eviction-load-metric-ring-size``], 10.
        load_eviction_cool_down_s: after offering candidates, none again for this long
            [``eviction-load-cool-down-time``], 300 s.
        load_eviction_sync_period_s: seconds between load collections
            [``eviction-load-sync-period``], 30 s.
        enable_suppression_eviction: [``eviction-suppression-enable``], default false.
        max_suppression_tolerance_rate: a pod's tolerance rate is capped at this
            [``eviction-suppression-max-tolerance-rate``], 5.
        min_suppression_tolerance_duration_s: a pod is offered only once over its tolerance for
            longer than this [``eviction-suppression-min-tolerance-duration``], 300 s.
        grace_period_s: deletion grace period of the load plugin's candidates; negative sends
            none [``eviction-cpu-grace-period``], -1.
        enable_reclaim: [``enable-reclaim``]; with it, and no CPU reserved for allocation, the
            load plugin uses the "advised" bounds (``checkPressureWithAdvisedThreshold``).
        reserved_cpu_for_allocate: the CPU of [``reserved-resource-for-allocate``], 4.
        reserved_cpu_for_reclaimed_cores: the CPU of
            [``reserved-resource-for-reclaimed-cores``], 4: cores kept for reclaimed pods,
            subtracted from the shared pools' limit.
    """

    skip_pools: frozenset[str] = field(default_factory=lambda: frozenset(DEFAULT_SKIP_POOLS))
    enable_load_eviction: bool = False
    load_upper_bound_ratio: float = 1.8
    load_threshold_met_percentage: float = 0.8
    load_metric_ring_size: int = 10
    load_eviction_cool_down_s: float = 300.0
    load_eviction_sync_period_s: float = 30.0
    enable_suppression_eviction: bool = False
    max_suppression_tolerance_rate: float = 5.0
    min_suppression_tolerance_duration_s: float = 300.0
    grace_period_s: int = -1
    enable_reclaim: bool = False
    reserved_cpu_for_allocate: float = 4.0
    reserved_cpu_for_reclaimed_cores: float = 4.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "skip_pools", frozenset(self.skip_pools))
        for name in (
            "load_upper_bound_ratio",
            "load_threshold_met_percentage",
            "max_suppression_tolerance_rate",
        ):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise PressureSettingsError(f"{name}: expected a finite number, got {value!r}")
        # A ring of size 0 makes the reference divide by zero on its first push.
        if self.load_metric_ring_size < 1:
            raise PressureSettingsError(
                f"load_metric_ring_size: a ring holds at least 1 sample, got "
                f"{self.load_metric_ring_size}"
            )
        for name in (
            "load_eviction_cool_down_s",
            "min_suppression_tolerance_duration_s",
            "reserved_cpu_for_allocate",
            "reserved_cpu_for_reclaimed_cores",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise PressureSettingsError(f"{name}: expected a number >= 0, got {value!r}")
        period = self.load_eviction_sync_period_s
        if not (math.isfinite(period) and period > 0):
            raise PressureSettingsError(
                f"load_eviction_sync_period_s: expected a positive number of seconds, got "
                f"{period!r}"
            )

    @property
    def uses_advised_threshold(self) -> bool:
        """Whether pool bounds follow the load (``checkPressureWithAdvisedThreshold``).

        The reference compares ``Quantity.Value()``, which rounds up: 0.5 CPU reserved is 1,
        so only an exact 0 switches to the advised bounds.
        """
        return self.enable_reclaim and math.ceil(self.reserved_cpu_for_allocate) == 0

    def to_json(self) -> dict[str, Any]:
        """The settings as plain values (skip pools sorted), for journal causes and the plan."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["skip_pools"] = sorted(self.skip_pools)
        return out

    @classmethod
    def from_json(cls, value: object, where: str = "settings") -> PressureSettings:
        """Settings from :meth:`to_json`'s form; a missing key keeps its default.

        Raises:
            PressureSettingsError: not a map, an unknown key, a value of the wrong type or out
                of range; the message names the key.
        """
        if not isinstance(value, dict):
            raise PressureSettingsError(f"{where}: expected a map, got {type(value).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise PressureSettingsError(f"{where}: unknown keys {unknown}; known: {sorted(known)}")
        given: dict[str, Any] = {}
        for key, raw in value.items():
            given[key] = _typed(key, raw, str(known[key].type), f"{where}.{key}")
        try:
            return cls(**given)
        except PressureSettingsError as err:
            raise PressureSettingsError(f"{where}.{err}") from None


def _typed(key: str, raw: object, kind: str, where: str) -> object:
    if kind == "bool":
        if not isinstance(raw, bool):
            raise PressureSettingsError(f"{where}: expected true or false, got {raw!r:.40}")
        return raw
    if kind == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise PressureSettingsError(f"{where}: expected an integer, got {raw!r:.40}")
        return raw
    if kind == "float":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise PressureSettingsError(f"{where}: expected a number, got {raw!r:.40}")
        return float(raw)
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise PressureSettingsError(f"{where}: expected a list of pool names, got {raw!r:.40}")
    del key
    return frozenset(raw)
