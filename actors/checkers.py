"""The Checkers: the dynamic policy's periodic handlers on ticks (spec cpu-policy §12.1–§12.6;
DESIGN.md "Checkers").

Handlers, by their reference names (each is a check on ``/healthz`` with §12.3's rules, which
the composition root registers; the core reports "update by error" after every run):

* ``qrm_cpu_plugin_dynamic_clear_residual_state`` (``--residual-check-period``, §12.4): the
  state's pods that the pod list misses are counted (``policy.cpu.residual_check``: the one
  count; the Allocator keeps none). A round whose fetch succeeded with a *new*, non-empty
  listing counts; a failed fetch counts nothing and resets nothing, an empty listing
  likewise. When the count makes pods due, the evidence (the listing's fingerprint, size and
  time, every missing pod's sightings, the due pods) goes to the Allocator as
  ``RemoveResidualPods``: it removes the due pods in one decision whose journaled input is
  that evidence (``policy.cpu.residual_removal``). The Allocator is asked without waiting
  (``block=False``): its answer is collected at the next round, and its warnings (a pool
  adjustment that failed after a removal) make that round NotReady, as the reference's
  handler reports them; pods it kept (the advisor refused) are still due, so the next round
  sends them again;
* ``qrm_cpu_plugin_dynamic_check_cpuset`` (``--cpuset-check-period``, §12.5): each checked
  container's real cpuset, through the pod source's container ID and the ``CpusetReader``
  port, judged by ``policy.cpu.cpuset_check``. Detection only;
* ``qrm_cpu_plugin_dynamic_sync_cpu_idle`` (30 s, §12.6, with ``--enable-syncing-cpu-idle``):
  ``cpu.idle`` on the reclaimed pods' cgroup; no ``cpu.idle`` → one warning, Ready;
* ``heartbeat`` (30 s, §12.1 step 1): the time of the last beat, read by the metrics.

The core never fetches: it reads the pod source's latest snapshot. The publisher fetches once
per fetch period (the shorter of the two pod handlers' periods) for every reader and then tells
``PodListFetched(now)``, whether the fetch succeeded or not; on it, each pod handler whose
period has passed since its last run runs, so it always sees the answer of that very fetch
(one fetch per tick, shared by the handlers due at it). A handler runs on the first fetch at
or after its period (with the default 10 s and 30 s, exactly every third fetch).
A handler that raises is reported NotReady with the error and logged; the actor keeps
running.

``CheckersCore`` is the behaviour, driven directly by unit tests; ``CheckersActor`` is the
thin pykka shell; the messages and values are ``actors.checkers_messages``' (re-exported).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from actors.allocator_messages import RemoveResidualPods, ResidualRemoval
from actors.checkers_messages import (
    CHECK_CPUSET,
    CLEAR_RESIDUAL_STATE,
    HEARTBEAT,
    SYNC_CPU_IDLE,
    CheckerSettings,
    CheckersView,
    CheckerTick,
    GetCheckersView,
    PodListFetched,
)
from actors.log_text import utc
from actors.ports.actor_ref import ActorRef
from actors.ports.cgroups import CpuIdleError, CpuIdleSetter, CpusetReader, CpusetUnavailable
from actors.ports.pod_source import PodListSnapshot, PodSource
from policy.cpu.context import PolicyContext
from policy.cpu.cpuset_check import (
    CheckedContainer,
    CpusetReading,
    CpusetVerdict,
    containers_to_check,
    judge_cpusets,
)
from policy.cpu.residual_check import Listing, ResidualEvidence, observe_listing
from policy.state.sections import State

__all__ = [
    "CHECK_CPUSET",
    "CLEAR_RESIDUAL_STATE",
    "HEARTBEAT",
    "SYNC_CPU_IDLE",
    "CheckerSettings",
    "CheckerTick",
    "CheckersActor",
    "CheckersCore",
    "CheckersPorts",
    "CheckersView",
    "GetCheckersView",
    "PodListFetched",
]

_log = logging.getLogger("qrmd.checkers")


#: What the residual handler needs of the Allocator: an actor it can ``ask`` (with
#: ``block=False``, pykka answers a future).
ResidualRemover = ActorRef


@dataclass(frozen=True, slots=True)
class CheckersPorts:
    """The world as the Checkers see it.

    Attributes:
        pods: the node's pods (the publisher's latest snapshot).
        state: the latest durable state (the StateStore's published snapshot), or None.
        allocator: where due residual pods are sent (``RemoveResidualPods``).
        cpusets: where real cpusets are read.
        cpu_idle: where ``cpu.idle`` is written (None: syncCPUIdle not configured).
        report: ``(handler, error or None)`` after each run: the health check's update.
        fetch_error: the pod source's last fetch error, for messages (None: it succeeded).
    """

    pods: PodSource
    state: Callable[[], State | None]
    allocator: ResidualRemover
    cpusets: CpusetReader
    report: Callable[[str, str | None], None]
    cpu_idle: CpuIdleSetter | None = None
    fetch_error: Callable[[], str | None] = lambda: None


class CheckersCore:
    """Runs the periodic handlers; see the module docstring.

    Args:
        ports: the pod source, state, Allocator, cgroups and health report.
        ctx: the CPU policy's context (which containers §12.5 checks).
        settings: the handlers' settings.
    """

    def __init__(self, ports: CheckersPorts, ctx: PolicyContext, settings: CheckerSettings):
        self._ports = ports
        self._ctx = ctx
        self._settings = settings
        self._residual = ResidualEvidence()
        self._pending: tuple[Any, ResidualEvidence] | None = None
        self._removed = 0
        self._cpuset: CpusetVerdict | None = None
        self._heartbeat_at: float | None = None
        self._errors: dict[str, str | None] = {}
        self._warned_no_cpu_idle = False
        self._last_run: dict[str, float] = {}
        self.view = CheckersView()

    def handle(
        self, message: PodListFetched | CheckerTick | GetCheckersView
    ) -> CheckersView | None:
        """The Checkers' single dispatch.

        Raises:
            TypeError: not a Checkers message.
        """
        match message:
            case GetCheckersView():
                return self.view
            case PodListFetched(now):
                self.run_due(now)
                return None
            case CheckerTick(handler, now):
                self.run(handler, now)
                return None
        raise TypeError(f"the Checkers have no command {type(message).__name__}")

    def run_due(self, now: float) -> tuple[str, ...]:
        """After a fetch: run each pod handler whose period has passed since its last run.

        A tenth of the shorter period is allowed early, so tickers' jitter never skips a
        round that is due.

        Returns:
            The handlers run, in order.
        """
        settings = self._settings
        periods = {
            CLEAR_RESIDUAL_STATE: settings.residual_period_s,
            CHECK_CPUSET: settings.cpuset_period_s,
        }
        slack = 0.1 * min(periods.values())
        ran = []
        for handler, period in periods.items():
            last = self._last_run.get(handler)
            if last is None or now - last >= period - slack:
                self.run(handler, now)
                ran.append(handler)
        return tuple(ran)

    def run(self, handler: str, now: float) -> str | None:
        """Run one handler and report its outcome ("update by error", §12.3).

        Returns:
            The error reported, or None (Ready).

        Raises:
            ValueError: an unknown handler name.
        """
        handlers: dict[str, Callable[[float], str | None]] = {
            CLEAR_RESIDUAL_STATE: self.clear_residual_state,
            CHECK_CPUSET: self.check_cpuset,
            SYNC_CPU_IDLE: self.sync_cpu_idle,
            HEARTBEAT: self.heartbeat,
        }
        if handler not in handlers:
            raise ValueError(f"no periodic handler {handler!r} (known: {', '.join(handlers)})")
        self._last_run[handler] = now
        try:
            error = handlers[handler](now)
        except Exception as err:  # a bug in one round must not stop the handlers
            _log.exception("periodic handler %s failed", handler)
            error = f"{type(err).__name__}: {err}"
        if handler != HEARTBEAT:
            self._errors[handler] = error
            self._ports.report(handler, error)
        self._publish()
        return error

    def _publish(self) -> None:
        self.view = CheckersView(
            self._residual,
            self._removed,
            self._cpuset,
            self._heartbeat_at,
            tuple(sorted(self._errors.items())),
        )

    # -- clearResidualState (§12.4) ---------------------------------------------------------

    def _collect_removal(self) -> str | None:
        """The previous round's answer from the Allocator, if it came (never waits)."""
        if self._pending is None:
            return None
        future, evidence = self._pending
        try:
            answer = future.get(timeout=0)
        except pykka.Timeout:
            return "the previous residual round is still with the Allocator"
        except Exception as err:
            self._pending = None
            return f"the Allocator did not take the residual round: {err}"
        self._pending = None
        if isinstance(answer, ResidualRemoval):
            if answer.kept:
                _log.warning(
                    "residual pods kept: sys-advisor refused their removal (tried again next "
                    "round): %s",
                    ", ".join(answer.kept),
                )
            if answer.removed:
                self._removed += len(answer.removed)
                _log.info("residual pods removed: %s", _removal_words(answer.removed, evidence))
            if answer.warnings:
                return "; ".join(answer.warnings)
        return None

    def clear_residual_state(self, now: float) -> str | None:
        """One §12.4 round; returns the handler's error or None."""
        del now
        previous_error = self._collect_removal()
        if self._pending is not None:
            return previous_error  # the last round is not answered yet: send no other
        fetch_error = self._ports.fetch_error()
        if fetch_error is not None:
            # §12.4 step 1: this round's listing failed, so it is no round (an older listing
            # not counted yet is not this round's either).
            return f"cannot list the node's pods: {fetch_error}"
        snapshot = self._ports.pods.latest()
        state = self._ports.state()
        if snapshot is None or state is None:
            return self._no_listing("no pod list yet" if snapshot is None else "no state yet")
        listing = Listing(frozenset(snapshot.pods), snapshot.fetched_at)
        evidence = observe_listing(
            self._residual, state.cpu, listing, self._settings.residual_sightings
        )
        if not evidence.counted:
            if not listing.pod_uids:
                return previous_error  # an empty list: nothing to count, nothing removed
            return self._no_listing(f"no new pod list since {snapshot.fetched_at:.0f}")
        # The count is this checker's alone: adopted at once, whatever the Allocator answers
        # (pods it could not remove stay due and are sent again next round).
        self._residual = evidence
        if evidence.due:
            _log.info("residual pods due for removal: %s", ", ".join(evidence.due))
            future = self._ports.allocator.ask(RemoveResidualPods(evidence), block=False)
            self._pending = (future, evidence)
        return previous_error

    def _no_listing(self, why: str) -> str:
        fetch_error = self._ports.fetch_error()
        return f"{why}: {fetch_error}" if fetch_error else why

    # -- checkCPUSet (§12.5) ------------------------------------------------------------------

    def _read(self, container: CheckedContainer, snapshot: PodListSnapshot) -> CpusetReading:
        listed = snapshot.pods.get(container.pod_uid)
        if listed is None:
            return CpusetReading(container, None, "the pod source does not list the pod")
        container_id = listed.container_ids.get(container.container_name)
        if not container_id:
            return CpusetReading(container, None, "the pod source lists no container ID")
        try:
            return CpusetReading(
                container, self._ports.cpusets.cpuset(container.pod_uid, container_id)
            )
        except CpusetUnavailable as err:
            return CpusetReading(container, None, str(err))

    def check_cpuset(self, now: float) -> str | None:
        """One §12.5 round; returns the handler's error or None."""
        del now
        snapshot = self._ports.pods.latest()
        state = self._ports.state()
        if snapshot is None or state is None:
            return self._no_listing("no pod list yet" if snapshot is None else "no state yet")
        checked = containers_to_check(state.cpu, self._ctx)
        verdict = judge_cpusets([self._read(c, snapshot) for c in checked])
        self._cpuset = verdict
        for reading in verdict.unreadable:
            _log.warning("cpuset of %s unreadable: %s", reading.container.label, reading.error)
        for reading in verdict.invalid:
            _log.error(
                "cpuset of %s is %s, allocated %s",
                reading.container.label,
                reading.actual,
                reading.container.expected,
            )
        if verdict.overlap:
            _log.error("cpuset overlap: %s", verdict.health_error)
        return verdict.health_error

    # -- syncCPUIdle (§12.6) and the heartbeat (§12.1 step 1) ---------------------------------

    def sync_cpu_idle(self, now: float) -> str | None:
        """One §12.6 round; returns the handler's error or None."""
        del now
        setter = self._ports.cpu_idle
        if setter is None:
            return "syncCPUIdle has no cgroup writer"
        settings = self._settings
        try:
            written = setter.set_idle(settings.reclaim_cgroup_path, settings.enable_cpu_idle)
        except CpuIdleError as err:
            return str(err)
        if not written and not self._warned_no_cpu_idle:
            self._warned_no_cpu_idle = True
            _log.warning(
                "cpu.idle is not supported under %s: syncCPUIdle skips (as the reference)",
                settings.reclaim_cgroup_path,
            )
        return None

    def heartbeat(self, now: float) -> None:
        """Record the beat (the ``heartbeat`` gauge's time)."""
        self._heartbeat_at = now


def _removal_words(removed: tuple[str, ...], evidence: ResidualEvidence) -> str:
    """The removed pods with their evidence in words (the journal holds it as data)."""
    parts = []
    for uid in removed:
        seen = evidence.sightings.get(uid)
        if seen is None:
            parts.append(uid)
            continue
        parts.append(
            f"{uid} (missing from {seen.count} pod listings in a row over "
            f"{seen.last_at - seen.first_at:.1f} s, since {utc(seen.first_at)})"
        )
    words = ", ".join(parts)
    listing = evidence.listing
    if listing is not None:
        words += (
            f"; last listing {utc(listing.fetched_at)}: {listing.pods} "
            f"pod{'' if listing.pods == 1 else 's'}, fingerprint {listing.fingerprint}"
        )
    return words


class CheckersActor(pykka.ThreadingActor):
    """The pykka shell: one mailbox in front of a ``CheckersCore``; tickers tell it ticks."""

    def __init__(self, core: CheckersCore) -> None:
        super().__init__()
        self.core = core

    def on_receive(self, message: Any) -> Any:
        """Serve one message (see ``CheckersCore.handle``)."""
        return self.core.handle(message)
