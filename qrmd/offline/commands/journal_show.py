"""``qrmd journal show DIR``: the timeline of records and events (the on-call questions of
DESIGN.md, "Who uses it").

One header line per record (seq, time, cause: the RPC and pod/container, or the cause's
rendering, ``qrmd.offline.renderers``) and one line per event; ``--json`` prints one object
per record per line. Filters are ``qrmd.offline.journal_view.RecordFilter``'s; what this module
adds:

- The journal is read once first (``_Scope``): its seq range, the kinds it holds, its newest
  record's time (relative times count back from it, ``qrmd.offline.points``) and, for
  ``--pod``, the pods it names (a pod by UID, ``namespace/name`` or name).
- Nothing is ever an empty answer without a word: an unknown kind, an unknown or ambiguous
  pod, a reversed or out-of-range seq or time range is an error naming it (exit 2); a valid
  selection nothing matches says so on stderr (exit 1).
- ``--skip-damaged`` reads past damage in the middle of the log, reporting each gap on stderr
  where the timeline meets it (exit 1); without it the timeline stops there (exit 2).
- ``--follow`` prints what the journal holds, then each record the daemon appends, every seq
  once and in order, without the journal's lock (``journal.follow``); seqs it passes over
  (retention deleted them before they were read, the journal was cut back) are said on stderr.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.text import Text

from journal import Gap, JournalError, Record, read_records
from journal.follow import JournalFollower, Skipped
from qrmd.console import make_console
from qrmd.offline.commands.journal_common import DIR_HELP, EXIT_PROBLEMS, need_segments, refuse
from qrmd.offline.explain import KnownPod, known_pods_in_records, match_pod
from qrmd.offline.journal_view import (
    RecordFilter,
    cause_target,
    format_event,
    format_time,
    known_kinds,
    record_document,
    record_kinds,
)
from qrmd.offline.points import TIME_FORMS, resolve_time
from qrmd.offline.renderers import RENDERERS, render_cause
from qrmd.offline.walk import ForensicsError

__all__ = ["FOLLOW_POLL_S", "register", "run_show"]


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``show`` to ``qrmd journal``."""
    s = actions.add_parser(
        "show",
        help="print the timeline of records and events",
        description="Print the journal's records, one header line each (seq, time, cause) "
        "and one line per event. Times are " + TIME_FORMS + ". Exit 1 when nothing matches "
        "or damage was read past (--skip-damaged), 2 on an error.",
    )
    s.add_argument("directory", metavar="DIR", help=DIR_HELP)
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


def run_show(args: argparse.Namespace) -> int:
    need_segments(args.directory)
    scope = _show_scope(args)
    selection = _show_filter(args, scope)
    out = make_console(soft_wrap=True)
    gaps = _GapReport()
    if args.follow:
        return _show_following(args, scope, selection, out, gaps)
    shown = 0
    try:
        records = read_records(
            args.directory,
            args.from_seq,
            args.to_seq,
            on_damage=gaps.add if args.skip_damaged else None,
        )
        for record, events in _picked(records, selection, args.tail):
            gaps.flush()
            _print_record(out, record, events, as_json=args.json)
            shown += 1
        gaps.flush()
    except JournalError as err:
        raise _stopped_at(err, args) from err
    if shown == 0:
        sys.stderr.write(f"qrmd journal show: {_nothing_matched(args, scope)}\n")
        return EXIT_PROBLEMS
    return EXIT_PROBLEMS if gaps.reported else 0


