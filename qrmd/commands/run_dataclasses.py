"""The compiled code of the methods ``@dataclass`` generates, kept between starts beside the
interpreter's bytecode (``qrmd run``'s start path; bench/bench_startup.py).

CPython writes each dataclass's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and, for
a frozen one, ``__setattr__`` and ``__delattr__`` as source text and ``exec``s it. ``qrmd run``
defines some 220 dataclasses before it answers kubelet: about 1,300 such texts, whose
compilation was a quarter of the CPU of a restart (90 of 350 ms at 5,000 pods), against a
Python process that imports grpc and serves an empty servicer in 70 ms. The text depends only
on a class's fields and options, so it compiles to the same code at every start: ``install``
gives the ``dataclasses`` module an ``exec`` that runs the code compiled at an earlier start
for a text it has seen, and compiles a new text exactly as ``exec`` does (``"<string>"``,
mode ``exec``, no ``__future__`` flags of the caller: ``dataclasses`` has none); once the
daemon serves, ``finish`` writes what was compiled anew and puts the built-in ``exec`` back
(``qrmd.cli`` installs it for ``qrmd run`` only). The classes and their methods are the same
either way; only the compiling is skipped.

The file follows the rules of the interpreter's own bytecode, so it is trusted exactly as
much: it lives in ``qrmd/commands/__pycache__`` (or under ``sys.pycache_prefix``), is named
by the interpreter's cache tag and starts with its magic number, is written only when the
interpreter writes bytecode (not under ``PYTHONDONTWRITEBYTECODE`` or ``-B``), atomically,
and a missing, foreign or unreadable file is the same as none (every text is compiled, as
without it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import marshal
import os
import sys
import threading
from types import CodeType
from typing import Any

__all__ = ["DataclassCode", "cache_path", "finish", "install", "main", "save", "uninstall"]

#: The file's first bytes: the running interpreter's bytecode magic number, so a file written
#: by another Python is never loaded.
_MAGIC = importlib.util.MAGIC_NUMBER


def cache_path() -> str:
    """Where the code is kept: this module's bytecode file, with ``.methods`` for ``.pyc``
    (``qrmd/commands/__pycache__/run_dataclasses.cpython-311.methods``, or under
    ``sys.pycache_prefix``)."""
    pyc = importlib.util.cache_from_source(__file__)
    return pyc.removesuffix(".pyc") + ".methods"


class DataclassCode:
    """The code of the generated methods, by their source text, and an ``exec`` that uses it.

    Args:
        path: the file it is read from and saved to.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._codes: dict[str, CodeType] = _read(path)
        self._loaded = len(self._codes)
        self._lock = threading.Lock()

    @property
    def kept(self) -> int:
        """How many texts' code it holds."""
        return len(self._codes)

    @property
    def compiled(self) -> int:
        """How many texts were compiled since the file was read (not found in it)."""
        return len(self._codes) - self._loaded

    def exec(
        self, source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /
    ) -> None:
        """``exec`` as ``dataclasses`` calls it: a text found is not compiled again."""
        if isinstance(source, str):
            code = self._codes.get(source)
            if code is None:
                code = compile(source, "<string>", "exec", dont_inherit=True)
                self._codes[source] = code
            source = code
        exec(source, globals, locals)

    def save(self) -> bool:
        """Write the file when texts were compiled anew and the interpreter writes bytecode;
        whether it was written. A failure to write is not an error: the next start compiles."""
        if self.compiled == 0 or sys.dont_write_bytecode:
            return False
        with self._lock:
            data = _MAGIC + marshal.dumps(dict(self._codes))
            temporary = f"{self.path}.{os.getpid()}.tmp"
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                with open(temporary, "wb") as out:
                    out.write(data)
                os.replace(temporary, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                return False
            self._loaded = len(self._codes)
            return True


def _read(path: str) -> dict[str, CodeType]:
    """The code in ``path``; empty when there is none or it is not this interpreter's."""
    try:
        with open(path, "rb") as file:
            data = file.read()
        if not data.startswith(_MAGIC):
            return {}
        codes = marshal.loads(data[len(_MAGIC) :])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(codes, dict):
        return {}
    return {
        text: code
        for text, code in codes.items()
        if isinstance(text, str) and isinstance(code, CodeType)
    }


_installed: DataclassCode | None = None


def install(path: str | None = None) -> DataclassCode:
    """Let ``dataclasses`` take generated methods' code from ``path`` (``cache_path()``); the
    one installed already, if any, stays.

    ``dataclasses`` calls the built-in ``exec`` by its name; a module global of that name
    is found first, and ``uninstall`` removes it again.
    """
    global _installed  # noqa: PLW0603 (one per process, as the dataclasses module is)
    if _installed is None:
        _installed = DataclassCode(path or cache_path())
        dataclasses.exec = _installed.exec  # type: ignore[attr-defined]
    return _installed


def save() -> bool:
    """Save the installed code (``DataclassCode.save``); False when none is installed."""
    return _installed.save() if _installed is not None else False


def finish() -> bool:
    """The start is over (``qrmd run`` serves): save what it compiled and give ``dataclasses``
    the built-in ``exec`` again, releasing the code read (some 4 MiB) for the heap to reuse;
    whether the file was written."""
    saved = save()
    uninstall()
    return saved


def uninstall() -> None:
    """``dataclasses`` compiles every text again (the built-in ``exec``)."""
    global _installed  # noqa: PLW0603
    if _installed is not None:
        _installed = None
        vars(dataclasses).pop("exec", None)


#: What ``qrmd run`` may import at its start, whichever subsystems are enabled: the command,
#: kubelet's server, each subsystem's wiring (``qrmd.daemon.SUBSYSTEMS``) and the metrics
#: endpoint (built right after kubelet's socket is served, so kept here too).
_RUN_MODULES = ("qrmd.cli", "qrmd.commands.run", "wire.plugin_server", "qrmd.daemon")
_METRICS_MODULES = ("qrmd.status.metrics", "qrmd.status.endpoint")


def main() -> int:
    """``python -m qrmd.commands.run_dataclasses``: compile and save the methods of every dataclass
    ``qrmd run`` may define before it serves, as ``pip install`` compiles the modules'
    bytecode: for an installation the daemon cannot write (a read-only image), where it
    would otherwise compile them at every start. Exit status 1 when nothing could be saved."""
    if sys.dont_write_bytecode:
        print(
            "not saved: this Python writes no bytecode (PYTHONDONTWRITEBYTECODE or -B); "
            "run it as pip compiles, without them",
            file=sys.stderr,
        )
        return 1
    installed = install()
    for name in _RUN_MODULES:
        importlib.import_module(name)
    subsystems = importlib.import_module("qrmd.daemon").SUBSYSTEMS
    for module in [entry.module for entry in subsystems] + list(_METRICS_MODULES):
        importlib.import_module(module)
    if installed.compiled and not installed.save():
        print(
            f"could not write {installed.path}: run it as the user that installed qrmd",
            file=sys.stderr,
        )
        return 1
    print(f"{installed.path}: the code of {installed.kept} generated methods")
    return 0


if __name__ == "__main__":
    sys.exit(main())
