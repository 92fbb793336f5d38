"""``qrmd journal import-katalyst|export-katalyst``: take a node over from katalyst-agent, or hand
it back (spec cpu-policy §13; the mapping is ``policy.state.katalyst_checkpoint``).

- ``import-katalyst DIR FILE``: reads the reference's ``cpu_plugin_state``, verifies its
  checksum (refused unless ``--skip-corruption``, the reference's
  ``skip-cpu-state-corruption``), checks it against this machine, and journals it into DIR as
  *one* decision whose cause holds the file's text, so ``qrmd journal show`` and ``rerun`` see
  where the state came from. It takes the journal's writer lock (a running qrmd on DIR makes it
  fail) and refuses a journal that already holds containers; pools written by a ``qrmd run``
  start-up alone are replaced (that start wrote them from no state at all).
- ``export-katalyst DIR OUT``: writes the state at the newest record (or ``--seq N``, or the last
  record at or before ``--at TIME``) in the reference's byte layout with its checksum, atomically
  as the reference writes its own file (a ``.``-prefixed temporary in the same directory,
  fsync, rename, §13.1). It only reads DIR: no lock, so it works beside a running daemon and on
  a read-only copy; a torn tail being written is not part of any state.

Exit status 0 on success; 2 for an error, one line on stderr (``qrmd.cli``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
from typing import Any, Final

from actors.state_replay import ReplayError, replay_records, state_from_checkpoint
from journal import Journal, JournalError, OsFileOps, Record, load_checkpoint, read_records
from journal.checkpoints import list_checkpoints
from journal.segments import SegmentHeaderError, list_segments, read_segment_header
from policy.errors import StateError
from policy.state.codec import encode_event
from policy.state.events import CPUEvent, PoolRemoved
from policy.state.katalyst_checkpoint import (
    CheckpointCorruptedError,
    ImportPlan,
    export_document,
    plan_import,
)
from policy.state.katalyst_decode import decode_document
from policy.state.katalyst_file import encode_document
from policy.state.sections import State, apply_all, empty_state
from policy.topology.model import CPUTopology
from qrmd.host.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS, load_topology
from qrmd.journal_view import parse_time

__all__ = ["IMPORT_COMMAND", "STATE_FILE", "register", "run_export", "run_import"]

#: The reference's file name in its ``qrm-state-dir`` (§13.1).
STATE_FILE: Final = "cpu_plugin_state"
#: The cause's ``command`` of an import record.
IMPORT_COMMAND: Final = "import-katalyst"


class KatalystCheckpointError(ValueError):
    """A failure reported as one line (``qrmd.cli`` prints every ``ValueError`` so)."""


def register(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``import-katalyst`` and ``export-katalyst`` under ``qrmd journal``."""
    i = actions.add_parser(
        IMPORT_COMMAND, help="take over katalyst-agent's cpu_plugin_state into an empty journal"
    )
    i.add_argument("directory", metavar="DIR", help="the qrmd state directory (--state-dir)")
    i.add_argument("file", metavar="FILE", help=f"the reference's {STATE_FILE}")
    i.add_argument(
        "--topology",
        default=DEFAULT_TOPOLOGY_SPEC,
        metavar="SPEC",
        help=f"this node's topology: {SPEC_FORMS}; default: %(default)s",
    )
    i.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        metavar="NAME",
        help="the node name qrmd run will use (default: $NODE_NAME, else the host name)",
    )
    i.add_argument(
        "--skip-corruption",
        action="store_true",
        help="import a file whose checksum or policy name does not match, as katalyst-agent's "
        "--skip-cpu-state-corruption does",
    )
    i.set_defaults(run=run_import)

    e = actions.add_parser(
        "export-katalyst", help="write the state as katalyst-agent's cpu_plugin_state"
    )
    e.add_argument("directory", metavar="DIR", help="the qrmd state directory, or a copy")
    e.add_argument(
        "out", metavar="OUT", help=f"the file to write; a directory gets OUT/{STATE_FILE}"
    )
    e.add_argument(
        "--topology",
        default=DEFAULT_TOPOLOGY_SPEC,
        metavar="SPEC",
        help=f"the node's topology: {SPEC_FORMS}; default: %(default)s",
    )
    when = e.add_mutually_exclusive_group()
    when.add_argument("--seq", type=int, metavar="N", help="the state after record N")
    when.add_argument(
        "--at", metavar="TIME", help="the state at TIME (epoch seconds or ISO 8601, UTC default)"
    )
    e.set_defaults(run=run_export)


# -- import ------------------------------------------------------------------------------------


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise KatalystCheckpointError(f"cannot read {path}: {err.strerror}") from None


def _plan(path: str, data: bytes, topology: CPUTopology, skip: bool) -> ImportPlan:
    try:
        return plan_import(decode_document(data), topology, skip_corruption=skip)
    except CheckpointCorruptedError as err:
        raise KatalystCheckpointError(
            f"could not restore state from checkpoint: {err}; {path} was not imported (pass "
            f"--skip-corruption to import it anyway, as --skip-cpu-state-corruption would)"
        ) from None
    except StateError as err:
        raise KatalystCheckpointError(
            f"could not restore state from checkpoint: {err}; {path} was not imported"
        ) from None


