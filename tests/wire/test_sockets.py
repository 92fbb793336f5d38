"""Socket files of qrmd's gRPC servers (wire.md §1.2; DESIGN.md "sockets owner-only")."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from wire.sockets import MAX_SOCKET_PATH_BYTES, bind_owner_only, check_socket_path, remove_socket


@pytest.fixture
def short_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="qrmd-so-", dir="/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def server() -> Iterator[grpc.Server]:
    made = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    try:
        yield made
    finally:
        made.stop(grace=None).wait()


def _path_of_length(directory: Path, size: int) -> Path:
    head = len(os.fsencode(directory / "x"))
    return directory / ("x" * (size - head + 1))


@pytest.mark.parametrize(
    ("size", "fits"),
    [
        pytest.param(MAX_SOCKET_PATH_BYTES, True, id="107 bytes fit"),
        pytest.param(MAX_SOCKET_PATH_BYTES + 1, False, id="108 bytes do not"),
    ],
)
def test_socket_path_length(short_dir: Path, size: int, fits: bool) -> None:
    path = _path_of_length(short_dir, size)
    assert len(os.fsencode(path)) == size
    if fits:
        assert check_socket_path(path) == path
    else:
        with pytest.raises(ValueError, match=f"is {size} bytes long; .* limited to 107 bytes"):
            check_socket_path(path)


def test_a_relative_path_is_made_absolute(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(short_dir)
    assert check_socket_path(Path("plugin.sock")) == short_dir / "plugin.sock"


def test_the_longest_path_binds(short_dir: Path, server: grpc.Server) -> None:
    path = _path_of_length(short_dir, MAX_SOCKET_PATH_BYTES)
    assert bind_owner_only(server, path).path == path
    assert stat.S_ISSOCK(path.lstat().st_mode)


def _stale_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as leftover:
        leftover.bind(str(path))


def _stale_file(path: Path) -> None:
    path.write_text("left over")


def _dangling_link(path: Path) -> None:
    path.symlink_to(path.parent / "gone")


def _nothing(path: Path) -> None:
    pass


@pytest.mark.parametrize(
    "leave",
    [
        pytest.param(_nothing, id="binds where nothing is"),
        pytest.param(_stale_socket, id="replaces a stale socket"),
        pytest.param(_stale_file, id="replaces a stale regular file"),
        pytest.param(_dangling_link, id="replaces a dangling link, not its target"),
    ],
)
def test_bind_owner_only(short_dir: Path, server: grpc.Server, leave: object) -> None:
    path = short_dir / "plugin.sock"
    leave(path)  # type: ignore[operator]
    bound = bind_owner_only(server, path)
    info = path.lstat()
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert (bound.device, bound.inode) == (info.st_dev, info.st_ino)


def test_a_missing_directory_is_created(short_dir: Path, server: grpc.Server) -> None:
    path = short_dir / "plugin-socks" / "plugin.sock"
    bind_owner_only(server, path)
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o700 == 0o700
    assert stat.S_ISSOCK(path.lstat().st_mode)


def test_a_directory_in_the_way_is_refused_and_kept(short_dir: Path, server: grpc.Server) -> None:
    path = short_dir / "plugin.sock"
    path.mkdir()
    with pytest.raises(OSError, match="a directory is in the way"):
        bind_owner_only(server, path)
    assert path.is_dir()


def test_remove_socket_removes_only_the_file_it_bound(short_dir: Path, server: grpc.Server) -> None:
    path = short_dir / "plugin.sock"
    bound = bind_owner_only(server, path)
    path.unlink()
    _stale_file(path)  # another process's file now; it must survive
    assert remove_socket(bound) is False and path.exists()
    path.unlink()
    assert remove_socket(bound) is False


def test_remove_socket_removes_its_own_file(short_dir: Path, server: grpc.Server) -> None:
    path = short_dir / "plugin.sock"
    bound = bind_owner_only(server, path)
    assert remove_socket(bound) is True
    assert not path.exists()
