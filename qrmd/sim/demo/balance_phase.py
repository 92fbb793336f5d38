"""The demo's memory-balancer phase: a NUMA node under latency pressure, seen from outside.

``qrmd run`` runs with ``--enable-memory-balancer`` from the start: a round every
``--qos-aware-sync-period``, latency and bandwidth from the demo's metrics file, the pods'
anonymous memory from the demo's cgroup tree (``qrmd.sim.demo.node_files``). The phase then:

1. writes the pods' cgroups and waits for a round journaled after that: every node quiet, so
   the round stores a record with nothing to balance (memory-balancer §7.4);
2. rewrites the metrics file with ``PRESSURED_NUMA`` above the force threshold and the highest
   bandwidth, and waits for the round that sees it: a force balance from that node, its
   destinations, the pods whose memory is to move and the reclaimed pod to evict (§7.6–§7.11);
   the same tick's ``GetAdvices`` takes the advice (§8), a dry run that qrmd logs and journals;
3. plays katalyst-agent's eviction manager on the plugin socket (§9): register, then
   ``GetEvictPods`` with the active pods, twice: the offer comes once;
4. writes quiet metrics again (the next rounds wait out the 30 s cool-down anyway, §6.2).

Rounds are read back from the journal as the daemon wrote them (``journal.read_records``
reads a live journal: a torn tail ends the reading quietly). Waiting is bounded; a timeout or a
failed RPC raises ``DemoError`` through the caller with one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from journal import JournalError, read_records
from policy.balance import BalanceInfo, MemoryAdvice, RoundInputs, advice_for
from policy.balance.constants import ADVICE_KEY, BALANCE_INTERVAL_NS
from policy.balance.events import BalanceAdviceTaken, BalanceRoundFailed, BalanceRoundRecorded
from policy.errors import CodecError
from policy.state.codec import decode_event
from qrmd.sim.demo.balance_view import Round, numa_table, pods_table, verdict
from qrmd.sim.demo.node_files import NumaMetricsCollector, NumaReading, write_pod_cgroups
from qrmd.sim.demo.workload import ANON_MEMORY
from qrmd.sim.kubelet import Pod
from wire.eviction_client import ActivePod, EvictionManager, Offer

__all__ = ["BalanceOutcome", "BalancePhase", "BalancePhaseError"]

POLL_S = 0.1
LOG_WAIT_S = 2.0
#: How the dry-run executor's log lines start (``qrmd.host.migrate``).
DRY_RUN_LINE = "numa balance dry run"


class BalancePhaseError(Exception):
    """A round the phase waits for did not come or failed, or the journal could not be read;
    the message says which."""


@dataclass(frozen=True, slots=True)
class BalanceOutcome:
    """What the phase showed."""

    quiet: Round
    pressure: Round
    advice: MemoryAdvice | None
    offers: tuple[Offer, ...]
    second_offers: tuple[Offer, ...]


class BalancePhase:
    """One run of the phase against a daemon started with the balancer's flags.

    Args:
        console: where to show it.
        state_dir: the daemon's journal.
        collector: the metrics file's writer.
        cgroup_root: the daemon's ``--memory-cgroup-root``.
        eviction_socket: the eviction plugin's socket.
        period_s: the daemon's ``--qos-aware-sync-period``.
        check_alive: raises if the daemon has exited (called while waiting).
        log_lines: the daemon log's lines containing a string.
        round_timeout_s: how long to wait for a round (default: 10 s and five periods).
        cool_down_s: the balancer's cool-down after an advice, added to the first wait.
    """

    def __init__(
        self,
        console: Console,
        state_dir: Path,
        *,
        collector: NumaMetricsCollector,
        cgroup_root: Path,
        eviction_socket: Path,
        period_s: float,
        check_alive: Callable[[], None],
        log_lines: Callable[[str], list[str]],
        round_timeout_s: float | None = None,
        cool_down_s: float = BALANCE_INTERVAL_NS / 1e9,
    ) -> None:
        self.console = console
        self.state_dir = state_dir
        self.collector = collector
        self.cgroup_root = cgroup_root
        self.eviction_socket = eviction_socket
        self.period_s = period_s
        self._check_alive = check_alive
        self._log_lines = log_lines
        # A round may take a few periods to appear, with the journal's fsyncs.
        self.timeout_s = round_timeout_s if round_timeout_s is not None else 10.0 + 5 * period_s
        self.cool_down_s = cool_down_s
        self._next_seq = 1
        self._pending: list[tuple[int, object]] = []  # read from the journal, not yet looked at
        self._latest_round: tuple[int, object] | None = None  # the newest round journaled

    # -- reading rounds from the journal ------------------------------------------------------

    def _events(self) -> list[tuple[int, object]]:
        """Events not looked at yet, with their record's seq: those left over from the last
        call, then those of the records appended since."""
        found, self._pending = self._pending, []
        try:
            for record in read_records(str(self.state_dir), from_seq=self._next_seq):
                self._next_seq = record.seq + 1
                found.extend((record.seq, decode_event(raw)) for raw in record.events)
        except (JournalError, CodecError) as err:
            raise BalancePhaseError(f"reading the journal {self.state_dir}: {err}") from None
        return found

    def _skip_to_end(self) -> None:
        # Quiet rounds that repeat the journaled outcome are not journaled one by one
        # (policy.balance.coalesce): the newest round journaled is the one the balancer
        # stands on, so it is kept.
        for seq, event in self._events():
            if isinstance(event, BalanceRoundRecorded | BalanceRoundFailed):
                self._latest_round = (seq, event)

    def _wait_round(
        self, what: str, wanted: Callable[[BalanceInfo], bool], extra_s: float = 0.0
    ) -> Round:
        timeout_s = self.timeout_s + extra_s
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive()
            events = self._events()
            for i, (seq, event) in enumerate(events):
                if isinstance(event, BalanceRoundFailed):
                    raise BalancePhaseError(f"{what}: round failed: {event.error}")
                if isinstance(event, BalanceRoundRecorded) and wanted(event.record):
                    # The same record may hold what follows (the advice taken on this tick).
                    self._pending = events[i + 1 :]
                    return Round(seq, event.record, RoundInputs.from_json(event.inputs))
            if time.monotonic() > deadline:
                raise BalancePhaseError(
                    f"{what}: no such round journaled within {timeout_s:g} s "
                    f"(rounds every {self.period_s:g} s)"
                )
            time.sleep(POLL_S)

    def _wait_advice_taken(self, record: BalanceInfo) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() <= deadline:
            self._check_alive()
            for _, event in self._events():
                if isinstance(event, BalanceAdviceTaken) and (
                    event.detect_time == record.detect_time
                ):
                    return
            time.sleep(POLL_S)
        raise BalancePhaseError(
            f"the advice of the round at {record.detect_time:.3f} was not taken within "
            f"{self.timeout_s:g} s"
        )

    # -- the phase ----------------------------------------------------------------------------

    def run(self, active: Sequence[Pod], pressured: int) -> BalanceOutcome:
        """Run the phase (module docstring) with the kubelet's active pods.

        Raises:
            BalancePhaseError: a round did not come in time or failed, or the journal
                cannot be read.
            EvictionManagerError: an eviction-plugin call failed.
            OSError: a node file cannot be written.
        """
        write_pod_cgroups(self.cgroup_root, active, ANON_MEMORY, self.collector.numa_count)
        self._say(
            f"kernel: memory.numa_stat of {len(active)} pod cgroups under {self.cgroup_root} "
            "(cgroup v2, cgroupfs driver)"
        )
        self._skip_to_end()
        quiet_readings = self.collector.quiet()
        quiet = self._quiet_round(quiet_readings)
        pressure_readings = self.collector.under_pressure(pressured)
        self.collector.write(pressure_readings)
        pressure = self._pressure_round(pressured, pressure_readings)
        self.console.print(numa_table(quiet_readings, pressure_readings, pressure.record))
        self.console.print(pods_table(pressure))
        advice = advice_for(pressure.record)
        self._show_advice(pressure.record, advice)
        offers, second = self._evict(active)
        self.collector.write(quiet_readings)
        self._say(
            "collector: every node quiet again (rounds now wait out the 30 s cool-down after an "
            "advice)"
        )
        return BalanceOutcome(quiet, pressure, advice, tuple(offers), tuple(second))

    def _quiet_round(self, readings: Mapping[int, NumaReading]) -> Round:
        config = self.collector.config
        latencies = sorted(r.read_latency for r in readings.values())
        vendor = self.collector.cpu_vendor or "unknown vendor"
        self._say(
            f"collector: every node quiet in {self.collector.path.name} (read latency "
            f"{latencies[0]:g}-{latencies[-1]:g}); thresholds on this CPU ({vendor}): grace "
            f"{config.grace_balance_read_latency_threshold:g}, force "
            f"{config.force_balance_read_latency_threshold:g}"
        )
        seq, event = self._latest_round or (0, None)
        if isinstance(event, BalanceRoundRecorded) and not event.record.need_balance:
            quiet = Round(seq, event.record, RoundInputs.from_json(event.inputs))
            self._say(f"round (journal seq {quiet.seq}): {self._verdict(quiet.record)}")
            return quiet
        # A journal kept from a run less than 30 s ago holds an advice still in its cool-down
        # (§6.2): no round is computed until it ends.
        quiet = self._wait_round(
            "a quiet round", lambda r: not r.need_balance, extra_s=self.cool_down_s
        )
        self._say(f"round (journal seq {quiet.seq}): {self._verdict(quiet.record)}")
        return quiet

    def _pressure_round(self, pressured: int, readings: Mapping[int, NumaReading]) -> Round:
        hot = readings[pressured]
        self._say(
            f"collector: NUMA {pressured} under pressure in {self.collector.path.name}: read "
            f"latency {hot.read_latency:g} (force threshold "
            f"{self.collector.config.force_balance_read_latency_threshold:g}), bandwidth "
            f"{hot.bandwidth:g}, the highest"
        )
        pressure = self._wait_round(
            f"a balance round with NUMA {pressured} as the source",
            lambda r: (
                r.need_balance and r.source_numa is not None and r.source_numa.numa_id == pressured
            ),
        )
        self._say(f"round (journal seq {pressure.seq}): {self._verdict(pressure.record)}")
        return pressure

    def _verdict(self, record: BalanceInfo) -> str:
        return verdict(record, self.collector.config.grace_balance_read_latency_threshold)

    def _show_advice(self, record: BalanceInfo, advice: MemoryAdvice | None) -> None:
        if advice is None:
            self._say("no advice: nothing to migrate this round")
            return
        self._wait_advice_taken(record)
        self._say(
            f"advice taken by the same tick's GetAdvices ({ADVICE_KEY}); a dry run "
            "(no --memory-balance-execute): logged and journaled, nothing moved"
        )
        self.console.print(f"    {advice.to_json_text()}", soft_wrap=True, markup=False)
        self._say("what qrmd would migrate (its daemon log):")
        # The executor logs one line per pod as it takes the advice; give the log a moment.
        pods = len({c.pod_uid for c in advice.migrate_containers})
        deadline = time.monotonic() + LOG_WAIT_S
        while len(lines := self._log_lines(DRY_RUN_LINE)) < pods and time.monotonic() < deadline:
            time.sleep(POLL_S)
        for line in lines[-pods:]:
            said = line[line.index(DRY_RUN_LINE) :].strip()
            self.console.print(f"    daemon: {said}", style="dim", soft_wrap=True, markup=False)

    def _evict(self, pods: Sequence[Pod]) -> tuple[list[Offer], list[Offer]]:
        active = [
            ActivePod(
                p.namespace, p.name, p.uid, p.native_qos_class, tuple(sorted(p.labels.items()))
            )
            for p in pods
        ]
        manager = EvictionManager(self.eviction_socket)
        try:
            info = manager.register()
            self._say(
                f"katalyst-agent: registered {info.type} [bold]{info.name}[/] "
                f"({', '.join(info.versions)}) from {self.eviction_socket}: GetInfo → "
                f"GetToken ({info.token!r}) → NotifyRegistrationStatus(true)"
            )
            offers = manager.get_evict_pods(active)
            for offer in offers:
                self._say(
                    f"GetEvictPods({len(active)} active pods) → [bold]{offer.namespace}/"
                    f"{offer.name}[/] (force {str(offer.force_evict).lower()}, plugin "
                    f"{offer.plugin_name}): {offer.reason}"
                )
            if not offers:
                self._say(f"GetEvictPods({len(active)} active pods) → no pod")
            second = manager.get_evict_pods(active)
            self._say(
                "GetEvictPods again → "
                + (
                    ", ".join(f"{o.namespace}/{o.name}" for o in second)
                    if second
                    else "no pod (a round's eviction is offered once)"
                )
            )
        finally:
            manager.close()
        return offers, second

    def _say(self, line: str) -> None:
        self.console.print(f"  {line}", soft_wrap=True)
