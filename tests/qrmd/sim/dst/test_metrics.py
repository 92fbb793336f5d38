"""The simulated CPU load source and GetEvictPods requests, and the suppression timers'
invariant read against hand-made calls."""

from __future__ import annotations

from random import Random

import pytest

from actors.cpu_pressure_messages import SuppressionEvictPods
from actors.ports.cpu_load import ContainerLoadSource, MissingLoad
from policy.cpu.pressure import ActivePod
from policy.cpu.qos import QOS_LEVEL_KEY
from policy.cpu.request import ContainerType
from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.invariants import suppression_timers_kept
from qrmd.sim.dst.kubelet import KubeletPeer, SimContainer, SimPod
from qrmd.sim.dst.metrics import ABSURD_LOADS, SimLoadSource, active_pods
from qrmd.sim.dst.node import SuppressionCall

KEYS = [(f"p{i}", "app") for i in range(40)]


def test_the_load_source_keeps_the_port() -> None:
    assert isinstance(SimLoadSource(Random(0)), ContainerLoadSource)


@pytest.mark.parametrize(
    ("mode", "missing", "absurd"),
    [
        pytest.param("healthy", False, False, id="a healthy source samples every container"),
        pytest.param("missing", True, False, id="a missing source leaves samples out, no zero"),
        pytest.param("absurd", False, True, id="an absurd source reports loads beyond any pool"),
    ],
)
def test_each_mode_answers_every_container(mode: str, missing: bool, absurd: bool) -> None:
    source = SimLoadSource(Random(1))
    source.mode = mode
    samples = source.sample(KEYS)
    assert set(samples) == set(KEYS)
    gaps = [v for v in samples.values() if isinstance(v, MissingLoad)]
    loads = [v for v in samples.values() if not isinstance(v, MissingLoad)]
    assert bool(gaps) is missing
    assert all(v >= 0 for v in loads)
    assert any(v in ABSURD_LOADS for v in loads) is absurd


def test_evict_requests_list_running_pods_with_or_without_the_reclaimed() -> None:
    kubelet = KubeletPeer(Random(0), VirtualClock())
    init = SimContainer("init-0", ContainerType.INIT, 0, 4.0)
    sidecar = SimContainer("sidecar-0", ContainerType.SIDECAR, 1, 0.5)
    kubelet.pods = {
        "a": SimPod("a", "reclaimed", (_main(1500.0),), phase="running"),
        "b": SimPod("b", "shared", (init, _main(2.0), sidecar), phase="running"),
        "c": SimPod("c", "reclaimed", (_main(500.0),), phase="allocate"),
    }
    full = active_pods(kubelet, with_reclaimed=True)
    # Init containers have ended: only the app containers are sent, each with its request.
    assert [(p.uid, p.annotations[QOS_LEVEL_KEY], p.containers) for p in full] == [
        ("a", "reclaimed_cores", (("app", {"cpu": "1500m"}),)),
        ("b", "shared_cores", (("app", {"cpu": "2"}), ("sidecar-0", {"cpu": "0.5"}))),
    ]
    assert [p.uid for p in active_pods(kubelet, with_reclaimed=False)] == ["b"]


def _main(quantity: float) -> SimContainer:
    return SimContainer("app", ContainerType.MAIN, 0, quantity)


RECLAIMED = ActivePod("a", "sim", "pod-a", {QOS_LEVEL_KEY: "reclaimed_cores"})
SHARED = ActivePod("b", "sim", "pod-b", {QOS_LEVEL_KEY: "shared_cores"})
TIMER = {"sim/pod-a": 100.0}


class _Node:
    def __init__(self, calls: list[SuppressionCall]) -> None:
        self.suppression_calls = calls


class _World:
    def __init__(self, calls: list[SuppressionCall]) -> None:
        self.node = _Node(calls)


@pytest.mark.parametrize(
    ("pods", "pool", "after", "answered", "broken"),
    [
        pytest.param((SHARED,), 4, TIMER, True, False, id="no reclaimed pod keeps the timers"),
        pytest.param((SHARED,), 4, {}, True, True, id="no reclaimed pod clearing them breaks it"),
        pytest.param((RECLAIMED,), 0, {}, True, True, id="an empty pool clearing them breaks it"),
        pytest.param((RECLAIMED,), None, {}, False, True, id="a missing pool clearing them too"),
        pytest.param((RECLAIMED,), 4, {}, True, False, id="a full pass may stop a timer"),
        pytest.param(
            (SHARED, RECLAIMED),
            4,
            {"sim/pod-a": 100.0, "sim/pod-x": 1.0},
            True,
            True,
            id="an answered full pass keeping a timer of a pod not sent breaks it",
        ),
        pytest.param(
            (SHARED, RECLAIMED),
            4,
            {"sim/pod-a": 100.0, "sim/pod-x": 1.0},
            False,
            False,
            id="a refused full pass keeps the durable timers",
        ),
    ],
)
def test_the_suppression_timers_invariant(
    pods: tuple[ActivePod, ...],
    pool: int | None,
    after: dict[str, float],
    answered: bool,
    broken: bool,
) -> None:
    before = {"sim/pod-a": 100.0, "sim/pod-x": 1.0} if "sim/pod-x" in after else TIMER
    call = SuppressionCall(SuppressionEvictPods(pods), pool, before, after, answered)
    world = _World([call])
    assert bool(suppression_timers_kept(world)) is broken  # type: ignore[arg-type]
    assert world.node.suppression_calls == []
