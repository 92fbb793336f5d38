"""The demo's story, phase by phase, against the real ``qrmd run`` over real gRPC.

1. **Start and register**: ``qrmd run`` on the demo machine in a fresh state directory; the
   kubelet simulator finds its socket and registers it (wire.md §8.1).
2. **Admit**: the workload, in kubelet order with topology hints (wire.md §9.1). Shared pods
   start on every pooled CPU (ramp-up, cpu-policy §9.6).
3. **Ramp-up**: reconcile passes (wire.md §9.2) until shared containers have left the ramp-up
   cpuset for their pool and two passes agree.
4. **Delete**: some pods go: their containers stop, the kubelet's next garbage collection
   calls ``RemovePod`` (wire.md §9.3), and only then do they leave ``/pods`` (as a kubelet's
   pod manager keeps a deleted pod until it is cleaned up), so qrmd's residual-state checker
   never races the kubelet for them, whatever ``--residual-max-age``. One pod the kubelet
   forgets instead: no ``RemovePod`` ever comes, and the residual-state checker, reading the
   simulator's ``/pods``, removes it after ``--residual-max-age`` in one journaled decision
   (cpu-policy §12.4). Each removal is told only once the journal and the simulator's record
   of what it sent show it (``claims``).
4b. **v0.5.47 placement** (only with ``--reference-version v0.5.47``, once NUMA 1 is free):
   a dedicated pod asking for two NUMA nodes with its CPUs distributed evenly gets the same
   count on each, and a shared pod bound to a NUMA node joins that node's ``share-NUMA<n>``
   pool, which the other shared pods leave to it; each placement is told only once the
   journal's ``Allocate`` record and the reconcile answer bear it out (``claims``). Both pods
   are then deleted, so phases 5 and 6 run the same workload at either level.
5. **Memory balancer**: a NUMA node under read-latency pressure; the balancer's quiet round,
   its balance round (source, destinations, pods to migrate, eviction choice), its dry-run
   advice, and its eviction offer over the eviction plugin's socket (``balance_phase``).
5b. **CPU pressure eviction**: the reclaim pool, squeezed by the share pool's growth, holds
   fewer CPUs than the reclaimed pods' tolerance allows; ``cpu-pressure-suppression-plugin``
   offers ``batch-1`` for eviction with the reference's reason (``pressure_phase``).
6. **Crash and recover**: the daemon is killed with SIGKILL and started again on the same state
   directory; the kubelet re-registers it, and ``GetResourcesAllocation`` must answer exactly
   what it answered before the crash: every acknowledged allocation came back from the journal.
   The restarted daemon talks to sys-advisor, which is not up yet: kubelet is served anyway.
7. **sys-advisor**: the simulated advisor sizes the pools, drops, and comes back while the
   kubelet keeps admitting pods; at the reconnect every stored container is pushed again
   (``advisor_phase``). At v0.5.47 the simulator is a v0.5.47 sys-advisor, asked GetAdvice
   every period with every stored container.

After each phase the map and pool table of ``view`` show what the kubelet sees. Any failure,
a narrated claim the record does not bear out included, raises ``DemoError`` with one line
naming the phase and what went wrong; the daemon is killed first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from policy.balance.constants import EVICTION_PLUGIN_NAME
from policy.cpu.pressure import EVICTION_NAME_SUPPRESSION
from policy.cpu.reference import DEFAULT_REFERENCE_VERSION, is_v0_5_47
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.config import parse_duration
from qrmd.host.cpu_vendor import read_cpu_vendor
from qrmd.sim.demo.advisor_phase import ADVICE_INTERVAL, AdvisorOptions, AdvisorPhase
from qrmd.sim.demo.balance_phase import BalanceOutcome, BalancePhase, BalancePhaseError
from qrmd.sim.demo.claims import (
    ClaimError,
    Deletions,
    check_deletions,
    check_even_placement,
    check_snb_placement,
    journaled_causes,
    journaled_placement,
)
from qrmd.sim.demo.daemon_process import (
    BalancerOptions,
    CPUPressureOptions,
    DaemonError,
    DaemonOptions,
    DaemonProcess,
    PodSourceOptions,
)
from qrmd.sim.demo.invocation import qrmd_command
from qrmd.sim.demo.node_files import NumaMetricsCollector, write_container_cpusets
from qrmd.sim.demo.pressure_phase import PressureOutcome, PressurePhase, PressurePhaseError
from qrmd.sim.demo.settings import DemoError, DemoResult, DemoSettings
from qrmd.sim.demo.view import Snapshot, admission_line, render_phase, runtime_view, snapshot
from qrmd.sim.demo.workload import (
    DELETED,
    EVEN_NUMA_NUMBER,
    EVEN_POD,
    FORGOTTEN,
    PRESSURED_NUMA,
    RESERVED_CPU_CORES,
    SNB_POD,
    TOPOLOGY,
    WORKLOAD,
    is_snb,
)
from qrmd.sim.kubelet import (
    AdmissionError,
    Endpoint,
    KubeletSimulator,
    PluginCallError,
    Pod,
    RegistrationOutcome,
)
from qrmd.sim.kubelet.pods_endpoint import PodsEndpoint
from wire.eviction_client import EvictionManagerError

__all__ = ["DemoError", "DemoResult", "DemoSettings", "run_demo"]

PLUGIN = "cpu"
_Answer = TypeVar("_Answer")
SOCKET_NAME = "qrm_cpu_plugin_dynamic.sock"
EVICTION_SOCKET_NAME = f"{EVICTION_PLUGIN_NAME}.sock"
SUPPRESSION_SOCKET_NAME = f"{EVICTION_NAME_SUPPRESSION}.sock"
#: Short, so the demo waits it out: the reference's default is 5m.
SUPPRESSION_MIN_DURATION = "1s"
REGISTER_TIMEOUT_S = 20.0
WATCH_PERIOD_S = 0.2
POLL_S = 0.05
#: How long a daemon log line the demo shows may take to be written after what it tells.
LOG_WAIT_S = 3.0
#: The daemon's log line when it serves after recovery (``qrmd.daemon``).
SERVING_LINE = "qrmd serving:"
RESIDUAL_LINE = "residual pods removed:"
UNLISTED_CPUSET = "unreadable: the pod source does not list the pod"


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Demo:
    """One run of the story; the phases share the daemon, the simulator and the console."""

    def __init__(self, settings: DemoSettings, console: Console) -> None:
        self.settings = settings
        self.console = console
        self.topology: CPUTopology = parse_synthetic_spec(TOPOLOGY)
        self.work_dir = Path(tempfile.mkdtemp(prefix="qrmd-demo-", dir="/tmp"))
        self.state_dir = settings.state_dir or self.work_dir / "state"
        socket_dir = self.work_dir / "sock"
        self.socket_path = socket_dir / SOCKET_NAME
        metrics = f"127.0.0.1:{_free_loopback_port()}" if settings.metrics else "off"
        node = self.work_dir / "node"
        self.balancer = BalancerOptions(
            sync_period=settings.balance_period,
            metrics_file=node / "numa-metrics.json",
            memory_cgroup_root=node / "cgroup",
            plugin_registration_dir=self.work_dir / "plugin-socks",
        )
        self.cpu_pressure = CPUPressureOptions(
            min_tolerance_duration=SUPPRESSION_MIN_DURATION,
            plugin_registration_dir=self.balancer.plugin_registration_dir,
        )
        self.sim = KubeletSimulator(
            [socket_dir],
            self.topology.numa_nodes(),
            watch_period_s=WATCH_PERIOD_S,
            reconcile_period_s=settings.reconcile_period_s,
            on_registration=self._registration_seen,
        )
        # The kubelet's /pods on loopback, for qrmd's pod source (bound now: its port is a flag).
        self.pods = PodsEndpoint(self.sim.kubelet)
        self.pod_source = PodSourceOptions(
            self.pods.port, node / "cpuset", residual_max_age=settings.residual_max_age
        )
        self.collector = NumaMetricsCollector(
            self.balancer.metrics_file, len(self.topology.numa_nodes()), read_cpu_vendor()
        )
        self.daemon = DaemonProcess(
            DaemonOptions(
                state_dir=self.state_dir,
                socket_dir=socket_dir,
                topology=TOPOLOGY,
                reserved_cpu_cores=RESERVED_CPU_CORES,
                transition_period=settings.transition_period,
                metrics_address=metrics,
                balancer=self.balancer,
                cpu_pressure=self.cpu_pressure,
                pod_source=self.pod_source,
                reference_version=(
                    None
                    if settings.reference_version == DEFAULT_REFERENCE_VERSION
                    else settings.reference_version
                ),
            ),
            self.work_dir / "daemon.log",
        )
        at_v0_5_47 = is_v0_5_47(settings.reference_version)
        self.advisor = AdvisorPhase(
            AdvisorOptions(
                self.work_dir / "advisor" / "cpu_advisor.sock",
                self.work_dir / "advisor" / "cpu_plugin.sock",
                advice_interval=ADVICE_INTERVAL if at_v0_5_47 else None,
            ),
            {numa: len(self.topology.cpus_in_numa(numa)) for numa in self.topology.numa_nodes()},
            wait_view=self._wait_stable,
            admit=self._admit,
            show=self._show,
            say=self.console.print,
            log_lines=self.daemon.log_lines_matching,
            at_v0_5_47=at_v0_5_47,
        )
        self.admitted: list[Pod] = []

        self.qrmd = qrmd_command()  # how the user runs the commands the demo suggests
        self.started = time.monotonic()
        self.phase = "setting up"

    # -- output --------------------------------------------------------------------------------

    def _registration_seen(self, outcome: RegistrationOutcome) -> None:
        # Successes are shown by the phase that waits for them, in order; failures as they come.
        if not outcome.registered:
            self.console.print(f"  [dim]kubelet: registration attempt failed: {outcome.error}[/]")

    def _registered(self, endpoint: Endpoint) -> None:
        options = endpoint.options
        self.console.print(
            f"  kubelet registered plugin [bold]{endpoint.name}[/] from {endpoint.socket_path}: "
            "GetInfo → GetResourcePluginOptions "
            f"(topology alignment {options.with_topology_alignment}, reconcile "
            f"{options.need_reconcile}, pre-start {options.pre_start_required}) → "
            "NotifyRegistrationStatus(true)"
        )

    def _phase(self, number: int | str, title: str) -> None:
        self.phase = f"phase {number}, {title}"
        elapsed = time.monotonic() - self.started
        self.console.rule(f"[bold]{number}. {title}[/]  [dim](t={elapsed:4.1f} s)[/]")

    def _show(self, caption: str, view: Snapshot) -> None:
        self.console.print(render_phase(self.topology, self.admitted, view))
        self.console.print(f"  [dim]{caption}[/]")

    # -- waiting -------------------------------------------------------------------------------

    def _register(self, newer_than: int) -> Endpoint:
        deadline = time.monotonic() + REGISTER_TIMEOUT_S
        while True:
            self.daemon.check_alive()
            try:
                return self.sim.kubelet.endpoints.wait_registered(
                    PLUGIN, newer_than=newer_than, timeout_s=0.2
                )
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise DemoError(
                        f"the kubelet could not register qrmd within {REGISTER_TIMEOUT_S:g} s "
                        f"(socket {self.socket_path}); daemon log: {self.daemon.log_tail()}"
                    ) from None

    def _wait_stable(self, what: str, condition: Callable[[Snapshot], bool]) -> Snapshot:
        """Reconcile answers until ``condition`` holds and two passes in a row agree."""
        timeout_s = 6 * self.settings.reconcile_period_s + 10
        deadline = time.monotonic() + timeout_s
        previous: Snapshot | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DemoError(f"{what}: not reached within {timeout_s:g} s of reconcile passes")
            try:
                report = self.sim.wait_for_pass(self.sim.passes, timeout_s=remaining)
            except TimeoutError:
                continue
            self.daemon.check_alive()
            if PLUGIN not in report.answers:
                previous = None
                continue
            view = snapshot(report.answers[PLUGIN])
            if view == previous and condition(view):
                return view
            previous = view

    # -- the phases ----------------------------------------------------------------------------

    def start_and_register(self) -> Endpoint:
        self._phase(1, "start qrmd run and register it with the kubelet")
        try:
            self.balancer.memory_cgroup_root.mkdir(parents=True, exist_ok=True)
            # The collector writes before the daemon starts, so its first round has metrics.
            self.collector.write(self.collector.quiet())
        except OSError as exc:
            raise DemoError(f"the node's files: {exc}") from None
        self.pods.start()
        pid = self.daemon.start()
        self.console.print(f"  started (pid {pid}): qrmd {' '.join(self.daemon.argv[3:])}")
        self.sim.start()
        endpoint = self._register(newer_than=0)
        self._registered(endpoint)
        try:
            allocatable = endpoint.connection.get_topology_aware_allocatable_resources()
        except PluginCallError as exc:
            raise DemoError(f"GetTopologyAwareAllocatableResources: {exc}") from None
        per_numa, capacity = allocatable.get(PLUGIN, ((), ()))
        self.console.print(
            "  allocatable CPUs per NUMA node (GetTopologyAwareAllocatableResources), "
            "of its capacity: "
            + ", ".join(
                f"{a.node}: {a.value:g}/{c.value:g}"
                for a, c in zip(per_numa, capacity, strict=False)
            )
        )
        return endpoint

    def _admit(self, pod: Pod) -> dict[str, str]:
        kubelet = self.sim.kubelet
        try:
            granted = kubelet.admit(pod)
        except AdmissionError as exc:
            raise DemoError(f"admission: {exc}") from None
        self.admitted.append(pod)
        self._write_cpusets()
        cpusets = {name: res[PLUGIN].allocation_result for name, res in granted.items()}
        affinities = {
            s.container.name: kubelet.affinity(pod.uid, s.container.name)
            for s in pod.admission_order()
        }
        self.console.print(admission_line(pod, cpusets, affinities))
        return cpusets

    def admit(self) -> dict[str, dict[str, str]]:
        self._phase(2, "admit the workload (init containers first, then app containers)")
        kubelet = self.sim.kubelet
        first_cpusets = {pod.uid: self._admit(pod) for pod in WORKLOAD}
        view = runtime_view(kubelet.runtime_properties())
        self._show(
            "the cpusets Allocate answered: shared pods are ramping up on every pooled CPU", view
        )
        return first_cpusets

    def ramp_up(self, first: dict[str, dict[str, str]]) -> Snapshot:
        self._phase(3, f"ramp-up (transition period {self.settings.transition_period})")
        # A shared pod bound to a NUMA node joins its pool at once: it never ramps up.
        shared = [p for p in self.admitted if p.qos_level == "shared_cores" and not is_snb(p)]

        def moved(view: Snapshot) -> bool:
            return all(
                view.get(p.uid, {}).get(c) not in (None, cpus)
                for p in shared
                for c, cpus in first[p.uid].items()
            )

        view = self._wait_stable("ramp-up of the shared pods", moved)
        self._show(
            "GetResourcesAllocation after ramp-up: shared containers are in the share pool", view
        )
        return view

    def place_v0_5_47(self) -> Snapshot:
        """Phase 4b: the SNB pod and the evenly distributed dedicated pod, told as journaled,
        then deleted again (the module docstring).

        Returns:
            The reconcile answer once they are gone, for the phases after.
        """
        self._phase(
            "4b",
            "v0.5.47 placement: shared cores bound to a NUMA node, dedicated "
            "cores distributed evenly",
        )
        pods = (EVEN_POD, SNB_POD)
        journal_end = self._journal_end()
        granted = {pod.uid: self._admit(pod) for pod in pods}
        view = self._wait_stable(
            "the v0.5.47 pods' placement", lambda v: all(p.uid in v for p in pods)
        )
        self._show("GetResourcesAllocation with the v0.5.47 pods placed", view)
        snb_main, even_main = SNB_POD.main_container_name, EVEN_POD.main_container_name
        try:
            snb = journaled_placement(
                self.state_dir,
                journal_end,
                pod_uid=SNB_POD.uid,
                container=snb_main,
                answered=granted[SNB_POD.uid][snb_main],
                numa_of_cpus=self._per_numa,
            )
            numa = check_snb_placement(snb, SNB_POD.name)
            even = journaled_placement(
                self.state_dir,
                journal_end,
                pod_uid=EVEN_POD.uid,
                container=even_main,
                answered=granted[EVEN_POD.uid][even_main],
                numa_of_cpus=self._per_numa,
            )
            nodes = check_even_placement(even, EVEN_POD.name, EVEN_NUMA_NUMBER)
        except ClaimError as exc:
            raise DemoError(str(exc)) from None
        pool_now = view[SNB_POD.uid][snb_main]
        if set(self._per_numa(pool_now)) != {numa}:
            raise DemoError(
                f"GetResourcesAllocation gives {SNB_POD.name} CPUs {pool_now}, not all on "
                f"NUMA {numa}, its pool's node"
            )
        intruders = sorted(
            f"{p.name}/{container}"
            for p in self.admitted
            if p.qos_level == "shared_cores" and not is_snb(p)
            for container, cpus in view.get(p.uid, {}).items()
            if numa in self._per_numa(cpus)
        )
        if intruders:
            raise DemoError(
                f"shared containers without NUMA binding hold CPUs of NUMA {numa}, "
                f"{SNB_POD.name}'s node: {', '.join(intruders)}"
            )
        if view[EVEN_POD.uid][even_main] != even.cpus:
            raise DemoError(
                f"GetResourcesAllocation gives {EVEN_POD.name} CPUs "
                f"{view[EVEN_POD.uid][even_main]}, not the {even.cpus} it was allocated"
            )
        self.console.print(
            f"  {SNB_POD.name} (shared_cores, numa_binding) is bound to NUMA {numa}: pool "
            f"{snb.owner_pool}, annotation numa_hint={numa}, CPUs {pool_now} now "
            f"(journal seq {snb.seq}); the shared pods without binding leave NUMA {numa} to "
            "it",
            soft_wrap=True,
            markup=False,
        )
        spread = ", ".join(f"NUMA {n}: {even.per_numa[n]}" for n in nodes)
        self.console.print(
            f"  {EVEN_POD.name} (dedicated_cores, numa_number {EVEN_NUMA_NUMBER}, "
            f"distribute_evenly_across_numa) spans NUMA {', '.join(map(str, nodes))}: CPUs "
            f"{even.cpus}, {spread} (journal seq {even.seq})",
            soft_wrap=True,
            markup=False,
        )
        after = self._remove_again(pods)
        self._show("GetResourcesAllocation after deleting them", after)
        self.console.print(
            f"  {SNB_POD.name} and {EVEN_POD.name} deleted again (RemovePod): phases 5 and 6 run "
            "the same workload as at v0.5.3",
            soft_wrap=True,
        )
        return after

    def _per_numa(self, cpuset: str) -> dict[int, int]:
        """How many CPUs of ``cpuset`` each NUMA node holds (nodes holding none left out)."""
        cpus = CPUSet.parse(cpuset)
        counts = {
            n: cpus.intersection(self.topology.cpus_in_numa(n)).size()
            for n in self.topology.numa_nodes()
        }
        return {n: count for n, count in counts.items() if count}

    def _remove_again(self, pods: tuple[Pod, ...]) -> Snapshot:
        """Delete ``pods`` as phase 4 deletes its pods: stopped, RemovePod, gone from /pods."""
        kubelet = self.sim.kubelet
        sent_before = len(kubelet.removals_sent())
        uids = [p.uid for p in pods]
        for uid in uids:
            kubelet.stop_pod(uid)
        self.admitted = [p for p in self.admitted if p.uid not in uids]
        self._wait_removals_sent(uids, sent_before)
        for uid in uids:
            kubelet.delete_pod(uid)

        def gone(view: Snapshot) -> bool:
            held = kubelet.checkpointed_pods()
            return not any(uid in view or uid in held for uid in uids)

        view = self._wait_stable("removal of the v0.5.47 pods", gone)
        self._write_cpusets()
        return view

    def _write_cpusets(self) -> None:
        """The runtime's side: each container's cgroup holds the cpuset it was given."""
        try:
            write_container_cpusets(
                self.pod_source.cpuset_cgroup_root,
                self.admitted,
                self.sim.kubelet.runtime_properties(),
            )
        except OSError as exc:
            raise DemoError(f"the node's files: {exc}") from None

    def delete(self) -> Snapshot:
        names = [p.name for p in self.admitted if p.uid in DELETED]
        forgotten = next(p for p in self.admitted if p.uid == FORGOTTEN)
        self._phase(4, f"delete pods {', '.join(names)} (the kubelet forgets {forgotten.name}'s)")
        kubelet = self.sim.kubelet
        journal_end = self._journal_end()
        sent_before = len(kubelet.removals_sent())
        stopped = [uid for uid in DELETED if uid != FORGOTTEN]
        for uid in stopped:
            kubelet.stop_pod(uid)  # still listed until its RemovePod has gone
        kubelet.forget_pod(FORGOTTEN)  # gone without a RemovePod
        self.admitted = [p for p in self.admitted if p.uid not in DELETED]
        self._wait_removals_sent(stopped, sent_before)
        for uid in stopped:
            kubelet.delete_pod(uid)  # cleaned up: the pod leaves /pods

        def gone(view: Snapshot) -> bool:
            held = kubelet.checkpointed_pods()
            return not any(uid in view or uid in held for uid in DELETED)

        view = self._wait_stable("removal of the deleted pods", gone)
        self._write_cpusets()
        try:
            deletions = check_deletions(
                journaled_causes(self.state_dir, journal_end),
                kubelet.removals_sent()[sent_before:],
                stopped,
                FORGOTTEN,
            )
        except ClaimError as exc:
            raise DemoError(str(exc)) from None
        self._show(
            "CPUs back in the pools: RemovePod from the kubelet's garbage collection, and the "
            "residual-state checker for the forgotten pod",
            view,
        )
        self._tell_deletions(deletions, forgotten)
        return view

    def _wait_removals_sent(self, uids: list[str], sent_before: int) -> None:
        """Until the kubelet's garbage collection (each reconcile pass) has removed ``uids``."""
        timeout_s = 2 * self.settings.reconcile_period_s + 10
        deadline = time.monotonic() + timeout_s
        while True:
            sent = self.sim.kubelet.removals_sent()[sent_before:]
            missing = [u for u in uids if not any(s.pod_uid == u and s.error is None for s in sent)]
            if not missing:
                return
            self.daemon.check_alive()
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the kubelet's garbage collection sent no successful RemovePod for "
                    f"{', '.join(missing)} within {timeout_s:g} s"
                )
            time.sleep(POLL_S)

    def _journal_end(self) -> int:
        """The seq the next record will have (records before it are not looked at)."""
        try:
            causes = journaled_causes(self.state_dir)
        except ClaimError as exc:
            raise DemoError(str(exc)) from None
        return causes[-1].seq + 1 if causes else 1

    def _tell_deletions(self, deletions: Deletions, forgotten: Pod) -> None:
        """What the record showed: each removal with its journal seq, and the daemon's words."""
        names = {p.uid: p.name for p in WORKLOAD}
        removed = sorted(deletions.removed_by_kubelet.items(), key=lambda item: item[1])
        self.console.print(
            f"  kubelet deleted {', '.join(names.get(uid, uid) for uid, _ in removed)}: their "
            "containers stopped, its garbage collection sent RemovePod for each (journal seq "
            f"{', '.join(str(seq) for _, seq in removed)}), then they left /pods",
            soft_wrap=True,
            markup=False,
        )
        residual = deletions.residual
        plural = "" if residual.events == 1 else "s"
        self.console.print(
            f"  kubelet forgot {forgotten.name}: no RemovePod came; qrmd's residual-state "
            f"checker removed it once /pods had missed it for "
            f"{self.pod_source.residual_max_age}: journal seq {residual.seq}, cause "
            f"RemoveResidualPods [{', '.join(residual.residual_uids)}], {residual.events} "
            f"event{plural}",
            soft_wrap=True,
            markup=False,
        )
        # The checker logs the removal when it collects the answer, a round later.
        said = self._wait_log_line(RESIDUAL_LINE, FORGOTTEN)
        if said is not None:
            self._say_daemon(said)
        label = f"{forgotten.namespace}/{forgotten.name}/"
        unreadable = [
            line for line in self.daemon.log_lines_matching(UNLISTED_CPUSET) if f" {label}" in line
        ]
        if unreadable:
            self.console.print(
                f"  [dim]until then the cpuset checker could not read {forgotten.name}'s "
                f"cpuset, the pod source no longer listing it: {len(unreadable)} warning"
                f"{'' if len(unreadable) == 1 else 's'} in the daemon log[/]",
                soft_wrap=True,
            )
        see = f"{self.qrmd} journal show {self.state_dir} --pod {FORGOTTEN}"
        self.console.print(f"  [dim]see it: {escape(see)}[/]", soft_wrap=True)

    def _wait_log_line(self, needle: str, also: str, after: int = 0) -> str | None:
        """The newest daemon log line (of those past the first ``after``) holding both
        strings, waiting up to ``LOG_WAIT_S`` for it; None when none came."""
        deadline = time.monotonic() + LOG_WAIT_S
        while True:
            lines = [ln for ln in self.daemon.log_lines_matching(needle)[after:] if also in ln]
            if lines:
                return lines[-1]
            if time.monotonic() > deadline:
                return None
            time.sleep(POLL_S)

    def _say_daemon(self, line: str) -> None:
        """A daemon log line, without its timestamp and level (the words are the point)."""
        words = line.strip().split(" ", 2)
        said = words[2] if len(words) == 3 and words[1].isupper() else line.strip()
        self.console.print(f"  [dim]daemon: {escape(said)}[/]", soft_wrap=True)

    def _topology_aware(self, endpoint: Endpoint, view: Snapshot) -> dict[tuple[str, str], object]:
        """Each container's ``GetTopologyAwareResources`` answer (the pod-resources view)."""

        def ask(current: Endpoint) -> dict[tuple[str, str], object]:
            return {
                (uid, name): current.connection.get_topology_aware_resources(uid, name)
                for uid, containers in view.items()
                for name in containers
            }

        try:
            return self._on_newest(endpoint, ask)
        except PluginCallError as exc:
            raise DemoError(f"GetTopologyAwareResources: {exc}") from None

    def _on_newest(self, endpoint: Endpoint, call: Callable[[Endpoint], _Answer]) -> _Answer:
        """``call`` on ``endpoint``, once more on a newer registration if it failed meanwhile.

        A plugin may register again while the demo talks to it (qrmd re-creates its socket
        when kubelet's registration is slow, as on a loaded machine); the kubelet then closes
        the old endpoint's channel, so a call on it is CANCELLED. A real kubelet's next call
        goes to the newest endpoint: so does the demo's, rather than fail the phase.
        """
        try:
            return call(endpoint)
        except PluginCallError:
            newest = self.sim.kubelet.endpoints.running(PLUGIN)
            if newest is None or newest.generation <= endpoint.generation:
                raise
            return call(newest)

    def balance(self) -> BalanceOutcome:
        self._phase(5, f"memory balancer: NUMA {PRESSURED_NUMA} under read-latency pressure")
        phase = BalancePhase(
            self.console,
            self.state_dir,
            collector=self.collector,
            cgroup_root=self.balancer.memory_cgroup_root,
            eviction_socket=self.balancer.plugin_registration_dir / EVICTION_SOCKET_NAME,
            period_s=parse_duration(self.settings.balance_period),
            check_alive=self.daemon.check_alive,
            log_lines=self.daemon.log_lines_matching,
        )
        try:
            return phase.run(self.admitted, PRESSURED_NUMA)
        except (BalancePhaseError, EvictionManagerError) as exc:
            raise DemoError(f"{exc}; daemon log: {self.daemon.log_tail()}") from None
        except OSError as exc:
            raise DemoError(f"the node's files: {exc}") from None

    def pressure(self, view: Snapshot) -> PressureOutcome:
        self._phase("5b", "CPU pressure eviction: the reclaim pool squeezed")
        reclaimed = [p for p in self.admitted if p.qos_level == "reclaimed_cores"]
        reclaim_cpus = max(
            (CPUSet.parse(cpus).size() for p in reclaimed for cpus in view.get(p.uid, {}).values()),
            default=0,
        )
        phase = PressurePhase(
            self.console,
            self.cpu_pressure.plugin_registration_dir / SUPPRESSION_SOCKET_NAME,
            min_duration_s=parse_duration(SUPPRESSION_MIN_DURATION),
            check_alive=self.daemon.check_alive,
        )
        try:
            return phase.run(reclaimed, reclaim_cpus)
        except PressurePhaseError as exc:
            raise DemoError(f"{exc}; daemon log: {self.daemon.log_tail()}") from None

    def crash_and_recover(self, endpoint: Endpoint, before: Snapshot) -> tuple[int, bool]:
        self._phase(6, "kill qrmd with SIGKILL, restart it on the same journal")
        aware_before = self._topology_aware(endpoint, before)
        pid = self.daemon.kill()
        self.console.print(f"  killed qrmd run (pid {pid}) with SIGKILL")
        serving_before = len(self.daemon.log_lines_matching(SERVING_LINE))
        journaled = self._journal_end() - 1  # what recovery must come back to
        # From now on the daemon talks to sys-advisor (phase 7); none is up yet.
        self.advisor.options.advisor_socket.parent.mkdir(mode=0o700, exist_ok=True)
        self.daemon.options = dataclasses.replace(self.daemon.options, advisor=self.advisor.options)
        new_pid = self.daemon.start()
        self.console.print(
            f"  restarted qrmd run (pid {new_pid}) on {self.state_dir}, now with "
            "--enable-cpu-advisor: no sys-advisor is up yet, kubelet is served without it"
        )
        again = self._register(newer_than=endpoint.generation)
        self._registered(again)
        # The restarted daemon's own line (the kubelet may register it before it is logged).
        said = self._wait_log_line(SERVING_LINE, "recovered", after=serving_before)
        if said is None:
            raise DemoError(f"the restarted daemon did not log {SERVING_LINE!r}")
        if f"recovered seq {journaled} " not in said:
            raise DemoError(
                f"the journal held records up to seq {journaled}, but the restarted daemon "
                f"said: {said.strip()}"
            )
        self._say_daemon(said)
        try:
            after = snapshot(
                self._on_newest(again, lambda e: e.connection.get_resources_allocation())
            )
        except PluginCallError as exc:
            raise DemoError(f"after the restart: {exc}") from None
        recovered = sum(len(c) for c in after.values())
        identical = after == before
        aware_identical = self._topology_aware(again, after) == aware_before
        self._show("GetResourcesAllocation after the restart", after)
        self.console.print(
            f"  [bold]journal recovered {recovered} allocations, identical: "
            f"{'yes' if identical else 'no'}[/]"
        )
        self.console.print(
            "  GetTopologyAwareResources of every container, identical: "
            f"{'yes' if aware_identical else 'no'}"
        )
        if not identical:
            raise DemoError(f"recovery: allocations differ: {_first_difference(before, after)}")
        if not aware_identical:
            raise DemoError("recovery: GetTopologyAwareResources answers differ after the restart")
        return recovered, identical

    def advise(self) -> int:
        self._phase(7, "sys-advisor sizes the pools, drops, comes back")
        shared = [p for p in self.admitted if p.qos_level == "shared_cores"]
        told = self.advisor.run(shared)
        self.console.print(f"  [bold]sys-advisor knows {told} containers after the reconnect[/]")
        return told

    def finish(self) -> int | None:
        if self.settings.keep:
            return self.daemon.abandon()
        self.daemon.stop()
        return None


