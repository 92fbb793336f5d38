"""The sys-advisor link's metrics, as one Prometheus collector the daemon registers (cpu-policy
§14, §11.5).

The reference's names, tagged ``policy="dynamic"``; each is a count since start where the
reference sets a raw gauge to 1 at every occurrence (as ``qrmd.status.metrics`` does for
``alloc_failed``: alerting on ``> 0`` or on an increase works for both):

* ``lw_advisor_server_failed`` — ListAndWatch streams that failed;
* ``handle_advisor_resp_called`` — responses handed to the Allocator;
* ``handle_advisor_resp_failed`` — responses refused (at any stage);
* ``lw_recv_stuck`` — receive-stuck checks that found no response for 30 s (§11.2 step 7).

qrmd's own:

* ``qrmd_advisor_link_state{state}`` — 1 for the link's current state, 0 for the others;
* ``qrmd_advisor_responses_total{outcome, stage}`` — responses applied (``stage=""``) and
  refused by stage (``validate``, ``blocks``, ``apply``; ``request`` at v0.5.47);
* ``qrmd_advisor_push_refused_total`` — containers the advisor refused during a push (skipped);
* ``qrmd_advisor_seconds_since_applied`` — time since the last applied response (absent before
  the first), what ``--cpu-advisor-unhealthy-after`` is compared with;
* ``qrmd_advisor_pools_sized_by{by}`` — 1 for who sizes the pools now (``advisor``, or
  ``requests`` while the fallback is in force), read from the latest durable state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.advisor_link import LinkStats
from machines import advisor_link as machine

__all__ = ["AdvisorLinkCollector"]

_POLICY = "dynamic"
#: Who can size the pools (``policy.state.advisor_section``'s sizing values).
_SIZINGS: Final = ("advisor", "requests")


class AdvisorLinkCollector(Collector):
    """Reads a ``LinkStats`` at each scrape.

    Args:
        stats: the link's figures (the Allocator records outcomes on the same object).
        monotonic: the clock ``last_applied_at`` was taken on.
        sizing: who sizes the pools in the latest durable state (``None``: no state yet).
    """

    def __init__(
        self,
        stats: LinkStats,
        monotonic: Callable[[], float],
        sizing: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._stats = stats
        self._monotonic = monotonic
        self._sizing = sizing

    def collect(self) -> Iterator[Metric]:
        figures = self._stats.read()
        refused = figures["refused_by_stage"]
        for name, doc, value in (
            ("lw_advisor_server_failed", "ListAndWatch streams that failed.", "stream_failures"),
            ("handle_advisor_resp_called", "Advisor responses handled.", "responses_forwarded"),
            ("lw_recv_stuck", "Receive-stuck checks that found no response.", "recv_stuck_checks"),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["policy"])
            gauge.add_metric([_POLICY], figures[value])
            yield gauge
        failed = GaugeMetricFamily(
            "handle_advisor_resp_failed", "Advisor responses refused.", labels=["policy"]
        )
        failed.add_metric([_POLICY], sum(refused.values()))
        yield failed
        state = GaugeMetricFamily(
            "qrmd_advisor_link_state", "1 for the advisor link's current state.", labels=["state"]
        )
        for name in machine.TABLE.states:
            state.add_metric([name], 1.0 if figures["state"] == name else 0.0)
        yield state
        outcomes = CounterMetricFamily(
            "qrmd_advisor_responses",
            "Advisor responses by outcome and refusing stage.",
            labels=["outcome", "stage"],
        )
        outcomes.add_metric(["applied", ""], figures["applied"])
        for stage, count in sorted(refused.items()):
            outcomes.add_metric(["refused", stage], count)
        yield outcomes
        pushed = CounterMetricFamily(
            "qrmd_advisor_push_refused", "Containers the advisor refused during a push."
        )
        pushed.add_metric([], figures["push_refused"])
        yield pushed
        sizing = self._sizing()
        if sizing is not None:
            by = GaugeMetricFamily(
                "qrmd_advisor_pools_sized_by", "1 for who sizes the pools now.", labels=["by"]
            )
            for name in _SIZINGS:
                by.add_metric([name], 1.0 if sizing == name else 0.0)
            yield by
        if figures["last_applied_at"] is not None:
            yield GaugeMetricFamily(
                "qrmd_advisor_seconds_since_applied",
                "Seconds since the last applied advisor response.",
                value=max(self._monotonic() - figures["last_applied_at"], 0.0),
            )
