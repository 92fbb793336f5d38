"""CPUSet: an immutable set of CPU ids in Linux list format (spec cpu-policy §1.1).

The set is a Python int used as a bitmask: union, intersection and difference are one
C-level operation each, whatever the node size (up to 1024 CPUs and beyond), and the value
is hashable, so it can sit in frozen dataclasses and dict keys.

A set is either *initialized* (every set an operation produces, possibly empty) or
*uninitialized* (the reference's "nil" set, which only decoding the JSON string ``"nil"`` or
an absent field yields). It behaves as empty for every query; equality tells the two apart
because the reference's checkpoint and checksum do (§1.1, §13.4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

__all__ = ["MAX_CPU_ID", "NIL_JSON", "CPUSet"]

#: JSON form of an uninitialized set.
NIL_JSON = "nil"

#: The largest CPU id parsing accepts. Linux allows at most 8192 CPUs (NR_CPUS); the bound
#: keeps a hostile or corrupt text such as "0-99999999999" from building a gigabyte mask
#: (the reference, in Go, would loop over it until memory runs out).
MAX_CPU_ID = 65535


def _ids_of(bits: int) -> tuple[int, ...]:
    """Ascending ids of the set bits of ``bits``."""
    if not bits:
        return ()
    # bin() walks the int in C; scanning its text is far faster than bit tricks in Python
    # for the dense masks a node has.
    text = bin(bits)[:1:-1]
    return tuple(i for i, ch in enumerate(text) if ch == "1")


def _runs(bits: int) -> Iterator[tuple[int, int]]:
    """``(first, last)`` of each run of consecutive set bits, ascending.

    A few int operations per run rather than per member: every formatting of a cpuset (each
    reply, record and log line) pays this, and a node's sets are mostly a few long runs.
    """
    while bits:
        low = bits & -bits  # the lowest set bit: the run's first
        carry = bits + low  # clears the run and sets the bit just above it
        first = low.bit_length() - 1
        last = (carry & -carry).bit_length() - 2
        yield first, last
        bits &= carry  # the run gone; the bit above it was clear in ``bits``


@lru_cache(maxsize=256)
def _list_format(bits: int) -> str:
    """The list format of ``bits``, remembered per mask.

    A node formats the same few sets over and over: every Allocate of a shared container
    replies with the pooled CPUs, and every pool resize journals the pools' sets; a set is
    a new object each time, but its mask repeats.
    """
    return ",".join(str(start) if start == end else f"{start}-{end}" for start, end in _runs(bits))


def _parse_int(piece: str, text: str) -> int:
    # Go's strconv.Atoi: optional sign, decimal digits only, no spaces.
    body = piece[1:] if piece[:1] in ("+", "-") else piece
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"invalid cpuset {text!r}: {piece!r} is not a CPU id")
    digits = body.lstrip("0")
    if piece[0] == "-" and digits:
        raise ValueError(f"invalid cpuset {text!r}: {piece!r} is negative")
    # compare lengths first, so a long digit string costs nothing to refuse
    if len(digits) > len(str(MAX_CPU_ID)) or int(body) > MAX_CPU_ID:
        raise ValueError(
            f"invalid cpuset {text[:60]!r}: {piece[:20]!r} exceeds the largest CPU id {MAX_CPU_ID}"
        )
    return int(body)


class CPUSet:
    """An immutable set of non-negative CPU ids.

    Construct with ``CPUSet(ids)``, ``CPUSet.parse("0-3,8")`` or ``CPUSet.from_mask(bits)``.
    All operations return new sets; none mutates.
    """

    __slots__ = ("_bits", "_ids", "_initialized")

    _bits: int
    _initialized: bool
    _ids: tuple[int, ...] | None

    def __init__(self, ids: Iterable[int] = ()) -> None:
        bits = 0
        for cpu in ids:
            if cpu < 0:
                raise ValueError(f"CPU ids are non-negative, got {cpu}")
            bits |= 1 << cpu
        self._bits = bits
        self._initialized = True
        self._ids = None

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_mask(cls, bits: int, *, initialized: bool = True) -> CPUSet:
        """The set whose members are the set bits of ``bits``."""
        if bits < 0:
            raise ValueError("a CPU mask is non-negative")
        s = cls.__new__(cls)
        s._bits = bits
        s._initialized = initialized or bits != 0
        s._ids = None
        return s

    @classmethod
    def uninitialized(cls) -> CPUSet:
        """The "nil" set (§1.1): empty, and told apart from an initialized empty set."""
        return cls.from_mask(0, initialized=False)

    @classmethod
    def parse(cls, text: str) -> CPUSet:
        """Parse Linux list format exactly as the reference does (§1.1).

        ``""`` is the empty set; ``a-b`` with ``a > b`` adds nothing; pieces with three or
        more ``-`` parts are ignored; whitespace is not trimmed.

        Raises:
            ValueError: naming the offending piece.
        """
        if text == "":
            return cls()
        bits = 0
        for piece in text.split(","):
            parts = piece.split("-")
            if len(parts) == 1:
                bits |= 1 << _parse_int(parts[0], text)
            elif len(parts) == 2:
                start, end = _parse_int(parts[0], text), _parse_int(parts[1], text)
                if start <= end:
                    bits |= ((1 << (end - start + 1)) - 1) << start
            # three or more parts ("1-2-3"): the reference skips the piece silently
        return cls.from_mask(bits)

    @classmethod
    def from_json(cls, value: object) -> CPUSet:
        """Decode the JSON form: a string, ``"nil"`` for the uninitialized set.

        Raises:
            ValueError: the value is not a string or not valid list format.
        """
        if not isinstance(value, str):
            raise ValueError(f"a cpuset is encoded as a JSON string, got {value!r}")
        if value == NIL_JSON:
            return cls.uninitialized()
        return cls.parse(value)

    # -- queries --------------------------------------------------------------------------

    @property
    def mask(self) -> int:
        """The bitmask (bit i set iff CPU i is a member)."""
        return self._bits

    @property
    def is_initialized(self) -> bool:
        return self._initialized

    def size(self) -> int:
        return self._bits.bit_count()

    def __len__(self) -> int:
        return self._bits.bit_count()

    def is_empty(self) -> bool:
        return self._bits == 0

    def __bool__(self) -> bool:
        return self._bits != 0

    def contains(self, cpu: int) -> bool:
        return cpu >= 0 and (self._bits >> cpu) & 1 == 1

    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and self.contains(cpu)

    def to_sorted_list(self) -> list[int]:
        return list(self.ids())

    def ids(self) -> tuple[int, ...]:
        """Members in ascending order (cached)."""
        if self._ids is None:
            self._ids = _ids_of(self._bits)
        return self._ids

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids())

    def min(self) -> int:
        """The smallest member.

        Raises:
            ValueError: the set is empty.
        """
        if not self._bits:
            raise ValueError("min() of an empty cpuset")
        return (self._bits & -self._bits).bit_length() - 1

    def is_subset_of(self, other: CPUSet) -> bool:
        return self._bits & ~other._bits == 0

    def equals(self, other: CPUSet) -> bool:
        """Reference equality: same members and same initialized flag."""
        return self == other

    def same_cpus(self, other: CPUSet) -> bool:
        """Same members, whatever the initialized flags."""
        return self._bits == other._bits

    # -- operations (all return initialized sets) ------------------------------------------

    def union(self, *others: CPUSet) -> CPUSet:
        bits = self._bits
        for o in others:
            bits |= o._bits
        return CPUSet.from_mask(bits)

    @staticmethod
    def union_all(sets: Iterable[CPUSet]) -> CPUSet:
        bits = 0
        for s in sets:
            bits |= s._bits
        return CPUSet.from_mask(bits)

    def intersection(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._bits & other._bits)

    def difference(self, other: CPUSet) -> CPUSet:
        return CPUSet.from_mask(self._bits & ~other._bits)

    def filter(self, keep: Callable[[int], bool]) -> CPUSet:
        return CPUSet(cpu for cpu in self.ids() if keep(cpu))

    def add(self, *cpus: int) -> CPUSet:
        """A new set with ``cpus`` added (the reference mutates; values here never do)."""
        return self.union(CPUSet(cpus))

    def clone(self) -> CPUSet:
        """Copy; a clone of the uninitialized set is an initialized empty set (§1.1)."""
        return CPUSet.from_mask(self._bits)

    __or__ = union
    __and__ = intersection
    __sub__ = difference

    def __le__(self, other: CPUSet) -> bool:
        return self.is_subset_of(other)

    # -- value semantics ------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CPUSet):
            return NotImplemented
        return self._bits == other._bits and self._initialized == other._initialized

    def __hash__(self) -> int:
        return hash((self._bits, self._initialized))

    def __reduce__(self) -> tuple[object, ...]:
        return (CPUSet.from_mask, (self._bits,), {"_initialized": self._initialized})

    def __setstate__(self, state: dict[str, bool]) -> None:
        self._initialized = state["_initialized"]

    def __str__(self) -> str:
        """Linux list format: ascending runs, ``a`` or ``a-b``, comma-joined (§1.1)."""
        return _list_format(self._bits)

    def to_json(self) -> str:
        """The JSON form: list format, or ``"nil"`` when uninitialized (§1.1)."""
        return str(self) if self._initialized else NIL_JSON

    def __repr__(self) -> str:
        if not self._initialized:
            return "CPUSet.uninitialized()"
        return f"CPUSet.parse({str(self)!r})"
