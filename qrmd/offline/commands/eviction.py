"""``qrmd eviction plan FILE``: would this node's CPU pressure eviction plugins have evicted?

An operator gives a sequence of ticks as JSON (format in ``policy.cpu.pressure.plan`` and
docs/cpu-pressure.md: each tick's time, the CPU state's pools with their sizes, the pods with each
container's pool, CPU request and 1-minute load, which pods the eviction manager sent, and the
configuration). qrmd runs the decisions the daemon runs for ``cpu-pressure-load-plugin`` and
``cpu-pressure-suppression-plugin`` (katalyst-core v0.5.3 ``cpueviction``), tick by tick with
one history, and prints for each tick:

* the load collection: each pool's sample and the bounds it was judged by, the pools left
  unsampled for a missing load and, with the advised bounds, the shared pools' size against
  their limit;
* ``ThresholdMet``: NOT_MET, SOFT_MET or HARD_MET, the pool, the over-bound ratio and the
  condition;
* ``GetTopEvictionPods``: the pods offered, in order, and the deletion options;
* ``GetEvictPods`` (suppression): each pod offered with its reason, ``force_evict``, the
  plugin name and the deletion options, and the response's condition;
* an RPC's error as the plugin answers it (status code and message);
* the warnings each decision gave.

With ``--json``, one JSON object per tick, one per line (``plan_json``): each call's answer is
the response the running plugin sends for the same inputs, field for field
(``policy.cpu.pressure.answers``), and an RPC's error is ``{"code", "error"}``, the status
and message the plugin answers (``wire.errors``). A bad file is one error line naming the
file and the field; nothing is printed to stdout.

``qrmd eviction rerun DIR`` takes every journaled CPU pressure decision again from its record
(``qrmd.offline.pressure_rerun``) and says whether it gives the recorded events.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from journal import JournalError
from policy.cpu.pressure.plan import PlanTick, TickResult, parse_plan, run_plan
from qrmd.commands.input_file import input_name, read_json_input
from qrmd.offline.commands.journal_common import need_segments, refuse
from qrmd.offline.journal_view import format_time
from qrmd.offline.pressure_rerun import rerun_journal
from wire.errors import status_for

__all__ = ["RPC_OF_CALL", "load_plan", "plan_json", "register", "render_tick", "run", "run_rerun"]

#: The RPC each plan call is (the load collection is the plugin's own ticker, no RPC).
RPC_OF_CALL = {
    "threshold_met": "ThresholdMet",
    "top_eviction_pods": "GetTopEvictionPods",
    "evict_pods": "GetEvictPods",
}

#: A plan of thousands of ticks of hundreds of pods is a few hundred MB at most.


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
        epilog="The file format is in docs/cpu-pressure.md, section 'Asking the CPU eviction "
        "plugins offline', and every field printed in docs/eviction-plan.md; examples are in "
        "docs/examples/eviction/.",
    )
    plan.add_argument("file", metavar="FILE", help="the ticks as JSON; '-' reads stdin")
    plan.add_argument("--json", action="store_true", help="print one JSON object per tick")
    # Each action names itself in its errors, as argparse's usage errors already do.
    plan.set_defaults(run=run, error_prefix=plan.prog)
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
    rerun.set_defaults(run=run_rerun, error_prefix=rerun.prog)


def run(args: argparse.Namespace) -> int:
    ticks = load_plan(args.file)
    results, _ = run_plan(ticks)
    for tick, result in zip(ticks, results, strict=True):
        if args.json:
            sys.stdout.write(json.dumps(plan_json(result), sort_keys=True) + "\n")
        else:
            sys.stdout.write(render_tick(tick, result) + "\n")
    return 0


def plan_json(result: TickResult) -> dict[str, Any]:
    """A tick's result as ``--json`` prints it: ``TickResult.to_json`` with each RPC's error
    as the plugin answers it, ``{"code": STATUS, "error": MESSAGE}`` (``wire.errors``; the
    message is the RPC's name before the decision's text)."""
    document = result.to_json()
    for call, err in result.errors.items():
        rpc = RPC_OF_CALL.get(call)
        if rpc is not None:
            status = status_for(err, rpc)
            document[call] = {"code": status.code.name, "error": status.message}
    return document


def run_rerun(args: argparse.Namespace) -> int:
    """``qrmd eviction rerun``: 0 when every record re-runs to its events, else 1."""
    need_segments(args.directory)
    try:
        return _rerun(args)
    except JournalError as exc:
        # A journal that cannot be read is the operator's input, not our crash: one line.
        raise refuse(str(exc)) from None


def _rerun(args: argparse.Namespace) -> int:
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
    name = input_name(file)
    document = read_json_input(file, "plan")
    try:
        return parse_plan(document)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def render_tick(tick: PlanTick, result: TickResult) -> str:
    """A tick's answers for a person: one block, a line per call."""
    when = datetime.fromtimestamp(tick.time, UTC).isoformat(timespec="milliseconds")
    lines = [f"tick {when.replace('+00:00', 'Z')} ({tick.time:.3f})"]
    names = {pod.uid: f"{pod.uniq_key} ({pod.uid})" for pod in tick.active_pods}
    document = plan_json(result)
    for call in tick.calls:
        answer = document[call]
        if "error" in answer:
            code = f" ({answer['code']})" if "code" in answer else ""
            lines.append(f"  {call}: error{code}: {answer['error']}")
        else:
            pool = result.answer_pools.get(call, "")
            lines.append(f"  {call}: {_RENDER[call](answer, names, pool)}")
    lines += [f"  warning: {w}" for w in result.warnings]
    return "\n".join(lines)


