"""The simulated kubelet: pods of every QoS level through hints → Allocate → listing → RemovePod.

Each call goes through both halves of the wire conversion (``wire.loopback``): kubelet's plain
request becomes the protobuf bytes kubelet sends, the server's row converts them to the
Allocator's command, the Allocator is asked (not blocking: many calls may be in flight, and
the scheduler decides when each is served), and its reply travels back the same way to the
plain value kubelet's client reads. Errors map to gRPC codes as the server maps them
(``wire.errors.code_for``).

As the real kubelet (wire.md §9; the kubelet fork's ``qosresourcemanager``): every call has a
deadline (10 s); a call that fails with UNAVAILABLE or DEADLINE_EXCEEDED, or whose answer never
came, is sent again later, unchanged (every call is idempotent); a refused Allocate fails the
pod's admission and kubelet removes the pod; a restarted plugin is registered again and asked
for its options and its allocations.

A pod has what the seed gives it: init containers, its main container and sidecars (the
``SIDECAR`` type: every app container but the main one). Admission goes one container at a
time, init containers first, then the app containers in their spec order (the main one first,
or, as the seed says, a sidecar before it, as a pod naming its main container by annotation
has): hints, then Allocate, for each. An Allocate answer without a cpu allocation (an init
container, a dedicated pod's sidecar admitted before its main container, spec cpu-policy §7.1
step 5 and §7.5.2 step 1) records nothing; the reconcile then finds an app container the listing
does not name and Allocates it again (``reconcileState``'s re-allocation). Init containers are
never reconciled.

At Katalyst v0.5.47 (``at_v0_5_47``) the pods also come in that release's shapes, with the
annotations its tests use (tests/wire/test_v0547_*.py): a shared pod bound to one NUMA node
(SNB: ``memory_enhancement`` ``numa_binding``), a dedicated pod with allocation options in its
``cpu_enhancement`` (``numa_ids``, ``numa_number`` with ``distribute_evenly_across_numa``,
``full_pcpus_pairing``, ``align_by_socket``), and, with ``--enable-reclaim-numa-binding``, a
reclaimed pod bound to one NUMA node (RNB). The draws are made only at v0.5.47, so a v0.5.3
seed makes the choices it always made.

What kubelet was told is kept for the invariants: the last answer per container, the pods
whose removal was acknowledged, and every pod a removal was ever sent for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from random import Random
from typing import Any

import grpc

from policy.cpu.qos import CPU_ENHANCEMENT_KEY, MEMORY_ENHANCEMENT_KEY, QOS_LEVEL_KEY
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from policy.topology.cpuset import CPUSet
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import SimFuture
from wire.errors import code_for
from wire.loopback import LoopbackPlugin

__all__ = ["Answer", "KubeletPeer", "SimContainer", "SimPod"]

CPU = "cpu"
RECLAIMED_MILLICPU = "resource.katalyst.kubewharf.io/reclaimed_millicpu"
#: QoS levels and their share of new pods.
KINDS = ("shared", "shared", "shared", "dedicated", "dedicated_exclusive", "reclaimed")
#: A v0.5.47 dedicated pod's allocation options (``cpu_enhancement``), one drawn per pod that
#: has any (docs/reference-levels-dedicated.md; the reference's TestGetTopologyHints cases).
DEDICATED_OPTIONS: tuple[dict[str, str], ...] = (
    {"katalyst.kubewharf.io/numa_ids": "1"},
    {"katalyst.kubewharf.io/numa_ids": "2-3"},
    {"distribute_evenly_across_numa": "true", "katalyst.kubewharf.io/numa_number": "2"},
    {"full_pcpus_pairing": "true"},
    {"align_by_socket": "true"},
)
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
#: The RPCs kubelet makes; ``policy.cpu.commands``' class names are the RPCs' names.
RPCS = frozenset(
    (
        "GetTopologyHints",
        "Allocate",
        "RemovePod",
        "GetResourcesAllocation",
        "GetResourcePluginOptions",
    )
)


@dataclass(frozen=True, slots=True)
class SimContainer:
    """One container of a simulated pod: its name, type, index in its spec list, request."""

    name: str
    type: ContainerType
    index: int
    quantity: float

    @property
    def is_app(self) -> bool:
        """A main container or a sidecar: listed, reconciled, given a cgroup."""
        return self.type is not ContainerType.INIT


@dataclass(slots=True)
class SimPod:
    """One pod, as kubelet tracks it.

    ``phase``: ``hints`` → ``allocate`` (for each container in ``containers``' order, the one
    at ``cursor``) → ``running`` → ``removing`` → ``gone``.

    Attributes:
        containers: admission order: init containers, then app containers in spec order.
        hints: the hint chosen for each container (None: no preference).
        realloc: app containers a listing left out, to Allocate again (the reconcile's rule).
        admitted: app container → how many answers kubelet had read when its Allocate was
            answered (it has a container ID from then on).
    """

    uid: str
    kind: str
    containers: tuple[SimContainer, ...]
    phase: str = "hints"
    cursor: int = 0
    hints: dict[str, TopologyHint | None] = field(default_factory=dict)
    realloc: list[str] = field(default_factory=list)
    admitted: dict[str, int] = field(default_factory=dict)
    #: v0.5.47 shapes: NUMA binding of a shared (SNB) or reclaimed (RNB) pod, and a dedicated
    #: pod's allocation options (``cpu_enhancement``; empty: none).
    numa_binding: bool = False
    options: dict[str, str] = field(default_factory=dict)

    def annotations(self) -> dict[str, str]:
        """The pod's annotations (the fork copies them onto every container's request)."""
        annotations = {QOS_LEVEL_KEY: _qos(self.kind)}
        if self.kind.startswith("dedicated") or self.numa_binding:
            enhancement = {"numa_binding": "true"}
            if self.kind == "dedicated_exclusive":
                enhancement["numa_exclusive"] = "true"
            annotations[MEMORY_ENHANCEMENT_KEY] = json.dumps(enhancement, separators=(",", ":"))
        if self.options:
            annotations[CPU_ENHANCEMENT_KEY] = json.dumps(self.options, separators=(",", ":"))
        return annotations

    @property
    def current(self) -> SimContainer:
        """The container being admitted (or re-allocated)."""
        if self.phase == "running" and self.realloc:
            return self.container(self.realloc[0])
        return self.containers[self.cursor]

    @property
    def app_containers(self) -> tuple[SimContainer, ...]:
        return tuple(c for c in self.containers if c.is_app)

    def container(self, name: str) -> SimContainer:
        return next(c for c in self.containers if c.name == name)

    def request(self, container: SimContainer, with_hint: bool) -> ResourceRequest:
        """The ``ResourceRequest`` of GetTopologyHints (no hint) or Allocate (the chosen one)
        for ``container``; the pod's annotations go with every container's (the fork copies
        the pod's)."""
        annotations = self.annotations()
        requested = RECLAIMED_MILLICPU if self.kind == "reclaimed" else CPU
        return ResourceRequest(
            pod_uid=self.uid,
            pod_namespace="sim",
            pod_name=f"pod-{self.uid}",
            container_name=container.name,
            container_type=container.type,
            container_index=container.index,
            resource_name=CPU,
            resource_requests={requested: container.quantity},
            pod_role="",
            pod_type="",
            hint=self.hints.get(container.name) if with_hint else None,
            labels=None,
            annotations=annotations,
            native_qos_class="Guaranteed" if self.kind.startswith("dedicated") else "Burstable",
        )


def _qos(kind: str) -> str:
    if kind.startswith("dedicated"):
        return "dedicated_cores"
    return f"{kind}_cores"


@dataclass(frozen=True, slots=True)
class Answer:
    """What kubelet was last told of a container, and the durable state it was told from.

    Attributes:
        cpus: the cpuset (``allocation_result``).
        rpc: the call that told it.
        seq: the StateStore's seq when the answer was given.
        state: the durable state then (the witness), or None when the node was down.
        before: for an Allocate, the state the Allocator began serving it from (None: not
            known).
    """

    cpus: str
    rpc: str
    seq: int
    state: Any
    #: For an Allocate: the durable state the Allocator held as it began serving it.
    before: Any = None


@dataclass(slots=True)
class Call:
    """A call in flight."""

    rpc: str
    pod: SimPod | None
    future: SimFuture
    deadline: float
    sent_seq: int = -1
    container: str = ""
    #: How many answers kubelet had read when it sent the call.
    answers_read: int = 0


@dataclass(slots=True)
class KubeletPeer:
    """The simulated kubelet (module docstring).

    Args:
        rng: the seed's generator.
        clock: the virtual clock (deadlines).
        max_pods: pods alive at once.
    """

    rng: Random
    clock: VirtualClock
    max_pods: int = 12
    deadline_s: float = 10.0
    pods: dict[str, SimPod] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    answers: dict[tuple[str, str], Answer] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    removal_sent: set[str] = field(default_factory=set)
    acked_seq: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    #: App containers a listing left out, Allocated again (the reconcile's re-allocation).
    reallocations: int = 0
    answers_read: int = 0
    _next_uid: int = 0
    #: Set when an answer disagreed with the state it was given from: (rpc, message).
    disagreements: list[str] = field(default_factory=list)
    #: Answers told since the invariants last looked.
    fresh: list[tuple[tuple[str, str], Answer]] = field(default_factory=list)
    plugin: LoopbackPlugin = field(default_factory=LoopbackPlugin.new)
    #: Draw pods in Katalyst v0.5.47's shapes too (module docstring).
    at_v0_5_47: bool = False
    #: With ``--enable-reclaim-numa-binding``: reclaimed pods bound to one NUMA node too.
    reclaim_numa_binding: bool = False
    #: The durable seq now (-1 while qrmd is down): a listing answered with no commit since
    #: it was sent must agree with the state exactly.
    seq_now: Callable[[], int] = lambda: -1

    # -- acting -------------------------------------------------------------------------------

    def act(self, allocator: Any) -> str:
        """Do one thing a kubelet does, the seed choosing; returns what, for the trace.

        Args:
            allocator: the Allocator's ref, or None while the plugin is down.
        """
        busy = {c.pod.uid for c in self.calls if c.pod is not None}
        live = [p for p in self.pods.values() if p.phase != "gone" and p.uid not in busy]
        plugin = self.plugin
        roll = self.rng.random()
        if roll < 0.12 and not any(c.rpc == "GetResourcesAllocation" for c in self.calls):
            return self._send(allocator, None, plugin.resources_allocation())
        if roll < 0.30 and len(self.pods) < self.max_pods:
            pod = self._new_pod()
            container = pod.current
            command = plugin.hints(pod.request(container, with_hint=False))
            return self._send(allocator, pod, command, container.name)
        if not live:
            return "kubelet idle"
        pod = live[self.rng.randrange(len(live))]
        if pod.phase == "running":
            if pod.realloc:
                # The reconcile's re-allocation: the same request as at admission.
                container = pod.current
                command = plugin.allocate(pod.request(container, with_hint=True))
                return self._send(allocator, pod, command, container.name)
            if self.rng.random() >= 0.35:
                return self._send(allocator, None, plugin.resources_allocation())
            pod.phase = "removing"
        if pod.phase == "hints":
            container = pod.current
            command = plugin.hints(pod.request(container, with_hint=False))
            return self._send(allocator, pod, command, container.name)
        if pod.phase == "allocate":
            container = pod.current
            command = plugin.allocate(pod.request(container, with_hint=True))
            return self._send(allocator, pod, command, container.name)
        self.removal_sent.add(pod.uid)
        return self._send(allocator, pod, plugin.remove_pod(pod.uid))

    def restarted(self, allocator: Any) -> str:
        """The plugin registered again: kubelet asks its options and its allocations."""
        self.plugin = LoopbackPlugin.new()
        self._send(allocator, None, self.plugin.options())
        return self._send(allocator, None, self.plugin.resources_allocation())

    def connection_lost(self) -> None:
        """The plugin's process died: every call in flight fails with UNAVAILABLE."""
        for call in self.calls:
            self._count(f"{call.rpc}:UNAVAILABLE")
        self.calls.clear()

    # -- answers ------------------------------------------------------------------------------

    def collect(self) -> list[str]:
        """Read every answer that came (or whose deadline passed), in the order sent."""
        now = self.clock.monotonic()
        out = []
        still = []
        for call in self.calls:
            future = call.future
            if not future.done:
                if now >= call.deadline:
                    out.append(self._failed(call, grpc.StatusCode.DEADLINE_EXCEEDED))
                else:
                    still.append(call)
                continue
            assert future.resolved_at is not None
            if future.resolved_at > call.deadline:
                out.append(self._failed(call, grpc.StatusCode.DEADLINE_EXCEEDED))
            elif future.exception is not None:
                out.append(self._failed(call, code_for(future.exception)))
            else:
                out.append(self._answered(call))
        self.calls = still
        return out

    def _send(self, allocator: Any, pod: SimPod | None, command: Any, container: str = "") -> str:
        rpc = type(command).__name__
        assert rpc in RPCS, rpc
        who = f" {pod.uid}" if pod is not None else ""
        who += f"/{container}" if container else ""
        if allocator is None:
            self._count(f"{rpc}:UNAVAILABLE")
            return f"kubelet {rpc}{who}: plugin down"
        try:
            future = allocator.ask(command, block=False)
        except Exception as err:  # the Allocator is restarting: the server answers at once
            self._count(f"{rpc}:{code_for(err).name}")
            return f"kubelet {rpc}{who}: {code_for(err).name}"
        deadline = self.clock.monotonic() + self.deadline_s
        call = Call(rpc, pod, future, deadline, self.seq_now(), container, self.answers_read)
        self.calls.append(call)
        return f"kubelet sends {rpc}{who}"

    def _failed(self, call: Call, code: grpc.StatusCode) -> str:
        self._count(f"{call.rpc}:{code.name}")
        pod = call.pod
        admitting = call.rpc in ("GetTopologyHints", "Allocate")
        if pod is not None and admitting and pod.phase != "running" and code not in RETRYABLE:
            # Admission failed: kubelet rejects the pod and removes what the plugin holds.
            pod.phase = "removing"
        if pod is not None and call.rpc == "Allocate" and code not in RETRYABLE:
            # A refused Allocate removes the container from the plugin (cpu-policy §7.2, even
            # one it held: a re-allocation that no longer fits); kubelet's cache is no witness.
            self.answers.pop((pod.uid, call.container), None)
        # A failed re-allocation is logged and tried again at the next reconcile.
        return f"kubelet {call.rpc} {_who(call)} failed {code.name}"

    def _answered(self, call: Call) -> str:
        self._count(f"{call.rpc}:OK")
        self.answers_read += 1
        future = call.future
        witness = future.witness
        seq, state = witness if witness is not None else (0, None)
        self.acked_seq = max(self.acked_seq, seq)
        answer = self.plugin.answer(call.rpc, future.value)
        pod = call.pod
        if call.rpc == "GetTopologyHints":
            assert pod is not None
            hints = list(answer or ())
            preferred = [h for h in hints if h.preferred] or hints
            # No hints (``{"cpu": null}``: no preference) leaves the hint unset.
            chosen = preferred[self.rng.randrange(len(preferred))] if preferred else None
            pod.hints[call.container] = chosen
            if pod.phase == "hints":
                pod.phase = "allocate"
        elif call.rpc == "Allocate":
            assert pod is not None
            info = (answer or {}).get(CPU)
            if info is not None:
                key = (pod.uid, call.container)
                self._told(key, info.allocation_result, call.rpc, seq, state, before=future.before)
            self._admitted(pod, call.container)
        elif call.rpc == "RemovePod":
            assert pod is not None
            pod.phase = "gone"
            self.removed.add(pod.uid)
            for key in [k for k in self.answers if k[0] == pod.uid]:
                del self.answers[key]
            del self.pods[pod.uid]
        elif call.rpc == "GetResourcesAllocation":
            self._listed(answer, seq, state, settled=seq != call.sent_seq, sent=call.answers_read)
        return f"kubelet {call.rpc} {_who(call)} ok"

    def _admitted(self, pod: SimPod, container: str) -> None:
        """An Allocate answered: the next container's hints, or the pod runs."""
        pod.admitted.setdefault(container, self.answers_read)
        if pod.phase == "running":
            if container in pod.realloc:
                pod.realloc.remove(container)
            return
        if pod.phase != "allocate" or pod.current.name != container:
            return  # a late answer to a re-send: its container moved on already
        pod.cursor += 1
        pod.phase = "running" if pod.cursor == len(pod.containers) else "hints"

    def _told(
        self,
        key: tuple[str, str],
        cpus: str,
        rpc: str,
        seq: int,
        state: Any,
        *,
        before: Any = None,
    ) -> None:
        answer = Answer(cpus, rpc, seq, state, before)
        self.answers[key] = answer
        self.fresh.append((key, answer))

    def _listed(
        self, listing: Any, seq: int, state: Any, *, settled: bool, sent: int | None = None
    ) -> None:
        """A listing: kept as the containers' last answers, and checked against the state.

        Its containers must be the state's. Its cpusets must be the state's too, unless the
        listing itself (or anything since it was sent) committed: the call that settles a
        ramp-up answers the cpuset from before the adjustment (spec cpu-policy §15.6), and the
        next one the new one.
        """
        for uid, containers in listing.items():
            for container, resources in containers.items():
                info = resources.get(CPU)
                if info is not None and uid in self.pods:
                    key = (uid, container)
                    self._told(key, info.allocation_result, "GetResourcesAllocation", seq, state)
        for pod in self.pods.values():
            if pod.phase != "running":
                continue
            listed_here = listing.get(pod.uid, {})
            for container in pod.app_containers:
                # Only a container that had started when the listing was asked for: one
                # admitted while the call was out was not the plugin's to list yet.
                started = pod.admitted.get(container.name)
                if started is None or (sent is not None and started >= sent):
                    continue
                if container.name not in listed_here and container.name not in pod.realloc:
                    # reconcileState: an app container the plugin has no record of loses its
                    # cached allocation and is Allocated again.
                    pod.realloc.append(container.name)
                    self.reallocations += 1
                    self.answers.pop((pod.uid, container.name), None)
        if state is None:
            return
        listed = {(u, c) for u, containers in listing.items() for c in containers}
        held = {(e.pod_uid, e.container_name) for e in state.cpu.entries()}
        if listed != held:
            self.disagreements.append(
                f"GetResourcesAllocation at seq {seq} listed {sorted(listed)} but the state "
                f"holds {sorted(held)}"
            )
            return
        if settled:
            return
        cpu = state.cpu
        for uid, containers in sorted(listing.items()):
            for container, resources in sorted(containers.items()):
                info = resources.get(CPU)
                if info is None:
                    continue
                held_cpus, _ = cpu.placement_cpus(cpu.require_entry(uid, container).placement)
                if CPUSet.parse(info.allocation_result) != held_cpus:
                    self.disagreements.append(
                        f"GetResourcesAllocation at seq {seq} (nothing committed since it was "
                        f"sent) told {uid}/{container} {info.allocation_result}; the state "
                        f"holds {held_cpus}"
                    )

    def _new_pod(self) -> SimPod:
        self._next_uid += 1
        rng = self.rng
        kind = KINDS[rng.randrange(len(KINDS))]
        inits = [
            SimContainer(f"init-{i}", ContainerType.INIT, i, self._quantity(kind))
            for i in range(rng.choice((0, 0, 1, 2)))
        ]
        sidecars = [
            SimContainer(f"sidecar-{i}", ContainerType.SIDECAR, 0, self._quantity(kind))
            for i in range(rng.choice((0, 0, 1, 2)))
        ]
        main = SimContainer("app", ContainerType.MAIN, 0, self._quantity(kind))
        # The main container first, or (a pod naming its main container by annotation) after
        # a sidecar; the index is the place in ``spec.containers``.
        apps = [main, *sidecars]
        if sidecars and rng.random() < 0.3:
            apps = [sidecars[0], main, *sidecars[1:]]
        apps = [replace(c, index=i) for i, c in enumerate(apps)]
        pod = SimPod(f"p{self._next_uid:04d}", kind, (*inits, *apps))
        if self.at_v0_5_47:
            self._v0_5_47_shape(pod)
        self.pods[pod.uid] = pod
        return pod

    def _v0_5_47_shape(self, pod: SimPod) -> None:
        """Half of the shared pods SNB, half of the reclaimed ones RNB (with the option on),
        half of the dedicated ones with allocation options (module docstring)."""
        roll = self.rng.random()
        if pod.kind == "shared":
            pod.numa_binding = roll < 0.5
        elif pod.kind == "reclaimed":
            pod.numa_binding = self.reclaim_numa_binding and roll < 0.5
        elif roll < 0.5:
            pod.options = dict(self.rng.choice(DEDICATED_OPTIONS))

    def _quantity(self, kind: str) -> float:
        if kind == "reclaimed":
            return float(self.rng.choice((500, 1000, 2000)))
        if kind.startswith("dedicated"):
            return float(self.rng.choice((1, 2, 3, 4)))
        return self.rng.choice((0.5, 1.0, 2.0, 3.0))

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1


def _who(call: Call) -> str:
    if call.pod is None:
        return ""
    return f"{call.pod.uid}/{call.container}" if call.container else call.pod.uid
