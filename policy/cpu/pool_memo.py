"""The last pool sizing, answered again when the same inputs come back (cpu-policy §9.4).

Pool sizing (``generate_pools_and_isolation``, or v0.5.47's
``generate_pools_with_numa_binding``) is a pure function of the policy context, the wanted
pool and isolated quantities and the adjustable CPUs, and most pool adjustments ask it the
same question as the one before: removing a container that is still ramping up, or one whose
pool's rounded-up size does not change (a 0.04-CPU pod leaving a pool of 20.3 CPUs), leaves
every input as it was. Its cost is a few ``take_by_numa_balance`` calls over the whole node,
which are most of a RemovePod's decision on a large node, so the last answer is kept and
given again when the inputs are equal.

The memo holds one entry and compares everything the function reads: the context by
identity (it is frozen, and the one the Allocator holds is the same object for every
decision; another context only misses), the quantities in their order (the answer's order
follows theirs), the adjustable CPUs, and v0.5.47's overlap ratios. A call that raises is
not kept. Callers get fresh dictionaries, so nothing they do to an answer reaches the memo.
The answer is the function's, whether it comes from the memo or not: decisions stay pure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from policy.cpu.context import PolicyContext
from policy.cpu.pool_sizing import IsolatedCPUs, IsolatedQuantities
from policy.topology.cpuset import CPUSet

__all__ = ["PoolSizing", "sized_pools"]

#: A pool sizing function: (context, pool quantities, isolated quantities, adjustable CPUs
#: [, v0.5.47's overlap ratios]) → (pool cpusets, isolated container cpusets).
PoolSizing = Callable[..., tuple[dict[str, CPUSet], IsolatedCPUs]]

_Key = tuple[
    PoolSizing,
    PolicyContext,
    tuple[tuple[str, int], ...],
    tuple[tuple[str, tuple[tuple[str, int], ...]], ...],
    int,
    tuple[tuple[str, float], ...] | None,
]

# One entry per thread: the Allocator's own thread in the daemon; offline re-runs and tests
# that decide on other threads keep theirs apart.
_last = threading.local()


def sized_pools(
    generate: PoolSizing,
    ctx: PolicyContext,
    pools_q: Mapping[str, int],
    iso_q: IsolatedQuantities,
    available: CPUSet,
    *,
    overlap: Mapping[str, float] | None = None,
) -> tuple[dict[str, CPUSet], IsolatedCPUs]:
    """``generate(ctx, pools_q, iso_q, available)`` (with ``overlap`` after them when it is
    given: v0.5.47's overlap ratios), from the memo when the inputs are equal.

    Raises:
        PoolError: as ``generate`` does (never from the memo: failures are not kept).
    """
    key: _Key = (
        generate,
        ctx,
        tuple(pools_q.items()),
        tuple((pod, tuple(containers.items())) for pod, containers in iso_q.items()),
        available.mask,
        None if overlap is None else tuple(overlap.items()),
    )
    kept = getattr(_last, "entry", None)
    if kept is not None and _same(kept[0], key):
        pools_cs, iso_cs = kept[1]
    else:
        if overlap is None:
            pools_cs, iso_cs = generate(ctx, pools_q, iso_q, available)
        else:
            pools_cs, iso_cs = generate(ctx, pools_q, iso_q, available, overlap)
        _last.entry = (key, (dict(pools_cs), _copy(iso_cs)))
    return dict(pools_cs), _copy(iso_cs)


def _same(kept: _Key, key: _Key) -> bool:
    # The function and the context by identity (hashing a context would hash its topology).
    return kept[0] is key[0] and kept[1] is key[1] and kept[2:] == key[2:]


def _copy(iso_cs: IsolatedCPUs) -> IsolatedCPUs:
    return {pod: dict(containers) for pod, containers in iso_cs.items()}
