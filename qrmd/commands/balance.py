"""``qrmd balance plan FILE``: ask the NUMA memory balancer what it would do, offline.

An operator gives one round's inputs as JSON (the shape ``RoundInputs.to_json`` writes and a
journaled round records: per-NUMA latency and bandwidth, the distance lists, the pools and their
pods with per-NUMA anonymous memory, the configuration, the last emitted round and the time;
format in ``policy.balance.inputs`` and docs/balancer.md). qrmd runs the same pure
``plan_round`` the daemon runs (spec memory-balancer §6.2, §7) and prints:

* the human view: the verdict, a per-NUMA latency/bandwidth table with each node's role (max
  latency, max bandwidth, source, destination with its distance), the pods to migrate, the
  eviction offer, and the advice text exactly as the balancer would hand it on (§5.6);
* with ``--json``, one machine-readable line ``{"outcome", "record", "advice", "evictPods"}``:
  ``outcome`` is ``stored``, ``failed`` or ``skipped`` (cool-down), ``record`` the balance
  record with the reference's field names (§5.5) or null, ``advice`` the advice object (§5.6)
  or null, ``evictPods`` the offers ``GetEvictPods`` would answer with for the record's pods
  (§9.1: ``uid``, ``reason``, ``forceEvict``, ``evictionPluginName``). Numbers are formatted as
  Go formats them, so the record and advice are the reference's bytes.

A bad file is one error line naming the file and the field (``inputs.pods[2].containers[0]
.anon["1"]: -5 is outside [0, ...]``); nothing is printed to stdout. Beyond the shape, the
file must be one node's: every NUMA node with metrics has a distance list and the other way
round, a distance names only those nodes, and so do the pools and each container's memory;
every pod's pool is one of the pools. The daemon always gives the planner such inputs; a
hand-edited file that mixes two nodes would plan a round no node could run.

Times: ``now`` and ``last.detectTime`` each take Unix seconds or RFC 3339 (the journal's and
the reference's forms). Exit status for a FILE: 0 for a stored or skipped round, 1 for a
failed one (its reason is printed), 2 for a bad file.

``--from-journal DIR --seq N`` takes the inputs of the round journaled as record N instead of a
file, re-computes it on the balance section as it stood before that record
(``qrmd.offline.balance_rerun``) and says whether today's code decides what the journal holds:
exit 0 when it matches, 1 when it differs (both events printed), 2 when record N is not a round.
``--json`` adds ``"journal": {"seq", "matches", "journaled", "recomputed"}``.
"""

from __future__ import annotations

import argparse
import sys

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from policy.balance import (
    BalanceInfo,
    EvictOffer,
    MemoryAdvice,
    RoundInputs,
    RoundOutcome,
    RoundResult,
    evict_offers,
    plan_round,
)
from policy.balance.constants import ADVICE_KEY, BALANCE_INTERVAL_NS
from policy.balance.gojson import encode, format_float, format_time
from policy.state.codec import encode_event
from qrmd.commands.input_file import input_name, read_json_input
from qrmd.commands.node_view import numa_roles
from qrmd.console import make_console
from qrmd.offline.balance_rerun import rerun_journaled_round

__all__ = [
    "EXIT_ROUND_FAILED",
    "check_one_node",
    "load_inputs",
    "plan_document",
    "register",
    "run",
]

_WIDEST_TABLE = 10_000  # characters; only bounds the measurement of the pods table

