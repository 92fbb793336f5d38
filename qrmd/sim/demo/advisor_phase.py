"""The demo's sys-advisor phase: the advisor sizes the pools, drops, and comes back while the
kubelet keeps admitting pods (cpu-policy §11; the issue's deviation for a sick advisor).

The daemon restarted after the crash runs with ``--enable-cpu-advisor``; until this phase
nothing serves its advisor socket, so its link backs off and kubelet is served without it
(qrmd starts whatever the advisor does, beyond the reference). Then:

1. the simulated sys-advisor (``qrmd.sim.advisor``, real gRPC on a unix socket) starts: the
   link dials, checks its own GetCheckpoint socket, pushes every stored container and watches;
   the advisor's results resize ``share`` (``load`` CPUs per requested core) and ``reclaim``;
2. the advisor goes away (its stream breaks): new pods are admitted all the same, answered
   without it, and the link backs off;
3. a new advisor process comes up on the same socket: the link reconnects, pushes every stored
   container again (the new pods included), and the next result sizes the pools for them.

At ``--reference-version v0.5.47`` the simulator answers as a v0.5.47 sys-advisor: the link
asks it ``GetAdvice`` every ``--cpu-resource-plugin-advisor-interval`` (the demo's period)
instead of pushing and watching, each request carrying every stored container; its results
keep the NUMA nodes of dedicated pods apart, as v0.5.47 wants. When it comes back, the next
GetAdvice tells it every stored container, the new pods included: there is no push.

After each step the map shows what the kubelet sees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from qrmd.sim.advisor import LoadModel, SimNode, SysAdvisorSimulator
from qrmd.sim.kubelet import Pod, shared_pod

__all__ = ["ADVICE_INTERVAL", "ADVISOR_LOAD", "LATE_PODS", "AdvisorOptions", "AdvisorPhase"]

#: share's CPUs per requested core in the simulated advisor's results.
ADVISOR_LOAD = 2.0
#: How often the simulated advisor sends a result (sys-advisor's default is 5 s).
ADVISOR_PERIOD_S = 0.2
#: At v0.5.47, ``--cpu-resource-plugin-advisor-interval``: the same period.
ADVICE_INTERVAL = "200ms"
#: Pods admitted while the advisor is away.
LATE_PODS: tuple[Pod, ...] = (
    shared_pod("uid-report", "report", 3, namespace="demo"),
    shared_pod("uid-search", "search", 2, namespace="demo"),
)


@dataclass(frozen=True, slots=True)
class AdvisorOptions:
    """The sys-advisor link's ``qrmd run`` flags."""

    advisor_socket: Path
    plugin_socket: Path
    #: ``--cpu-resource-plugin-advisor-interval`` (v0.5.47 only; None: not given).
    advice_interval: str | None = None

    def argv(self) -> list[str]:
        interval = (
            []
            if self.advice_interval is None
            else ["--cpu-resource-plugin-advisor-interval", self.advice_interval]
        )
        return [
            "--enable-cpu-advisor",
            "--cpu-advisor-socket",
            str(self.advisor_socket),
            "--cpu-plugin-socket",
            str(self.plugin_socket),
            *interval,
        ]


#: Reconcile answers of the kubelet: pod uid → container → cpuset.
View = dict[str, dict[str, str]]