def _show_following(
    args: argparse.Namespace,
    scope: _Scope,
    selection: RecordFilter,
    out: Console,
    gaps: _GapReport,
) -> int:
    """``--follow``: what the journal holds, then each record appended, every seq once.

    One ``JournalFollower`` reads both, so the first record followed is the one after the
    last record the first pass read (``journal.follow`` for the rules).
    """
    after = (
        args.from_seq - 1
        if args.from_seq is not None and args.from_seq > (scope.first_seq or 0)
        else None
    )
    skips = _SkipReport()
    follower = JournalFollower(
        args.directory,
        after,
        on_skip=skips.add,
        on_damage=gaps.add if args.skip_damaged else None,
    )
    try:
        first_pass = _up_to(follower.poll(), args.to_seq)
        for record, events in _picked(first_pass, selection, args.tail):
            gaps.flush()
            _print_record(out, record, events, as_json=args.json)
        gaps.flush()
        while not _reached(follower, args.to_seq) and _poll_wait():
            for record, events in _picked(_up_to(follower.poll(), args.to_seq), selection, None):
                gaps.flush()
                _print_record(out, record, events, as_json=args.json)
            gaps.flush()
    except JournalError as err:
        raise _stopped_at(err, args) from err
    return EXIT_PROBLEMS if gaps.reported or skips.reported else 0


def _picked(
    records: Iterator[Record], selection: RecordFilter, tail: int | None
) -> Iterator[tuple[Record, list[Any]]]:
    picked: Iterator[tuple[Record, list[Any]]] = (
        (r, e) for r in records if (e := selection.select(r)) is not None
    )
    return iter(collections.deque(picked, maxlen=tail)) if tail is not None else picked


def _up_to(records: Iterator[Record], to_seq: int | None) -> Iterator[Record]:
    return records if to_seq is None else itertools.takewhile(lambda r: r.seq <= to_seq, records)


def _reached(follower: JournalFollower, to_seq: int | None) -> bool:
    return to_seq is not None and (follower.last_seq or 0) >= to_seq


def _stopped_at(err: JournalError, args: argparse.Namespace) -> Exception:
    hint = "" if args.skip_damaged else "; --skip-damaged reads past it"
    return refuse(f"{err} (the records before it were shown{hint})")


class _SkipReport:
    """Seqs ``--follow`` passed over (``journal.follow.Skipped``), each said on stderr."""

    def __init__(self) -> None:
        self.reported = 0

    def add(self, skipped: Skipped) -> None:
        sys.stderr.write(f"qrmd journal show: {skipped.reason}\n")
        sys.stderr.flush()
        self.reported += 1


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
                f"qrmd journal show: gap: damage in {gap.path} @ {gap.offset} from seq "
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
        raise refuse(
            f"--from-seq {args.from_seq} is after --to-seq {args.to_seq}: the range is empty"
        )
    if args.tail is not None and args.tail < 1:
        raise refuse(f"--tail {args.tail}: give a number of records, 1 or more")
    if scope.last_seq is None:
        raise refuse(f"{args.directory} holds a journal with no records yet")
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
        raise refuse(
            f"{' '.join(outside)} is outside {args.directory}, which keeps seq "
            f"{first}-{scope.last_seq}: the range is empty"
        )
    kinds, excluded = _split_kinds(args.kind), _split_kinds(args.exclude_kind)
    known = known_kinds() | set(RENDERERS) | scope.kinds
    for flag, names in (("--kind", kinds), ("--exclude-kind", excluded)):
        unknown = sorted(names - known)
        if unknown:
            raise refuse(
                f"unknown kind {', '.join(map(repr, unknown))} for {flag}: kinds are event "
                f"kinds ({', '.join(sorted(known_kinds()))}) or cause kinds; this journal "
                f"holds {', '.join(sorted(scope.kinds))}"
            )
    try:
        since = None if args.since is None else resolve_time(args.since, scope.last_wall_time)
        until = None if args.until is None else resolve_time(args.until, scope.last_wall_time)
    except ValueError as err:
        raise refuse(str(err)) from err
    if since is not None and until is not None and since > until:
        raise refuse(
            f"--since {args.since} ({format_time(since)}) is after --until {args.until} "
            f"({format_time(until)}): the range is empty"
        )
    pod = None
    if args.pod is not None:
        try:
            pod = match_pod(args.pod, scope.pods).uid
        except ForensicsError as err:
            raise refuse(str(err)) from err
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
