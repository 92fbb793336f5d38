"""NUMA latency and bandwidth from a JSON file an external collector rewrites (spec
memory-balancer §4.1, §4.3).

On a node without the reference's monitoring agent, any collector (a perf script, a vendor
tool) can feed the balancer by rewriting one file. It should write a temporary file and rename
it over the old one, so a reader never sees half a file. The format::

    {
      "timestamp": "2026-11-29T23:25:21Z",
      "numas": {
        "0": {"mem.latency.read.numa": 75, "mem.bandwidth.numa": 900},
        "1": {"mem.latency.read.numa": {"value": 50, "timestamp": 1795994700},
              "mem.bandwidth.numa": 300}
      }
    }

* ``numas`` maps each NUMA id (decimal string) to its metrics by name: the latency metric the
  balancer is configured with (``read-latency-metric-name``: ``mem.latency.read.numa`` by
  default, ``mem.latency.amd.l3.miss`` on AMD) and ``mem.bandwidth.numa``. Other names are
  ignored, so one file may carry both vendors' latencies.
* A value is a number, or ``{"value": number, "timestamp": time}`` for its own measurement
  time. ``timestamp`` (top level or per value) is Unix seconds or an RFC 3339 string; the
  per-value one wins. Without one, or with 0, a value never expires (§4.3).
* Units are the collector's; the default thresholds were tuned for the reference agent's
  latency units (§4.1). Bandwidths are only compared with each other.

The file is read afresh at every round. A missing node, metric or file, malformed JSON, a value
that is not a non-negative number, or an expired timestamp make that node's metric a
``MissingSample`` naming the file and the problem: never a zero.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from policy.balance import BalanceError, MissingSample, NumaMetrics
from policy.balance.gojson import parse_time
from policy.balance.inputs import Sample
from qrmd.host.metric_sources import (
    BANDWIDTH_METRIC,
    DEFAULT_LATENCY_METRIC,
    Staleness,
    checked_value,
    missing_everywhere,
)

__all__ = ["MAX_FILE_BYTES", "MetricsFile"]

#: A metrics file is a few hundred bytes per NUMA node; anything huge is not one.
MAX_FILE_BYTES = 4 << 20


class _MalformedError(Exception):
    """The file as a whole cannot be used; every node's metrics are missing."""


class MetricsFile:
    """The ``NumaMetricSource`` port on a collector's JSON file.

    Args:
        path: the file.
        latency_metric: the name of the latency metric to read (the balancer's resolved
            ``ReadLatencyMetric``).
        bandwidth_metric: the name of the bandwidth metric to read.
        staleness: the insurance period (§4.3); off by default.
        clock: the current Unix time, injected for tests.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        latency_metric: str = DEFAULT_LATENCY_METRIC,
        bandwidth_metric: str = BANDWIDTH_METRIC,
        staleness: Staleness | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = Path(path)
        self._latency_metric = latency_metric
        self._bandwidth_metric = bandwidth_metric
        self._staleness = staleness or Staleness()
        self._clock = clock

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Read the file now (``NumaMetricSource``)."""
        try:
            default_stamp, numas = self._load()
        except _MalformedError as exc:
            return missing_everywhere(numa_ids, str(exc))
        now = self._clock()
        out: dict[int, NumaMetrics] = {}
        for numa in numa_ids:
            metrics = numas.get(str(numa))
            out[numa] = NumaMetrics(
                self._value(numa, metrics, self._latency_metric, default_stamp, now),
                self._value(numa, metrics, self._bandwidth_metric, default_stamp, now),
            )
        return out

    def _load(self) -> tuple[float | None, Mapping[str, object]]:
        path = self._path
        try:
            with path.open("rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            raise _MalformedError(f"{path}: missing") from None
        except OSError as exc:
            raise _MalformedError(f"cannot read {path}: {exc.strerror or exc}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise _MalformedError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise _MalformedError(f"{path}: not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise _MalformedError(f"{path}: expected a JSON object at the top")
        unknown = sorted(set(document) - {"timestamp", "numas"})
        if unknown:
            raise _MalformedError(f"{path}: unknown field {unknown[0]!r} (known: numas, timestamp)")
        numas = document.get("numas")
        if not isinstance(numas, dict):
            raise _MalformedError(f"{path}: 'numas' must be an object of NUMA id → metrics")
        stamp = _timestamp(document.get("timestamp"), f"{path}: timestamp")
        if isinstance(stamp, MissingSample):
            raise _MalformedError(stamp.reason)
        return stamp, numas

    def _value(
        self,
        numa: int,
        metrics: object,
        name: str,
        default_stamp: float | None,
        now: float,
    ) -> Sample:
        where = f"{self._path}: numas[{str(numa)!r}]"
        if metrics is None:
            return MissingSample(f"{where}: no such NUMA node in the file")
        if not isinstance(metrics, dict):
            return MissingSample(f"{where}: expected an object of metric name → value")
        if name not in metrics:
            return MissingSample(f"{where}: no {name!r}")
        raw = metrics[name]
        where = f"{where}[{name!r}]"
        stamp: float | MissingSample | None = default_stamp
        if isinstance(raw, dict):
            extra = sorted(set(raw) - {"value", "timestamp"})
            if extra or "value" not in raw:
                return MissingSample(f"{where}: expected {{'value': ..., 'timestamp': ...}}")
            if "timestamp" in raw:
                stamp = _timestamp(raw["timestamp"], f"{where}.timestamp")
            raw = raw["value"]
        if isinstance(stamp, MissingSample):
            return stamp
        return self._staleness.check(checked_value(raw, where), stamp, now)


def _timestamp(value: object, where: str) -> float | MissingSample | None:
    """Unix seconds from a number or RFC 3339 text; None when absent."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse_time(value, where)
        except BalanceError as exc:
            return MissingSample(str(exc))
    return checked_value(value, where)