#: Round files are a few MB even for 2,000 pods; refuse what cannot be one.


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("balance", help="the NUMA memory balancer, offline")
    actions = p.add_subparsers(dest="balance_command", metavar="ACTION", required=True)
    plan = actions.add_parser(
        "plan",
        help="compute one balance round from a JSON file of its inputs",
        description=(
            "Compute one NUMA memory balance round from a JSON file of its inputs (the shape a "
            "journaled round records) and print the record, the advice and the eviction offer."
        ),
    )
    plan.add_argument(
        "file", metavar="FILE", nargs="?", help="round inputs as JSON; '-' reads stdin"
    )
    plan.add_argument("--json", action="store_true", help="print machine-readable JSON")
    plan.add_argument(
        "--from-journal",
        metavar="DIR",
        help="re-compute the round journaled as --seq N in this journal (instead of FILE) and "
        "say whether it matches: exit 1 when it does not, 2 when the record is not a round",
    )
    plan.add_argument("--seq", metavar="N", type=int, help="the record of --from-journal")
    plan.set_defaults(run=run, error_prefix=plan.prog)  # errors name the action, as usage errors do


#: Exit status of a round that failed (a metric missing, the inputs unusable).
EXIT_ROUND_FAILED = 1


def run(args: argparse.Namespace) -> int:
    if args.from_journal is not None or args.seq is not None:
        return _run_from_journal(args)
    if args.file is None:
        raise ValueError("give a round file (FILE, or - for stdin) or --from-journal DIR --seq N")
    inputs = load_inputs(args.file)
    outcome = plan_round(inputs)
    if args.json:
        sys.stdout.write(encode(plan_document(outcome)) + "\n")
    else:
        _render(inputs, outcome, make_console())
    return EXIT_ROUND_FAILED if outcome.result is RoundResult.FAILED else 0


def check_one_node(inputs: RoundInputs) -> None:
    """Refuse inputs that cannot come from one node (module docstring).

    Raises:
        ValueError: the first inconsistency, naming the field and the NUMA ids or pool.
    """
    numas = set(inputs.distances)
    metrics = set(inputs.numa_metrics)
    if metrics != numas:
        raise ValueError(
            f"numaMetrics name NUMA nodes {sorted(metrics)} but distances name {sorted(numas)}: "
            "every NUMA node needs both"
        )
    for numa, row in inputs.distances.items():
        unknown = sorted({d.numa_id for d in row} - numas)
        if unknown:
            raise ValueError(
                f"distances[{numa}] names NUMA nodes {unknown}, which have no distance list "
                f"(nodes: {sorted(numas)})"
            )
    for pool, pool_numas in inputs.pools.items():
        unknown = sorted(set(pool_numas) - numas)
        if unknown:
            raise ValueError(f"pools[{pool!r}] names unknown NUMA nodes {unknown}")
    for pod in inputs.pods:
        if pod.pool not in inputs.pools:
            raise ValueError(
                f"pod {pod.uid!r} is in pool {pod.pool!r}, which pools does not list "
                f"(pools: {sorted(inputs.pools)})"
            )
        for container in pod.containers:
            unknown = sorted(set(container.anon) - numas)
            if unknown:
                raise ValueError(
                    f"pod {pod.uid!r} container {container.name!r} has anon on unknown NUMA "
                    f"nodes {unknown}"
                )
    for unresolved in inputs.unresolved_pods:
        if unresolved.pool not in inputs.pools:
            raise ValueError(
                f"unresolvedPods: {unresolved.uid!r} is in pool {unresolved.pool!r}, which "
                f"pools does not list (pools: {sorted(inputs.pools)})"
            )


def _unix_detect_time(document: object) -> object:
    """``last.detectTime`` given as Unix seconds, as ``now`` may be, in the record's RFC 3339."""
    if not isinstance(document, dict) or not isinstance(document.get("last"), dict):
        return document
    detect = document["last"].get("detectTime")
    if isinstance(detect, (int, float)) and not isinstance(detect, bool):
        last = {**document["last"], "detectTime": format_time(float(detect))}
        return {**document, "last": last}
    return document


