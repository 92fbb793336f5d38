"""The reference's ``migrate_pages(2)`` call, behind its seam (memory-balancer §11).

``syscall_migrate_pages`` is the real call (``ctypes`` over libc's ``syscall`` with this
architecture's number); ``qrmd.host.migrate`` uses it only when asked to (``migrate=``): by
default pages move with ``move_pages(2)`` in batches (``qrmd.host.page_mover``),
since one ``migrate_pages`` holds a process's memory for the whole move.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections.abc import Callable, Iterable, Mapping
from typing import Final

__all__ = [
    "SYS_MIGRATE_PAGES",
    "MigratePages",
    "MigratePagesError",
    "libc_syscall",
    "syscall_migrate_pages",
]

#: ``__NR_migrate_pages`` by ``platform.machine()``: x86_64's own table, and the generic table
#: (``asm-generic/unistd.h``) that arm64 uses.
SYS_MIGRATE_PAGES: Final[Mapping[str, int]] = {"x86_64": 256, "amd64": 256, "aarch64": 238}

#: ``(pid, maxnode, from nodes, to nodes) -> pages not moved``; raises ``MigratePagesError``.
MigratePages = Callable[[int, int, frozenset[int], frozenset[int]], int]

# What an errno of migrate_pages(2) means here, so the log says what to do.
_ERRNO_HINTS: Final[Mapping[int, str]] = {
    errno.EPERM: "not permitted: qrmd needs CAP_SYS_NICE to move another user's pages",
    errno.ESRCH: "the process has exited",
    errno.EINVAL: "a node is not in the mask range or has no memory",
    errno.ENOSYS: "the kernel has no NUMA support",
    errno.ENODEV: "a destination node is not online",
}


class MigratePagesError(OSError):
    """``migrate_pages(2)`` failed; the message names the process, the nodes and the errno."""


def libc_syscall(
    name: str, numbers: Mapping[str, int], machine: str | None = None
) -> tuple[Callable[..., int], int]:
    """libc's ``syscall`` and the number of system call ``name`` on this architecture.

    Args:
        name: the call's name, for the error.
        numbers: its number by ``platform.machine()`` value.
        machine: the architecture (default ``platform.machine()``).

    Returns:
        ``(syscall, number)``: libc's ``syscall`` returning a C long, and the call's number.

    Raises:
        OSError: no syscall number is known for the architecture (ENOSYS).
    """
    arch = machine or platform.machine()
    number = numbers.get(arch)
    if number is None:
        known = ", ".join(sorted(numbers))
        raise OSError(errno.ENOSYS, f"{name}: no syscall number for {arch!r} (know {known})")
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    syscall.restype = ctypes.c_long
    return syscall, number


def syscall_migrate_pages(machine: str | None = None) -> MigratePages:
    """The real ``migrate_pages(2)``, through libc's ``syscall``.

    Args:
        machine: the architecture (default ``platform.machine()``).

    Returns:
        The call.

    Raises:
        OSError: no syscall number is known for the architecture.
    """
    syscall, number = libc_syscall("migrate_pages", SYS_MIGRATE_PAGES, machine)
    word_bits = ctypes.sizeof(ctypes.c_ulong) * 8

    def migrate(pid: int, maxnode: int, old: frozenset[int], new: frozenset[int]) -> int:
        _check_nodes(old | new, maxnode)
        words = max(1, -(-maxnode // word_bits))
        old_mask = _node_mask(old, words, word_bits)
        new_mask = _node_mask(new, words, word_bits)
        ctypes.set_errno(0)
        result = syscall(
            ctypes.c_long(number),
            ctypes.c_long(pid),
            ctypes.c_ulong(maxnode),
            old_mask,
            new_mask,
        )
        if result < 0:
            code = ctypes.get_errno()
            raise MigratePagesError(code, _describe(pid, old, new, code))
        return int(result)

    return migrate


def _check_nodes(nodes: Iterable[int], maxnode: int) -> None:
    # The kernel reads maxnode - 1 bits of each mask (the historical off-by-one that callers
    # compensate with NumNUMANodes + 1).
    for node in nodes:
        if not 0 <= node < maxnode - 1:
            raise ValueError(f"migrate_pages: NUMA node {node} is outside 0..{maxnode - 2}")


def _node_mask(nodes: Iterable[int], words: int, word_bits: int) -> ctypes.Array[ctypes.c_ulong]:
    mask = (ctypes.c_ulong * words)()
    for node in nodes:
        mask[node // word_bits] |= 1 << (node % word_bits)
    return mask


def _describe(pid: int, old: frozenset[int], new: frozenset[int], code: int) -> str:
    hint = _ERRNO_HINTS.get(code, os.strerror(code))
    name = errno.errorcode.get(code, str(code))
    return f"migrate_pages(pid={pid}, from={sorted(old)}, to={sorted(new)}): {name}: {hint}"