class AdvisorPhase:
    """Runs the three steps against the running daemon.

    Args:
        options: the sockets the daemon uses.
        numa_cpus: CPUs per NUMA node of the demo's machine.
        wait_view: reconcile passes until the condition holds and two passes agree (raises
            ``DemoError`` when it does not).
        admit: admits one pod through the kubelet, printing its line.
        show: prints the map for a view with a caption.
        say: prints one line.
        log_lines: the daemon's log lines holding a text.
        at_v0_5_47: the daemon runs at ``--reference-version v0.5.47``: a v0.5.47 advisor.
    """

    def __init__(
        self,
        options: AdvisorOptions,
        numa_cpus: dict[int, int],
        *,
        wait_view: Callable[[str, Callable[[View], bool]], View],
        admit: Callable[[Pod], object],
        show: Callable[[str, View], None],
        say: Callable[[str], None],
        log_lines: Callable[[str], list[str]],
        at_v0_5_47: bool = False,
    ) -> None:
        self.options = options
        self.at_v0_5_47 = at_v0_5_47
        self._node = SimNode(numa_cpus)
        self._wait_view = wait_view
        self._admit = admit
        self._show = show
        self._say = say
        self._log_lines = log_lines
        self.sim: SysAdvisorSimulator | None = None

    def run(self, shared: Sequence[Pod]) -> int:
        """The three steps; returns how many containers the advisor knows at the end.

        Args:
            shared: the shared_cores pods admitted so far.

        Raises:
            DemoError: a step was not reached (raised by ``wait_view`` or ``admit``).
        """
        uids = {pod.uid for pod in shared}
        # 1. The advisor comes up and sizes the pools.
        self._start_sim()
        self._say(f"  sys-advisor simulator up ({ADVISOR_LOAD:g} CPUs of share per shared core)")
        if self.at_v0_5_47:
            self._say(
                f"  v0.5.47: qrmd asks it GetAdvice every {ADVISOR_PERIOD_S:g} s with every "
                "stored container; its blocks keep dedicated NUMA nodes apart"
            )
        view = self._wait_view("the advisor's first pools", self._share_sized(uids))
        self._show(f"sys-advisor sized share to {self._planned()} CPUs", view)
        # 2. It drops; the kubelet keeps admitting.
        self.stop()
        self._say("  sys-advisor gone (its stream broke): admitting pods without it")
        for pod in LATE_PODS:
            self._admit(pod)
        uids |= {pod.uid for pod in LATE_PODS}
        # 3. It comes back: every stored container is pushed, the pools follow.
        pushed_before = len(self._log_lines("containers to sys-advisor"))
        self._start_sim()
        view = self._wait_view("the advisor's pools after it came back", self._share_sized(uids))
        for line in self._log_lines("containers to sys-advisor")[pushed_before:][-1:]:
            self._say(f"  [dim]daemon: {line.split(': ', 1)[-1].strip()}[/]")
        if self.at_v0_5_47 and self.sim is not None:
            self._say(
                f"  the next GetAdvice told it all {len(self.sim.containers())} stored "
                f"containers, no push (calls so far: {self.sim.stats.advice_calls})"
            )
        self._show(f"sys-advisor back: share sized to {self._planned()} CPUs, new pods in", view)
        return len(self.sim.containers()) if self.sim is not None else 0

    def stop(self) -> None:
        """Stop the simulator (safe to call twice)."""
        if self.sim is not None:
            self.sim.stop()
            self.sim = None

    def _start_sim(self) -> None:
        self.sim = SysAdvisorSimulator(
            str(self.options.advisor_socket),
            str(self.options.plugin_socket),
            self._node,
            LoadModel(load=ADVISOR_LOAD),
            ADVISOR_PERIOD_S,
            at_v0_5_47=self.at_v0_5_47,
        )
        self.sim.start()

    def _planned(self) -> int:
        """The simulator's share for what it was told: ceil(load × Σ shared requests)."""
        sim = self.sim
        if sim is None:
            return 0
        told = sim.containers().values()
        requested = sum(m.request_quantity for m in told if m.qos_level == "shared_cores")
        return math.ceil(ADVISOR_LOAD * requested)

    def _share_sized(self, uids: set[str]) -> Callable[[View], bool]:
        """Every shared pod of ``uids`` is in the view, all on one cpuset of the planned size."""

        def holds(view: View) -> bool:
            if not uids <= set(view):
                return False
            sets = {cpus for uid in uids for cpus in view[uid].values()}
            planned = self._planned()
            return len(sets) == 1 and planned > 0 and _count(next(iter(sets))) == planned

        return holds


def _count(cpuset: str) -> int:
    total = 0
    for part in filter(None, cpuset.split(",")):
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total
