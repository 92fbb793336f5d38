"""The advisor link's metrics: the reference's names with policy="dynamic", and qrmd's own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from actors.advisor_link import LinkStats
from qrmd.advisor.metrics import AdvisorLinkCollector


def scrape(stats: LinkStats, now: float = 100.0) -> str:
    registry = CollectorRegistry()
    registry.register(AdvisorLinkCollector(stats, lambda: now))
    return generate_latest(registry).decode()


def test_a_fresh_link_reports_zeros_and_its_state():
    text = scrape(LinkStats())
    assert 'lw_advisor_server_failed{policy="dynamic"} 0.0' in text
    assert 'handle_advisor_resp_failed{policy="dynamic"} 0.0' in text
    assert 'qrmd_advisor_link_state{state="disabled"} 1.0' in text
    assert 'qrmd_advisor_link_state{state="watching"} 0.0' in text
    assert "qrmd_advisor_seconds_since_applied" not in text


def test_outcomes_and_failures_are_counted():
    stats = LinkStats()
    stats.set_state("watching")
    for name in (
        "responses_forwarded",
        "responses_forwarded",
        "stream_failures",
        "recv_stuck_checks",
    ):
        stats.bump(name)
    stats.record_outcome(True, "", now=40.0)
    stats.record_outcome(False, "validate", now=50.0)
    text = scrape(stats, now=100.0)
    assert 'handle_advisor_resp_called{policy="dynamic"} 2.0' in text
    assert 'handle_advisor_resp_failed{policy="dynamic"} 1.0' in text
    assert 'lw_recv_stuck{policy="dynamic"} 1.0' in text
    assert 'qrmd_advisor_link_state{state="watching"} 1.0' in text
    assert 'qrmd_advisor_responses_total{outcome="refused",stage="validate"} 1.0' in text
    assert 'qrmd_advisor_responses_total{outcome="applied",stage=""} 1.0' in text
    assert "qrmd_advisor_seconds_since_applied 60.0" in text
