"""The ``communicate_with_advisor`` health check on ``/healthz`` (cpu-policy §11.2 step 6, §12.3).

The reference registers ``qrm_cpu_plugin_dynamic_communicate_with_advisor`` in heartbeat mode
with a 2-minute timeout and a 2-minute tolerance, NotReady at first, and updates it after every
response it handles: Ready when applied, NotReady with the error when refused. So ``/healthz``
fails until the first applied response, when a refused one has been NotReady for more than 2
minutes, and when no response came for 2 minutes. The rule itself is ``qrmd.status.health``'s
``HandlerHealth``; the Allocator reports each ``ApplyAdvice`` outcome to the check this returns
(``update(None | reason, monotonic now)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from qrmd.status.health import HandlerHealth, HealthRegistry

__all__ = ["ADVISOR_HEALTH_TIMEOUT_S", "COMMUNICATE_WITH_ADVISOR", "register_advisor_health"]

COMMUNICATE_WITH_ADVISOR: Final = "qrm_cpu_plugin_dynamic_communicate_with_advisor"
#: §14: the advisor health check's timeout and tolerance.
ADVISOR_HEALTH_TIMEOUT_S: Final = 120.0


def register_advisor_health(
    registry: HealthRegistry, monotonic: Callable[[], float]
) -> HandlerHealth:
    """Add the check to ``/healthz``.

    Args:
        registry: the daemon's health registry.
        monotonic: the clock the check is measured on (the registry's).

    Returns:
        The check to update after each advisor response.
    """
    check = HandlerHealth(
        COMMUNICATE_WITH_ADVISOR, ADVISOR_HEALTH_TIMEOUT_S, ADVISOR_HEALTH_TIMEOUT_S, monotonic()
    )

    def problems() -> list[str]:
        why = check.failing(monotonic())
        return [] if why is None else [why]

    registry.add_source(problems)
    return check