def _run_from_journal(args: argparse.Namespace) -> int:
    if args.file is not None:
        raise ValueError("give either FILE or --from-journal DIR --seq N, not both")
    if args.from_journal is None or args.seq is None:
        raise ValueError("--from-journal DIR and --seq N go together")
    rerun = rerun_journaled_round(args.from_journal, args.seq)
    outcome = plan_round(rerun.inputs)
    if args.json:
        document = {**plan_document(outcome), "journal": rerun.document()}
        sys.stdout.write(encode(document) + "\n")
        return 0 if rerun.matches else 1
    console = make_console()
    verdict = "matches the journal" if rerun.matches else "DIFFERS from the journal"
    console.print(
        Text(f"Record {rerun.seq} re-computed with this qrmd's policy: {verdict}", style="bold"),
        soft_wrap=True,
    )
    if not rerun.matches:
        for label, events in (("journaled", rerun.journaled), ("recomputed", rerun.again.events)):
            console.print(Text(f"{label}:"))
            for event in events:
                console.print(Text(f"  {encode(encode_event(event))}"), soft_wrap=True)
    console.print()
    _render(rerun.inputs, outcome, console)
    return 0 if rerun.matches else 1


def load_inputs(file: str) -> RoundInputs:
    """Read and validate a round file.

    Args:
        file: a path, or ``-`` for stdin.

    Returns:
        The validated inputs.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not JSON, a field is missing, unknown or invalid, or the
            inputs are not one node's (``check_one_node``); the message names the file and
            the field's path.
    """
    name = input_name(file)
    document = read_json_input(file, "round")
    try:
        inputs = RoundInputs.from_json(_unix_detect_time(document))
        check_one_node(inputs)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return inputs


def plan_document(outcome: RoundOutcome) -> dict[str, object]:
    """``{"outcome", "record", "advice", "evictPods"}`` for ``--json`` (module docstring)."""
    record = outcome.record
    offers = () if record is None else evict_offers(record, [p.uid for p in record.evict_pods])
    return {
        "outcome": str(outcome.result),
        "record": None if record is None else record.to_json(),
        "advice": None if outcome.advice is None else outcome.advice.to_json(),
        "evictPods": [
            {
                "uid": offer.pod_uid,
                "reason": offer.reason,
                "forceEvict": offer.force_evict,
                "evictionPluginName": offer.eviction_plugin_name,
            }
            for offer in offers
        ],
    }


# -- the human view ------------------------------------------------------------------------------


def _render(inputs: RoundInputs, outcome: RoundOutcome, console: Console) -> None:
    record = outcome.record
    console.print(Text(f"Balance round at {format_time(inputs.now)}", style="bold"))
    if record is None:
        _render_skipped(inputs, console)
        return
    console.print(Text(_verdict(outcome, record)), soft_wrap=True)
    console.print()
    if record.raw_numa_latency_info:
        console.print(_numa_table(record))
    _render_pods(record, console)
    _render_eviction(evict_offers(record, [p.uid for p in record.evict_pods]), record, console)
    _render_advice(outcome.advice, console)


def _render_skipped(inputs: RoundInputs, console: Console) -> None:
    # Only a round after an emitted one is skipped, so ``last`` is there.
    started = (
        ""
        if inputs.last is None
        else (
            f" The last emitted round started at {format_time(inputs.last.detect_time)}, "
            f"{format_float(inputs.now - inputs.last.detect_time)} s before now."
        )
    )
    console.print(
        Text(
            f"skipped: cool-down.{started} Rounds wait {BALANCE_INTERVAL_NS // 10**9} s after "
            "an emitted advice (§6.2). No record, no advice, no eviction offer."
        ),
        soft_wrap=True,
    )