def _takeover_events(state: State, plan: ImportPlan) -> list[CPUEvent]:
    """Pools left by a start-up are replaced by the file's; containers make the journal taken.

    Raises:
        KatalystCheckpointError: the journal holds container entries already.
    """
    cpu = state.cpu
    held = [f"{pod}/{name}" for pod, name in (e.key for e in cpu.entries())]
    if held:
        raise KatalystCheckpointError(
            f"the journal already holds CPU state ({len(held)} containers, e.g. {held[0]}); "
            f"import only into a new state directory, or one only qrmd run's start-up wrote"
        )
    removed = [PoolRemoved(name) for name in sorted(cpu.pools) if name not in plan.pools]
    return [*removed, *plan.events]


def run_import(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    data = _read_file(args.file)
    plan = _plan(args.file, data, topology, args.skip_corruption)
    try:
        journal, recovery = Journal.open(
            args.directory, node_name=args.node_name, topology_fingerprint=topology.fingerprint()
        )
    except JournalError as err:
        raise KatalystCheckpointError(str(err)) from None
    with journal:
        try:
            state = state_from_checkpoint(
                recovery.checkpoint_state, recovery.checkpoint_seq, topology
            )
            state, _, _ = replay_records(state, recovery.records)
        except ReplayError as err:
            raise KatalystCheckpointError(str(err)) from None
        events = _takeover_events(state, plan)
        try:
            apply_all(state, events)  # the journal only ever holds events that apply
        except StateError as err:
            raise KatalystCheckpointError(f"the imported entries do not apply: {err}") from None
        cause: dict[str, Any] = {
            "command": IMPORT_COMMAND,
            "file": os.path.abspath(args.file),
            "skip_corruption": bool(args.skip_corruption),
            "checkpoint": data.decode("utf-8", errors="replace"),
            "notes": list(plan.notes),
        }
        seq = journal.append(cause, [encode_event(event) for event in events])
    for note in plan.notes:
        print(f"note: {note}")
    print(
        f"imported {args.file} into {args.directory} as record {seq}: {plan.containers} "
        f"containers, pools {', '.join(plan.pools) or 'none'}"
    )
    return 0


# -- export ------------------------------------------------------------------------------------


def _target_seq(directory: str, seq: int | None, at: str | None) -> int | None:
    """The last record to include (None: the newest)."""
    if at is None:
        return seq
    moment = parse_time(at)
    found: int | None = None
    for record in read_records(directory):
        if record.wall_time > moment:
            break
        found = record.seq
    if found is None:
        raise KatalystCheckpointError(f"no record at or before {at} in {directory}")
    return found


def _check_topology(directory: str, topology: CPUTopology, spec: str) -> None:
    """The newest segment's header names the topology the journal was written for."""
    fs = OsFileOps()
    segments = list_segments(fs, directory)
    if not segments:
        return
    try:
        header, _ = read_segment_header(fs.read_file(segments[-1][1]))
    except (SegmentHeaderError, OSError) as err:
        raise KatalystCheckpointError(f"cannot read {segments[-1][1]}: {err}") from None
    if header.topology_fingerprint != topology.fingerprint():
        raise KatalystCheckpointError(
            f"journal {directory} was written for topology {header.topology_fingerprint}, but "
            f"--topology {spec} is {topology.fingerprint()}: pass the node's own topology"
        )


def state_at(directory: str, topology: CPUTopology, to_seq: int | None) -> tuple[State, int]:
    """The state after record ``to_seq`` (the newest when None), from the newest usable
    checkpoint at or before it, reading only.

    Returns:
        ``(state, seq of the last record applied)``.

    Raises:
        KatalystCheckpointError: no checkpoint covers the records retention removed, the
            journal was written for another topology, or a record does not apply.
    """
    fs = OsFileOps()
    state, base = empty_state(topology), 0
    for ck_seq, path in reversed(list_checkpoints(fs, directory)):
        if to_seq is not None and ck_seq > to_seq:
            continue
        try:
            state = state_from_checkpoint(load_checkpoint(fs, path).state, ck_seq, topology)
        except (JournalError, ReplayError):
            continue  # an older checkpoint, or the records, cover it
        base = ck_seq
        break
    last = base
    try:
        records: list[Record] = []
        for record in read_records(directory, from_seq=base + 1, to_seq=to_seq):
            if not records and record.seq != base + 1:
                raise KatalystCheckpointError(
                    f"records {base + 1}-{record.seq - 1} are gone from {directory} and no "
                    f"checkpoint covers them"
                )
            records.append(record)
            last = record.seq
        state, _, _ = replay_records(state, records)
    except (JournalError, ReplayError) as err:
        raise KatalystCheckpointError(str(err)) from None
    if to_seq is not None and last != to_seq:
        raise KatalystCheckpointError(f"{directory} holds no record {to_seq} (newest: {last})")
    return state, last


def _write_atomically(path: str, data: bytes) -> None:
    """Temporary ``.``-file in the same directory, fsync, rename (as the reference, §13.1)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    # fsync the directory too: the rename is not durable until its entry is.
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def run_export(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.directory):
        raise KatalystCheckpointError(f"no journal at {args.directory}: not a directory")
    topology = load_topology(args.topology)
    _check_topology(args.directory, topology, args.topology)
    target = _target_seq(args.directory, args.seq, args.at)
    state, seq = state_at(args.directory, topology, target)
    out = os.path.join(args.out, STATE_FILE) if os.path.isdir(args.out) else args.out
    document = export_document(state.cpu)
    _write_atomically(out, encode_document(document))
    count = sum(1 for _ in state.cpu.entries())
    sys.stdout.write(
        f"exported the state after record {seq} of {args.directory} to {out}: {count} "
        f"containers, checksum {document['checksum']}\n"
    )
    return 0
