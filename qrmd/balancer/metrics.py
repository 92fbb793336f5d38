"""The memory balancer's metrics, as one Prometheus collector the daemon registers once
kubelet is served (spec memory-balancer §10, §11, §12): ``qrmd.balancer.subsystem`` imports this
module only then, so a node with the balancer on starts without prometheus_client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.balancer_messages import BalancerView
from policy.balance.constants import EVICTION_PLUGIN_NAME, ROUND_METRIC
from wire.eviction_server import EVICTION_PLUGIN_TYPE

__all__ = ["BalancerCollector"]


class BalancerCollector(Collector):
    """The balancer's metrics (§10, §11, §12).

    * ``numa_memory_balance{need_balance, balance_level, bandwidth_pressure, status,
      bandwidth_level, failed_reason}``: computed rounds with those tags since start (the
      reference emits 1 per round; in a pull model that is a count, as for ``alloc_failed``);
    * ``memory_handle_numa_balance`` and ``memory_numa_balance_result{success}``: advices
      handed to the executor and finished migrations (§11);
    * ``qrmd_migration_bytes_moved_total``, ``qrmd_migration_batches_total`` and
      ``qrmd_migration_longest_batch_seconds``: the batched page moves (``qrmd.host.migrate``);
    * ``plugin_start_failed{pluginName, pluginType}``: failed starts of the eviction plugin
      (§10);
    * ``qrmd_balancer_<counter>``: what the actor did (ticks, rounds skipped, failed and
      stored, advices, eviction polls and offers, commit failures, …).
    """

    def __init__(
        self,
        view: Callable[[], BalancerView | None],
        executor: Callable[[], Mapping[str, Any] | None],
        plugin_failures: Callable[[], int],
    ) -> None:
        self._view = view
        self._executor = executor
        self._plugin_failures = plugin_failures

    def collect(self) -> Iterator[Metric]:
        failed = GaugeMetricFamily(
            "plugin_start_failed",
            "Failed starts of the eviction plugin since start.",
            labels=["pluginName", "pluginType"],
        )
        failed.add_metric([EVICTION_PLUGIN_NAME, EVICTION_PLUGIN_TYPE], self._plugin_failures())
        yield failed
        executor = self._executor()
        if executor is not None:
            yield GaugeMetricFamily(
                "memory_handle_numa_balance",
                "Balance advices handed to the executor since start.",
                value=executor["handled"],
            )
            result = GaugeMetricFamily(
                "memory_numa_balance_result",
                "Finished migrations since start, by success.",
                labels=["success"],
            )
            for success, count in sorted(executor["results"].items()):
                result.add_metric(["true" if success else "false"], count)
            yield result
            # The batched move_pages of qrmd.host.page_mover: how much, in how many
            # batches, and how long a workload's memory was held at most.
            moved, batches, longest = executor.get("moved", (0, 0, 0.0))
            yield CounterMetricFamily(
                "qrmd_migration_bytes_moved", "Bytes move_pages moved between NUMA nodes.", moved
            )
            yield CounterMetricFamily(
                "qrmd_migration_batches", "move_pages batches made (query and move).", batches
            )
            yield GaugeMetricFamily(
                "qrmd_migration_longest_batch_seconds",
                "The longest move_pages batch since start (target 20 ms).",
                value=longest,
            )
        view = self._view()
        if view is None:
            return
        tag_names = ("need_balance", "balance_level", "bandwidth_pressure", "status",
                     "bandwidth_level", "failed_reason")  # fmt: skip
        rounds = GaugeMetricFamily(
            ROUND_METRIC, "Computed balance rounds since start, by their tags.", labels=tag_names
        )
        for tags, count in sorted(view.round_metric.items()):
            by_name = dict(tags)
            rounds.add_metric([by_name.get(name, "") for name in tag_names], count)
        yield rounds
        for name, value in sorted(view.metrics.items()):
            yield CounterMetricFamily(
                f"qrmd_balancer_{name.removesuffix('_total')}",
                f"Memory balancer: {name.removesuffix('_total').replace('_', ' ')}.",
                value=value,
            )
        seq = GaugeMetricFamily(
            "qrmd_balancer_state_seq", "Sequence number of the balancer's durable state."
        )
        seq.add_metric([], view.seq)
        yield seq
