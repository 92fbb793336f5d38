"""``qrmd journal verify|repair|show|stats DIR``: forensics on a journal (issue 3, item 4).

All four work offline, on a live node's directory or a copy taken off it: ``verify``, ``show``
and ``stats`` only read (no writer lock, nothing changed); ``repair`` changes files only as
``journal.repair`` allows — a torn tail is cut (nothing acknowledged is lost, opening does the
same), anything else is described and done only with ``--force``, and nothing is deleted.

- ``verify``: every checksum and the sequence (``journal.verify``), then replay from empty —
  through the same decode-and-apply path as the StateStore (``actors.state_replay``) — must
  equal every valid checkpoint it passes, the newest included. Replaying needs the node's
  topology (``--topology``, default this host's sysfs); a topology whose fingerprint differs
  from the journal's is refused with both fingerprints.
- ``repair``: prints what it found and what it does or would do, and what is lost.
- ``show``: the timeline, one header line per record (seq, time, cause) and one line per
  event; filters in ``qrmd.journal_view``; ``--json`` prints one object per record per line.
- ``stats``: records, events by kind, causes, bytes, segments, checkpoints, time span.

Exit status: 0 when all is well, 1 when verify found problems or repair needs ``--force``,
2 for an error (one line on stderr).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from actors.state_replay import ReplayError, replay_records, state_from_checkpoint
from journal import (
    Gap,
    JournalError,
    OsFileOps,
    Record,
    load_checkpoint,
    read_records,
    repair,
    verify,
)
from journal.checkpoints import checkpoint_name
from policy.state.sections import State, empty_state
from policy.topology.model import CPUTopology
from qrmd.commands import journal_forensics
from qrmd.forensics.explain import KnownPod, known_pods_in_records, match_pod
from qrmd.forensics.points import TIME_FORMS, resolve_time
from qrmd.forensics.renderers import RENDERERS, render_cause
from qrmd.forensics.replay import ForensicsError
from qrmd.journal_view import (
    JournalSums,
    RecordFilter,
    cause_target,
    format_event,
    format_time,
    known_kinds,
    record_document,
    record_kinds,
    sum_records,
)
from qrmd.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS, load_topology

__all__ = ["JournalCommandError", "register", "run_repair", "run_show", "run_stats", "run_verify"]

EXIT_PROBLEMS = 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("journal", help="verify, repair, show or sum up a journal directory")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    v = actions.add_parser("verify", help="check every checksum; replay must equal checkpoints")
    v.add_argument("directory", metavar="DIR")
    v.add_argument(
        "--topology",
        default=DEFAULT_TOPOLOGY_SPEC,
        metavar="SPEC",
        help=f"the node's topology, for replay: {SPEC_FORMS}; default: %(default)s",
    )
    v.add_argument("--json", action="store_true", help="print one JSON document")
    v.set_defaults(run=run_verify)

    r = actions.add_parser("repair", help="cut a damaged journal back, saying what is lost")
    r.add_argument("directory", metavar="DIR")
    r.add_argument("--force", action="store_true", help="also drop records after mid-log damage")
    r.add_argument("--json", action="store_true", help="print one JSON document")
    r.set_defaults(run=run_repair)

    s = actions.add_parser(
        "show",
        help="print the timeline of records and events",
        description="Print the journal's records, one header line each (seq, time, cause) "
        "and one line per event. Times are " + TIME_FORMS + ". Exit 1 when nothing matches "
        "or damage was read past (--skip-damaged), 2 on an error.",
    )
    s.add_argument("directory", metavar="DIR")
    s.add_argument(
        "--pod",
        metavar="POD",
        help="records whose cause or events name this pod (UID, namespace/name or name)",
    )
    s.add_argument("--container", metavar="NAME", help="...this container")
    s.add_argument(
        "--kind",
        action="append",
        default=[],
        metavar="KIND",
        help="records whose cause or events are of this kind (repeat, or comma-separated)",
    )
    s.add_argument(
        "--exclude-kind",
        action="append",
        default=[],
        metavar="KIND",
        help="leave out records whose cause is of this kind, and events of it (repeatable)",
    )
    s.add_argument("--since", metavar="TIME", help="records at or after this time")
    s.add_argument("--until", metavar="TIME", help="records at or before this time")
    s.add_argument("--from-seq", type=int, metavar="N", help="first seq (inclusive)")
    s.add_argument("--to-seq", type=int, metavar="N", help="last seq (inclusive)")
    s.add_argument("--tail", type=int, metavar="N", help="only the last N matching records")
    s.add_argument(
        "--follow",
        action="store_true",
        help="keep printing records as the daemon appends them (no lock taken; Ctrl-C stops)",
    )
    s.add_argument(
        "--skip-damaged",
        action="store_true",
        help="read past mid-log damage, reporting each gap on stderr (exit 1)",
    )
    s.add_argument("--json", action="store_true", help="one JSON object per record per line")
    s.set_defaults(run=run_show)

    t = actions.add_parser("stats", help="records, events by kind, bytes, time span")
    t.add_argument("directory", metavar="DIR")
    t.add_argument("--json", action="store_true", help="print one JSON document")
    t.set_defaults(run=run_stats)

    journal_forensics.register(actions)


class JournalCommandError(ValueError):
    """A failure reported as one line (``qrmd.cli`` prints every ``ValueError`` so)."""


def _refuse(message: str) -> Exception:
    return JournalCommandError(message)


def _need_directory(directory: str) -> None:
    if not os.path.isdir(directory):
        raise _refuse(f"no journal at {directory}: not a directory")


def _need_segments(directory: str) -> None:
    _need_directory(directory)
    if not any(name.endswith(".seg") for name in os.listdir(directory)):
        raise _refuse(
            f"no journal at {directory}: the directory holds no segment (*.seg); is it the "
            f"daemon's --state-dir journal directory?"
        )


# -- verify ------------------------------------------------------------------------------------


def run_verify(args: argparse.Namespace) -> int:
    _need_directory(args.directory)
    out = Console(highlight=False, soft_wrap=True, quiet=args.json)
    report = verify(args.directory)
    topology = load_topology(args.topology)
    if report.topology_fingerprint and report.topology_fingerprint != topology.fingerprint():
        raise _refuse(
            f"journal {args.directory} was written for topology {report.topology_fingerprint}, "
            f"but --topology {args.topology} is {topology.fingerprint()}: pass the node's own "
            f"topology (a machine file, or sysfs:ROOT copied from the node)"
        )
    span = "no records" if report.first_seq is None else f"{report.first_seq}-{report.last_seq}"
    out.print(
        Text(
            f"{args.directory}: {report.segments} segments, {report.records} records "
            f"(seq {span}), {len(report.checkpoints)} valid checkpoints"
        )
    )
    for finding in report.findings:
        where = f"{finding.path}" + (f" @ {finding.offset}" if finding.offset is not None else "")
        blocks = "blocks recovery" if finding.blocks_recovery else "recovery cuts it"
        out.print(Text(f"  {finding.kind}: {where}: {finding.message} ({blocks})"))
    problems = list(
        _replay_problems(args.directory, report.first_seq, report.checkpoints, topology, out)
    )
    for problem in problems:
        out.print(Text(f"  replay: {problem}"))
    ok = report.ok and not problems
    out.print(Text("ok" if ok else f"{len(report.findings) + len(problems)} problems"))
    if args.json:
        document = {
            **{k: v for k, v in dataclasses.asdict(report).items() if k != "findings"},
            "findings": [dataclasses.asdict(f) for f in report.findings],
            "replay_problems": problems,
            "ok": ok,
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    return 0 if ok else EXIT_PROBLEMS


def _replay_problems(
    directory: str,
    first_seq: int | None,
    checkpoints: tuple[int, ...],
    topology: CPUTopology,
    out: Console,
) -> Iterator[str]:
    """Replay from empty (or the oldest checkpoint retention left a start for) and compare."""
    fs = OsFileOps()
    base_seq = 0
    state: State = empty_state(topology)
    if first_seq is not None and first_seq > 1:
        starts = [seq for seq in checkpoints if seq + 1 >= first_seq]
        if not starts:
            yield f"records before seq {first_seq} are gone and no valid checkpoint covers them"
            return
        base_seq = starts[0]
        path = os.path.join(directory, checkpoint_name(base_seq))
        try:
            state = state_from_checkpoint(load_checkpoint(fs, path).state, base_seq, topology)
        except ReplayError as err:
            yield str(err)
            return
        out.print(Text(f"replaying from checkpoint {base_seq} (older records were retired)"))
    pending = [seq for seq in checkpoints if seq > base_seq]
    matched: list[int] = []
    seq = base_seq
    try:
        for record in read_records(directory, from_seq=base_seq + 1):
            state, _, _ = replay_records(state, [record])
            seq = record.seq
            while pending and pending[0] == seq:
                problem = _compare_checkpoint(fs, directory, seq, state, topology)
                if problem:
                    yield problem
                else:
                    matched.append(seq)
                pending.pop(0)
    except (JournalError, ReplayError) as err:
        yield f"stopped after seq {seq}: {err}"
        return
    for ahead in pending:
        yield f"checkpoint {ahead} is ahead of the newest record {seq}"
    start = "empty" if base_seq == 0 else f"checkpoint {base_seq}"
    shown = ", ".join(map(str, matched[-5:])) if matched else "none"
    out.print(
        Text(
            f"replay from {start} through seq {seq}: every record applies; matches "
            f"{len(matched)} checkpoints (newest: {shown})"
        )
    )


def _compare_checkpoint(
    fs: OsFileOps, directory: str, seq: int, state: State, topology: CPUTopology
) -> str | None:
    path = os.path.join(directory, checkpoint_name(seq))
    try:
        saved = state_from_checkpoint(load_checkpoint(fs, path).state, seq, topology)
    except (JournalError, ReplayError) as err:
        return str(err)
    if saved == state:
        return None
    differing = [
        name for name in state.sections if saved.sections.get(name) != state.sections[name]
    ]
    detail = ""
    if "cpu" in differing:
        ours, theirs = state.cpu, saved.cpu
        keys = {e.key for e in ours.entries()} ^ {e.key for e in theirs.entries()}
        keys |= {e.key for e in ours.entries() if theirs.entry(*e.key) not in (None, e)}
        pools = sorted(set(ours.pools.items()) ^ set(theirs.pools.items()))
        detail = f": containers {sorted(keys)[:5]}, pools {sorted({p for p, _ in pools})}"
    return (
        f"checkpoint {seq} differs from the replay of the records up to it in sections "
        f"{differing}{detail}"
    )


# -- repair ------------------------------------------------------------------------------------


def run_repair(args: argparse.Namespace) -> int:
    _need_directory(args.directory)
    try:
        report = repair(args.directory, force=args.force)
    except JournalError as err:
        raise _refuse(str(err)) from err
    if args.json:
        sys.stdout.write(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    else:
        Console(highlight=False, soft_wrap=True).print(Text(report.description))
    return EXIT_PROBLEMS if report.needs_force and not report.applied else 0


# -- show --------------------------------------------------------------------------------------


def run_show(args: argparse.Namespace) -> int:
    _need_segments(args.directory)
    scope = _show_scope(args)
    selection = _show_filter(args, scope)
    out = Console(highlight=False, soft_wrap=True)
    gaps = _GapReport()
    shown = 0
    try:
        records = read_records(
            args.directory,
            args.from_seq,
            args.to_seq,
            on_damage=gaps.add if args.skip_damaged else None,
        )
        picked: Iterator[tuple[Record, list[Any]]] = (
            (r, e) for r in records if (e := selection.select(r)) is not None
        )
        if args.tail is not None:
            picked = iter(collections.deque(picked, maxlen=args.tail))
        for record, events in picked:
            gaps.flush()
            _print_record(out, record, events, as_json=args.json)
            shown += 1
        gaps.flush()
        if args.follow:
            for record in follow_records(args.directory, scope.last_seq, _poll_wait):
                chosen = selection.select(record)
                if chosen is not None:
                    _print_record(out, record, chosen, as_json=args.json)
            return 0
    except JournalError as err:
        hint = "" if args.skip_damaged else "; --skip-damaged reads past it"
        raise _refuse(f"{err} (the records before it were shown{hint})") from err
    if shown == 0:
        sys.stderr.write(f"qrmd journal: {_nothing_matched(args, scope)}\n")
        return EXIT_PROBLEMS
    return EXIT_PROBLEMS if gaps.reported else 0


class _GapReport:
    """Gaps ``--skip-damaged`` read past, each reported on stderr where the timeline meets it."""

    def __init__(self) -> None:
        self._pending: list[Gap] = []
        self.reported = 0

    def add(self, gap: Gap) -> None:
        self._pending.append(gap)

    def flush(self) -> None:
        for gap in self._pending:
            resumed = (
                f"resumed at seq {gap.resumed_at_seq}"
                if gap.resumed_at_seq is not None
                else "nothing intact follows in that segment"
            )
            sys.stderr.write(
                f"qrmd journal: gap: damage in {gap.path} @ {gap.offset} from seq "
                f"{gap.first_missing_seq} ({gap.reason}); {resumed}\n"
            )
            self.reported += 1
        self._pending.clear()


@dataclass(frozen=True, slots=True)
class _Scope:
    """What the journal holds, read once before filtering (relative times, names, ranges)."""

    first_seq: int | None
    last_seq: int | None
    last_wall_time: float | None
    kinds: frozenset[str]
    pods: dict[str, KnownPod]


def _show_scope(args: argparse.Namespace) -> _Scope:
    first = last = None
    kinds: set[str] = set()
    records = []
    try:
        for record in read_records(
            args.directory, on_damage=(lambda gap: None) if args.skip_damaged else None
        ):
            first = record if first is None else first
            last = record
            kinds |= record_kinds(record)
            if args.pod is not None:
                records.append(record)
    except JournalError:
        pass  # the pass that prints reports the damage where it meets it
    pods = known_pods_in_records(records) if args.pod is not None else {}
    return _Scope(
        None if first is None else first.seq,
        None if last is None else last.seq,
        None if last is None else last.wall_time,
        frozenset(kinds),
        pods,
    )


def _split_kinds(values: list[str]) -> frozenset[str]:
    return frozenset(k.strip() for v in values for k in v.split(",") if k.strip())


def _show_filter(args: argparse.Namespace, scope: _Scope) -> RecordFilter:
    if args.from_seq is not None and args.to_seq is not None and args.from_seq > args.to_seq:
        raise _refuse(
            f"--from-seq {args.from_seq} is after --to-seq {args.to_seq}: the range is empty"
        )
    if args.tail is not None and args.tail < 1:
        raise _refuse(f"--tail {args.tail}: give a number of records, 1 or more")
    if scope.last_seq is None:
        raise _refuse(f"{args.directory} holds a journal with no records yet")
    first = scope.first_seq if scope.first_seq is not None else 0
    outside = [
        f"{flag} {seq}"
        for flag, seq, beyond in (
            (
                "--from-seq",
                args.from_seq,
                args.from_seq is not None and args.from_seq > scope.last_seq,
            ),
            ("--to-seq", args.to_seq, args.to_seq is not None and args.to_seq < first),
        )
        if beyond
    ]
    if outside:
        raise _refuse(
            f"{' '.join(outside)} is outside {args.directory}, which keeps seq "
            f"{first}-{scope.last_seq}: the range is empty"
        )
    kinds, excluded = _split_kinds(args.kind), _split_kinds(args.exclude_kind)
    known = known_kinds() | set(RENDERERS) | scope.kinds
    for flag, names in (("--kind", kinds), ("--exclude-kind", excluded)):
        unknown = sorted(names - known)
        if unknown:
            raise _refuse(
                f"unknown kind {', '.join(map(repr, unknown))} for {flag}: kinds are event "
                f"kinds ({', '.join(sorted(known_kinds()))}) or cause kinds; this journal "
                f"holds {', '.join(sorted(scope.kinds))}"
            )
    try:
        since = None if args.since is None else resolve_time(args.since, scope.last_wall_time)
        until = None if args.until is None else resolve_time(args.until, scope.last_wall_time)
    except ValueError as err:
        raise _refuse(str(err)) from err
    if since is not None and until is not None and since > until:
        raise _refuse(
            f"--since {args.since} ({format_time(since)}) is after --until {args.until} "
            f"({format_time(until)}): the range is empty"
        )
    pod = None
    if args.pod is not None:
        try:
            pod = match_pod(args.pod, scope.pods).uid
        except ForensicsError as err:
            raise _refuse(str(err)) from err
    return RecordFilter(
        pod=pod,
        container=args.container,
        kinds=kinds,
        exclude_kinds=excluded,
        since=since,
        until=until,
    )


def _nothing_matched(args: argparse.Namespace, scope: _Scope) -> str:
    given = [
        f"{flag} {value}"
        for flag, value in (
            ("--pod", args.pod),
            ("--container", args.container),
            ("--kind", ",".join(args.kind) or None),
            ("--exclude-kind", ",".join(args.exclude_kind) or None),
            ("--since", args.since),
            ("--until", args.until),
            ("--from-seq", args.from_seq),
            ("--to-seq", args.to_seq),
        )
        if value is not None
    ]
    return (
        f"no record of {args.directory} (seq {scope.first_seq}-{scope.last_seq}) matches "
        f"{' '.join(given) or 'the selection'}"
    )


def _print_record(out: Console, record: Record, events: list[Any], *, as_json: bool) -> None:
    if as_json:
        line = json.dumps(record_document(record, events), sort_keys=True, default=str)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return
    header = Text(f"{record.seq:>8}  {format_time(record.wall_time)}  ", style="bold")
    rpc, pod, container = cause_target(record.cause)
    if pod:
        header.append(rpc or "?", style="cyan")
        header.append(f" {pod}" + (f"/{container}" if container else ""))
    else:
        header.append(render_cause(record), style="cyan")
    out.print(header)
    for raw in events:
        out.print(Text(f"          {format_event(raw)}"))


#: How often ``--follow`` looks for new records.
FOLLOW_POLL_S = 0.5


def _poll_wait() -> bool:
    time.sleep(FOLLOW_POLL_S)  # a live tail waits on the daemon, not on a test
    return True


def follow_records(
    directory: str, after_seq: int | None, wait: Callable[[], bool]
) -> Iterator[Record]:
    """Records appended after ``after_seq``, as they come, until ``wait`` returns False.

    Takes no lock and never writes: it re-reads the newest segments after each ``wait``. A
    record being written (a torn tail) is not yet a record; it is read on a later pass.

    Args:
        directory: the live journal.
        after_seq: the newest record already shown (None: from the first).
        wait: called between passes; blocks until it is time to look again, returns False to
            stop.

    Yields:
        New records, ascending.

    Raises:
        JournalError: damage before the tail.
    """
    seq = after_seq or 0
    while wait():
        for record in read_records(directory, from_seq=seq + 1):
            seq = record.seq
            yield record


# -- stats -------------------------------------------------------------------------------------


def run_stats(args: argparse.Namespace) -> int:
    _need_segments(args.directory)
    sums = JournalSums()
    damage = ""
    try:
        sum_records(read_records(args.directory), sums)
    except JournalError as err:
        damage = str(err)
    files = _file_sizes(args.directory)
    document: dict[str, Any] = {
        "directory": args.directory,
        "records": sums.records,
        "events": sums.events,
        "first_seq": sums.first_seq,
        "last_seq": sums.last_seq,
        "first_time": None if sums.first_time is None else format_time(sums.first_time),
        "last_time": None if sums.last_time is None else format_time(sums.last_time),
        "span_s": (sums.last_time or 0.0) - (sums.first_time or 0.0),
        "segments": len(files[".seg"]),
        "segment_bytes": sum(files[".seg"]),
        "checkpoints": len(files[".ckpt"]),
        "checkpoint_bytes": sum(files[".ckpt"]),
        "events_by_kind": dict(sums.events_by_kind.most_common()),
        "records_by_cause": dict(sums.records_by_cause.most_common()),
        "damage": damage or None,
    }
    if args.json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        _print_stats(document)
    return EXIT_PROBLEMS if damage else 0


def _file_sizes(directory: str) -> dict[str, list[int]]:
    sizes: dict[str, list[int]] = {".seg": [], ".ckpt": []}
    with os.scandir(directory) as entries:
        for entry in entries:
            suffix = os.path.splitext(entry.name)[1]
            if suffix in sizes and entry.is_file():
                sizes[suffix].append(entry.stat().st_size)
    return sizes


def _print_stats(doc: dict[str, Any]) -> None:
    out = Console(highlight=False, soft_wrap=True)
    seqs = "none" if doc["first_seq"] is None else f"{doc['first_seq']}-{doc['last_seq']}"
    lines = [
        f"journal    {doc['directory']}",
        f"records    {doc['records']} (seq {seqs}), {doc['events']} events",
        (
            f"time span  {doc['first_time']} .. {doc['last_time']} ({doc['span_s']:.1f} s)"
            if doc["first_time"] is not None
            else "time span  none: the journal has no records yet"
        ),
        f"segments   {doc['segments']} ({doc['segment_bytes']} bytes)",
        f"checkpoints {doc['checkpoints']} ({doc['checkpoint_bytes']} bytes)",
        "events by kind:",
        *(f"  {kind:<22} {n}" for kind, n in doc["events_by_kind"].items()),
        "records by cause:",
        *(f"  {cause:<22} {n}" for cause, n in doc["records_by_cause"].items()),
    ]
    if doc["damage"]:
        lines.append(f"stopped at damage: {doc['damage']}")
    for line in lines:
        out.print(Text(line))
