"""QoS levels: resolving a request's level and normalising its maps (spec cpu-policy §4.3–§4.6).

**Resolution** (§4.4) reads annotations only, never labels. Each level has a *selector*, a map
of annotation pairs (by default just ``katalyst.kubewharf.io/qos_level: <level>``). Levels are
tried in the fixed order dedicated, reclaimed, shared, system (the reference's order is random,
§15 item 11). For each, count the selector pairs whose key is present with the same value
(``eq``) and with another value (``ne``): both non-zero is a conflict and an error; ``eq`` alone
picks the level; ``ne`` alone on ``shared_cores`` marks the pod "not default". With no match,
"not default" is an error ("can't get valid qos level", e.g. for the value ``foo``), else the
level is ``shared_cores``.

**Normalisation** (§4.5) rewrites labels and annotations once the level is known: the
annotations keep only selector keys plus the flattened enhancement pairs (JSON objects under
the cpu, memory and network enhancement keys, or a configured alias of one; the default key
beats its alias), then configured defaults for missing enhancement keys; labels keep only
selector keys. Both carry the resolved level under the QoS key.

Enhancement decoding, and what a malformed enhancement does (refused by default, ignored
with a warning in lenient mode), is ``policy.cpu.enhancements``.

**Debug pods** (§4.6) are recognised by configured annotation keys in the *original*
annotations, before normalisation drops them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from policy.cpu.enhancements import (
    CPU_ENHANCEMENT_KEY,
    CPUSET_POOL_KEY,
    ENHANCEMENT_KEYS,
    MEMORY_ENHANCEMENT_KEY,
    NETWORK_ENHANCEMENT_KEY,
    NUMA_BINDING_KEY,
    NUMA_EXCLUSIVE_KEY,
    flatten_enhancements,
)
from policy.cpu.request import RequestError
from policy.errors import ErrorKind, PolicyError

__all__ = [
    "CPUSET_POOL_KEY",
    "CPU_ENHANCEMENT_KEY",
    "DEDICATED_CORES",
    "ENHANCEMENT_KEYS",
    "HANDLED_QOS_LEVELS",
    "MEMORY_ENHANCEMENT_KEY",
    "NETWORK_ENHANCEMENT_KEY",
    "NUMA_BINDING_KEY",
    "NUMA_EXCLUSIVE_KEY",
    "QOS_LEVELS",
    "QOS_LEVEL_KEY",
    "RECLAIMED_CORES",
    "SHARED_CORES",
    "SYSTEM_CORES",
    "Normalised",
    "QoSConfig",
    "QoSConfigError",
    "QoSError",
    "check_handled_level",
    "is_debug_pod",
    "normalise",
    "resolve_qos_level",
]

QOS_LEVEL_KEY = "katalyst.kubewharf.io/qos_level"

SHARED_CORES = "shared_cores"
DEDICATED_CORES = "dedicated_cores"
RECLAIMED_CORES = "reclaimed_cores"
SYSTEM_CORES = "system_cores"

#: Every level, in the order resolution tries them (§4.4, recommended fixed order).
QOS_LEVELS = (DEDICATED_CORES, RECLAIMED_CORES, SHARED_CORES, SYSTEM_CORES)

#: Levels the CPU policy has Allocate and hint handlers for; system_cores resolves but is
#: refused, as in the reference (§7.1 step 9).
HANDLED_QOS_LEVELS = frozenset({SHARED_CORES, RECLAIMED_CORES, DEDICATED_CORES})


class QoSError(RequestError):
    """The request's QoS annotations resolve to no level, or to one the policy cannot serve."""

    kind = ErrorKind.INVALID


class QoSConfigError(PolicyError):
    """A QoS setting is invalid; raised at start-up, naming the setting."""

    kind = ErrorKind.INVALID


