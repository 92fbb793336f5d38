"""A disk that knows what was written and what was synced, behind the journal's ``FileOps``.

The model (what an ext4/xfs node keeps, simplified to what the journal relies on):

* A file's *written* bytes are what reads return; its *synced* bytes are what its last
  ``fsync`` made durable. A directory's *entries* are the names that exist; its *synced
  entries* are those its last ``fsync_dir`` made durable (a created, renamed or removed name
  is not durable before that).
* A process **crash** keeps everything written (the page cache survives the process): open
  descriptors and locks vanish, nothing else changes.
* A **power loss** keeps only what was synced: each directory goes back to its synced entries,
  each file to its synced bytes; the last unsynced append of a file may survive torn (a
  prefix of it, as many bytes as the seed says), and a truncation not yet synced is undone.
* Faults the seed arms (``DiskFaults``): a write fails with ``ENOSPC`` (after writing a
  prefix, a short write, as a full disk does) or ``EIO``; an fsync fails with ``EIO`` (the
  dirty bytes may then be lost at a power loss, or not); an fsync is slow (it costs seconds of
  virtual time); a crash fires inside the Nth disk operation from now (``SimCrash``), between
  a write and its fsync, a rename and its directory sync.

Paths are plain strings; directories are a set (made by ``makedirs``, always durable: the
journal's directory exists before the simulation starts).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from random import Random

from qrmd.sim.dst.clock import VirtualClock
from qrmd.sim.dst.runtime import SimCrash

__all__ = ["DiskFaults", "SimDisk", "SimFileOps"]

#: Virtual seconds a healthy fsync takes (a fast SSD).
FSYNC_S = 0.0005


@dataclass(slots=True)
class SimFile:
    """One inode: what reads see, and what the last fsync made durable."""

    data: bytearray = field(default_factory=bytearray)
    synced: bytes = b""
    mtime: float = 0.0


@dataclass(slots=True)
class DiskFaults:
    """What the disk does wrong, armed by the simulation from the seed.

    Attributes:
        full: the disk is nearly full: the space left (``free_bytes``, a few hundred bytes
            the seed picks when it fills) goes to the next writes, short ones at the end, then
            every write fails with ENOSPC.
        free_bytes: the space left while ``full`` (None until the first write sees it).
        write_eio_p: chance that a write fails with EIO.
        fsync_eio_p: chance that an fsync fails with EIO.
        slow_fsync_s: extra virtual seconds each fsync takes (0: none).
        crash_in_ops: a crash fires inside the disk operation this many operations from now
            (None: no crash armed).
    """

    full: bool = False
    free_bytes: int | None = None
    write_eio_p: float = 0.0
    fsync_eio_p: float = 0.0
    slow_fsync_s: float = 0.0
    crash_in_ops: int | None = None

    def clear(self) -> None:
        """No fault armed."""
        self.full = False
        self.free_bytes = None
        self.write_eio_p = self.fsync_eio_p = self.slow_fsync_s = 0.0
        self.crash_in_ops = None


class SimDisk:
    """The files and directories of the simulated node, which outlive its processes.

    Args:
        rng: the seed's generator (faults, torn writes).
        clock: the virtual clock (fsync latency, mtimes).
    """

    def __init__(self, rng: Random, clock: VirtualClock) -> None:
        self.rng = rng
        self.clock = clock
        self.faults = DiskFaults()
        self.dirs: set[str] = {"/"}
        self.names: dict[str, SimFile] = {}
        self.durable_names: dict[str, SimFile] = {}
        self.ops = 0
        #: Bumped by every change of written bytes or names (the invariants' cue to re-read).
        self.version = 0

    def tick_op(self) -> None:
        """Count one disk operation; fire the armed crash when its turn comes."""
        self.ops += 1
        crash = self.faults.crash_in_ops
        if crash is not None:
            if crash <= 0:
                self.faults.crash_in_ops = None
                raise SimCrash("the process crashed inside a disk operation")
            self.faults.crash_in_ops = crash - 1

    def power_loss(self) -> None:
        """Keep what was synced (module rules); the last unsynced append may survive torn."""
        self.names = dict(self.durable_names)
        for f in {id(f): f for f in self.names.values()}.values():
            written = bytes(f.data)
            kept = f.synced
            if written.startswith(kept) and len(written) > len(kept):
                tail = written[len(kept) :]
                kept = kept + tail[: self.rng.randrange(len(tail) + 1)]
            f.data = bytearray(kept)
            f.synced = kept
        self.version += 1

    def copy(self) -> SimDisk:
        """A frozen view of what a crash would keep now (for read-only replay checks)."""
        other = SimDisk(Random(0), self.clock)
        other.dirs = set(self.dirs)
        clones = {id(f): SimFile(bytearray(f.data), f.synced, f.mtime) for f in self.names.values()}
        other.names = {p: clones[id(f)] for p, f in self.names.items()}
        return other


class SimFileOps:
    """``journal.fileops.FileOps`` on a ``SimDisk``: one per simulated process.

    Args:
        disk: the node's disk.
    """

    def __init__(self, disk: SimDisk) -> None:
        self.disk = disk
        self._fds: dict[int, tuple[SimFile, str]] = {}
        self._next_fd = 3
        self._locks: dict[int, str] = {}

    # -- reading ------------------------------------------------------------------------------

    def listdir(self, directory: str) -> list[str]:
        if directory not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", directory)
        prefix = directory.rstrip("/") + "/"
        return [p[len(prefix) :] for p in self.disk.names if os.path.dirname(p) + "/" == prefix]

    def makedirs(self, directory: str) -> None:
        path = os.path.abspath(directory)
        while path not in self.disk.dirs:
            self.disk.dirs.add(path)
            path = os.path.dirname(path)

    def exists(self, path: str) -> bool:
        return path in self.disk.names or path in self.disk.dirs

    def size(self, path: str) -> int:
        return len(self._file(path).data)

    def mtime(self, path: str) -> float:
        return self._file(path).mtime

    def read_file(self, path: str) -> bytes:
        return bytes(self._file(path).data)

    def read_from(self, path: str, offset: int) -> bytes:
        return bytes(self._file(path).data[offset:])

    # -- writing ------------------------------------------------------------------------------

    def open_append(self, path: str, *, create: bool) -> int:
        self.disk.tick_op()
        if create:
            if path in self.disk.names:
                raise FileExistsError(errno.EEXIST, "file exists", path)
            if os.path.dirname(path) not in self.disk.dirs:
                raise FileNotFoundError(errno.ENOENT, "no such directory", path)
            self.disk.names[path] = SimFile(mtime=self.disk.clock.time())
            self.disk.version += 1
        f = self._file(path)
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = (f, path)
        return fd

    def write(self, fd: int, data: bytes) -> int:
        self.disk.tick_op()
        f, path = self._open(fd)
        faults = self.disk.faults
        if faults.write_eio_p and self.disk.rng.random() < faults.write_eio_p:
            raise OSError(errno.EIO, "input/output error (simulated)", path)
        if faults.full and data:
            if faults.free_bytes is None:
                faults.free_bytes = self.disk.rng.randrange(512)
            if faults.free_bytes == 0:
                raise OSError(errno.ENOSPC, "no space left on device (simulated)", path)
            data = data[: faults.free_bytes]
            faults.free_bytes -= len(data)
        f.data += data
        f.mtime = self.disk.clock.time()
        self.disk.version += 1
        return len(data)

    def fsync(self, fd: int) -> None:
        self.disk.tick_op()
        f, path = self._open(fd)
        faults = self.disk.faults
        self.disk.clock.advance(FSYNC_S + faults.slow_fsync_s)
        if faults.fsync_eio_p and self.disk.rng.random() < faults.fsync_eio_p:
            # Linux may have written some dirty pages before the error, or none: the seed says.
            if self.disk.rng.random() < 0.5:
                f.synced = bytes(f.data)
            raise OSError(errno.EIO, "input/output error on fsync (simulated)", path)
        f.synced = bytes(f.data)

    def truncate(self, fd: int, length: int) -> None:
        self.disk.tick_op()
        f, _ = self._open(fd)
        del f.data[length:]
        self.disk.version += 1

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        self._locks.pop(fd, None)  # closing the lock's descriptor releases the flock

    def rename(self, src: str, dst: str) -> None:
        self.disk.tick_op()
        f = self._file(src)
        del self.disk.names[src]
        self.disk.names[dst] = f
        self.disk.version += 1

    def unlink(self, path: str) -> None:
        self.disk.tick_op()
        self._file(path)
        del self.disk.names[path]
        self.disk.version += 1

    def fsync_dir(self, directory: str) -> None:
        self.disk.tick_op()
        if directory not in self.disk.dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", directory)
        faults = self.disk.faults
        self.disk.clock.advance(FSYNC_S + faults.slow_fsync_s)
        if faults.fsync_eio_p and self.disk.rng.random() < faults.fsync_eio_p:
            raise OSError(errno.EIO, "input/output error on fsync (simulated)", directory)
        durable = self.disk.durable_names
        for path in [p for p in durable if os.path.dirname(p) == directory]:
            del durable[path]
        for path, f in self.disk.names.items():
            if os.path.dirname(path) == directory:
                durable[path] = f

    def restrict_to_owner(self, directory: str) -> int | None:
        del directory  # the simulated disk has one owner and no modes
        return None

    def lock(self, path: str) -> int:
        if path in self._locks.values():
            raise BlockingIOError(errno.EWOULDBLOCK, "locked", path)
        fd = self._next_fd
        self._next_fd += 1
        self._locks[fd] = path
        return fd

    # -- helpers ------------------------------------------------------------------------------

    def _file(self, path: str) -> SimFile:
        f = self.disk.names.get(path)
        if f is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return f

    def _open(self, fd: int) -> tuple[SimFile, str]:
        entry = self._fds.get(fd)
        if entry is None:
            raise OSError(errno.EBADF, "bad file descriptor", str(fd))
        return entry