def _first_difference(before: Snapshot, after: Snapshot) -> str:
    for uid in sorted(set(before) | set(after)):
        b, a = before.get(uid, {}), after.get(uid, {})
        for container in sorted(set(b) | set(a)):
            if b.get(container) != a.get(container):
                return (
                    f"pod {uid} container {container}: before {b.get(container)!r}, "
                    f"after {a.get(container)!r}"
                )
    return "none"


def run_demo(settings: DemoSettings, console: Console) -> DemoResult:
    """Run the whole story (see the module docstring).

    Args:
        settings: how to run it.
        console: where to show it.

    Returns:
        Where the state, socket and log are, and what recovery showed.

    Raises:
        DemoError: a phase failed; the daemon has been killed.
    """
    demo = _Demo(settings, console)
    finished = False
    try:
        endpoint = demo.start_and_register()
        first = demo.admit()
        demo.ramp_up(first)
        before = demo.delete()
        if is_v0_5_47(settings.reference_version):
            before = demo.place_v0_5_47()
        balance = demo.balance()
        demo.pressure(before)
        recovered, identical = demo.crash_and_recover(endpoint, before)
        demo.advise()
        demo.sim.stop()
        kept = demo.finish()
        finished = True
    except (DaemonError, DemoError) as exc:
        pid = demo.daemon.pid
        killed = ""
        if pid is not None:
            with contextlib.suppress(DaemonError):  # raised when it had exited already
                demo.daemon.kill()
                killed = f"; killed qrmd run (pid {pid})"
        raise DemoError(f"{demo.phase}: {exc}{killed}") from None
    finally:
        demo.advisor.stop()
        demo.sim.stop()
        demo.pods.stop()
        if not finished:
            with contextlib.suppress(DaemonError):
                demo.daemon.kill()
    return DemoResult(
        work_dir=demo.work_dir,
        state_dir=demo.state_dir,
        socket_path=demo.socket_path,
        log_path=demo.daemon.log_path,
        metrics_address=demo.daemon.options.metrics_address,
        recovered=recovered,
        identical=identical,
        balance=balance,
        kept_pid=kept,
        elapsed_s=time.monotonic() - demo.started,
        qrmd_command=demo.qrmd,
    )
