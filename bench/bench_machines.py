"""What a model costs on the shared ramp-up machine: fire() on plain models vs add_model().

Run: ``PYTHONPATH=. python bench/bench_machines.py [N]`` (default 5,000 containers).

* ``fire``: the container is any object with a ``state`` attribute; nothing is registered, so
  the machine adds no memory per container and no work grows with the container count.
* ``add``: ``transitions``' own way (``machine.add_model``) binds a partial per trigger, a
  ``may_<trigger>`` per trigger and an ``is_<state>`` per state onto every model, and
  ``remove_model`` is a linear list removal.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

from machines import ramp_up


@dataclass(eq=False)  # add_model/remove_model look models up by ==: identity is what we want
class Container:
    state: str
    pod_pending_or_unknown: bool = True
    target_pool_missing: bool = False
    transition_period_passed: bool = True


def _measure(label: str, n: int, build: Callable[[int], list[Container]]) -> None:
    # Time without tracemalloc (it slows allocation down several-fold), then memory with it.
    t0 = time.perf_counter()
    kept = build(n)
    elapsed = time.perf_counter() - t0
    _forget(kept)
    tracemalloc.start()
    base = tracemalloc.take_snapshot()
    kept = build(n)
    used = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(base, "filename"))
    tracemalloc.stop()
    _forget(kept)
    print(
        f"{label:<44} {n:>6} models  {used / n:>8.0f} B/model  {elapsed / n * 1e6:>7.1f} us/model"
    )


def _forget(models: list[Container]) -> None:
    lc = ramp_up.lifecycle()
    for m in lc.machine.models[:]:
        lc.remove(m)


def plain(n: int) -> list[Container]:
    return [Container("new") for _ in range(n)]


def fired(n: int) -> list[Container]:
    lc = ramp_up.lifecycle()
    models = [Container("new") for _ in range(n)]
    for m in models:
        lc.fire(m, "allocate_shared")
        lc.fire(m, "finish_ramp_up")
    return models


def added(n: int) -> list[Container]:
    lc = ramp_up.lifecycle()
    models = [Container("new") for _ in range(n)]
    for m in models:
        lc.add(m)
        m.allocate_shared()  # type: ignore[attr-defined]
        m.finish_ramp_up()  # type: ignore[attr-defined]
    return models


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    lc = ramp_up.lifecycle()
    _measure("plain dataclass models (baseline)", n, plain)
    _measure("fire(): allocate_shared + finish_ramp_up", n, fired)
    assert lc.machine.models == []
    _measure("add(): register + the same two triggers", n, added)
    models = added(n)
    t0 = time.perf_counter()
    for m in models:
        lc.remove(m)
    print(f"remove() of {len(models)} registered models: {time.perf_counter() - t0:.3f} s total")
    t0 = time.perf_counter()
    for _ in range(n):
        lc.step("ramping", "finish_ramp_up", {"transition_period_passed": True})
    print(f"step() pure form: {(time.perf_counter() - t0) / n * 1e6:.1f} us per call")


if __name__ == "__main__":
    main()
