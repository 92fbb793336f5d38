"""The kubelet topology manager, for a node whose only hint provider is one QRM plugin.

With one provider, merging hints reduces to choosing one of its hints (kubelet 1.24
``policy_best_effort``/``policy_restricted`` with a single provider):

1. No preference (the resource key absent from the answer, wire.md §1.1) → the default
   affinity, every NUMA node of the machine, preferred.
2. No feasible placement (an empty hint list, also what a failed ``GetTopologyHints`` counts
   as, wire.md §9.1) → the default affinity, **not** preferred.
3. Otherwise the best hint: preferred before not preferred, then the narrower one (fewer NUMA
   nodes, then the lower bitmask, as kubelet's ``IsNarrowerThan``).

Then the policy decides: ``best-effort`` admits whatever was chosen; ``restricted`` rejects the
pod when the choice is not preferred; ``none`` asks no provider and gives an affinity with no
NUMA nodes, which ``Allocate`` receives as an empty hint (wire.md §4.3, field ``hint``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from policy.cpu.request import TopologyHint

__all__ = ["Hint", "TopologyAffinityError", "TopologyPolicy", "choose_affinity"]

#: A topology hint, the kubelet's word for it: NUMA node ids and whether the placement is
#: preferred. It is the policy's ``TopologyHint``, the value ``Allocate`` carries.
Hint = TopologyHint


class TopologyPolicy(Enum):
    """The kubelet's ``--topology-manager-policy`` values the simulator knows."""

    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"

    @property
    def asks_for_hints(self) -> bool:
        """Whether the topology manager calls ``GetTopologyHints`` at all (not under ``none``)."""
        return self is not TopologyPolicy.NONE


class TopologyAffinityError(Exception):
    """The policy rejects the pod: no preferred placement under ``restricted``."""


def _mask(nodes: Sequence[int]) -> int:
    return sum(1 << n for n in set(nodes))


def _rank(hint: Hint) -> tuple[bool, int, int]:
    # Sort key: preferred first, then fewer NUMA nodes, then the lower bitmask.
    return (not hint.preferred, len(set(hint.nodes)), _mask(hint.nodes))


def choose_affinity(
    policy: TopologyPolicy, hints: Sequence[Hint] | None, numa_nodes: Sequence[int]
) -> Hint:
    """The affinity the topology manager stores for a container, and passes to ``Allocate``.

    Args:
        policy: the topology-manager policy.
        hints: the provider's hints: ``None`` for no preference, empty for no feasible
            placement. Ignored under ``none``.
        numa_nodes: every NUMA node of the machine (the default affinity).

    Returns:
        The chosen hint; nodes sorted ascending.

    Raises:
        TopologyAffinityError: ``restricted`` and the chosen hint is not preferred.
    """
    if policy is TopologyPolicy.NONE:
        return Hint((), False)
    default_nodes = tuple(sorted(set(numa_nodes)))
    if hints is None:
        chosen = Hint(default_nodes, True)
    elif not hints:
        chosen = Hint(default_nodes, False)
    else:
        best = min(hints, key=_rank)
        chosen = Hint(tuple(sorted(set(best.nodes))), best.preferred)
    if policy is TopologyPolicy.RESTRICTED and not chosen.preferred:
        raise TopologyAffinityError(
            f"restricted topology policy: no preferred NUMA affinity among {len(hints or ())} "
            f"hint(s), best is nodes={list(chosen.nodes)}"
        )
    return chosen
