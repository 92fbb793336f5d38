"""``qrmd journal state|diff|explain|export|report DIR``: the node at a point, what changed,
why a pod has its CPUs, a Parquet export and an HTML report (DESIGN.md, "Who uses it": on-call
on a copied journal).

All three replay the journal read-only and without its lock (``qrmd.offline.walk``), so
they run on a live node's directory or a copy. They need the node's topology (``--topology``,
checked against the journal's fingerprint). Points are ``seq:N`` or a time; a relative time
(``1h``) counts back from the journal's newest record (``qrmd.offline.points``). ``--json``
prints one JSON document. Errors are one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.text import Text

from journal import journal_identity, read_records
from qrmd import config
from qrmd.console import make_console
from qrmd.host.topology_source import SPEC_FORMS
from qrmd.offline.changes import diff_states
from qrmd.offline.commands.journal_common import DIR_HELP
from qrmd.offline.explain import explain, known_pods, match_pod
from qrmd.offline.export import event_rows, write_parquet
from qrmd.offline.journal_view import format_time
from qrmd.offline.points import TIME_FORMS, Point, parse_point, resolve_time
from qrmd.offline.renderers import render_event
from qrmd.offline.report import collect_series, render_html
from qrmd.offline.rerun import RerunSummary, rerun_steps
from qrmd.offline.state_view import render_state, state_document
from qrmd.offline.walk import (
    JOURNAL_TOPOLOGY,
    ForensicsError,
    JournalWalk,
    open_walk,
    resolve_topology,
)

__all__ = ["EXIT_DIVERGED", "add_topology_argument", "register", "walk_of"]

#: ``rerun``'s exit status when a decision comes out differently today.
EXIT_DIVERGED = 1


def add_topology_argument(parser: argparse.ArgumentParser) -> None:
    """``--topology SPEC``: the node's topology, which replay needs."""
    parser.add_argument(
        "--topology",
        default=JOURNAL_TOPOLOGY,
        metavar="SPEC",
        help=f"the node's topology: 'journal' (the machine its newest daemon start recorded; "
        f"this host's sysfs when none did), {SPEC_FORMS}; default: %(default)s",
    )


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``state``, ``diff``, ``explain``, ``export`` and ``report`` to ``qrmd journal``."""
    s = actions.add_parser(
        "state",
        help="the CPU state and the balancer section at a point (default: the newest)",
        description="Replay the journal up to a point (by default its newest record) and "
        "print the node as it was: pods, containers and their cpusets, pools, the per-NUMA "
        "map, the balancer's rounds.",
    )
    s.add_argument("directory", metavar="DIR", help=DIR_HELP)
    where = s.add_mutually_exclusive_group()
    where.add_argument(
        "--at",
        metavar="TIME",
        help=f"the last record at or before: {TIME_FORMS} (default: the newest record)",
    )
    where.add_argument("--seq", type=int, metavar="N", help="after record N")
    add_topology_argument(s)
    s.add_argument("--json", action="store_true", help="print one JSON document")
    s.set_defaults(run=run_state)

    d = actions.add_parser(
        "diff",
        help="containers added, removed, moved and pools resized between two points",
        description="Compare the state at two points and name the records that made each "
        "change. A point is seq:N (after record N) or a time: " + TIME_FORMS + ".",
    )
    d.add_argument("directory", metavar="DIR", help=DIR_HELP)
    d.add_argument("--from", dest="start", required=True, metavar="POINT")
    d.add_argument("--to", dest="end", required=True, metavar="POINT")
    add_topology_argument(d)
    d.add_argument("--json", action="store_true", help="print one JSON document")
    d.set_defaults(run=run_diff)

    e = actions.add_parser(
        "explain",
        help="every record that touched a pod's CPUs, with cause and before → after",
        description="List every record that touched the pod directly or through its pool: "
        "its cause, the CPUs before and after, and the reply kubelet got.",
    )
    e.add_argument("directory", metavar="DIR", help=DIR_HELP)
    e.add_argument("pod", metavar="POD", help="a pod UID, namespace/name or name")
    e.add_argument("container", metavar="CONTAINER", nargs="?", help="only this container")
    add_topology_argument(e)
    e.add_argument("--json", action="store_true", help="print one JSON document")
    e.set_defaults(run=run_explain)

    u = actions.add_parser(
        "rerun",
        help="re-run every recorded decision with this qrmd's policy; list each divergence",
        description="Take every journaled decision again — its recorded inputs, on the state "
        "replayed up to the record before it — with this qrmd's policy code, and list each "
        "record whose events come out differently (the record, what it holds, what is decided "
        "now). The safe-rollout check for a new qrmd version; journals written by older "
        "versions are read through their cause upgrade. The Allocator's settings are not in "
        "the journal: pass the node's (--config and the flags of `qrmd run`, --topology "
        "included). Exit 0 when every decision comes out the same, 1 on a divergence, 2 on an "
        "error.",
    )
    u.add_argument("directory", metavar="DIR", help=DIR_HELP)
    u.add_argument("--from", dest="start", metavar="POINT", help="first record (seq:N or a time)")
    u.add_argument("--to", dest="end", metavar="POINT", help="last record (seq:N or a time)")
    u.add_argument("--json", action="store_true", help="print one JSON document")
    config.add_arguments(u)
    u.set_defaults(run=run_rerun)

    x = actions.add_parser(
        "export",
        help="one Parquet row per event, for querying many nodes' journals together",
        description="Write one row per event (node, seq, time, kind, cause kind, pod, "
        "container, pool, cpuset, NUMA nodes, cause as JSON) to a Parquet file. Needs "
        "pip install 'qrmd[forensics]'.",
    )
    x.add_argument("directory", metavar="DIR", help=DIR_HELP)
    x.add_argument("--parquet", required=True, metavar="OUT", help="the Parquet file to write")
    x.add_argument(
        "--node", metavar="NAME", help="the node column (default: the journal's node name)"
    )
    add_topology_argument(x)
    x.add_argument("--json", action="store_true", help="print what was written as JSON")
    x.set_defaults(run=run_export)

    r = actions.add_parser(
        "report",
        help="one self-contained HTML page of charts: NUMA use, pools, rounds, timeline",
        description="Draw the journal as one HTML page that needs no network: CPUs per NUMA "
        "node, pool sizes and balance rounds over time, and the event timeline. Needs "
        "pip install 'qrmd[forensics]'.",
    )
    r.add_argument("directory", metavar="DIR", help=DIR_HELP)
    r.add_argument("--html", required=True, metavar="OUT", help="the HTML file to write")
    add_topology_argument(r)
    r.add_argument("--json", action="store_true", help="print what was written as JSON")
    r.set_defaults(run=run_report)


def walk_of(args: argparse.Namespace) -> JournalWalk:
    """The walk over ``args.directory`` on ``args.topology``.

    Raises:
        ForensicsError: see ``open_walk``.
        TopologyError: the SPEC is unreadable.
    """
    topology, described = resolve_topology(args.directory, args.topology)
    return open_walk(args.directory, topology, described)


def _seq_of(walk: JournalWalk, point: Point) -> int:
    if point.seq is not None:
        walk.check_seq(point.seq)
        return point.seq
    assert point.time is not None
    return walk.seq_at_time(resolve_time(point.time, walk.last_wall_time), point.time)


def _write_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")


def _wall_time_of(walk: JournalWalk, seq: int) -> float | None:

    for record in read_records(walk.directory, seq, seq):
        return record.wall_time
    return None


def run_state(args: argparse.Namespace) -> int:
    walk = walk_of(args)
    if args.seq is not None:
        seq = _seq_of(walk, Point(seq=args.seq))
    elif args.at is not None:
        seq = _seq_of(walk, Point(time=args.at))
    else:  # the newest state, what an operator means by "the state"
        seq = walk.last_seq if walk.last_seq is not None else walk.base_seq
    state = walk.state_at(seq)
    wall = _wall_time_of(walk, seq) if seq > 0 else None
    document = state_document(state, seq=seq, wall_time=wall)
    if args.json:
        _write_json(document)
        return 0
    when = "" if wall is None else f" ({format_time(wall)})"
    header = f"{args.directory} after seq {seq}{when}: {len(document['pods'])} pods"
    make_console(soft_wrap=True).print(render_state(state, header, document["balance"]))
    return 0


def run_diff(args: argparse.Namespace) -> int:
    walk = walk_of(args)
    start_seq = _seq_of(walk, parse_point(args.start))
    end_seq = _seq_of(walk, parse_point(args.end))
    if end_seq < start_seq:
        raise ForensicsError(
            f"--from {args.start} (seq {start_seq}) is after --to {args.end} (seq {end_seq}): "
            f"swap them"
        )
    start = walk.state_at(start_seq)
    end = start
    steps = []
    for step in walk.steps(end_seq, what="diffing"):
        if step.record.seq <= start_seq:
            continue
        steps.append((step.record.seq, step.before, step.after))
        end = step.after
    diff = diff_states(start, end, steps)
    document = {"from_seq": start_seq, "to_seq": end_seq, **diff.to_json()}
    if args.json:
        _write_json(document)
        return 0
    out = make_console(soft_wrap=True)
    out.print(Text(f"{args.directory}: seq {start_seq} → seq {end_seq}", style="bold"))
    if not diff.containers and not diff.pools and not diff.balance_changed and not diff.sections:
        out.print(Text("no change in containers, pools or any other state section"))
    for c in document["containers"]:
        out.print(
            Text(
                f"  container {c['pod']}/{c['container']} {c['change']}: "
                f"{c['cpuset_before'] or '-'} ({c['placement_before'] or '-'}) → "
                f"{c['cpuset_after'] or '-'} ({c['placement_after'] or '-'})  "
                f"records {_seqs(c['records'])}"
            )
        )
    for p in document["pools"]:
        out.print(
            Text(
                f"  pool {p['pool']} {p['change']}: {p['cpuset_before'] or '-'} "
                f"({p['size_before'] or 0}) → {p['cpuset_after'] or '-'} ({p['size_after'] or 0})"
                f"  records {_seqs(p['records'])}"
            )
        )
    if diff.balance_changed:
        out.print(Text(f"  balancer section changed  records {_seqs(diff.balance_records)}"))
    for name, seqs in diff.sections.items():
        out.print(Text(f"  {name} section changed  records {_seqs(seqs)}"))
    return 0


def _seqs(seqs: list[int]) -> str:
    return ", ".join(map(str, seqs)) if seqs else "-"


def run_explain(args: argparse.Namespace) -> int:
    walk = walk_of(args)
    steps = list(walk.steps(what="explaining"))
    pod = match_pod(args.pod, known_pods(steps))
    if args.container is not None and not any(
        args.container in state.cpu.pod_containers(pod.uid)
        for step in steps
        for state in (step.before, step.after)
    ):
        raise ForensicsError(f"pod {pod.describe()} never had a container {args.container!r}")
    found = list(explain(steps, pod, args.container))
    if args.json:
        _write_json(
            {"pod": pod.describe(), "uid": pod.uid, "records": [e.to_json() for e in found]}
        )
        return 0
    out = make_console(soft_wrap=True)
    what = pod.describe() + (f" container {args.container}" if args.container else "")
    out.print(Text(f"{what}: {len(found)} records", style="bold"))
    for item in found:
        doc = item.to_json()
        out.print(Text(f"{doc['seq']:>8}  {doc['time']}  {doc['summary']}  ({doc['how']})"))
        for change in doc["changes"]:
            out.print(
                Text(
                    f"          {change['container']}: {change['cpuset_before'] or '-'} → "
                    f"{change['cpuset_after'] or '-'} ({change['change']}, "
                    f"{change['placement_after'] or 'gone'})"
                )
            )
        for container, reply in doc["replies"].items():
            out.print(Text(f"          reply to kubelet for {container}: {reply}"))
        for container, move in doc["moves"].items():
            out.print(Text(f"          {container} {move}, not a reply: kubelet sees it listed"))
        for event in doc["events"]:
            out.print(Text(f"          event {event}"))
    return 0


def _node_name(args: argparse.Namespace) -> str:
    if args.node:
        return str(args.node)
    identity = journal_identity(args.directory)
    return identity.node_name if identity is not None else ""


def _written(args: argparse.Namespace, path: str, what: str, count: int) -> int:
    if args.json:
        _write_json({"directory": args.directory, "written": path, what: count})
    else:
        make_console(soft_wrap=True).print(
            Text(f"{args.directory}: wrote {count} {what} to {path}")
        )
    return 0


def run_export(args: argparse.Namespace) -> int:
    walk = walk_of(args)
    if walk.last_seq is None:
        raise ForensicsError(f"{args.directory} has no records: there is nothing to export")
    count = write_parquet(event_rows(walk, _node_name(args)), args.parquet)
    return _written(args, args.parquet, "rows", count)


def run_report(args: argparse.Namespace) -> int:
    walk = walk_of(args)
    series = collect_series(walk.steps(what="charting"))
    identity = journal_identity(args.directory)
    node = identity.node_name if identity is not None else args.directory
    page = render_html(series, f"qrmd journal report: node {node}")
    with open(args.html, "w", encoding="utf-8") as out:
        out.write(page)
    return _written(args, args.html, "records", len(series.timeline))


def run_rerun(args: argparse.Namespace) -> int:
    node = config.config_from_args(args)
    settings = config.build_context(node)
    walk = open_walk(args.directory, settings.topology, node.topology)
    if walk.last_seq is None:
        raise ForensicsError(f"{args.directory} has no records: there is nothing to re-run")
    first = walk.base_seq + 1 if args.start is None else _seq_of(walk, parse_point(args.start))
    last = walk.last_seq if args.end is None else _seq_of(walk, parse_point(args.end))
    if last < first:
        raise ForensicsError(f"the range seq {first} to seq {last} is empty")
    summary = RerunSummary()
    steps = (s for s in walk.steps(last, what="re-running") if s.record.seq >= first)
    out = make_console(soft_wrap=True)
    for divergence in rerun_steps(steps, settings, summary):
        if args.json:
            continue
        out.print(Text(f"divergence at seq {divergence.seq} ({divergence.kind})", style="bold"))
        out.print(Text("  recorded: " + "; ".join(map(render_event, divergence.expected))))
        if divergence.got is not None:
            out.print(Text("  now:      " + "; ".join(map(render_event, divergence.got))))
        if divergence.error:
            out.print(Text(f"  now:      {divergence.error}"))
    for seq, names in summary.other_settings.items():
        if not args.json:
            out.print(
                Text(
                    f"note: the daemon start at seq {seq} ran with other settings than these: "
                    f"{', '.join(names)} (pass the node's --config and flags)"
                )
            )
    if args.json:
        _write_json({"from_seq": first, "to_seq": last, **summary.to_json()})
    else:
        skipped = sum(len(v) for v in summary.no_rerunner.values())
        kinds = ", ".join(f"{k} ({len(v)})" for k, v in sorted(summary.no_rerunner.items()))
        out.print(
            Text(
                f"{args.directory} seq {first}-{last}: {summary.rerun} decisions re-run, "
                f"{summary.same} the same, {len(summary.divergences)} divergent"
                + (f"; {skipped} records of kinds without a re-runner: {kinds}" if skipped else "")
                + (
                    f"; {len(summary.nothing_to_rerun)} with nothing to re-run"
                    if summary.nothing_to_rerun
                    else ""
                )
            )
        )
    return EXIT_DIVERGED if summary.divergences else 0
