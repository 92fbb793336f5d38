"""Restart to serving, step by step, against a bare gRPC server measured in the same run.

Run: ``PYTHONPATH=. python bench/bench_startup.py [--pods N] [--repeats N] [--importtime]``.

The figure is ``bench/bench_wire.py``'s restart row: ``qrmd run`` from exec to its first answered
GetResourcePluginOptions, with ``--pods`` shared pods in its journal, after SIGKILL and after
SIGTERM, durability ``always``, vs a Python process that imports grpc and serves an empty
servicer on a unix socket. Every repeat measures the daemon and the baseline back to back, and
only the medians' ratios are meant to be compared between runs (the machine is shared).

Beside the figure it prints where the time goes, from a probed start (``bench/startup_probe.py``
runs ``qrmd run`` in its interpreter and notes the monotonic clock, which is the parent's
too, around each start-up step):

* interpreter start (exec → this file's first line), imports (``qrmd.cli`` and ``qrmd run``'s
  modules), configuration, the policy context (topology, reserve, QoS), recovery
  (``StateStoreCore.open``), the Allocator's start (its snapshot and ``StartPolicy``), the start
  record, the gRPC server's start, and the rest until the bench's call is answered;
* with ``--bytecode``, every process reads compiled bytecode (``-X pycache_prefix``, filled by
  this run first) as an installed wheel does; without it, in an environment that sets
  ``PYTHONDONTWRITEBYTECODE`` and a checkout that has no ``__pycache__``, qrmd compiles its
  ~180 modules at every start while grpc's site-packages are compiled;
* with ``--importtime``, the import time by top-level package (``python -X importtime``: it
  inflates every figure alike, so read the shares, not the milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from daemon_process import (  # type: ignore[import-not-found]
    EMPTY_SERVER,
    ROOT,
    fill_journal,
    qrmd_run_args,
    start,
)
from startup_probe import STEPS  # type: ignore[import-not-found]

PYTHON = sys.executable
# --- the parent: starts processes and reads their marks ---------------------------------------


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far: less noisy than wall time on
    a shared machine, so the A/B of ``--against`` prints it too."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(process: subprocess.Popen[bytes], how: signal.Signals) -> None:
    process.send_signal(how)
    process.communicate(timeout=120)


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def breakdown(marks: dict[str, Any], exec_at: float, answered_at: float) -> list[tuple[str, float]]:
    """The probed start as consecutive steps (seconds); nested steps count in their parent."""
    rows = [("interpreter start", marks["entry"] - exec_at)]
    rows.append(("imports (to the configuration step)", marks["imported"] - marks["entry"]))
    spans = {label: (begin, end) for label, begin, end in marks["spans"]}
    last = marks["imported"]
    for label, _, _ in STEPS:
        if label not in spans:
            continue
        begin, end = spans[label]
        if label.startswith("supervisor"):
            rows.append(("  (of which supervisor start, all actors)", end - begin))
            continue
        if begin > last:
            rows.append(("  between steps", begin - last))
        rows.append((label, end - begin))
        last = max(last, end)
    # Negative when the bench's call was answered while the server still checked itself.
    rows.append(("server start returned -> answer (<0: during its GetInfo)", answered_at - last))
    return rows


def import_shares(python: list[str]) -> list[tuple[str, float]]:
    """Self import time by top-level package of ``qrmd run``'s imports (python -X importtime)."""
    done = subprocess.run(
        [*python, "-X", "importtime", "-c", "import qrmd.cli, qrmd.commands.run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    by_package: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, _, name = (part.strip() for part in line[len("import time:") :].split("|"))
        top = name.split(".")[0]
        by_package[top] += int(self_us) / 1e6
    return sorted(by_package.items(), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=5000, help="shared pods in the journal")
    parser.add_argument("--repeats", type=int, default=5, help="restarts of each kind")
    parser.add_argument("--importtime", action="store_true", help="import time by package")
    parser.add_argument(
        "--bytecode",
        action="store_true",
        help="every process (qrmd and the baseline) reads compiled bytecode from a cache this "
        "run fills first, as an installed wheel does (pip compiles on install)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="also restart the qrmd of another checkout (e.g. /work/main) on the same journal, "
        "interleaved with this one, and print this one's ratio to it",
    )
    args = parser.parse_args()
    directory = tempfile.mkdtemp(dir="/tmp", prefix="qs")
    try:
        python = [PYTHON]
        if args.bytecode:
            python = [PYTHON, "-X", f"pycache_prefix={directory}/pycache"]
        trees = [ROOT] if args.against is None else [ROOT, args.against.resolve()]
        run(directory, python, args.pods, args.repeats, trees)
        if args.importtime:
            print_import_shares(python)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run(directory: str, python: list[str], pods: int, repeats: int, trees: list[Path]) -> None:
    qrmd_run, socket = qrmd_run_args(directory)
    daemon = [*python, "-m", "qrmd.cli", *qrmd_run, "--durability", "always"]
    base_socket = f"{directory}/empty.sock"
    empty_server = [*python, "-c", EMPTY_SERVER, base_socket]
    # With a bytecode cache, filling the journal fills it too (writing allowed there only: the
    # prefix keeps the checkouts free of __pycache__); without, the environment is left as is.
    with_writes = dict(os.environ)
    if len(python) > 1:
        with_writes.pop("PYTHONDONTWRITEBYTECODE", None)
    fill_journal([*python, "-m", "qrmd.cli", *qrmd_run], socket, pods, env=with_writes)
    empty, _, _ = start(empty_server, base_socket, env=with_writes)
    empty.kill()
    empty.wait()
    for tree in trees[1:]:  # its bytecode too
        stop(start(daemon, socket, with_writes, tree)[0], signal.SIGTERM)
    kill_s: dict[Path, list[float]] = {tree: [] for tree in trees}
    term_s: dict[Path, list[float]] = {tree: [] for tree in trees}
    cpu_s: dict[Path, list[float]] = {tree: [] for tree in trees}
    base_s: list[float] = []
    bare_s: list[float] = []
    for _ in range(repeats):
        for tree in trees:
            process, _, _ = start(daemon, socket, cwd=tree)
            stop(process, signal.SIGKILL)
            process, _, seconds = start(daemon, socket, cwd=tree)
            kill_s[tree].append(seconds)
            cpu_s[tree].append(cpu_seconds(process.pid))
            stop(process, signal.SIGTERM)
            process, _, seconds = start(daemon, socket, cwd=tree)
            term_s[tree].append(seconds)
            cpu_s[tree].append(cpu_seconds(process.pid))
            stop(process, signal.SIGTERM)
        empty, _, seconds = start(empty_server, base_socket)
        base_s.append(seconds)
        empty.kill()
        empty.wait()
        started = time.monotonic()
        subprocess.run([*python, "-c", "pass"], check=True)
        bare_s.append(time.monotonic() - started)
    base = median(base_s)
    cache = "compiled bytecode cached" if len(python) > 1 else "no bytecode cache"
    print(f"qrmd run, {pods} pods journalled, durability always, {cache}; medians of {repeats}:")
    for tree in trees:
        print(f"  qrmd of {tree}:")
        for label, values in (("after SIGKILL", kill_s[tree]), ("after SIGTERM", term_s[tree])):
            figure = median(values)
            against = ""
            if tree != trees[0]:
                mine = median((kill_s if "KILL" in label else term_s)[trees[0]])
                against = f"; {trees[0].name} takes {mine / figure:.2f}x of this"
            print(
                f"    restart to serving {label}: {figure:.3f} s vs empty grpc server {base:.3f} s"
                f" = {figure / base:.2f}x (target <= 2x){against}"
            )
        print(f"    CPU time used until serving (both kinds): {median(cpu_s[tree]):.3f} s")
    print(f"  (a bare interpreter, python -c pass: {median(bare_s):.3f} s)")
    marks_path = f"{directory}/marks.json"
    probe = str(ROOT / "bench" / "startup_probe.py")
    probed = [*python, probe, marks_path, *qrmd_run, "--durability", "always"]
    for label, how in (("after SIGKILL", signal.SIGKILL), ("after SIGTERM", signal.SIGTERM)):
        process, _, _ = start(daemon, socket)
        stop(process, how)
        process, exec_at, seconds = start(probed, socket)
        stop(process, signal.SIGTERM)
        with open(marks_path) as handle:
            marks = json.load(handle)
        print(f"where the time goes, one probed start {label} ({seconds:.3f} s in all):")
        for step, step_s in breakdown(marks, exec_at, exec_at + seconds):
            print(f"  {step:<56} {step_s * 1000:8.1f} ms")


def print_import_shares(python: list[str]) -> None:
    print("import self time by top-level package (python -X importtime inflates it):")
    shares = import_shares(python)
    total = sum(seconds for _, seconds in shares)
    for package, seconds in shares[:20]:
        print(f"  {package:<28} {seconds * 1000:7.1f} ms {seconds / total:6.1%}")
    print(f"  {'all':<28} {total * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
