"""The ``cpu_pressure`` section's events (katalyst-core v0.5.3 ``cpueviction/strategy``).

The CPU pressure actor commits one event per change of what the two eviction plugins
remember (``policy.state.pressure.history``), each journaled with the decision's inputs as
the record's cause, so ``qrmd journal show`` tells why a pod was offered for eviction:

* ``LoadSamplesCollected``: one load collection (``collectMetrics``): the rings of entries no
  longer in the CPU state are dropped (``expired``), then each sampled container and pool is
  pushed. A collection that changes nothing is not journaled.
* ``LoadHistoryCleared(reason)``: every ring dropped, because load eviction is disabled
  (``collectMetrics`` resets its history then) or the daemon restarted (the reference's
  rings live in memory only, so a restarted plugin starts empty; replaying old samples
  would judge a pool by load from before the restart).
* ``LoadEvictionPoolSet(pool)``: ``ThresholdMet`` set the eviction pool (HARD_MET) or cleared
  it (``""``, any other answer).
* ``LoadEvictionOffered(time, pool, pod_uids)``: ``GetTopEvictionPods`` offered these pods of
  the pool: the cool-down starts, the eviction pool is cleared.
* ``SuppressionTimersSet(since, evicted)``: ``GetEvictPods`` of the suppression plugin left
  these tolerance timers; ``evicted`` names the pods it offered, with the reason text.

Applying needs no policy code: each event says exactly what changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from policy.decision import Event
from policy.errors import StateError
from policy.state.pressure.history import ContainerKey, LoadSample, PressureHistory

__all__ = [
    "PRESSURE_EVENT_TYPES",
    "PRESSURE_SECTION",
    "LoadEvictionOffered",
    "LoadEvictionPoolSet",
    "LoadHistoryCleared",
    "LoadSamplesCollected",
    "PressureEvent",
    "SuppressionTimersSet",
    "apply_pressure_event",
]

PRESSURE_SECTION: Final = "cpu_pressure"


class PressureEvent(Event):
    """An event of the ``cpu_pressure`` section."""

    __slots__ = ()

    section: ClassVar[str] = PRESSURE_SECTION


@dataclass(frozen=True, slots=True)
class LoadSamplesCollected(PressureEvent):
    """One load collection.

    Attributes:
        time: the collection time (every sample's).
        ring_size: the size of a ring created by this collection.
        expired: the rings dropped: entries no longer in the CPU state, pools as ``(pool, "")``.
        containers: (pod UID, container, sample) for each sampled container.
        pools: (pool, sample) for each pool pushed, with its bounds.
    """

    time: float
    ring_size: int
    expired: tuple[ContainerKey, ...]
    containers: tuple[tuple[str, str, LoadSample], ...]
    pools: tuple[tuple[str, LoadSample], ...]


@dataclass(frozen=True, slots=True)
class LoadHistoryCleared(PressureEvent):
    """Every load ring dropped; ``reason`` says why (``disabled``, ``restart``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class LoadEvictionPoolSet(PressureEvent):
    """The eviction pool set by a HARD_MET, or cleared (``pool == ""``)."""

    pool: str


@dataclass(frozen=True, slots=True)
class LoadEvictionOffered(PressureEvent):
    """``GetTopEvictionPods`` offered ``pod_uids`` (in order) of ``pool`` at ``time``."""

    time: float
    pool: str
    pod_uids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SuppressionTimersSet(PressureEvent):
    """The suppression plugin's tolerance timers after one ``GetEvictPods``.

    Attributes:
        since: ``(namespace/name, since when)`` for each pod over its tolerance.
        evicted: ``(namespace/name, reason)`` for each pod offered, in offer order.
    """

    since: tuple[tuple[str, float], ...]
    evicted: tuple[tuple[str, str], ...] = ()


#: Every event type of the section, in the order the codec documents them.
PRESSURE_EVENT_TYPES: Final[tuple[type[PressureEvent], ...]] = (
    LoadSamplesCollected,
    LoadHistoryCleared,
    LoadEvictionPoolSet,
    LoadEvictionOffered,
    SuppressionTimersSet,
)


def apply_pressure_event(history: PressureHistory, event: Event) -> PressureHistory:
    """The section after one event; ``history`` is unchanged.

    Raises:
        StateError: not an event of this section, or a collection with a ring size below 1.
    """
    match event:
        case LoadSamplesCollected(ring_size=size, expired=gone, containers=cs, pools=ps):
            return history.with_load_samples(
                size, gone, {(pod, name): s for pod, name, s in cs}, dict(ps)
            )
        case LoadHistoryCleared():
            return history.without_load_history()
        case LoadEvictionPoolSet(pool=pool):
            return history.with_eviction_pool(pool)
        case LoadEvictionOffered(time=time):
            return history.with_eviction_offered(time)
        case SuppressionTimersSet(since=since):
            return history.with_tolerance_since(dict(since))
    raise StateError(f"{type(event).__name__} is not an event of the cpu_pressure section")
