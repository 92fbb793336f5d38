"""Simulated steps per second of the deterministic simulation (``qrmd sim``): how many seeds an
hour buys.

Run: ``PYTHONPATH=. python bench/bench_sim.py [--seeds N] [--steps K] [--faults KINDS]
[--reference-version v0.5.3|v0.5.47]`` (default: each seed picks its level, as ``qrmd sim``).

Each seed runs the real StateStore and Allocator on the one-thread scheduler, the journal on the
simulated disk, the simulated kubelet and every fault kind, with every invariant checked after
each step (``qrmd.sim.dst.simulation``). The figure is total steps over wall time, including the
invariant checks and each seed's start (building the node, the first recovery); it is printed
with the fault kinds injected, so a run with fewer faults is not mistaken for a faster one.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from qrmd.sim.dst.faults import parse_kinds
from qrmd.sim.dst.simulation import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--faults", default="all")
    parser.add_argument("--reference-version", default=None)
    args = parser.parse_args()
    kinds = parse_kinds(args.faults)
    started = time.perf_counter()
    steps = 0
    failures = 0
    injected: Counter[str] = Counter()
    digests = set()
    for seed in range(args.seeds):
        outcome = run(seed, args.steps, kinds, reference_version=args.reference_version)
        steps += outcome.steps
        failures += bool(outcome.failures)
        injected.update(outcome.faults_injected)
        digests.add(outcome.trace_digest)
    elapsed = time.perf_counter() - started
    print(
        f"{args.seeds} seeds x {args.steps} steps: {steps} steps in {elapsed:.2f} s = "
        f"{steps / elapsed:,.0f} steps/s; {failures} failing seeds; "
        f"{len(digests)} distinct traces"
    )
    print("faults injected: " + ", ".join(f"{k} {n}" for k, n in sorted(injected.items())))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
