"""``qrmd sim``: the deterministic simulation of the node (docs/simulation.md).

``qrmd sim run --seed N --steps K`` runs the real StateStore and Allocator, the journal on a
simulated disk, a simulated kubelet and faults from the seed, checking every invariant after
each step. Exit 0: every invariant held; 1: one broke (the seed, the step, the invariant and
the command that replays it are printed); 2: bad input, one line. ``--json`` prints one object
(``seed``, ``steps``, ``trace_digest``, ``faults_injected``, ``invariants_checked``,
``failures``, ...); the same seed always gives the same digest.

``qrmd sim shrink --seed N`` takes a failing seed and finds a smaller reproduction: the
shortest prefix that fails, with the fewest fault kinds and faults that still fail.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from policy.cpu.reference import REFERENCE_VERSIONS
from qrmd.commands import CommandError
from qrmd.sim.dst.defects import DEFECTS
from qrmd.sim.dst.faults import FAULT_KINDS, parse_kinds
from qrmd.sim.dst.shrink import shrink
from qrmd.sim.dst.simulation import FAULT_RATE, MAX_FAULT_RATE
from qrmd.sim.dst.simulation import run as simulate

__all__ = ["register", "run"]

DEFAULT_STEPS = 400


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sim",
        help="run the deterministic simulation of the node (any failure replays from its seed)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_p = actions.add_parser("run", help="run one seed and check every invariant each step")
    shrink_p = actions.add_parser("shrink", help="shrink a failing seed to a small reproduction")
    for action in (run_p, shrink_p):
        action.add_argument("--seed", required=True, metavar="N", help="the seed (an integer)")
        action.add_argument(
            "--steps",
            default=str(DEFAULT_STEPS),
            metavar="K",
            help="steps to run (default %(default)s)",
        )
        action.add_argument(
            "--faults",
            default="all",
            metavar="KINDS",
            help="fault kinds to inject, comma-separated, or 'all' or 'none' "
            "(crash, power_loss, disk_full, write_eio, fsync_eio, slow_fsync, clock_jump, "
            "kubelet_restart, pod_source, actor_crash, cpuset_drift, load_source, advisor; "
            "default all)",
        )
        action.add_argument(
            "--fault-budget",
            default=None,
            metavar="N",
            help="inject at most N faults (default: no limit)",
        )
        action.add_argument(
            "--fault-rate",
            default=str(FAULT_RATE),
            metavar="R",
            help=f"chance that a step is a fault, 0 to {MAX_FAULT_RATE} (default %(default)s)",
        )
        action.add_argument(
            "--plant",
            default=None,
            metavar="DEFECT",
            help="switch on a planted defect, to check that the simulation finds it "
            f"(one of: {', '.join(sorted(DEFECTS))})",
        )
        action.add_argument(
            "--reference-version",
            default=None,
            metavar="VERSION",
            help="the Katalyst release the simulated node reproduces, v0.5.3 or v0.5.47 "
            "(default: the seed picks; printed in --json and in the replay command)",
        )
        action.add_argument("--json", action="store_true", help="print one JSON object")
        action.set_defaults(error_prefix=action.prog)
    run_p.add_argument("--trace", default=None, metavar="FILE", help="write the trace to FILE")
    p.set_defaults(run=run)


def _count(text: str | None, flag: str, *, minimum: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise CommandError(f"{flag} must be an integer, got {text!r}") from None
    if value < minimum:
        raise CommandError(f"{flag} must be at least {minimum}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class SimArgs:
    """The checked arguments of ``qrmd sim run`` and ``qrmd sim shrink``."""

    seed: int
    steps: int
    kinds: tuple[str, ...]
    budget: int | None
    plant: str | None
    as_json: bool
    fault_rate: float = FAULT_RATE
    #: ``--reference-version`` (None: the seed picks).
    reference_version: str | None = None


def run(args: argparse.Namespace) -> int:
    seed = _count(args.seed, "--seed", minimum=0)
    steps = _count(args.steps, "--steps", minimum=1)
    budget = _count(args.fault_budget, "--fault-budget", minimum=0)
    assert seed is not None and steps is not None
    try:
        kinds = parse_kinds(args.faults)
    except ValueError as err:
        raise CommandError(f"--faults: {err}") from None
    if args.plant is not None and args.plant not in DEFECTS:
        raise CommandError(f"--plant: unknown defect {args.plant!r}; known: {', '.join(DEFECTS)}")
    try:
        rate = float(args.fault_rate)
    except ValueError:
        raise CommandError(f"--fault-rate must be a number, got {args.fault_rate!r}") from None
    if not 0 <= rate <= MAX_FAULT_RATE:
        raise CommandError(f"--fault-rate must lie between 0 and {MAX_FAULT_RATE}, got {rate}")
    level = args.reference_version
    if level is not None and level not in REFERENCE_VERSIONS:
        raise CommandError(
            f"--reference-version must be one of {', '.join(REFERENCE_VERSIONS)}, got {level!r}"
        )
    checked = SimArgs(seed, steps, kinds, budget, args.plant, args.json, rate, level)
    if args.action == "shrink":
        return _shrink(checked)
    return _run(checked, args.trace)


def replay_command(
    seed: int,
    steps: int,
    kinds: Sequence[str],
    budget: int | None,
    plant: str | None,
    *,
    fault_rate: float = FAULT_RATE,
    reference_version: str | None = None,
) -> str:
    """The command line that replays a run (with the level it ran at, when given)."""
    faults = "all" if tuple(kinds) == FAULT_KINDS else (",".join(kinds) or "none")
    out = f"qrmd sim run --seed {seed} --steps {steps} --faults {faults}"
    if budget is not None:
        out += f" --fault-budget {budget}"
    if fault_rate != FAULT_RATE:
        out += f" --fault-rate {fault_rate:g}"
    if reference_version is not None:
        out += f" --reference-version {reference_version}"
    if plant is not None:
        out += f" --plant {plant}"
    return out


def _run(args: SimArgs, trace: str | None) -> int:
    seed, steps, kinds, budget, plant, as_json = (
        args.seed,
        args.steps,
        args.kinds,
        args.budget,
        args.plant,
        args.as_json,
    )
    outcome = simulate(
        seed,
        steps,
        kinds,
        budget,
        plant,
        fault_rate=args.fault_rate,
        reference_version=args.reference_version,
    )
    if trace is not None:
        with open(trace, "w", encoding="utf-8") as handle:
            handle.write("\n".join(outcome.trace) + "\n")
    replay = replay_command(
        seed,
        outcome.steps,
        kinds,
        budget,
        plant,
        fault_rate=args.fault_rate,
        reference_version=outcome.reference_version,
    )
    if as_json:
        doc = outcome.as_json()
        doc["replay"] = replay
        print(json.dumps(doc, indent=2))
    else:
        faults = ", ".join(f"{k} {n}" for k, n in sorted(outcome.faults_injected.items()))
        print(
            f"seed {seed}: {outcome.steps} steps, {outcome.invariants_checked} invariant checks, "
            f"faults: {faults or 'none'}, {outcome.boots} boots; trace {outcome.trace_digest[:16]}"
        )
    if not outcome.failures:
        return 0
    if not as_json:
        for failure in outcome.failures:
            print(
                f"qrmd sim: seed {seed} failed at step {failure.step}: {failure.invariant}: "
                f"{failure.message}",
                file=sys.stderr,
            )
        print(f"replay it: {replay}", file=sys.stderr)
    return 1


def _shrink(args: SimArgs) -> int:
    seed, steps, kinds, budget, plant, as_json = (
        args.seed,
        args.steps,
        args.kinds,
        args.budget,
        args.plant,
        args.as_json,
    )
    found = shrink(
        seed,
        steps,
        kinds,
        budget,
        plant,
        fault_rate=args.fault_rate,
        reference_version=args.reference_version,
    )
    if found is None:
        print(f"seed {seed} does not fail in {steps} steps: nothing to shrink")
        return 0
    replay = replay_command(
        seed,
        found.steps,
        found.kinds,
        found.budget,
        plant,
        fault_rate=args.fault_rate,
        reference_version=found.reference_version,
    )
    failure = found.failure
    if as_json:
        print(
            json.dumps(
                {
                    "seed": seed,
                    "steps": found.steps,
                    "faults": list(found.kinds),
                    "fault_budget": found.budget,
                    "reference_version": found.reference_version,
                    "faults_injected": found.faults_injected,
                    "failure": {
                        "step": failure.step,
                        "invariant": failure.invariant,
                        "message": failure.message,
                    },
                    "runs": found.runs,
                    "replay": replay,
                },
                indent=2,
            )
        )
    else:
        print(
            f"seed {seed} shrunk in {found.runs} runs: fails at step {failure.step} "
            f"({failure.invariant}: {failure.message}) with {sum(found.faults_injected.values())} "
            f"faults of {len(found.kinds)} kinds\nreplay it: {replay}"
        )
    return 1
