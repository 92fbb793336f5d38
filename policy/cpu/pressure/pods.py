"""The pods the eviction manager sends, as the suppression plugin reads them (v0.5.3).

An ``ActivePod`` is what the plugins read of a Kubernetes ``Pod`` in a request's
``active_pods``: its name, namespace, UID, annotations, priority and its containers' CPU
requests. The reference's helpers it reproduces (``pkg/util/native``, ``pkg/util/qos``):

* ``pod_cpu_request`` is ``CPUQuantityGetter()(SumUpPodRequestResources(pod))``: requests
  summed over the containers, each init container's request taking the place of the sum when
  larger (compared as ``Quantity.Value()``, whole units rounded up); then ``cpu`` if present,
  else ``resource.katalyst.kubewharf.io/reclaimed_millicpu`` read as milli-CPUs.
  (The ``Pod`` subset qrmd decodes has no ``spec.overhead``, which the reference adds too.)
* ``suppression_tolerance_rate`` is ``GetPodCPUSuppressionToleranceRate`` capped by the
  maximum (``getPodToleranceRate``): the pod's ``suppression_tolerance_rate`` from its
  ``cpu_enhancement`` annotation; a pod that is not reclaimed_cores, or whose rate does not
  parse, gets the maximum; one without the key gets "any" (then the maximum).
* ``uniq_key`` is ``namespace/name`` (``GenerateUniqObjectNameKey``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from policy.cpu.enhancements import CPU_ENHANCEMENT_KEY
from policy.cpu.qos import RECLAIMED_CORES, QoSConfig, QoSError, resolve_qos_level
from policy.errors import ErrorKind, PolicyError

__all__ = [
    "RECLAIMED_MILLICPU",
    "SUPPRESSION_TOLERANCE_RATE_KEY",
    "ActivePod",
    "PodError",
    "enhancement_pairs",
    "is_reclaimed",
    "parse_quantity",
    "pod_cpu_request",
    "quantity_value",
    "suppression_tolerance_rate",
]

#: ``consts.ReclaimedResourceMilliCPU``.
RECLAIMED_MILLICPU: Final = "resource.katalyst.kubewharf.io/reclaimed_millicpu"
#: ``consts.PodAnnotationCPUEnhancementSuppressionToleranceRate``.
SUPPRESSION_TOLERANCE_RATE_KEY: Final = "suppression_tolerance_rate"

_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_SUFFIX: Final[dict[str, Fraction]] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    **{s: Fraction(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
}
_MAX_QUANTITY_CHARS: Final = 64
_TOO_LARGE: Final = Fraction(2**63)
# Go's strconv.ParseFloat (decimal forms, inf, infinity and nan in any case; no spaces). Hex
# floats, which it also takes, are left out: a tolerance rate is not written in hex.
_GO_FLOAT = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE
)


class PodError(PolicyError):
    """A pod field that cannot be read; the message names the pod and the field."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class ActivePod:
    """One pod of a request's ``active_pods``.

    Attributes:
        uid: ``metadata.uid``.
        namespace: ``metadata.namespace``.
        name: ``metadata.name``.
        annotations: ``metadata.annotations``.
        priority: ``spec.priority``; None when unset (``corev1helpers.PodPriority``: 0).
        containers: ``(name, requests)`` of each ``spec.containers`` entry, in order.
        init_containers: the same for ``spec.initContainers``.
    """

    uid: str
    namespace: str = ""
    name: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    priority: int | None = None
    containers: tuple[tuple[str, Mapping[str, str]], ...] = ()
    init_containers: tuple[tuple[str, Mapping[str, str]], ...] = ()

    @property
    def uniq_key(self) -> str:
        """``namespace/name`` (``GenerateUniqObjectNameKey``)."""
        return f"{self.namespace}/{self.name}"

    @property
    def container_names(self) -> tuple[str, ...]:
        """The names of ``spec.containers``, in order."""
        return tuple(name for name, _ in self.containers)

    @property
    def effective_priority(self) -> int:
        """``corev1helpers.PodPriority``: the priority, 0 when unset."""
        return 0 if self.priority is None else self.priority

    def to_json(self) -> dict[str, Any]:
        """The pod as plain values (the eviction plan's pod form)."""
        return {
            "uid": self.uid,
            "namespace": self.namespace,
            "name": self.name,
            "annotations": dict(sorted(self.annotations.items())),
            "priority": self.priority,
            "containers": [{"name": n, "requests": dict(r)} for n, r in self.containers],
            "init_containers": [{"name": n, "requests": dict(r)} for n, r in self.init_containers],
        }