def _default_selectors() -> dict[str, dict[str, str]]:
    return {level: {QOS_LEVEL_KEY: level} for level in QOS_LEVELS}


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class QoSConfig:
    """How requests are read: selectors, enhancement aliases and defaults, debug keys (§4.3).

    Build it with :meth:`build` from the operator's options; ``QoSConfig()`` is the default
    configuration.

    Attributes:
        selectors: level → annotation pairs that identify it.
        enhancement_aliases: alias annotation key → the enhancement key it stands for.
        enhancement_defaults: flattened enhancement key → value used when a pod sets none.
        debug_annotation_keys: annotation keys that mark a debug pod (§4.6).
        strict_enhancements: refuse an enhancement annotation that is not a JSON object of
            strings (default) instead of ignoring it as the reference does.
    """

    selectors: Mapping[str, Mapping[str, str]] = field(default_factory=_default_selectors)
    enhancement_aliases: Mapping[str, str] = field(default_factory=dict)
    enhancement_defaults: Mapping[str, str] = field(default_factory=dict)
    debug_annotation_keys: tuple[str, ...] = ()
    strict_enhancements: bool = True

    def __post_init__(self) -> None:
        unknown = sorted(set(self.selectors) - set(QOS_LEVELS))
        if unknown:
            raise QoSConfigError(
                f"QoS selectors name unknown levels {unknown}; levels are {list(QOS_LEVELS)}"
            )
        for alias, key in self.enhancement_aliases.items():
            if key not in ENHANCEMENT_KEYS:
                raise QoSConfigError(
                    f"enhancement alias {alias!r} stands for {key!r}, which is not one of "
                    f"{list(ENHANCEMENT_KEYS)}"
                )
            if not alias or alias in ENHANCEMENT_KEYS:
                raise QoSConfigError(
                    f"enhancement alias {alias!r} for {key!r} must be a different, non-empty key"
                )
        # Freeze copies: the caller's dicts must not change a live configuration.
        selectors = {level: _frozen(pairs) for level, pairs in self.selectors.items()}
        object.__setattr__(self, "selectors", MappingProxyType(selectors))
        object.__setattr__(self, "enhancement_aliases", _frozen(self.enhancement_aliases))
        object.__setattr__(self, "enhancement_defaults", _frozen(self.enhancement_defaults))
        object.__setattr__(self, "debug_annotation_keys", tuple(self.debug_annotation_keys))

    @classmethod
    def build(
        cls,
        *,
        extra_selectors: Mapping[str, Mapping[str, str]] | None = None,
        enhancement_keys: Mapping[str, str] | None = None,
        enhancement_defaults: Mapping[str, str] | None = None,
        debug_annotation_keys: Iterable[str] = (),
        strict_enhancements: bool = True,
    ) -> QoSConfig:
        """Build the configuration from the reference's options (§4.3).

        Args:
            extra_selectors: level → ``k=v`` pairs of the option
                ``pod-annotation-qos-level-<level>-selector``, merged over the default
                selector (the option's value wins on a shared key).
            enhancement_keys: ``default=alias`` entries of ``pod-annotation-qos-enhancements``:
                enhancement key → alias annotation key.
            enhancement_defaults: ``qos-enhancement-default-values`` (flattened key → value).
            debug_annotation_keys: ``qrm-pod-debug-anno-keys``.
            strict_enhancements: see the class.

        Returns:
            The validated configuration.

        Raises:
            QoSConfigError: a selector for an unknown level, an alias for a key that is not an
                enhancement key, an alias that is itself an enhancement key, or one alias
                claimed by two enhancement keys. (The reference ignores the first three
                silently, and lets the last be decided by map order; qrmd names them so a
                typo is seen at start.)
        """
        selectors = _default_selectors()
        for level, pairs in (extra_selectors or {}).items():
            if level not in selectors:
                raise QoSConfigError(
                    f"selector option for unknown QoS level {level!r}; levels are "
                    f"{list(QOS_LEVELS)}"
                )
            selectors[level].update(pairs)
        aliases: dict[str, str] = {}
        for key, alias in (enhancement_keys or {}).items():
            if alias in aliases:
                raise QoSConfigError(
                    f"enhancement alias {alias!r} is given for both {aliases[alias]!r} and {key!r}"
                )
            aliases[alias] = key
        return cls(
            selectors=selectors,
            enhancement_aliases=aliases,
            enhancement_defaults=dict(enhancement_defaults or {}),
            debug_annotation_keys=tuple(debug_annotation_keys),
            strict_enhancements=strict_enhancements,
        )

    @cached_property
    def qos_keys(self) -> frozenset[str]:
        """Every key some level's selector uses: what ``filter_qos`` keeps."""
        return frozenset(key for pairs in self.selectors.values() for key in pairs)


