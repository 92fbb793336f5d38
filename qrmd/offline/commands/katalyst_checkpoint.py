"""``qrmd journal import-katalyst|export-katalyst``: take a node over from katalyst-agent, or hand
it back (spec cpu-policy §13; the mapping is ``policy.state.katalyst_checkpoint``).

- ``import-katalyst DIR FILE``: journals the reference's ``cpu_plugin_state`` into DIR as *one*
  decision whose cause holds the file's text and the machine (``qrmd.store.katalyst_import`` says
  what it checks and refuses: a bad checksum, a directory of other files, a running qrmd's
  journal, one that holds containers).
- ``export-katalyst DIR OUT``: writes the state at the newest record (or ``--seq N``, or the last
  record at or before ``--at TIME``) in the reference's byte layout with its checksum, as the
  reference's checkpoint writer (kubelet's ``checkpointmanager``) writes its own file: a
  ``.``-prefixed temporary in the same directory, owner-only (0600), fsync, rename (§13.1),
  then the directory fsynced; in the layout of ``--katalyst-version`` (default v0.5.3, the
  layouts are ``policy.state.katalyst_layouts``). It only reads DIR: no lock, so it works
  beside a running daemon and on a read-only copy; a torn tail being written is not part of
  any state. Rollback must not hand katalyst-agent a lie, so it refuses a DIR that holds no
  journal (an empty state would free every dedicated pod's CPUs), and refuses to replace an
  existing OUT unless ``--force``, which first keeps the old file as ``OUT.bak`` (its mode
  and content).

Exit status 0 on success; 2 for an error, one line on stderr (``qrmd.cli``).
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import socket
import sys
import tempfile

from journal import JournalError, OsFileOps, read_records
from journal.segments import SegmentHeaderError, list_segments, read_segment_header
from journal.walk import find_start, replay_to, span
from policy.errors import StateError
from policy.state.katalyst_checkpoint import export_document
from policy.state.katalyst_file import encode_document
from policy.state.katalyst_layouts import DEFAULT_VERSION, layout_of_version, normalize_version
from policy.state.replay import ReplayError, StateReplayer
from policy.state.sections import State
from policy.topology.model import CPUTopology
from qrmd.host.topology_source import DEFAULT_TOPOLOGY_SPEC, SPEC_FORMS, load_topology
from qrmd.offline.journal_view import parse_time
from qrmd.store.katalyst_import import (
    IMPORT_COMMAND,
    STATE_FILE,
    KatalystCheckpointError,
    holds_journal,
    import_checkpoint,
)

__all__ = ["IMPORT_COMMAND", "STATE_FILE", "register", "run_export", "run_import"]


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
    e.add_argument(
        "--force",
        action="store_true",
        help=f"replace an existing OUT (katalyst-agent's own {STATE_FILE}), keeping it as OUT.bak",
    )
    when = e.add_mutually_exclusive_group()
    when.add_argument("--seq", type=int, metavar="N", help="the state after record N")
    when.add_argument(
        "--at", metavar="TIME", help="the state at TIME (epoch seconds or ISO 8601, UTC default)"
    )
    e.add_argument(
        "--katalyst-version",
        default=DEFAULT_VERSION,
        type=_katalyst_version,
        metavar="TAG",
        help="write the layout of this katalyst-agent release, v0.5.0 to v0.5.47 "
        "(docs/katalyst-checkpoints.md); default: %(default)s",
    )
    e.set_defaults(run=run_export)


def _katalyst_version(text: str) -> str:
    try:
        return normalize_version(text)
    except StateError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


# -- import ------------------------------------------------------------------------------------


def run_import(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    result = import_checkpoint(
        args.directory,
        args.file,
        topology,
        args.node_name,
        skip_corruption=bool(args.skip_corruption),
    )
    print(f"checkpoint layout: {result.layout}")
    for note in result.notes:
        print(f"note: {note}")
    print(
        f"imported {args.file} into {args.directory} as record {result.seq}: "
        f"{result.containers} containers, pools {', '.join(result.pools) or 'none'}"
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
    replayer = StateReplayer(topology)
    try:
        first = span(directory, whole=False).first
        start = find_start(
            directory,
            replayer,
            None if first is None else first.seq,
            at_most=to_seq,
            skip=(JournalError, ReplayError),  # an older checkpoint, or the records, cover it
        )
        state, last = replay_to(directory, replayer, start, to_seq)
    except (JournalError, ReplayError) as err:  # NoStart too: records retired, nothing covers
        raise KatalystCheckpointError(str(err)) from None
    if to_seq is not None and last != to_seq:
        raise KatalystCheckpointError(f"{directory} holds no record {to_seq} (newest: {last})")
    return state, last


def _backup(path: str) -> str:
    """Keep ``path`` as ``path.bak`` before it is replaced: a hard link, so the old file keeps
    its inode, content and mode; a copy where the file system has no hard links.

    Returns:
        The backup's path.
    """
    backup = f"{path}.bak"
    temp = f"{os.path.dirname(backup)}/.{os.path.basename(backup)}.tmp"
    if os.path.lexists(temp):
        os.unlink(temp)
    try:
        os.link(path, temp)
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
            raise
        shutil.copy2(path, temp)
    os.replace(temp, backup)
    return backup


def _write_atomically(path: str, data: bytes) -> None:
    """Temporary ``.``-file in the same directory (0600, as ``os.CreateTemp`` makes kubelet's
    checkpoint writer's), fsync, rename (as the reference, §13.1), directory fsync."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)  # mkstemp's mode already; said for the reader
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
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


def _output_path(out: str, force: bool) -> str:
    """OUT, or OUT/cpu_plugin_state for a directory; refused when it exists without --force.

    Raises:
        KatalystCheckpointError: OUT's directory is missing, or OUT exists and ``force`` is
            not given.
    """
    path = os.path.join(out, STATE_FILE) if os.path.isdir(out) else out
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise KatalystCheckpointError(f"cannot write {path}: {directory} is not a directory")
    if not os.path.isdir(directory):
        raise KatalystCheckpointError(
            f"cannot write {path}: directory {directory} does not exist (create it, or pass "
            f"katalyst-agent's --qrm-state-dir)"
        )
    if os.path.isdir(path):
        raise KatalystCheckpointError(f"cannot write {path}: it is a directory")
    if os.path.lexists(path) and not force:
        raise KatalystCheckpointError(
            f"{path} exists (katalyst-agent's own checkpoint?): nothing was written; pass "
            f"--force to replace it (the old file is kept as {path}.bak)"
        )
    return path


def run_export(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.directory):
        raise KatalystCheckpointError(f"no journal at {args.directory}: not a directory")
    if not holds_journal(args.directory):
        # An empty state handed to katalyst-agent would free every dedicated pod's CPUs.
        raise KatalystCheckpointError(
            f"no journal in {args.directory}: it holds no qrmd segment or checkpoint, so there "
            f"is no state to export; pass qrmd run's --state-dir (nothing was written)"
        )
    topology = load_topology(args.topology)
    _check_topology(args.directory, topology, args.topology)
    target = _target_seq(args.directory, args.seq, args.at)
    state, seq = state_at(args.directory, topology, target)
    out = _output_path(args.out, bool(args.force))
    try:
        document = export_document(state.cpu, args.katalyst_version)
    except StateError as err:
        raise KatalystCheckpointError(f"{err}; nothing was written") from None
    data = encode_document(document, layout_of_version(args.katalyst_version))
    kept = ""
    try:
        if os.path.lexists(out):
            kept = f" (the old file kept as {_backup(out)})"
        _write_atomically(out, data)
    except OSError as err:
        raise KatalystCheckpointError(
            f"cannot write {out}: {err.strerror}; the state was not exported"
        ) from None
    count = sum(1 for _ in state.cpu.entries())
    sys.stdout.write(
        f"exported the state after record {seq} of {args.directory} to {out}: {count} "
        f"containers, checksum {document['checksum']}{kept}\n"
    )
    return 0
