"""The probe of ``bench/bench_startup.py``: runs ``qrmd ARGS`` in this interpreter and writes
the monotonic clock (the parent's too) and the process's CPU time at this file's first line and
around each start-up step of ``STEPS`` to a JSON file; the imports are what comes before the
first step.

Run by ``bench_startup.py`` as ``python bench/startup_probe.py MARKS.json run ...``. Only the
standard library is imported before the first mark, and the steps are wrapped as qrmd imports
their modules, so the probed start runs as ``python -m qrmd.cli`` does (the same imports, in
the same order, with the collector on or off as ``qrmd.cli`` decides).
"""

from __future__ import annotations

import time

ENTRY = time.monotonic()
#: The CPU the process used before this file's first line (the interpreter's own start).
ENTRY_CPU = time.process_time()

import importlib.abc  # noqa: E402  (after the first mark, on purpose)
import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

#: The probed steps, in start-up order: (label, dotted owner, attribute).
STEPS = (
    ("configuration", "qrmd.commands.run", "config_from_args"),
    ("policy context (topology, reserve, QoS)", "qrmd.config", "build_context"),
    ("recovery (StateStoreCore.open)", "actors.state_store", "StateStoreCore.open"),
    (
        "allocator start (snapshot, StartPolicy)",
        "qrmd.cpu_plugin.subsystem",
        "CpuPluginWiring._start_allocator",
    ),
    ("allocator StartPolicy", "qrmd.cpu_plugin.subsystem", "CpuPluginWiring._start_policy"),
    ("supervisor start (all actors)", "actors.supervisor", "Supervisor.start"),
    ("start record", "qrmd.store.subsystem", "StoreWiring._journal_start"),
    ("gRPC server start", "wire.plugin_server", "PluginServer.start"),
)


class _TimeSteps(importlib.abc.MetaPathFinder):
    """Wraps each step's function as its module is imported, wherever qrmd imports it: the
    probe imports nothing of qrmd itself, so what runs (and when the collector runs) is what
    ``python -m qrmd.cli`` does."""

    def __init__(
        self, note: Callable[[str, tuple[float, float], tuple[float, float]], None]
    ) -> None:
        self._note = note
        self._steps: dict[str, list[tuple[str, str]]] = {}
        for label, module_name, attribute in STEPS:
            self._steps.setdefault(module_name, []).append((label, attribute))

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self._steps:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        assert spec is not None and spec.loader is not None
        exec_module = spec.loader.exec_module

        def exec_and_wrap(module: Any) -> None:
            exec_module(module)
            for label, attribute in self._steps[name]:
                self._wrap(module, label, attribute)

        spec.loader.exec_module = exec_and_wrap  # type: ignore[method-assign]
        return spec

    def _wrap(self, module: Any, label: str, attribute: str) -> None:
        owner = module
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = owner.__dict__[name]
        is_classmethod = isinstance(original, classmethod)
        function = original.__func__ if is_classmethod else original
        note = self._note

        def timed(*args: Any, **kwargs: Any) -> Any:
            started, cpu_started = time.monotonic(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                note(label, (started, time.monotonic()), (cpu_started, time.process_time()))

        setattr(owner, name, classmethod(timed) if is_classmethod else timed)


def probe(out_path: str, argv: list[str]) -> int:
    """Run ``qrmd <argv>`` here, writing each step's monotonic start and end, and the process's
    CPU time (every thread's) at both, to ``out_path``.

    The imports are what happens before the first step (configuration) begins.
    """
    spans: list[tuple[str, float, float, float, float]] = []
    marks: dict[str, Any] = {"entry": ENTRY, "entry_cpu": ENTRY_CPU, "spans": spans}

    def note(label: str, wall: tuple[float, float], cpu: tuple[float, float]) -> None:
        spans.append((label, *wall, *cpu))
        if label == STEPS[0][0]:
            marks["imported"], marks["imported_cpu"] = wall[0], cpu[0]
        with open(out_path, "w") as handle:
            json.dump(marks, handle)

    sys.meta_path.insert(0, _TimeSteps(note))
    cli = importlib.import_module("qrmd.cli")
    code: int = cli.main(argv)
    return code


if __name__ == "__main__":
    sys.exit(probe(sys.argv[1], sys.argv[2:]))
