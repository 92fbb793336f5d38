"""The pod list publisher (qrmd.host.pod_publisher): one fetch per refresh, the latest snapshot
kept across failures, the health rules of cpu-policy §12.3 and the metrics."""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, generate_latest

from actors.ports.pod_source import PodListing, PodListSnapshot
from qrmd.host.kubelet_pods import PodListError
from qrmd.host.pod_publisher import FETCH_HANDLER, PodListPublisher
from qrmd.status.health import HandlerHealth


class ScriptedKubelet:
    """Answers each fetch with the next scripted snapshot, or raises the scripted error."""

    def __init__(self, *answers: PodListSnapshot | str) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self) -> PodListSnapshot:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            raise PodListError(answer)
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _snapshot(at: float, *uids: str) -> PodListSnapshot:
    return PodListSnapshot.of([PodListing(u, "ns", u, "Running") for u in uids], at)


def test_a_failed_fetch_keeps_the_previous_snapshot_and_records_why() -> None:
    clock = Clock()
    first = _snapshot(1000.0, "a", "b")
    kubelet = ScriptedKubelet(first, "GET http://localhost:10255/pods: HTTP 503")
    publisher = PodListPublisher(kubelet, wall=clock, monotonic=clock)
    assert publisher.latest() is None and publisher.outcome() is None
    ok = publisher.refresh()
    assert ok.ok and ok.seq == 1 and publisher.latest() is first
    clock.now += 10
    failed = publisher.refresh()
    assert not failed.ok and failed.seq == 2 and "HTTP 503" in str(failed.error)
    assert publisher.latest() is first  # readers keep the last good answer, with its time
    assert kubelet.calls == 2  # reading latest() never fetches


def test_health_turns_failing_only_after_the_tolerance_and_recovers_at_the_next_good_fetch() -> (
    None
):
    clock = Clock()
    health = HandlerHealth.for_period(FETCH_HANDLER, 10.0, clock())
    kubelet = ScriptedKubelet(_snapshot(1000, "a"), *["refused"] * 5, _snapshot(1060, "a"))
    publisher = PodListPublisher(kubelet, wall=clock, monotonic=clock, health=health)
    publisher.refresh()
    assert health.failing(clock()) is None
    for _ in range(4):  # NotReady since 1010; at 1040, 30 s: not longer than 3 periods
        clock.now += 10
        publisher.refresh()
    assert health.failing(clock()) is None
    clock.now += 10
    publisher.refresh()  # 40 s NotReady: past the tolerance
    assert "not ready: refused" in str(health.failing(clock()))
    clock.now += 10
    publisher.refresh()
    assert health.failing(clock()) is None


def test_metrics_count_fetches_by_outcome_and_show_the_pods_and_latency() -> None:
    clock = Clock()
    publisher = PodListPublisher(
        ScriptedKubelet(_snapshot(1000, "a", "b", "c"), "boom"), wall=clock, monotonic=clock
    )
    publisher.refresh()
    publisher.refresh()
    clock.now = 1042
    registry = CollectorRegistry()
    registry.register(publisher)
    text = generate_latest(registry).decode()
    assert 'qrmd_pod_source_fetches_total{outcome="ok"} 1.0' in text
    assert 'qrmd_pod_source_fetches_total{outcome="failed"} 1.0' in text
    assert "qrmd_pod_source_pods 3.0" in text
    assert "qrmd_pod_source_snapshot_age_seconds 42.0" in text
    assert "qrmd_pod_source_fetch_seconds_count 2.0" in text


def test_an_unexpected_error_is_a_failed_fetch_not_a_dead_ticker() -> None:
    def broken() -> PodListSnapshot:
        raise KeyError("bug")

    clock = Clock()
    outcome = PodListPublisher(broken, wall=clock, monotonic=clock).refresh()
    assert outcome.error is not None and "KeyError" in outcome.error


def test_scraped_before_any_fetch_the_latency_histogram_is_there_and_empty() -> None:
    clock = Clock()
    publisher = PodListPublisher(ScriptedKubelet(), wall=clock, monotonic=clock)
    registry = CollectorRegistry()
    registry.register(publisher)
    text = generate_latest(registry).decode()
    assert "qrmd_pod_source_fetch_seconds_count 0.0" in text
    assert 'qrmd_pod_source_fetches_total{outcome="ok"} 0.0' in text


def test_fetches_and_scrapes_racing_for_the_first_histogram_record_every_fetch() -> None:
    """The histogram is made on first use, from the ticker's thread or a scrape's: one is
    made, so no fetch's latency lands in a histogram that is dropped."""
    clock = Clock()
    threads = 8
    publisher = PodListPublisher(
        ScriptedKubelet(*[_snapshot(1000, "a")] * threads), wall=clock, monotonic=clock
    )
    start = threading.Barrier(threads + 1)

    def fetch() -> None:
        start.wait()
        publisher.refresh()

    def scrape() -> None:
        start.wait()
        list(publisher.collect())

    workers = [threading.Thread(target=fetch) for _ in range(threads)]
    workers.append(threading.Thread(target=scrape))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    registry = CollectorRegistry()
    registry.register(publisher)
    assert f"qrmd_pod_source_fetch_seconds_count {threads}.0" in generate_latest(registry).decode()
