"""An eviction plan: a sequence of ticks run through both plugins, offline (``qrmd eviction plan``).

A plan answers "would this node have evicted?": from what the CPU state and the metric source
held at each tick, it runs the decisions the daemon runs and gives each tick's answers.
The form (JSON; docs/cpu-pressure.md, "qrmd eviction plan"):

.. code-block:: text

    {"settings": {SETTING: VALUE, ...},          # PressureSettings keys; defaults otherwise
     "ticks": [
       {"time": SECONDS,
        "settings": {...},                       # optional: changes from here on
        "pools": {POOL: CPUS, ...},              # the pool entries of the CPU state
        "shared_pools_limit": CPUS,              # needed with the advised bounds only
        "pods": [{"uid": UID, "namespace": NS, "name": NAME,
                  "annotations": {...}, "priority": INT,
                  "containers": [{"name": NAME, "pool": POOL, "load": LOAD,
                                  "requests": {"cpu": "2"}}]}],
        "active_pods": [UID, ...],               # optional: the RPCs' pods; default all
        "top_n": N,                              # GetTopEvictionPods' topN, default 1
        "reclaim_parts": [PART, ...],            # optional: GetEvictPods by the v0.5.47 rule
        "calls": ["collect", "threshold_met", "top_eviction_pods", "evict_pods"]}]}

A tick with ``reclaim_parts`` runs ``evict_pods`` by the v0.5.47 rule
(``policy.cpu.pressure.suppression_numa``): each part as a v0.5.47 record's ``inputs.parts``
holds it, ``{"numa": -1|NUMA, "cpus": N, "sample": {"pool_usage", "cgroup_usage",
"cfs_quota", "cfs_period"} or null, "missing": WHY}``, the non-bound part first.

A container's ``pool`` is its owner pool in the CPU state (left out: the state does not hold
it); ``load`` is its 1-minute load (null or left out: no sample). ``calls`` default to all four
in that order, each applied to the history before the next, as the daemon's one mailbox does.

Each tick's result (``TickResult.to_json``) gives, per call, the answer the running plugin
sends for the same inputs, field for field (``policy.cpu.pressure.answers``: the response
message under the proto's field names, pods by UID), or ``{"error": TEXT}`` with the text of
the RPC's error; ``collect`` gives the collection's report, with the shared pools' limit and
size when the advised bounds judge them. ``answer_pools`` names the pool a ``threshold_met``
or ``top_eviction_pods`` answer was chosen from (not on the wire).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policy.cpu.pressure.inputs import (
    ContainerPool,
    InputError,
    LoadInputs,
    PoolMap,
    SuppressionInputs,
    TopInputs,
    active_pods_from_json,
    number,
)
from policy.cpu.pressure.load import collect_load, threshold_met, top_eviction_pods
from policy.cpu.pressure.pods import ActivePod
from policy.cpu.pressure.settings import PressureSettings, PressureSettingsError
from policy.cpu.pressure.suppression import evict_pods
from policy.cpu.pressure.suppression_numa import (
    NUMASuppressionInputs,
    ReclaimPart,
    evict_pods_by_numa,
)
from policy.cpu.qos import QoSConfig
from policy.decision import Decision
from policy.errors import PolicyError
from policy.state.pressure import PressureHistory, apply_pressure_event

__all__ = ["CALLS", "PlanTick", "TickResult", "parse_plan", "run_plan"]

#: The calls a tick may make, in the order a tick makes them.
CALLS = ("collect", "threshold_met", "top_eviction_pods", "evict_pods")

_TICK_KEYS = (
    "time",
    "settings",
    "pools",
    "shared_pools_limit",
    "pods",
    "active_pods",
    "top_n",
    "calls",
    "reclaim_parts",
)


@dataclass(frozen=True, slots=True)
class PlanTick:
    """One tick of a plan, read.

    Attributes:
        time: when, seconds.
        settings: the settings in force.
        pool_map: the CPU state's pools and container owners.
        loads: (pod UID, container) → load, for containers that had a sample.
        shared_pools_limit: or None.
        active_pods: the RPCs' pods.
        top_n: ``GetTopEvictionPods``' ``topN``.
        calls: which calls, in order.
        reclaim_parts: the reclaim pool's parts as the v0.5.47 rule measures them; None runs
            the v0.5.3 rule.
        reclaim_pool_size: the ``reclaim`` pool's CPUs, None without one.
    """

    time: float
    settings: PressureSettings
    pool_map: PoolMap
    loads: Mapping[tuple[str, str], float]
    shared_pools_limit: int | None
    active_pods: tuple[ActivePod, ...]
    top_n: int
    calls: tuple[str, ...]
    reclaim_parts: tuple[ReclaimPart, ...] | None = None

    @property
    def reclaim_pool_size(self) -> int | None:
        """The ``reclaim`` pool's size, None when the state has no reclaim pool."""
        return self.pool_map.pools.get("reclaim")


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one tick answered.

    Attributes:
        time: the tick's time.
        answers: per call, its answer's plain form (the response as the plugin sends it), or
            ``{"error": ...}``.
        warnings: what the decisions warned, each after its call's name.
        events: the names of the events the decisions gave, in order.
        answer_pools: per call, the pool its answer was chosen from, for the calls that name
            one (not on the wire).
        errors: per call that refused, the error (its ``answers`` entry is its text); the
            command line turns it into the status the plugin answers.
    """

    time: float
    answers: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    answer_pools: dict[str, str] = field(default_factory=dict)
    errors: dict[str, PolicyError] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The result as plain values."""
        return {
            "time": self.time,
            **self.answers,
            "answer_pools": dict(self.answer_pools),
            "warnings": list(self.warnings),
            "events": list(self.events),
        }


