"""communicate_with_advisor on /healthz: the reference's heartbeat rule (§11.2 step 6, §12.3)."""

from __future__ import annotations

from qrmd.advisor.health import register_advisor_health
from qrmd.status.health import HealthRegistry


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_check_follows_the_responses():
    clock = Clock()
    registry = HealthRegistry(clock)
    check = register_advisor_health(registry, clock)
    # NotReady at first, never Ready: failing at once.
    assert not registry.check().healthy
    check.update(None, 1.0)  # an applied response
    clock.now = 100.0
    assert registry.check().healthy
    check.update("ValidateCPUAdvisorResp failed with error: boom", 100.0)
    clock.now = 219.0
    assert registry.check().healthy  # NotReady for less than the 2-minute tolerance
    check.update("ValidateCPUAdvisorResp failed with error: boom", 200.0)  # refused again
    clock.now = 221.0
    reasons = registry.check().reasons
    assert any("communicate_with_advisor" in r and "boom" in r for r in reasons)


def test_silence_for_two_minutes_fails_the_check():
    clock = Clock()
    registry = HealthRegistry(clock)
    check = register_advisor_health(registry, clock)
    check.update(None, 0.0)
    clock.now = 121.0
    assert any("last reported" in r for r in registry.check().reasons)
