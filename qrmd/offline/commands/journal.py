"""``qrmd journal ACTION DIR``: forensics on a journal (DESIGN.md "Who uses it": on-call).

Every action works offline, on a live node's directory or a copy taken off it, and every one
but ``repair`` only reads (no writer lock, nothing changed); ``repair`` changes files only as
``journal.repair`` allows — a torn tail is cut (nothing acknowledged is lost, opening does the
same), anything else is described and done only with ``--force``, and nothing is deleted.

- ``verify``: every checksum and the sequence (``journal.verify``), then replay from empty —
  on the one journal walk (``journal.walk``) with the StateStore's decode-and-apply
  (``policy.state.replay``) — must equal every valid checkpoint it passes, the newest
  included. Replaying needs the node's topology (``--topology``, by default the machine the
  journal's newest daemon start recorded, else this host's sysfs:
  ``qrmd.offline.walk.resolve_topology``); a topology whose fingerprint differs from the
  journal's is refused with both fingerprints.
- ``repair``: prints what it found and what it does or would do, and what is lost.
- ``show``: the timeline (``qrmd.offline.commands.journal_show``).
- ``stats``: records, events by kind, causes, bytes, segments, checkpoints, time span.
- ``state``, ``diff``, ``explain``, ``rerun``, ``export``, ``report``: the forensic questions
  (``qrmd.offline.commands.journal_forensics``).

``--json`` on every action prints one JSON document (``show``: one per record). Exit status:
0 when all is well, 1 when verify found problems or repair needs ``--force``, 2 for an error
(one line on stderr).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.text import Text

from journal import (
    JournalError,
    OsFileOps,
    load_checkpoint,
    read_records,
    repair,
    verify,
)
from journal.checkpoints import checkpoint_name
from journal.walk import NoStart, find_start
from journal.walk import steps as walk_steps
from policy.state.replay import ReplayError, StateReplayer, state_from_checkpoint
from policy.state.sections import State
from policy.topology.model import CPUTopology
from qrmd.console import make_console
from qrmd.offline.commands import journal_forensics, journal_show, katalyst_checkpoint
from qrmd.offline.commands.journal_common import (
    DIR_HELP,
    EXIT_PROBLEMS,
    JournalCommandError,
    need_directory,
    need_segments,
    refuse,
)
from qrmd.offline.journal_view import (
    JournalSums,
    format_time,
    sum_records,
)
from qrmd.offline.walk import resolve_topology

__all__ = ["JournalCommandError", "register", "run_repair", "run_stats", "run_verify"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("journal", help="verify, repair, show or sum up a journal directory")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    v = actions.add_parser("verify", help="check every checksum; replay must equal checkpoints")
    v.add_argument("directory", metavar="DIR", help=DIR_HELP)
    journal_forensics.add_topology_argument(v)
    v.add_argument("--json", action="store_true", help="print one JSON document")
    v.set_defaults(run=run_verify)

    r = actions.add_parser("repair", help="cut a damaged journal back, saying what is lost")
    r.add_argument("directory", metavar="DIR", help=DIR_HELP)
    r.add_argument("--force", action="store_true", help="also drop records after mid-log damage")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="only say what would be done; change nothing, not even a torn tail (works on a "
        "read-only copy)",
    )
    r.add_argument("--json", action="store_true", help="print one JSON document")
    r.set_defaults(run=run_repair)

    journal_show.register(actions)

    t = actions.add_parser("stats", help="records, events by kind, bytes, time span")
    t.add_argument("directory", metavar="DIR", help=DIR_HELP)
    t.add_argument("--json", action="store_true", help="print one JSON document")
    t.set_defaults(run=run_stats)

    journal_forensics.register(actions)
    katalyst_checkpoint.register(actions)
    for action in actions.choices.values():
        # An action's errors carry the prefix of its usage errors (argparse's `qrmd journal
        # state: error: ...`), not the command's alone (qrmd.cli).
        action.set_defaults(error_prefix=action.prog)


# -- verify ------------------------------------------------------------------------------------


def run_verify(args: argparse.Namespace) -> int:
    need_directory(args.directory)
    out = make_console(soft_wrap=True, quiet=args.json)
    report = verify(args.directory)
    topology, described = resolve_topology(args.directory, args.topology)
    if report.topology_fingerprint and report.topology_fingerprint != topology.fingerprint():
        raise refuse(
            f"journal {args.directory} was written for topology {report.topology_fingerprint}, "
            f"but --topology {described} is {topology.fingerprint()}: pass the node's own "
            f"topology (a machine file, `qrmd topology --json` output, or sysfs:ROOT copied "
            f"from the node)"
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
        blocks = (
            "blocks recovery"
            if finding.blocks_recovery
            else "recovery cuts it"
            if finding.kind == "torn_tail"
            else "recovery does not need it"
        )
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
    replayer = StateReplayer(topology)
    try:
        # Only a checkpoint that fails its checks is stepped over (verify reports it); one
        # that passes them but does not decode is a problem of its own.
        start = find_start(directory, replayer, first_seq, newest=False, fs=fs)
    except NoStart:
        yield f"records before seq {first_seq} are gone and no valid checkpoint covers them"
        return
    except ReplayError as err:
        yield str(err)
        return
    base_seq = start.seq
    if base_seq:
        out.print(Text(f"replaying from checkpoint {base_seq} (older records were retired)"))
    pending = [seq for seq in checkpoints if seq > base_seq]
    matched: list[int] = []
    seq = base_seq
    try:
        for step in walk_steps(directory, replayer, start, fs=fs):
            state, seq = step.after, step.record.seq
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
    origin = "empty" if base_seq == 0 else f"checkpoint {base_seq}"
    shown = ", ".join(map(str, matched[-5:])) if matched else "none"
    out.print(
        Text(
            f"replay from {origin} through seq {seq}: every record applies; matches "
            f"{len(matched)} checkpoints (newest: {shown})"
        )
    )


def _compare_checkpoint(
    fs: OsFileOps, directory: str, seq: int, state: State, topology: CPUTopology
) -> str | None:
    path = os.path.join(directory, checkpoint_name(seq))
    try:
        saved = state_from_checkpoint(load_checkpoint(fs, path).state, seq, topology, path)
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
    need_directory(args.directory)
    try:
        report = repair(args.directory, force=args.force, dry_run=args.dry_run)
    except JournalError as err:
        raise refuse(str(err)) from err
    if args.json:
        sys.stdout.write(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    else:
        make_console(soft_wrap=True).print(Text(report.description))
    return EXIT_PROBLEMS if report.needs_force and not report.applied else 0


# -- stats -------------------------------------------------------------------------------------


def run_stats(args: argparse.Namespace) -> int:
    need_segments(args.directory)
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
    out = make_console(soft_wrap=True)
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
