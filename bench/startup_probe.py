"""The probe of ``bench/bench_startup.py``: runs ``qrmd ARGS`` in this interpreter and writes
the monotonic clock (the parent's too) at this file's first line, after the imports, and around
each start-up step of ``STEPS`` to a JSON file.

Run by ``bench_startup.py`` as ``python bench/startup_probe.py MARKS.json run ...``. Only the
standard library is imported before the first mark, so what follows it is qrmd's own cost.
"""

from __future__ import annotations

import time

ENTRY = time.monotonic()

import importlib  # noqa: E402  (after the first mark, on purpose)
import json  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

#: The probed steps, in start-up order: (label, dotted owner, attribute).
STEPS = (
    ("configuration", "qrmd.commands.run", "config_from_args"),
    ("policy context (topology, reserve, QoS)", "qrmd.daemon", "build_context"),
    ("recovery (StateStoreCore.open)", "actors.state_store", "StateStoreCore.open"),
    ("allocator start (snapshot, StartPolicy)", "qrmd.daemon", "_start_allocator"),
    ("allocator StartPolicy", "qrmd.daemon", "_start_policy"),
    ("supervisor start (all actors)", "actors.supervisor", "Supervisor.start"),
    ("start record", "qrmd.daemon", "Daemon._journal_start"),
    ("gRPC server start", "wire.plugin_server", "PluginServer.start"),
)


def probe(out_path: str, argv: list[str]) -> int:
    """Run ``qrmd <argv>`` here, writing each step's monotonic start and end to ``out_path``."""
    marks: dict[str, Any] = {"entry": ENTRY}
    import qrmd.cli  # noqa: PLC0415  (timed: the imports of `qrmd run`)
    import qrmd.commands.run  # noqa: PLC0415

    spans: list[tuple[str, float, float]] = []
    marks["spans"] = spans

    def save() -> None:
        with open(out_path, "w") as handle:
            json.dump(marks, handle)

    for label, module_name, attribute in STEPS:
        owner: Any = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = owner.__dict__[name]
        is_classmethod = isinstance(original, classmethod)
        function = original.__func__ if is_classmethod else original

        def timed(*args: Any, _label: str = label, _f: Any = function, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                return _f(*args, **kwargs)
            finally:
                spans.append((_label, started, time.monotonic()))
                save()

        setattr(owner, name, classmethod(timed) if is_classmethod else timed)
    # The steps' modules count as imports: a lazy one is imported here, not in its step.
    marks["imported"] = time.monotonic()
    save()
    return qrmd.cli.main(argv)


if __name__ == "__main__":
    sys.exit(probe(sys.argv[1], sys.argv[2:]))
