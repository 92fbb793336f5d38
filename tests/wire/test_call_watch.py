"""The kubelet call path's watch (wire.call_watch): its rules on the groupers' stretches
without an answer, the reasons it gives ``/healthz`` and ``/livez``, and its log lines."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from wire import resource_plugin
from wire.call_watch import (
    CALL_TIMEOUT_S,
    HEALTH_LIMIT_S,
    LIVENESS_LIMIT_S,
    KubeletCallWatch,
)


@dataclass
class Path:
    """A grouper as the watch reads it."""

    since: float | None = None
    waiting: int = 0

    def unanswered_since(self) -> float | None:
        return self.since

    def queued(self) -> int:
        return self.waiting


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def watching(*paths: Path, now: float = 1000.0) -> tuple[KubeletCallWatch, Clock]:
    clock = Clock(now)
    watch = KubeletCallWatch(clock)
    for path in paths:
        watch.add(path)
    return watch, clock


@pytest.mark.parametrize(
    ("paths", "healthz", "livez"),
    [
        pytest.param([], [], [], id="no socket served yet is healthy"),
        pytest.param([Path()], [], [], id="an idle grouper is healthy"),
        pytest.param(
            [Path(since=1000.0 - HEALTH_LIMIT_S, waiting=2)],
            [],
            [],
            id="calls unanswered for exactly the health limit are still healthy",
        ),
        pytest.param(
            [Path(since=994.0, waiting=3)],
            ["kubelet calls: none answered by the allocator for 6 s (limit 5 s), 3 queued now"],
            [],
            id="calls unanswered past the health limit fail healthz but not livez",
        ),
        pytest.param(
            [Path(since=994.0, waiting=0)],
            ["kubelet calls: none answered by the allocator for 6 s (limit 5 s), 0 queued now"],
            [],
            id="a group with the allocator past the health limit fails healthz with none queued",
        ),
        pytest.param(
            [Path(since=1000.0 - LIVENESS_LIMIT_S, waiting=1)],
            ["kubelet calls: none answered by the allocator for 60 s (limit 5 s), 1 queued now"],
            [],
            id="calls unanswered for exactly the liveness limit keep livez passing",
        ),
        pytest.param(
            [Path(since=925.0, waiting=1)],
            ["kubelet calls: none answered by the allocator for 75 s (limit 5 s), 1 queued now"],
            [
                "kubelet calls: none answered by the allocator for 75 s (limit 60 s), 1 queued "
                "now: the call path is wedged, a restart is due"
            ],
            id="calls unanswered past the liveness limit fail livez too",
        ),
        pytest.param(
            [Path(since=999.0, waiting=4), Path(since=990.0, waiting=1), Path()],
            ["kubelet calls: none answered by the allocator for 10 s (limit 5 s), 5 queued now"],
            [],
            id="the oldest stretch of any socket counts and every socket's queue adds up",
        ),
        pytest.param(
            [Path(since=1003.0, waiting=1)],
            [],
            [],
            id="a stretch stamped after the check began counts as none",
        ),
    ],
)
def test_the_rules(paths: list[Path], healthz: list[str], livez: list[str]) -> None:
    watch, _ = watching(*paths)
    assert watch.health_problems() == healthz
    assert watch.liveness_problems() == livez


def test_the_limits_come_from_kubelets_deadline_for_the_grouped_calls() -> None:
    assert CALL_TIMEOUT_S == resource_plugin.DEFAULT_TIMEOUT_S
    assert (HEALTH_LIMIT_S, LIVENESS_LIMIT_S) == (5.0, 60.0)


def test_the_gauge_is_the_oldest_stretchs_age_and_zero_without_one() -> None:
    path = Path()
    watch, clock = watching(path)
    assert watch.stretch().age_s == 0.0
    path.since, path.waiting = 1000.0, 2
    clock.now = 1012.5
    assert (watch.stretch().age_s, watch.stretch().queued) == (12.5, 2)


def test_it_logs_once_when_the_path_becomes_stuck_and_once_when_it_is_answered_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = Path(since=1000.0, waiting=1)
    watch, clock = watching(path)
    caplog.set_level(logging.INFO, logger="qrmd.kubelet_calls")
    clock.now = 1004.0
    watch.check()
    assert caplog.messages == []
    clock.now = 1006.0
    watch.check()
    clock.now = 1030.0
    watch.check()
    assert watch.stuck
    path.since = None
    watch.check()
    watch.check()
    assert not watch.stuck
    assert caplog.messages == [
        "kubelet calls: none answered by the allocator for 6 s (limit 5 s), 1 queued now; "
        "see docs/running.md, Health answers",
        "kubelet calls are answered again, after at least 30 s without an answer from the "
        "allocator",
    ]
    assert [record.levelno for record in caplog.records] == [logging.WARNING, logging.INFO]


def test_a_health_limit_beyond_the_liveness_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="at most the liveness limit"):
        KubeletCallWatch(Clock(), health_limit_s=70.0, liveness_limit_s=60.0)
