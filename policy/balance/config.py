"""The balancer's configuration and its vendor-aware values (spec memory-balancer §3, §3.1).

Options keep the reference's flag names as JSON keys (``grace-balance-read-latency-threshold``);
absent keys take the reference's defaults. Four options are *vendor-aware*: a map from key
(``default``, ``AMD``, ``Intel``) to value, written on the command line as ``default=70,AMD=500``.
The map must hold ``default``; the CPU vendor picks its own key when present, else ``default``
wins (§3.1). ``resolve`` turns the options plus the vendor into the plain numbers a round uses.

One fix over the reference (O22): ``reclaim`` may not be listed in the supported pools, and no
pool twice, since the reclaim pool is always considered first with its own bounds and a pool
listed twice would have its pods collected twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from policy.balance.decode import as_float, as_int, as_list, as_object, as_str, reject_unknown
from policy.balance.errors import BalanceError, within

__all__ = [
    "DEFAULT_VENDOR_KEY",
    "POOL_RECLAIM",
    "POOL_SHARE",
    "BalancerConfig",
    "ResolvedConfig",
    "VendorAware",
    "vendor_key",
]

T = TypeVar("T")

POOL_RECLAIM = "reclaim"
POOL_SHARE = "share"
DEFAULT_VENDOR_KEY = "default"

GIB = 1 << 30
MIB = 1 << 20

# CPUID vendor strings and the vendor-aware key each selects (§3.1); other vendors select none.
_VENDOR_KEYS = {"AuthenticAMD": "AMD", "AMD": "AMD", "GenuineIntel": "Intel", "Intel": "Intel"}


def vendor_key(cpu_vendor: str) -> str | None:
    """The vendor-aware key of a CPU vendor (§3.1 step 2).

    Args:
        cpu_vendor: the CPUID vendor string (``AuthenticAMD``, ``GenuineIntel``) or a short name.

    Returns:
        ``"AMD"``, ``"Intel"``, or None for any other vendor.
    """
    return _VENDOR_KEYS.get(cpu_vendor)


@dataclass(frozen=True, slots=True)
class VendorAware(Generic[T]):
    """A vendor-aware option: ``(key, value)`` pairs in the order given, ``default`` among them."""

    items: tuple[tuple[str, T], ...]

    def __post_init__(self) -> None:
        keys = [k for k, _ in self.items]
        if DEFAULT_VENDOR_KEY not in keys:
            raise BalanceError("vendor aware configuration must have a default value")
        if len(set(keys)) != len(keys):
            raise BalanceError(f"vendor aware configuration names a key twice: {keys}")

    @classmethod
    def of(cls, mapping: Mapping[str, T]) -> VendorAware[T]:
        """Build from a mapping.

        Raises:
            BalanceError: the mapping has no ``default`` key.
        """
        return cls(tuple(mapping.items()))

    @classmethod
    def parse(cls, text: str, convert: Callable[[str], T]) -> VendorAware[T]:
        """Parse the command-line form ``default=70,AMD=500``.

        Args:
            text: comma-separated ``key=value`` pairs.
            convert: turns one value's text into the option's type; a ``ValueError`` it raises
                is reported with the pair.

        Raises:
            BalanceError: a pair is malformed, a value does not convert, or ``default`` is missing.
        """
        items: list[tuple[str, T]] = []
        for pair in text.split(","):
            key, sep, raw = pair.partition("=")
            if not sep or not key.strip():
                raise BalanceError(f"vendor aware value {text!r}: {pair!r} is not key=value")
            try:
                items.append((key.strip(), convert(raw.strip())))
            except ValueError as exc:
                raise BalanceError(f"vendor aware value {text!r}: {pair!r}: {exc}") from None
        return cls(tuple(items))

    def resolve(self, key: str | None) -> T:
        """The value for a vendor key: its own entry if present, else ``default`` (§3.1 step 3)."""
        values = dict(self.items)
        if key is not None and key in values:
            return values[key]
        return values[DEFAULT_VENDOR_KEY]

    def to_json(self) -> dict[str, T]:
        """The JSON form: an object from key to value."""
        return dict(self.items)


def _nonneg_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} is negative")
    return value


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """The numbers one round uses, after vendor resolution (§3; thresholds become floats)."""

    read_latency_metric: str
    grace_balance_read_latency_threshold: float
    force_balance_read_latency_threshold: float
    grace_balance_read_latency_gap_threshold: float
    grace_balance_numa_distance_max: int
    grace_balance_gap_ratio: float
    force_balance_gap_ratio: float
    balanced_pod_source_numa_rss_max: int
    balanced_pod_source_numa_rss_min: int
    balanced_reclaimed_pod_source_numa_rss_max: int
    balanced_reclaimed_pod_source_numa_rss_min: int
    balanced_pods_source_numa_total_rss_max: int
    balanced_reclaimed_pods_source_numa_total_rss_max: int
    balanced_reclaimed_pods_single_round_total_rss_threshold: int
    supported_pools: tuple[str, ...]


_INT_FIELDS = {
    "grace-balance-numa-distance-max": "grace_balance_numa_distance_max",
    "balanced-pod-source-numa-rss-max": "balanced_pod_source_numa_rss_max",
    "balanced-pod-source-numa-rss-min": "balanced_pod_source_numa_rss_min",
    "balanced-reclaimed-pod-source-numa-rss-max": "balanced_reclaimed_pod_source_numa_rss_max",
    "balanced-reclaimed-pod-source-numa-rss-min": "balanced_reclaimed_pod_source_numa_rss_min",
    # Singular flag, plural field: the reference's spelling (§3).
    "balanced-pod-source-numa-total-rss-max": "balanced_pods_source_numa_total_rss_max",
    "balanced-reclaimed-pod-source-numa-total-rss-max": (
        "balanced_reclaimed_pods_source_numa_total_rss_max"
    ),
    "balanced-reclaimed-pod-single-round-total-rss-threshold": (
        "balanced_reclaimed_pods_single_round_total_rss_threshold"
    ),
}
_RATIO_FIELDS = {
    "grace-balance-gap-ratio": "grace_balance_gap_ratio",
    "force-balance-gap-ratio": "force_balance_gap_ratio",
}
_VENDOR_INT_FIELDS = {
    "grace-balance-read-latency-threshold": "grace_balance_read_latency_threshold",
    "force-balance-read-latency-threshold": "force_balance_read_latency_threshold",
    "grace-balance-read-latency-gap-threshold": "grace_balance_read_latency_gap_threshold",
}
_METRIC_KEY = "read-latency-metric-name"
_POOLS_KEY = "numa-balance-supported-pools"
_KEYS = (_METRIC_KEY, *_VENDOR_INT_FIELDS, *_INT_FIELDS, *_RATIO_FIELDS, _POOLS_KEY)


@dataclass(frozen=True, slots=True)
class BalancerConfig:
    """The balancer's options with the reference's defaults (§3)."""

    read_latency_metric: VendorAware[str] = field(
        default_factory=lambda: VendorAware(
            (("default", "mem.latency.read.numa"), ("AMD", "mem.latency.amd.l3.miss"))
        )
    )
    grace_balance_read_latency_threshold: VendorAware[int] = field(
        default_factory=lambda: VendorAware((("default", 70), ("AMD", 500)))
    )
    force_balance_read_latency_threshold: VendorAware[int] = field(
        default_factory=lambda: VendorAware((("default", 80), ("AMD", 600)))
    )
    grace_balance_read_latency_gap_threshold: VendorAware[int] = field(
        default_factory=lambda: VendorAware((("default", 40), ("AMD", 400)))
    )
    grace_balance_numa_distance_max: int = 19
    grace_balance_gap_ratio: float = 0.15
    force_balance_gap_ratio: float = 0.2
    balanced_pod_source_numa_rss_max: int = 10 * GIB
    balanced_pod_source_numa_rss_min: int = 128 * MIB
    balanced_reclaimed_pod_source_numa_rss_max: int = 15 * GIB
    balanced_reclaimed_pod_source_numa_rss_min: int = 128 * MIB
    balanced_pods_source_numa_total_rss_max: int = 12 * GIB
    balanced_reclaimed_pods_source_numa_total_rss_max: int = 15 * GIB
    balanced_reclaimed_pods_single_round_total_rss_threshold: int = 3 * GIB
    supported_pools: tuple[str, ...] = (POOL_SHARE,)

    def __post_init__(self) -> None:
        for key, attr in (*_INT_FIELDS.items(), *_VENDOR_INT_FIELDS.items()):
            value = getattr(self, attr)
            values = [v for _, v in value.items] if isinstance(value, VendorAware) else [value]
            for v in values:
                as_int(v, key)
        for key, attr in _RATIO_FIELDS.items():
            object.__setattr__(self, attr, as_float(getattr(self, attr), key))
        object.__setattr__(self, "supported_pools", tuple(self.supported_pools))
        for vendor, metric in self.read_latency_metric.items:
            as_str(metric, f"{_METRIC_KEY}[{vendor!r}]", non_empty=True)
        seen: set[str] = set()
        for pool in self.supported_pools:
            as_str(pool, _POOLS_KEY, non_empty=True)
            if pool == POOL_RECLAIM:
                raise BalanceError(
                    f"{_POOLS_KEY}: 'reclaim' may not be listed: the reclaim pool is always "
                    "balanced first with its own RSS bounds (spec memory-balancer O22)"
                )
            if pool in seen:
                raise BalanceError(f"{_POOLS_KEY}: pool {pool!r} is listed twice")
            seen.add(pool)

    def resolve(self, cpu_vendor: str) -> ResolvedConfig:
        """The numbers a round uses on a CPU of this vendor (§3.1).

        Args:
            cpu_vendor: the CPUID vendor string; unknown vendors get the ``default`` values.
        """
        key = vendor_key(cpu_vendor)
        return ResolvedConfig(
            read_latency_metric=self.read_latency_metric.resolve(key),
            grace_balance_read_latency_threshold=float(
                self.grace_balance_read_latency_threshold.resolve(key)
            ),
            force_balance_read_latency_threshold=float(
                self.force_balance_read_latency_threshold.resolve(key)
            ),
            grace_balance_read_latency_gap_threshold=float(
                self.grace_balance_read_latency_gap_threshold.resolve(key)
            ),
            grace_balance_numa_distance_max=self.grace_balance_numa_distance_max,
            grace_balance_gap_ratio=self.grace_balance_gap_ratio,
            force_balance_gap_ratio=self.force_balance_gap_ratio,
            balanced_pod_source_numa_rss_max=self.balanced_pod_source_numa_rss_max,
            balanced_pod_source_numa_rss_min=self.balanced_pod_source_numa_rss_min,
            balanced_reclaimed_pod_source_numa_rss_max=self.balanced_reclaimed_pod_source_numa_rss_max,
            balanced_reclaimed_pod_source_numa_rss_min=self.balanced_reclaimed_pod_source_numa_rss_min,
            balanced_pods_source_numa_total_rss_max=self.balanced_pods_source_numa_total_rss_max,
            balanced_reclaimed_pods_source_numa_total_rss_max=(
                self.balanced_reclaimed_pods_source_numa_total_rss_max
            ),
            balanced_reclaimed_pods_single_round_total_rss_threshold=(
                self.balanced_reclaimed_pods_single_round_total_rss_threshold
            ),
            supported_pools=self.supported_pools,
        )

    @classmethod
    def from_json(cls, value: object, where: str = "config") -> BalancerConfig:
        """Decode the JSON form: flag names as keys, every key optional.

        Vendor-aware options are objects (``{"default": 70, "AMD": 500}``) or the command-line
        text (``"default=70,AMD=500"``).

        Raises:
            BalanceError: an unknown key or a bad value, named with its path.
        """
        obj = as_object(value, where)
        reject_unknown(obj, _KEYS, where)
        kwargs: dict[str, object] = {}
        if _METRIC_KEY in obj:
            kwargs["read_latency_metric"] = _vendor_aware(
                obj[_METRIC_KEY], f"{where}.{_METRIC_KEY}", str, as_str
            )
        for key, attr in _VENDOR_INT_FIELDS.items():
            if key in obj:
                kwargs[attr] = _vendor_aware(obj[key], f"{where}.{key}", _nonneg_int, as_int)
        for key, attr in _INT_FIELDS.items():
            if key in obj:
                kwargs[attr] = as_int(obj[key], f"{where}.{key}")
        for key, attr in _RATIO_FIELDS.items():
            if key in obj:
                kwargs[attr] = as_float(obj[key], f"{where}.{key}")
        if _POOLS_KEY in obj:
            pools = as_list(obj[_POOLS_KEY], f"{where}.{_POOLS_KEY}")
            kwargs["supported_pools"] = tuple(
                as_str(p, f"{where}.{_POOLS_KEY}[{i}]", non_empty=True) for i, p in enumerate(pools)
            )
        try:
            return cls(**kwargs)  # type: ignore[arg-type]
        except BalanceError as exc:
            raise within(where, exc) from None

    def to_json(self) -> dict[str, object]:
        """The JSON form, every key present."""
        out: dict[str, object] = {_METRIC_KEY: self.read_latency_metric.to_json()}
        for key, attr in _VENDOR_INT_FIELDS.items():
            out[key] = getattr(self, attr).to_json()
        for key, attr in (*_INT_FIELDS.items(), *_RATIO_FIELDS.items()):
            out[key] = getattr(self, attr)
        out[_POOLS_KEY] = list(self.supported_pools)
        return out


def _vendor_aware(
    value: object,
    where: str,
    convert: Callable[[str], T],
    check: Callable[[object, str], T],
) -> VendorAware[T]:
    try:
        if isinstance(value, str):
            return VendorAware.parse(value, convert)
        obj = as_object(value, where)
        return VendorAware.of({k: check(v, f"{where}[{k!r}]") for k, v in obj.items()})
    except BalanceError as exc:
        raise within(where, exc) from None
