"""What frames carry: journal records, segment headers and checkpoint headers, as msgpack maps.

Each payload is one msgpack map with the field names given in the package docstring. The
journal is generic: a record's ``cause`` and ``events`` and a checkpoint's state are whatever
msgpack-able values the caller gives (the state codec lives with the state model, in
``policy/``); they come back as msgpack returns them (tuples come back as lists).

Decoding checks the shape of every map, so a payload whose checksum passes but which is not
what the journal wrote (a bug, a foreign file) is an error naming the field, never a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from journal.errors import PayloadError, UnencodableRecord

__all__ = [
    "CHECKPOINT_KIND",
    "FORMAT_VERSION",
    "RECORD_SCHEMA_VERSION",
    "SEGMENT_KIND",
    "CheckpointHeader",
    "EventsReader",
    "Record",
    "RecordDecoder",
    "RecordEventsDecoder",
    "SegmentHeader",
    "decode_checkpoint_header",
    "decode_record",
    "decode_record_events",
    "decode_segment_header",
    "encode_checkpoint_header",
    "encode_record",
    "encode_record_fields",
    "encode_segment_header",
    "new_packer",
    "pack",
    "record_seq",
    "record_seq_at",
    "unpack",
]

#: Version of the file layout (frames, segment and checkpoint headers).
FORMAT_VERSION = 1
#: Version of the record map; a reader refuses records newer than it knows.
RECORD_SCHEMA_VERSION = 1
SEGMENT_KIND = "qrmd-journal-segment"
CHECKPOINT_KIND = "qrmd-journal-checkpoint"


@dataclass(frozen=True, slots=True)
class Record:
    """One committed record: the cause of a decision and the events it produced, atomically.

    Attributes:
        seq: sequence number, 1 for the first record, consecutive over the whole journal.
        wall_time: seconds since the epoch when it was appended (for people reading a timeline).
        monotonic_time: the clock's monotonic reading when it was appended (for durations).
        cause: the whole input of the decision (RPC and its fields, advisor response, tick,
            operator command), as a msgpack-able map.
        events: the events committed, each a msgpack-able value (typically a map).
        schema_version: version of the record map it was read from.
    """

    seq: int
    wall_time: float
    monotonic_time: float
    cause: dict[Any, Any]
    events: list[Any]
    schema_version: int = RECORD_SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    """The first frame of every segment file: what machine wrote it and where it starts."""

    node_name: str
    topology_fingerprint: str
    first_seq: int
    created_wall_time: float
    format_version: int = FORMAT_VERSION


@dataclass(frozen=True, slots=True)
class CheckpointHeader:
    """The first frame of a checkpoint file: which machine, which record it covers."""

    node_name: str
    topology_fingerprint: str
    seq: int
    wall_time: float
    state_bytes: int
    format_version: int = FORMAT_VERSION


def new_packer() -> msgpack.Packer:
    """A msgpack packer writing as :func:`pack` does, for a writer to keep between records
    (``packb`` builds one per call). A packer is not safe to share between threads; after a
    failed ``pack`` it is reset and may be used again."""
    return msgpack.Packer(use_bin_type=True)


def pack(value: Any, what: str, packer: msgpack.Packer | None = None) -> bytes:
    """Encode ``value`` as msgpack.

    Args:
        value: any msgpack-able value.
        what: what it is, for the error message ("record 12", "checkpoint payload").
        packer: a packer from :func:`new_packer` to use, or None for a new one.

    Returns:
        The msgpack bytes.

    Raises:
        UnencodableRecord: msgpack cannot encode it (names the type it choked on).
    """
    try:
        data: bytes = (packer or new_packer()).pack(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise UnencodableRecord(f"{what} cannot be encoded as msgpack: {exc}") from exc
    return data


def unpack(data: bytes) -> Any:
    """Decode one msgpack document.

    Raises:
        PayloadError: the bytes are not exactly one msgpack document.
    """
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise PayloadError(f"payload is not msgpack: {exc}") from exc


def encode_record(record: Record, packer: msgpack.Packer | None = None) -> bytes:
    """The payload bytes of ``record``.

    Args:
        record: the record.
        packer: a packer from :func:`new_packer` to use (a journal keeps one for its
            appends), or None for a new one.

    Raises:
        UnencodableRecord: the cause or an event is not msgpack-able.
    """
    return encode_record_fields(
        record.seq,
        record.wall_time,
        record.monotonic_time,
        record.cause,
        record.events,
        packer=packer,
        schema_version=record.schema_version,
    )


def encode_record_fields(
    seq: int,
    wall_time: float,
    monotonic_time: float,
    cause: dict[Any, Any],
    events: list[Any],
    *,
    packer: msgpack.Packer | None = None,
    schema_version: int = RECORD_SCHEMA_VERSION,
) -> bytes:
    """:func:`encode_record` of the record these fields make, without building the
    ``Record``: the journal's append encodes one per commit (a frozen ``Record`` costs
    2 µs of its 20). Same arguments and errors as ``Record`` and :func:`encode_record`."""
    try:
        data: bytes = (packer or new_packer()).pack(
            {
                "schema": schema_version,
                "seq": seq,
                "wall_time": wall_time,
                "monotonic_time": monotonic_time,
                "cause": cause,
                "events": events,
            }
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise UnencodableRecord(f"record {seq} cannot be encoded as msgpack: {exc}") from exc
    return data


def decode_record(payload: bytes) -> Record:
    """Read a record payload.

    Raises:
        PayloadError: not msgpack, a field missing or of the wrong type, or a schema version
            newer than this reader knows.
    """
    fields = _map(unpack(payload), "record")
    # Fast path for the well-formed record replay meets a million times; anything unusual
    # goes through the field-by-field checks below, which name what is wrong.
    record = _well_formed(fields)
    if record is not None:
        return record
    schema = _field(fields, "schema", int, "record")
    if schema > RECORD_SCHEMA_VERSION:
        raise PayloadError(
            f"record schema version {schema} is newer than this qrmd reads "
            f"({RECORD_SCHEMA_VERSION}); read the journal with a newer qrmd"
        )
    return Record(
        seq=_field(fields, "seq", int, "record"),
        wall_time=float(_field(fields, "wall_time", (int, float), "record")),
        monotonic_time=float(_field(fields, "monotonic_time", (int, float), "record")),
        cause=_field(fields, "cause", dict, "record"),
        events=_field(fields, "events", list, "record"),
        schema_version=schema,
    )


# How every record ``encode_record`` writes begins: a map of its six fields whose first two
# entries are ``"schema": 1`` and ``"seq"`` (msgpack keeps a dict's order), then the seq as a
# msgpack unsigned integer, whose first byte says its width.
_RECORD_PREFIX = (
    b"\x86" + msgpack.packb("schema") + msgpack.packb(RECORD_SCHEMA_VERSION) + msgpack.packb("seq")
)
_SEQ_AT = len(_RECORD_PREFIX)
_UINT_WIDTHS = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}


def record_seq(payload: bytes) -> int | None:
    """The seq of a record payload laid out as ``encode_record`` writes it, read from its first
    bytes without decoding the rest; None for any other layout (an older writer's, damage),
    which only ``decode_record`` can judge.

    Recovery reads the records a checkpoint covers this way: it needs no more of them than
    their frames' checksums and seqs (``journal.segments.SegmentReader``).
    """
    return record_seq_at(payload, 0, len(payload))


def record_seq_at(buf: bytes, start: int, end: int) -> int | None:
    """``record_seq(buf[start:end])``, read where the payload lies in ``buf`` (a segment's
    bytes) instead of from a copy of it."""
    if end - start <= _SEQ_AT or not buf.startswith(_RECORD_PREFIX, start, end):
        return None
    at = start + _SEQ_AT
    tag = buf[at]
    if tag < 0x80:  # a positive fixint is its own value
        return tag
    width = _UINT_WIDTHS.get(tag)
    if width is None or end < at + 1 + width:
        return None
    return int.from_bytes(buf[at + 1 : at + 1 + width], "big")


# The first byte of a msgpack map: a fixmap (0x80-0x8f), a map16 or a map32.
_MAP_TAGS = frozenset((*range(0x80, 0x90), 0xDE, 0xDF))


#: A reader's own decoding of a record's events, applied as the record is read: given the
#: events list exactly as msgpack built it, it returns the list to keep in the record (the
#: same one, or a list of whatever the reader decoded it into). It must not raise, and what
#: it keeps must carry everything the reader needs of the events: the journal drops the
#: msgpack at once instead of holding every record's until the reader walks them.
EventsReader = Callable[[list[Any]], list[Any]]


def decode_record_events(payload: bytes, events: EventsReader | None = None) -> Record:
    """Read a record payload for a caller that replays its events only: the record
    ``decode_record`` gives, with an empty ``cause``.

    The cause (the decision's whole input, about half of a record's bytes) is checked to be
    one well-formed msgpack map and stepped over without being built; the StateStore's
    recovery reads records this way. Anything unusual goes through ``decode_record``, so what
    is refused, and the message, are the same, with one exception: the cause's strings are
    not decoded, so one that is not UTF-8 is not refused here. ``encode_record`` never writes
    such a string and the frame's checksum rules out its bytes changing on disk; ``qrmd
    journal verify`` decodes every cause.

    ``events``, if given, is applied to the events of a record read this way (its layout is
    ``encode_record``'s); a record that needs ``decode_record``'s checks keeps its own.

    Raises:
        PayloadError: as ``decode_record``.
    """
    return RecordEventsDecoder(events).decode(payload)


class RecordEventsDecoder:
    """``decode_record_events`` for the records of one segment, one after another, with one
    msgpack unpacker for all of them: making one per record was a tenth of reading one."""

    __slots__ = ("_events", "_unpacker")

    def __init__(self, events: EventsReader | None = None) -> None:
        self._events = events
        self._unpacker: msgpack.Unpacker | None = None

    def decode(self, payload: bytes | memoryview) -> Record:
        """``decode_record_events(payload, events)``.

        ``payload`` may be a view of the segment's bytes (``journal.segments.SegmentReader``):
        a record laid out as written is read in place, anything else from a copy, as
        ``decode_record`` reads it.

        Raises:
            PayloadError: as ``decode_record``.
        """
        record = self._as_written(payload)
        if record is not None:
            return record
        payload = bytes(payload)
        unpacker = self._unpacker
        if unpacker is None:
            unpacker = self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        # The unpacker's offsets count every byte it was fed; this payload's start at base.
        base = unpacker.tell()
        unpacker.feed(payload)
        fields: dict[Any, Any] = {}
        try:
            for _ in range(unpacker.read_map_header()):
                key = unpacker.unpack()
                if key == "cause" and payload[unpacker.tell() - base] in _MAP_TAGS:
                    unpacker.skip()
                    fields[key] = _SKIPPED
                else:
                    fields[key] = unpacker.unpack()
            whole = unpacker.tell() - base == len(payload)
        except (ValueError, TypeError, IndexError, msgpack.UnpackException):
            whole = False
        if not whole:
            # Bytes of this payload may be left in it: the next record gets a fresh one.
            self._unpacker = None
        found = fields.get("events")
        if whole and fields.get("cause") is _SKIPPED and type(found) is list:
            fields["cause"] = {}
            record = _well_formed(fields, self._events)
            if record is not None:
                return record
        full = decode_record(payload)
        return Record(
            full.seq, full.wall_time, full.monotonic_time, {}, full.events, full.schema_version
        )

    def _as_written(self, payload: bytes | memoryview) -> Record | None:
        """The record of a payload laid out field by field as ``encode_record`` writes it
        (its six fields in their order, the cause a map), read in that order; None for any
        other payload, which ``decode`` then reads field by field, keys in any order.

        What the general reading gives such a payload, with fewer steps per record: the
        field names are compared where they must be instead of collected into a map first.
        """
        unpacker = self._unpacker
        if unpacker is None:
            unpacker = self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        base = unpacker.tell()
        unpacker.feed(payload)
        try:
            fields = _fields_as_written(unpacker, payload, base, keep_cause=False)
        except (ValueError, TypeError, IndexError, msgpack.UnpackException):
            fields = None
        if fields is not None:
            seq, wall, mono, _, events, schema = fields
            if self._events is not None:
                events = self._events(events)
            record: Record = _new_object(Record)
            _SET_SEQ(record, seq)
            _SET_WALL(record, wall)
            _SET_MONO(record, mono)
            _SET_CAUSE(record, {})
            _SET_EVENTS(record, events)
            _SET_SCHEMA(record, schema)
            return record
        # Bytes of this payload may be left in it: the general reading gets a fresh one.
        self._unpacker = None
        return None


def _fields_as_written(
    unpacker: msgpack.Unpacker, payload: bytes | memoryview, base: int, *, keep_cause: bool
) -> tuple[int, float, float, dict[Any, Any], list[Any], int] | None:
    """``(seq, wall_time, monotonic_time, cause, events, schema)`` of a payload laid out as
    ``encode_record`` writes it, its cause built when ``keep_cause`` and stepped over (an
    empty map) otherwise; None at the first difference. ``base`` is where the payload starts
    among the bytes ``unpacker`` was fed."""
    read = unpacker.unpack
    if unpacker.read_map_header() != 6 or read() != "schema":
        return None
    schema = read()
    if read() != "seq":
        return None
    seq = read()
    if read() != "wall_time":
        return None
    wall = read()
    if read() != "monotonic_time":
        return None
    mono = read()
    if read() != "cause" or payload[unpacker.tell() - base] not in _MAP_TAGS:
        return None
    if keep_cause:
        cause = read()
    else:
        unpacker.skip()
        cause = {}
    if read() != "events":
        return None
    events = read()
    if (
        unpacker.tell() - base != len(payload)
        or type(schema) is not int
        or not 0 < schema <= RECORD_SCHEMA_VERSION
        or type(seq) is not int
        or type(wall) is not float
        or type(mono) is not float
        or type(events) is not list
    ):
        return None
    return seq, wall, mono, cause, events, schema


class RecordDecoder:
    """``decode_record`` for the records of one segment, one after another (``read_records``
    reading a timeline, ``verify``): a record laid out as ``encode_record`` writes it is read
    field by field with one msgpack unpacker for all of them, straight into its ``Record``
    (``RecordEventsDecoder._as_written``, the cause built); anything else goes through
    ``decode_record``, so what is refused, and the message, are the same.

    ``msgpack.unpackb`` per record, the map of its fields, and the frozen dataclass's
    ``__init__`` were a fifth of reading a record this way."""

    __slots__ = ("_unpacker",)

    def __init__(self) -> None:
        self._unpacker: msgpack.Unpacker | None = None

    def decode(self, payload: bytes | memoryview) -> Record:
        """``decode_record(payload)``; ``payload`` may be a view of a segment's bytes.

        Raises:
            PayloadError: as ``decode_record``.
        """
        unpacker = self._unpacker
        if unpacker is None:
            unpacker = self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        base = unpacker.tell()
        try:
            unpacker.feed(payload)
            fields = _fields_as_written(unpacker, payload, base, keep_cause=True)
        except (ValueError, TypeError, IndexError, msgpack.UnpackException):
            fields = None
        if fields is None:
            # Bytes of this payload may be left in it: the next record gets a fresh one.
            self._unpacker = None
            return decode_record(bytes(payload))
        seq, wall, mono, cause, events, schema = fields
        record: Record = _new_object(Record)
        _SET_SEQ(record, seq)
        _SET_WALL(record, wall)
        _SET_MONO(record, mono)
        _SET_CAUSE(record, cause)
        _SET_EVENTS(record, events)
        _SET_SCHEMA(record, schema)
        return record


def _slot_setters() -> tuple[Callable[[Record, Any], None], ...]:
    return tuple(
        getattr(Record, name).__set__
        for name in ("seq", "wall_time", "monotonic_time", "cause", "events", "schema_version")
    )


# A frozen dataclass's __init__ sets each field through object.__setattr__ by name, a sixth of
# reading a record in recovery; _as_written sets Record's slots directly (it has no
# __post_init__, so the value is the one Record(...) builds).
_SET_SEQ, _SET_WALL, _SET_MONO, _SET_CAUSE, _SET_EVENTS, _SET_SCHEMA = _slot_setters()
_new_object = object.__new__


_SKIPPED = object()


def _well_formed(fields: dict[Any, Any], read: EventsReader | None = None) -> Record | None:
    """The record of a map exactly as ``encode_record`` writes it (its events passed through
    ``read``), or None."""
    schema = fields.get("schema")
    seq = fields.get("seq")
    wall = fields.get("wall_time")
    mono = fields.get("monotonic_time")
    cause = fields.get("cause")
    events = fields.get("events")
    if (
        type(schema) is int
        and 0 < schema <= RECORD_SCHEMA_VERSION
        and type(seq) is int
        and type(wall) is float
        and type(mono) is float
        and type(cause) is dict
        and type(events) is list
    ):
        return Record(seq, wall, mono, cause, events if read is None else read(events), schema)
    return None


def encode_segment_header(header: SegmentHeader) -> bytes:
    """The payload bytes of a segment header."""
    return pack(
        {
            "kind": SEGMENT_KIND,
            "format": header.format_version,
            "node": header.node_name,
            "topology": header.topology_fingerprint,
            "first_seq": header.first_seq,
            "created_wall_time": header.created_wall_time,
        },
        "segment header",
    )


def decode_segment_header(payload: bytes) -> SegmentHeader:
    """Read a segment header payload.

    Raises:
        PayloadError: not a segment header, or a format version this reader does not know.
    """
    fields = _map(unpack(payload), "segment header")
    _check_kind(fields, SEGMENT_KIND, "segment header")
    return SegmentHeader(
        node_name=_field(fields, "node", str, "segment header"),
        topology_fingerprint=_field(fields, "topology", str, "segment header"),
        first_seq=_field(fields, "first_seq", int, "segment header"),
        created_wall_time=float(
            _field(fields, "created_wall_time", (int, float), "segment header")
        ),
        format_version=_field(fields, "format", int, "segment header"),
    )


def encode_checkpoint_header(header: CheckpointHeader) -> bytes:
    """The payload bytes of a checkpoint header."""
    return pack(
        {
            "kind": CHECKPOINT_KIND,
            "format": header.format_version,
            "node": header.node_name,
            "topology": header.topology_fingerprint,
            "seq": header.seq,
            "wall_time": header.wall_time,
            "state_bytes": header.state_bytes,
        },
        "checkpoint header",
    )


def decode_checkpoint_header(payload: bytes) -> CheckpointHeader:
    """Read a checkpoint header payload.

    Raises:
        PayloadError: not a checkpoint header, or a format version this reader does not know.
    """
    fields = _map(unpack(payload), "checkpoint header")
    _check_kind(fields, CHECKPOINT_KIND, "checkpoint header")
    return CheckpointHeader(
        node_name=_field(fields, "node", str, "checkpoint header"),
        topology_fingerprint=_field(fields, "topology", str, "checkpoint header"),
        seq=_field(fields, "seq", int, "checkpoint header"),
        wall_time=float(_field(fields, "wall_time", (int, float), "checkpoint header")),
        state_bytes=_field(fields, "state_bytes", int, "checkpoint header"),
        format_version=_field(fields, "format", int, "checkpoint header"),
    )


def _map(value: Any, what: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise PayloadError(f"{what} is a msgpack {type(value).__name__}, not a map")
    return value


def _field(fields: dict[Any, Any], name: str, kind: Any, what: str) -> Any:
    if name not in fields:
        raise PayloadError(f"{what} has no field {name!r}")
    value = fields[name]
    # bool is an int subclass in Python; a boolean where a number belongs is damage.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise PayloadError(f"{what} field {name!r} is {value!r}, of the wrong type")
    return value


def _check_kind(fields: dict[Any, Any], kind: str, what: str) -> None:
    if fields.get("kind") != kind:
        raise PayloadError(f"{what} has kind {fields.get('kind')!r}, not {kind!r}")
    version = _field(fields, "format", int, what)
    if version > FORMAT_VERSION:
        raise PayloadError(
            f"{what} format version {version} is newer than this qrmd reads ({FORMAT_VERSION})"
        )