def parse_quantity(text: str, where: str) -> Fraction:
    """A Kubernetes quantity (``1500m``, ``2``, ``4Gi``, ``1e3``) as an exact number.

    Raises:
        PodError: not a quantity; the message names ``where``.
    """
    match = _QUANTITY.fullmatch(text) if len(text) <= _MAX_QUANTITY_CHARS else None
    if match is None:
        raise PodError(f"{where}: {text!r:.40} is not a Kubernetes quantity")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        exponent = int(suffix[1:])
        value = number * Fraction(10) ** exponent if abs(exponent) <= 30 else _TOO_LARGE
    else:
        value = number * _SUFFIX[suffix]
    # Quantities are int64 in the reference; far larger ones are a broken pod, not a request.
    if abs(value) >= _TOO_LARGE:
        raise PodError(f"{where}: {text!r:.40} is out of range")
    return value


def quantity_value(quantity: Fraction) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
    return math.ceil(quantity)


def _requests(pod: ActivePod) -> dict[str, Fraction]:
    """``SumUpPodRequestResources``: per resource, containers summed, then each init
    container's request where it is larger (by rounded-up value)."""
    total: dict[str, Fraction] = {}
    for name, requests in pod.containers:
        for resource, text in requests.items():
            amount = parse_quantity(text, f"pod {pod.uniq_key} container {name} {resource}")
            total[resource] = total.get(resource, Fraction(0)) + amount
    for name, requests in pod.init_containers:
        for resource, text in requests.items():
            amount = parse_quantity(text, f"pod {pod.uniq_key} init container {name} {resource}")
            if resource not in total or quantity_value(total[resource]) < quantity_value(amount):
                total[resource] = amount
    return total


def pod_cpu_request(pod: ActivePod) -> Fraction:
    """The pod's CPU request in CPUs (``CPUQuantityGetter``: ``cpu``, else reclaimed milli-CPU).

    Raises:
        PodError: a request that is not a quantity.
    """
    total = _requests(pod)
    if "cpu" in total:
        return total["cpu"]
    if RECLAIMED_MILLICPU in total:
        # resource.NewMilliQuantity(quantity.Value()): the reclaimed value, rounded up, in m.
        return Fraction(quantity_value(total[RECLAIMED_MILLICPU]), 1000)
    return Fraction(0)


def is_reclaimed(qos: QoSConfig, pod: ActivePod) -> bool:
    """``CheckReclaimedQoSForPod``: the pod's QoS level, from its annotations, is reclaimed.

    Raises:
        QoSError: the annotations conflict or name no valid level (``FilterPods`` logs it and
            leaves the pod out).
    """
    return resolve_qos_level(qos, pod.annotations) == RECLAIMED_CORES


def suppression_tolerance_rate(
    qos: QoSConfig, pod: ActivePod, max_rate: float
) -> tuple[float, str]:
    """The pod's tolerance rate, capped at ``max_rate``, and why it fell back, if it did.

    Returns:
        ``(rate, problem)``; ``problem`` is ``""`` unless the rate could not be read, in which
        case the rate is ``max_rate`` (the reference logs the error and uses the maximum).
    """
    try:
        level = resolve_qos_level(qos, pod.annotations)
    except QoSError as err:
        return max_rate, f"pod {pod.uniq_key}: {err}"
    if level != RECLAIMED_CORES:
        return max_rate, f"pod {pod.uniq_key}: qos level {level} not support cpu suppression"
    text = _cpu_enhancements(qos, pod.annotations).get(SUPPRESSION_TOLERANCE_RATE_KEY)
    if text is None:
        return max_rate, ""  # math.MaxFloat64, then the cap
    if _GO_FLOAT.fullmatch(text) is None:
        return max_rate, (
            f"pod {pod.uniq_key}: {SUPPRESSION_TOLERANCE_RATE_KEY} {text!r:.40} is not a number"
        )
    rate = float(text)
    # math.Min: NaN wins over any number.
    return (rate if math.isnan(rate) else min(rate, max_rate)), ""


def _cpu_enhancements(qos: QoSConfig, annotations: Mapping[str, str]) -> dict[str, str]:
    return enhancement_pairs(qos, annotations, CPU_ENHANCEMENT_KEY)


def enhancement_pairs(qos: QoSConfig, annotations: Mapping[str, str], key: str) -> dict[str, str]:
    """``GetQoSEnhancementKVs(key)``: the annotation (or its alias) as a JSON object of
    strings; anything else is no pairs at all (``json.Unmarshal`` fails whole)."""
    text = annotations.get(key)
    if text is None:
        for alias in sorted(qos.enhancement_aliases):
            if qos.enhancement_aliases[alias] == key and alias in annotations:
                text = annotations[alias]
                break
    if text is None:
        return {}
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(decoded, dict) or not all(isinstance(v, str) for v in decoded.values()):
        return {}
    return decoded