def _verdict(outcome: RoundOutcome, record: BalanceInfo) -> str:
    if outcome.result is RoundResult.FAILED:
        return (
            f"failed: {record.failed_reason}\n"
            "Not stored: the round is logged and counted, and the previous record stays (§6.2)."
        )
    parts = [f"stored · status {record.status}"]
    if not record.need_balance:
        if record.balance_level:
            parts.append(
                f"{record.balance_level} cancelled: bandwidth level "
                f"{record.max_latency_numa_bandwidth_level} (grace balance needs high)"
            )
        elif record.max_latency_numa is not None and (
            record.max_latency_numa.read_latency == 0
            or (record.max_bandwidth_numa and record.max_bandwidth_numa.read_write_bandwidth == 0)
        ):
            parts.append("no measurement (a latency or bandwidth of 0): nothing to do")
        else:
            parts.append("no latency pressure: nothing to do")
        return " · ".join(parts)
    parts.append(str(record.balance_level))
    parts.append(f"bandwidth level {record.max_latency_numa_bandwidth_level}")
    if record.bandwidth_pressure:
        parts.append("bandwidth pressure")
    if record.source_numa is not None:
        parts.append(f"source NUMA {record.source_numa.numa_id}")
    text = " · ".join(parts)
    if record.failed_reason:
        text += f"\n{record.failed_reason}"
    return text


def _numa_table(record: BalanceInfo) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left")
    table.add_column("NUMA", justify="right", no_wrap=True)
    table.add_column("read latency", justify="right", no_wrap=True)
    table.add_column("bandwidth", justify="right", no_wrap=True)
    table.add_column("role")
    for info in record.raw_numa_latency_info:
        roles = numa_roles(record, info.numa_id)
        table.add_row(
            str(info.numa_id),
            format_float(info.read_latency),
            format_float(info.read_write_bandwidth),
            " · ".join(roles),
            style="bold" if roles else "",
        )
    return table


def _render_pods(record: BalanceInfo, console: Console) -> None:
    if record.dest_numas is None:
        return
    if not record.dest_numas:
        console.print(Text("No destination NUMA node passes the gap-ratio and ping-pong filters."))
        return
    dests = ", ".join(str(n.numa_id) for n in record.dest_numas)
    source = record.source_numa.numa_id if record.source_numa else "?"
    if not record.balance_pods:
        console.print(Text(f"No pod can move from NUMA {source} to NUMA {dests}."))
        return
    console.print(
        Text(
            f"Pods to migrate from NUMA {source} to NUMA {dests}: "
            f"{len(record.balance_pods)}, {_bytes(record.total_rss)} in total"
        ),
        soft_wrap=True,
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("pod", no_wrap=True)
    table.add_column("containers", no_wrap=True)
    table.add_column("RSS on source", justify="right", no_wrap=True)
    table.add_column("pool NUMAs", no_wrap=True)
    table.add_column("UID", no_wrap=True)
    for pod in record.balance_pods:
        table.add_row(
            f"{pod.namespace}/{pod.name}",
            ", ".join(pod.containers),
            _bytes(pod.rss_on_source_numa),
            ",".join(map(str, pod.dest_numas)),
            pod.uid,
        )
    # Never cut a UID or a container name to fit a narrow terminal: long lines are better.
    unbounded = console.options.update_width(_WIDEST_TABLE)
    console.width = max(console.width, Measurement.get(console, unbounded, table).maximum)
    console.print(table)


def _render_eviction(offers: tuple[EvictOffer, ...], record: BalanceInfo, console: Console) -> None:
    if not record.evict_pods:
        console.print(Text("Eviction offer: none"))
        return
    for pod, offer in zip(record.evict_pods, offers, strict=True):
        console.print(
            Text(
                f"Eviction offer: {pod.namespace}/{pod.name} (UID {pod.uid}), force, "
                f"reason: {offer.reason}"
            ),
            soft_wrap=True,
        )


def _render_advice(advice: MemoryAdvice | None, console: Console) -> None:
    if advice is None:
        console.print(Text("Advice: none"))
        return
    console.print(Text(f"Advice ({ADVICE_KEY}):"))
    # Printed whole on one line, to be copied as is; never wrapped by rich.
    console.print(Text(advice.to_json_text()), soft_wrap=True)


def _bytes(amount: float) -> str:
    """``9126805504`` → ``8.5 GiB (9126805504)``: readable, with the exact figure."""
    exact = format_float(amount)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if amount >= size:
            return f"{amount / size:.1f} {unit} ({exact})"
    return f"{exact} B"