def _collect(answer: dict[str, Any], names: dict[str, str], pool: str) -> str:
    parts = [
        f"{name} load {s['value']:g} (soft > {s['lower_bound']:g}, hard > {s['upper_bound']:g})"
        for name, s in answer["pools"].items()
    ]
    parts += [f"{name} not sampled" for name in answer["unsampled_pools"]]
    if answer["advised"]:
        size, limit = answer["shared_pools_size"], answer["shared_pools_limit"]
        full = ", full" if answer["under_pressure"] else ""
        parts.append(f"advised bounds: shared pools {size} of their limit {limit} CPUs{full}")
    return "; ".join(parts) or "nothing sampled"


def _condition(condition: dict[str, Any] | None) -> str:
    if condition is None:
        return "no condition"
    effects = ",".join(condition["effects"]) or "no effects"
    met = "met" if condition["met_condition"] else "not met"
    return (
        f"condition {condition['condition_name']} ({condition['condition_type']}, {effects}, {met})"
    )


def _deletion(options: dict[str, Any] | None) -> str:
    if options is None:
        return "no deletion options"
    return f"grace period {options['grace_period_seconds']} s"


def _threshold(answer: dict[str, Any], names: dict[str, str], pool: str) -> str:
    if answer["met_type"] == "NOT_MET":
        return "NOT_MET"
    return (
        f"{answer['met_type']} pool {pool}: {answer['threshold_value']:g} of the ring "
        f"over the bound (>= {answer['observed_value']:g}), {_condition(answer['condition'])}"
    )


def _top(answer: dict[str, Any], names: dict[str, str], pool: str) -> str:
    if not answer["pod_uids"]:
        return "no pods"
    pods = ", ".join(names.get(uid, uid) for uid in answer["pod_uids"])
    return f"pool {pool}: evict {pods}, {_deletion(answer['deletion_options'])}"


def _evict(answer: dict[str, Any], names: dict[str, str], pool: str) -> str:
    offers = [
        f"evict {names.get(o['pod_uid'], o['pod_uid'])}: {o['reason']} "
        f"(force_evict {json.dumps(o['force_evict'])}, "
        f"eviction_plugin_name {json.dumps(o['eviction_plugin_name'])}, "
        f"{_deletion(o['deletion_options'])})"
        for o in answer["evict_pods"]
    ]
    return "; ".join([*(offers or ["no pods"]), _condition(answer["condition"])])


_RENDER = {
    "collect": _collect,
    "threshold_met": _threshold,
    "top_eviction_pods": _top,
    "evict_pods": _evict,
}
