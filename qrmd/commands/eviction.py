"""``qrmd eviction plan FILE``: would this node's CPU pressure eviction plugins have evicted?

An operator gives a sequence of ticks as JSON (format in ``policy.cpu.pressure.plan`` and the
README: each tick's time, the CPU state's pools with their sizes, the pods with each
container's pool, CPU request and 1-minute load, which pods the eviction manager sent, and the
configuration). qrmd runs the decisions the daemon runs for ``cpu-pressure-load-plugin`` and
``cpu-pressure-suppression-plugin`` (katalyst-core v0.5.3 ``cpueviction``), tick by tick with
one history, and prints for each tick:

* the load collection: each pool's sample and the bounds it was judged by, and the pools
  left unsampled for a missing load;
* ``ThresholdMet``: NOT_MET, SOFT_MET or HARD_MET, the pool and the over-bound ratio;
* ``GetTopEvictionPods``: the pods offered, in order, and the grace period;
* ``GetEvictPods`` (suppression): each pod offered with its reason;
* the warnings each decision gave.

With ``--json``, one JSON object per tick, one per line (``TickResult.to_json``). A bad file
is one error line naming the file and the field; nothing is printed to stdout.

``qrmd eviction rerun DIR`` takes every journaled CPU pressure decision again from its record
(``qrmd.pressure_rerun``) and says whether it gives the recorded events.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from policy.cpu.pressure.plan import PlanTick, TickResult, parse_plan, run_plan
from qrmd.journal_view import format_time
from qrmd.pressure_rerun import rerun_journal

__all__ = ["load_plan", "register", "render_tick", "run", "run_rerun"]

#: A plan of thousands of ticks of hundreds of pods is a few hundred MB at most.
MAX_INPUT_BYTES = 256 << 20


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eviction", help="the CPU pressure eviction plugins, offline")
    actions = p.add_subparsers(dest="eviction_command", metavar="ACTION", required=True)
    plan = actions.add_parser(
        "plan",
        help="run the CPU pressure eviction plugins over a JSON file of ticks",
        description=(
            "Run the CPU pressure eviction plugins (cpu-pressure-load-plugin, "
            "cpu-pressure-suppression-plugin) over a JSON file of ticks - pools, pods with "
            "their pools, requests and loads, the configuration - and print each tick's "
            "ThresholdMet, GetTopEvictionPods and GetEvictPods answers."
        ),
        epilog="The file format is in the README, section 'Asking the CPU eviction plugins "
        "offline'; an example "
        "is docs/examples/eviction/squeezed-reclaim.json.",
    )
    plan.add_argument("file", metavar="FILE", help="the ticks as JSON; '-' reads stdin")
    plan.add_argument("--json", action="store_true", help="print one JSON object per tick")
    plan.set_defaults(run=run)
    rerun = actions.add_parser(
        "rerun",
        help="re-run every journaled CPU pressure decision from its record",
        description=(
            "Walk a journal and take every CPU pressure decision again from its record (its "
            "command, time, settings and inputs) on the state just before it; print whether "
            "each gives the recorded events. Exit 1 when one does not."
        ),
    )
    rerun.add_argument("directory", metavar="DIR", help="the journal directory (--state-dir)")
    rerun.add_argument("--from-seq", type=int, metavar="N", help="first record (inclusive)")
    rerun.add_argument("--to-seq", type=int, metavar="N", help="last record (inclusive)")
    rerun.add_argument("--json", action="store_true", help="one JSON object per record")
    rerun.set_defaults(run=run_rerun)


def run(args: argparse.Namespace) -> int:
    ticks = load_plan(args.file)
    results, _ = run_plan(ticks)
    for tick, result in zip(ticks, results, strict=True):
        if args.json:
            sys.stdout.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
        else:
            sys.stdout.write(render_tick(tick, result) + "\n")
    return 0


def run_rerun(args: argparse.Namespace) -> int:
    """``qrmd eviction rerun``: 0 when every record re-runs to its events, else 1."""
    differing = total = 0
    for result in rerun_journal(args.directory, from_seq=args.from_seq, to_seq=args.to_seq):
        total += 1
        differing += not result.same
        if args.json:
            sys.stdout.write(json.dumps(result.to_json(), sort_keys=True) + "\n")
            continue
        when = format_time(result.wall_time)
        verdict = "same events" if result.same else "DIFFERENT events"
        if result.error:
            verdict = f"refused: {result.error}"
        sys.stdout.write(f"seq {result.seq}  {when}  {result.command}: {verdict}\n")
    if not args.json:
        sys.stdout.write(f"{total} CPU pressure records re-run, {differing} differ\n")
    return 1 if differing else 0


def load_plan(file: str) -> tuple[PlanTick, ...]:
    """Read and validate a plan file.

    Args:
        file: a path, or ``-`` for stdin.

    Raises:
        OSError: the file cannot be read.
        ValueError: not JSON, or a field is missing, unknown or invalid; the message names
            the file and the field's path.
    """
    name = "<stdin>" if file == "-" else file
    if file == "-":
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    else:
        try:
            with Path(file).open("rb") as f:
                raw = f.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise OSError(f"cannot read {file}: {exc.strerror or exc}") from None
    if len(raw) > MAX_INPUT_BYTES:
        raise ValueError(f"{name}: larger than {MAX_INPUT_BYTES} bytes; not a plan file")
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{name}: not JSON: {exc}") from None
    try:
        return parse_plan(document)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def render_tick(tick: PlanTick, result: TickResult) -> str:
    """A tick's answers for a person: one block, a line per call."""
    when = datetime.fromtimestamp(tick.time, UTC).isoformat(timespec="milliseconds")
    lines = [f"tick {when.replace('+00:00', 'Z')} ({tick.time:.3f})"]
    names = {pod.uid: f"{pod.uniq_key} ({pod.uid})" for pod in tick.active_pods}
    for call in tick.calls:
        answer = result.answers[call]
        if "error" in answer:
            lines.append(f"  {call}: error: {answer['error']}")
        else:
            lines.append(f"  {call}: {_RENDER[call](answer, names)}")
    lines += [f"  warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def _collect(answer: dict[str, Any], names: dict[str, str]) -> str:
    parts = [
        f"{pool} load {s['value']:g} (soft > {s['lower_bound']:g}, hard > {s['upper_bound']:g})"
        for pool, s in answer["pools"].items()
    ]
    parts += [f"{pool} not sampled" for pool in answer["unsampled_pools"]]
    if answer["advised"]:
        parts.append("advised bounds" + (", shared pools full" if answer["under_pressure"] else ""))
    return "; ".join(parts) or "nothing sampled"


def _threshold(answer: dict[str, Any], names: dict[str, str]) -> str:
    if answer["met_type"] == "NOT_MET":
        return "NOT_MET"
    return (
        f"{answer['met_type']} pool {answer['pool']}: {answer['threshold_value']:g} of the ring "
        f"over the bound (>= {answer['observed_value']:g}), condition CPUPressure"
    )


def _top(answer: dict[str, Any], names: dict[str, str]) -> str:
    if not answer["pod_uids"]:
        return "no pods"
    grace = answer["grace_period_seconds"]
    suffix = "" if grace is None else f", grace period {grace} s"
    pods = ", ".join(names.get(uid, uid) for uid in answer["pod_uids"])
    return f"pool {answer['pool']}: evict {pods}{suffix}"


def _evict(answer: dict[str, Any], names: dict[str, str]) -> str:
    offers = answer["evict_pods"]
    if not offers:
        return "no pods"
    return "; ".join(
        f"evict {names.get(o['pod_uid'], o['pod_uid'])}: {o['reason']}" for o in offers
    )


_RENDER = {
    "collect": _collect,
    "threshold_met": _threshold,
    "top_eviction_pods": _top,
    "evict_pods": _evict,
}