@dataclass(frozen=True, slots=True)
class Normalised:
    """A request's labels and annotations after §4.5, plus what was ignored on the way."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    warnings: tuple[str, ...] = ()


def resolve_qos_level(config: QoSConfig, annotations: Mapping[str, str] | None) -> str:
    """Resolve the QoS level from a request's original annotations (§4.4).

    Args:
        config: selectors to match.
        annotations: the pod's annotations as kubelet sent them (``None`` = none).

    Returns:
        One of :data:`QOS_LEVELS`; ``shared_cores`` when nothing identifies a level.

    Raises:
        QoSError: "qos %v conflicts, matched count %v, mis matched count %v" when a level's
            selector both matches and mismatches; "can't get valid qos level" when the
            shared selector's keys are present with other values and no level matches.
    """
    annotations = annotations or {}
    not_default = False
    for level in QOS_LEVELS:
        matched = mismatched = 0
        for key, value in config.selectors.get(level, {}).items():
            if key in annotations:
                if annotations[key] == value:
                    matched += 1
                else:
                    mismatched += 1
        if matched and mismatched:
            raise QoSError(
                f"qos {level} conflicts, matched count {matched}, mis matched count {mismatched}"
            )
        if matched:
            return level
        if mismatched and level == SHARED_CORES:
            not_default = True
    if not_default:
        raise QoSError("can't get valid qos level")
    return SHARED_CORES


def check_handled_level(level: str) -> None:
    """Refuse a level the CPU policy has no handler for (§7.1 step 9, §8.1 step 4).

    Args:
        level: a resolved level.

    Raises:
        QoSError: "katalyst QoS level: %s is not supported yet" (``system_cores``).
    """
    if level not in HANDLED_QOS_LEVELS:
        raise QoSError(f"katalyst QoS level: {level} is not supported yet")


def is_debug_pod(debug_keys: Iterable[str], annotations: Mapping[str, str] | None) -> bool:
    """Whether a request is for a debug pod: any debug key among its *original* annotations.

    Args:
        debug_keys: configured debug annotation keys (values are irrelevant, §4.6).
        annotations: the annotations before normalisation.

    Returns:
        True if any key is present.
    """
    present = annotations or {}
    return any(key in present for key in debug_keys)


def normalise(
    config: QoSConfig,
    qos_level: str,
    labels: Mapping[str, str] | None,
    annotations: Mapping[str, str] | None,
    kept_annotation_keys: Iterable[str] = (),
) -> Normalised:
    """Rewrite a request's labels and annotations for its resolved level (§4.5).

    Args:
        config: selectors, aliases, defaults and strictness.
        qos_level: the level :func:`resolve_qos_level` returned.
        labels: the pod's labels as sent (``None`` = none).
        annotations: the pod's annotations as sent (``None`` = none).
        kept_annotation_keys: annotations kept as they are besides the QoS ones (v0.5.47's
            ``--pod-annotation-kept-keys``, spec cpu-policy-v0.5.47 (c) 4; none at v0.5.3);
            a QoS or enhancement key of the same name wins, as the reference merges them
            first.

    Returns:
        New read-only maps (the inputs are not changed) and the warnings of a lenient
        configuration.

    Raises:
        RequestError: with ``strict_enhancements``, an enhancement annotation that is not a
            JSON object of string values (the message names the annotation and the fault).
    """
    source = {**(annotations or {}), QOS_LEVEL_KEY: qos_level}
    normalised = {key: source[key] for key in kept_annotation_keys if key in source}
    normalised.update((key, value) for key, value in source.items() if key in config.qos_keys)
    flattened, warnings = flatten_enhancements(
        source,
        aliases=config.enhancement_aliases,
        defaults=config.enhancement_defaults,
        strict=config.strict_enhancements,
    )
    # The enhancement side wins a clash, as the reference merges it last.
    normalised.update(flattened)
    stamped_labels = {**(labels or {}), QOS_LEVEL_KEY: qos_level}
    kept_labels = {key: value for key, value in stamped_labels.items() if key in config.qos_keys}
    return Normalised(
        labels=MappingProxyType(kept_labels),
        annotations=MappingProxyType(normalised),
        warnings=warnings,
    )
