"""The reference level: which Katalyst release's CPU plugin qrmd reproduces, and the options
that only mean something at the newer one.

qrmd re-implements katalyst-core's dynamic CPU policy at **v0.5.3** (spec cpu-policy.md) and,
behind ``--reference-version v0.5.47``, at **v0.5.47** (spec cpu-policy-v0.5.47.md): shared
cores with NUMA binding (SNB, part (a)), the dedicated allocation options (part (b)) and the
changes for ordinary pods (part (c)). The default stays v0.5.3, whose answers do not change.

Every rule that differs between the two asks ``is_v0_5_47(ctx.reference_version)`` (or
``ctx.at_v0_5_47``) rather than comparing strings, so the levels are named in one place.
``ReferenceOptions`` holds the v0.5.47 options the CPU decisions read, under the reference's
own flag names and with its defaults; at v0.5.3 they are left at their defaults (the settings
refuse them, ``qrmd.cpu_plugin.settings``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "AGGREGATED_REQUESTS_KEY",
    "CANONICAL",
    "DEDICATED_CORES_HINT_OPTIMIZERS_UNSUPPORTED",
    "DEFAULT_REFERENCE_VERSION",
    "DYNAMIC_PACKING",
    "INPLACE_UPDATE_RESIZING_KEY",
    "METRIC_BASED",
    "NUMA_BIND_RESULT_KEY",
    "NUMA_HINT_PREFER_POLICIES",
    "NUMA_IDS_KEY",
    "NUMA_NUMBER_KEY",
    "PACKING",
    "REFERENCE_CAUSE_KEY",
    "REFERENCE_VERSIONS",
    "SHARED_CORES_HINT_OPTIMIZERS",
    "SPREADING",
    "V0_5_3",
    "V0_5_47",
    "ReferenceOptions",
    "is_v0_5_47",
    "reference_cause",
    "reference_of_cause",
]

#: Katalyst v0.5.3: spec cpu-policy.md, every vector of tests/ (the default).
V0_5_3: Final = "v0.5.3"
#: Katalyst v0.5.47 (April 2026, commit f5ecec97): spec cpu-policy-v0.5.47.md.
V0_5_47: Final = "v0.5.47"
REFERENCE_VERSIONS: Final = (V0_5_3, V0_5_47)
DEFAULT_REFERENCE_VERSION: Final = V0_5_3


def is_v0_5_47(version: str) -> bool:
    """Whether ``version`` is the v0.5.47 level (the one newer level qrmd knows)."""
    return version == V0_5_47


# -- --cpu-numa-hint-prefer-policy (cpu consts; canonical optimizer) --------------------------
SPREADING: Final = "spreading"
PACKING: Final = "packing"
DYNAMIC_PACKING: Final = "dynamic_packing"
NUMA_HINT_PREFER_POLICIES: Final = (SPREADING, PACKING, DYNAMIC_PACKING)

# -- --shared-cores-hint-optimizer-policies: the registry entries qrmd reproduces -------------
#: ``metric_based`` skips itself unless ``--enable-metric-preferred-numa-allocation`` is set.
METRIC_BASED: Final = "metric_based"
CANONICAL: Final = "canonical"
SHARED_CORES_HINT_OPTIMIZERS: Final = (METRIC_BASED, CANONICAL)

# -- annotation keys (katalyst-core pkg/consts) ------------------------------------------------
#: A pod's aggregated requests, a JSON ResourceList (``pod.kubernetes.io/...``).
AGGREGATED_REQUESTS_KEY: Final = "pod.kubernetes.io/pod-aggregated-requests"
#: ``"true"`` while the pod is being resized in place.
INPLACE_UPDATE_RESIZING_KEY: Final = "pod.kubernetes.io/inplace-update-resizing"
#: ``--numa-binding-result-annotation-key``'s default.
NUMA_BIND_RESULT_KEY: Final = "katalyst.kubewharf.io/numa_bind_result"
#: ``--numa-number-annotation-key``'s default (``consts.PodAnnotationCPUEnhancementNumaNumber``).
NUMA_NUMBER_KEY: Final = "katalyst.kubewharf.io/numa_number"
#: ``--numa-ids-annotation-key``'s default (``consts.PodAnnotationCPUEnhancementNumaIDs``).
NUMA_IDS_KEY: Final = "katalyst.kubewharf.io/numa_ids"
#: The dedicated cores optimizers the reference registers (``DedicatedCoresHintOptimizerRegistry``);
#: qrmd reproduces neither, so only the empty chain (the default) is accepted.
DEDICATED_CORES_HINT_OPTIMIZERS_UNSUPPORTED: Final = ("memory_bandwidth", "resource_package")


@dataclass(frozen=True, slots=True)
class ReferenceOptions:
    """The v0.5.47 options of the CPU decisions, with the reference's defaults (spec
    cpu-policy-v0.5.47 (a) "Flags", (c) 4 and 6).

    Attributes:
        cpu_numa_hint_prefer_policy: ``--cpu-numa-hint-prefer-policy``: how the canonical
            optimizer marks SNB hints preferred (``spreading``, ``packing``,
            ``dynamic_packing``).
        cpu_numa_hint_prefer_low_threshold: ``--cpu-numa-hint-prefer-low-threshold``: the
            share of a NUMA left after the request above which ``dynamic_packing`` packs.
        shared_cores_hint_optimizer_policies: ``--shared-cores-hint-optimizer-policies``: the
            optimizer chain for SNB hints, in order (the first that does not skip decides).
        enable_snb_high_numa_preference: ``--enable-snb-high-numa-preference``: SNB hint
            candidates listed from the highest NUMA down.
        enable_reclaim_numa_binding: ``--enable-reclaim-numa-binding``: reclaimed_cores pods
            with ``numa_binding`` take the reclaimed NUMA-binding path.
        pod_annotation_kept_keys: ``--pod-annotation-kept-keys``: pod annotations kept (and
            echoed) besides the QoS ones.
        numa_binding_result_annotation_key: ``--numa-binding-result-annotation-key``.
        prefer_use_exist_numa_hint_result: ``--prefer-use-exist-numa-hint-result``: only the
            hint the result annotation names is preferred.
        enable_metric_preferred_numa_allocation: ``--enable-metric-preferred-numa-allocation``
            (the ``metric_based`` optimizer).
        dedicated_cores_hint_optimizer_policies: ``--dedicated-cores-hint-optimizer-policies``:
            the optimizer chain of dedicated NUMA-binding hints (empty, the reference's
            default; its two registered optimizers need metrics and CRDs qrmd lacks).
        numa_number_annotation_key: ``--numa-number-annotation-key``: the flattened key of a
            dedicated pod's NUMA count (``policy.cpu.dedicated_options``).
        numa_ids_annotation_key: ``--numa-ids-annotation-key``: the flattened key of a
            dedicated pod's NUMA ids.
    """

    cpu_numa_hint_prefer_policy: str = SPREADING
    cpu_numa_hint_prefer_low_threshold: float = 0.0
    shared_cores_hint_optimizer_policies: tuple[str, ...] = (METRIC_BASED, CANONICAL)
    enable_snb_high_numa_preference: bool = False
    enable_reclaim_numa_binding: bool = False
    pod_annotation_kept_keys: tuple[str, ...] = (
        AGGREGATED_REQUESTS_KEY,
        INPLACE_UPDATE_RESIZING_KEY,
    )
    numa_binding_result_annotation_key: str = NUMA_BIND_RESULT_KEY
    prefer_use_exist_numa_hint_result: bool = False
    enable_metric_preferred_numa_allocation: bool = False
    dedicated_cores_hint_optimizer_policies: tuple[str, ...] = ()
    numa_number_annotation_key: str = NUMA_NUMBER_KEY
    numa_ids_annotation_key: str = NUMA_IDS_KEY


#: The key of a decision's cause that records its reference level (v0.5.47 only).
REFERENCE_CAUSE_KEY: Final = "reference"


def reference_cause(version: str, options: ReferenceOptions) -> dict[str, object]:
    """A decision's reference level and options as plain data (msgpack-able), recorded in
    its cause so that a re-run decides at the same level: ``{"version": "v0.5.47",
    "options": {<field>: <value>, ...}}``."""
    plain: dict[str, object] = {}
    for name in ReferenceOptions.__dataclass_fields__:
        value = getattr(options, name)
        plain[name] = list(value) if isinstance(value, tuple) else value
    return {"version": version, "options": plain}


def reference_of_cause(cause: Mapping[Any, Any]) -> tuple[str, ReferenceOptions]:
    """The reference level and options a decision's cause records; a cause without them was
    decided at v0.5.3 (every qrmd before the levels, and v0.5.3 since).

    Raises:
        ValueError: the recorded level or an option is not one this qrmd knows.
    """
    recorded = cause.get(REFERENCE_CAUSE_KEY)
    if recorded is None:
        return V0_5_3, ReferenceOptions()
    if not isinstance(recorded, Mapping):
        raise ValueError(f"cause {REFERENCE_CAUSE_KEY!r} is not a map: {recorded!r:.80}")
    version = recorded.get("version")
    if version not in REFERENCE_VERSIONS:
        raise ValueError(f"cause records reference level {version!r}, not one of v0.5.3, v0.5.47")
    options = recorded.get("options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"cause reference options are not a map: {options!r:.80}")
    fields = ReferenceOptions.__dataclass_fields__
    unknown = sorted(str(k) for k in options if k not in fields)
    if unknown:
        raise ValueError(f"cause records reference options this qrmd does not know: {unknown}")
    values: dict[str, Any] = {}
    for key, value in options.items():
        values[str(key)] = tuple(value) if isinstance(value, list | tuple) else value
    return str(version), ReferenceOptions(**values)