def parse_plan(value: object) -> tuple[PlanTick, ...]:
    """Read a plan's plain form (the module docstring).

    Raises:
        InputError: malformed; the message names the field (``ticks[2].pods[0].uid``).
    """
    if not isinstance(value, dict):
        raise InputError(f"plan: expected a map, got {type(value).__name__}")
    unknown = sorted(set(value) - {"settings", "ticks"})
    if unknown:
        raise InputError(f"plan: unknown keys {unknown}; known: ['settings', 'ticks']")
    settings = _settings({}, value.get("settings", {}), "settings")
    ticks_raw = value.get("ticks")
    if not isinstance(ticks_raw, list) or not ticks_raw:
        raise InputError("ticks: expected a non-empty list of ticks")
    base: dict[str, Any] = dict(value.get("settings", {}))
    ticks = []
    last_time: float | None = None
    for i, raw in enumerate(ticks_raw):
        where = f"ticks[{i}]"
        if not isinstance(raw, dict):
            raise InputError(f"{where}: expected a map, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(_TICK_KEYS))
        if unknown:
            raise InputError(f"{where}: unknown keys {unknown}; known: {list(_TICK_KEYS)}")
        if "settings" in raw:
            settings = _settings(base, raw["settings"], f"{where}.settings")
        tick = _tick(raw, settings, where)
        if last_time is not None and tick.time < last_time:
            raise InputError(f"{where}.time: {tick.time} is before the previous tick's {last_time}")
        last_time = tick.time
        ticks.append(tick)
    return tuple(ticks)


def _settings(base: dict[str, Any], changes: object, where: str) -> PressureSettings:
    if not isinstance(changes, dict):
        raise InputError(f"{where}: expected a map, got {type(changes).__name__}")
    base.update(changes)
    try:
        return PressureSettings.from_json(dict(base), where)
    except PressureSettingsError as err:
        raise InputError(str(err)) from None


def _tick(raw: dict[str, Any], settings: PressureSettings, where: str) -> PlanTick:
    time = number(raw.get("time"), f"{where}.time")
    pools = PoolMap.from_json({"pools": raw.get("pools", {})}, where).pools
    pods_raw = raw.get("pods", [])
    if not isinstance(pods_raw, list):
        raise InputError(f"{where}.pods: expected a list, got {type(pods_raw).__name__}")
    owners: list[ContainerPool] = []
    loads: dict[tuple[str, str], float] = {}
    plain_pods = []
    for p, pod in enumerate(pods_raw):
        if not isinstance(pod, dict):
            raise InputError(f"{where}.pods[{p}]: expected a map, got {type(pod).__name__}")
        containers = pod.get("containers", [])
        if not isinstance(containers, list):
            raise InputError(f"{where}.pods[{p}].containers: expected a list")
        plain = []
        for c, container in enumerate(containers):
            at = f"{where}.pods[{p}].containers[{c}]"
            if not isinstance(container, dict):
                raise InputError(f"{at}: expected a map, got {type(container).__name__}")
            rest = {k: v for k, v in container.items() if k not in ("pool", "load")}
            plain.append(rest)
            uid, name = pod.get("uid"), container.get("name")
            if not isinstance(uid, str) or not isinstance(name, str):
                continue  # reported by active_pods_from_json below, with its path
            if container.get("pool") is not None:
                pool = container["pool"]
                if not isinstance(pool, str) or not pool:
                    raise InputError(f"{at}.pool: expected a pool name, got {pool!r:.40}")
                owners.append(ContainerPool(uid, name, pool))
            if container.get("load") is not None:
                loads[(uid, name)] = number(container["load"], f"{at}.load")
        plain_pods.append({**pod, "containers": plain})
    pods = active_pods_from_json(plain_pods, f"{where}.pods")
    active = pods
    if "active_pods" in raw:
        uids = raw["active_pods"]
        if not isinstance(uids, list) or not all(isinstance(u, str) for u in uids):
            raise InputError(f"{where}.active_pods: expected a list of pod UIDs")
        by_uid = {pod.uid: pod for pod in pods}
        missing = [u for u in uids if u not in by_uid]
        if missing:
            raise InputError(f"{where}.active_pods: {missing} are not among the tick's pods")
        active = tuple(by_uid[u] for u in uids)
    limit = raw.get("shared_pools_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise InputError(f"{where}.shared_pools_limit: expected a CPU count, got {limit!r:.40}")
    top_n = raw.get("top_n", 1)
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0:
        raise InputError(f"{where}.top_n: expected a count >= 0, got {top_n!r:.40}")
    calls = raw.get("calls", list(CALLS))
    if not isinstance(calls, list) or any(c not in CALLS for c in calls):
        raise InputError(f"{where}.calls: expected a list of {list(CALLS)}, got {calls!r:.80}")
    parts = None
    if "reclaim_parts" in raw:
        form = {"reclaim_pool_size": None, "parts": raw["reclaim_parts"]}
        try:
            parts = NUMASuppressionInputs.from_json(form, where).parts
        except InputError as err:
            # The plan's key is ``reclaim_parts`` (a record's inputs call them ``parts``).
            text = str(err).replace(f"{where}.parts", f"{where}.reclaim_parts", 1)
            raise InputError(text) from None
    return PlanTick(
        time=time,
        settings=settings,
        pool_map=PoolMap(pools, tuple(owners)),
        loads=loads,
        shared_pools_limit=limit,
        active_pods=active,
        top_n=top_n,
        calls=tuple(calls),
        reclaim_parts=parts,
    )


def run_plan(
    ticks: tuple[PlanTick, ...],
    history: PressureHistory | None = None,
    qos: QoSConfig | None = None,
) -> tuple[tuple[TickResult, ...], PressureHistory]:
    """Run each tick's calls in order, applying each decision's events before the next.

    Returns:
        Each tick's result, and the history after the last.
    """
    history = history or PressureHistory()
    results = []
    for tick in ticks:
        answers: dict[str, Any] = {}
        pools: dict[str, str] = {}
        errors: dict[str, PolicyError] = {}
        warnings: list[str] = []
        events: list[str] = []
        for call in tick.calls:
            try:
                decision = _decide(call, history, tick, qos)
            except PolicyError as err:
                answers[call] = {"error": str(err)}
                errors[call] = err
                continue
            for event in decision.events:
                history = apply_pressure_event(history, event)
                events.append(type(event).__name__)
            warnings += [f"{call}: {w}" for w in decision.warnings]
            if decision.error is not None:
                # v0.5.47's metrics failure: the timers changed so far are kept, then it fails.
                answers[call] = {"error": str(decision.error)}
                errors[call] = decision.error
                continue
            answers[call] = _plain(decision.reply)
            pool = getattr(decision.reply, "pool", "")
            if pool:
                pools[call] = pool
        result = TickResult(tick.time, answers, tuple(warnings), tuple(events), pools, errors)
        results.append(result)
    return tuple(results), history


def _decide(
    call: str, history: PressureHistory, tick: PlanTick, qos: QoSConfig | None
) -> Decision[Any]:
    settings, now = tick.settings, tick.time
    if call == "collect":
        inputs = LoadInputs(tick.pool_map, tick.loads, tick.shared_pools_limit)
        return collect_load(history, inputs, settings, now)
    if call == "threshold_met":
        return threshold_met(history, settings, now)
    if call == "top_eviction_pods":
        top = TopInputs(tick.pool_map, tick.active_pods, tick.top_n)
        return top_eviction_pods(history, top, settings, now)
    if tick.reclaim_parts is not None:
        by_numa = NUMASuppressionInputs(
            tick.reclaim_pool_size, tick.reclaim_parts, tick.active_pods
        )
        return evict_pods_by_numa(history, by_numa, settings, now, qos)
    suppression = SuppressionInputs(tick.reclaim_pool_size, tick.active_pods)
    return evict_pods(history, suppression, settings, now, qos)


def _plain(reply: Any) -> Any:
    to_json = getattr(reply, "to_json", None)
    return reply if to_json is None else to_json()
