"""Health: §12.3's heartbeat semantics for periodic handlers, and the /healthz report."""

from __future__ import annotations

import pytest

from qrmd.status.health import HandlerHealth, HealthGauge, HealthRegistry
from qrmd.status.metrics import DaemonMetrics, MetricSources

PERIOD = 10.0  # checkCPUSet's period: timeout = tolerance = 30 s


def _check() -> HandlerHealth:
    return HandlerHealth.for_period("qrm_cpu_plugin_dynamic_check_cpuset", PERIOD, now=0.0)


@pytest.mark.parametrize(
    ("updates", "now", "failing"),
    [
        pytest.param([], 1.0, "not ready: not run yet", id="never run: NotReady fails at once"),
        pytest.param([(5.0, None)], 6.0, None, id="ready after a clean run"),
        pytest.param(
            [(5.0, "boom")], 6.0, "not ready: boom", id="never Ready, then an error: fails at once"
        ),
        pytest.param(
            [(5.0, None), (15.0, "boom")], 44.0, None,
            id="NotReady within the tolerance after being Ready passes",
        ),
        pytest.param(
            [(5.0, None), (15.0, "boom"), (25.0, "boom"), (35.0, "boom")], 45.5,
            "not ready: boom",
            id="NotReady longer than the tolerance since the Ready to NotReady transition fails",
        ),
        pytest.param(
            [(5.0, None)], 35.5, "last reported 30 s ago (timeout 30 s)",
            id="a handler that stopped reporting fails after the timeout",
        ),
        pytest.param(
            [(5.0, None), (15.0, "boom"), (25.0, None)], 30.0, None,
            id="recovering to Ready passes again",
        ),
        pytest.param(
            [(5.0, None), (15.0, "a"), (25.0, None), (35.0, "b")], 60.0, None,
            id="tolerance counts from the latest Ready to NotReady transition",
        ),
    ],
)  # fmt: skip
def test_heartbeat_semantics(
    updates: list[tuple[float, str | None]], now: float, failing: str | None
) -> None:
    check = _check()
    for at, error in updates:
        check.update(error, at)
    why = check.failing(now)
    if failing is None:
        assert why is None
    else:
        assert why is not None and failing in why
        assert "qrm_cpu_plugin_dynamic_check_cpuset" in why


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_registry_collects_sources_and_handlers() -> None:
    clock = FakeClock()
    registry = HealthRegistry(clock)
    problems: list[str] = []
    registry.add_source(lambda: problems)
    assert registry.check().healthy
    handler = registry.register_handler("qrm_cpu_plugin_dynamic_clear_residual_state", 30.0)
    assert registry.check().reasons == (
        "handler qrm_cpu_plugin_dynamic_clear_residual_state not ready: not run yet",
    )
    handler.update(None, clock.now)
    assert registry.check().healthy
    problems.append("actor store is down: died")
    assert registry.check().reasons == ("actor store is down: died",)
    problems.clear()
    clock.now = 91.0
    assert not registry.check().healthy  # no report for more than 3 periods


def test_a_source_that_raises_is_a_reason_not_a_crash() -> None:
    registry = HealthRegistry(FakeClock())

    def broken() -> list[str]:
        raise RuntimeError("no status")

    registry.add_source(broken)
    assert registry.check().reasons == ("health source failed: RuntimeError('no status')",)


def test_liveness_sources_fail_livez_alone_and_a_raising_one_is_a_reason() -> None:
    registry = HealthRegistry(FakeClock())
    wedged: list[str] = []

    def broken() -> list[str]:
        raise RuntimeError("no status")

    registry.add_liveness_source(lambda: wedged)
    assert registry.liveness() == ()
    wedged.append("kubelet calls: none answered by the allocator for 61 s (limit 60 s)")
    registry.add_liveness_source(broken)
    assert registry.liveness() == (
        "kubelet calls: none answered by the allocator for 61 s (limit 60 s)",
        "health source failed: RuntimeError('no status')",
    )
    assert registry.check().healthy  # /healthz asks its own sources, not these


def test_a_gauge_added_to_the_registry_is_exported_at_each_scrape() -> None:
    registry = HealthRegistry(FakeClock())
    value = [0.0]
    registry.add_gauge(HealthGauge("qrmd_test_seconds", "A test figure.", lambda: value[0]))
    metrics = DaemonMetrics(MetricSources(health=registry))
    value[0] = 12.5
    assert b"\nqrmd_test_seconds 12.5\n" in metrics.exposition()
