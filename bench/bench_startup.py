"""Restart to serving, step by step, against a bare gRPC server measured in the same run.

Run: ``PYTHONPATH=. python bench/bench_startup.py [--pods N] [--repeats N] [--importtime]``.

The figure is ``bench/bench_wire.py``'s restart row: ``qrmd run`` from exec to its first answered
GetResourcePluginOptions, with ``--pods`` shared pods in its journal, after SIGKILL and after
SIGTERM, durability ``always``, with the metrics and health endpoint off and on (the default,
here on a port the kernel picks), vs a Python process that imports grpc and serves an empty
servicer on a unix socket. Every repeat measures the daemon and the baseline back to back, and
only the medians' ratios are meant to be compared between runs (the machine is shared).

Beside the figure it prints where the time goes, from a probed start (``bench/startup_probe.py``
runs ``qrmd run`` in its interpreter and notes the monotonic clock, which is the parent's
too, around each start-up step):

* interpreter start (exec → this file's first line), imports (``qrmd.cli`` and ``qrmd run``'s
  modules), configuration, the policy context (topology, reserve, QoS), recovery
  (``StateStoreCore.open``), the Allocator's start (its snapshot and ``StartPolicy``), the start
  record, the gRPC server's start, and the rest until the bench's call is answered: each step's
  wall time and the CPU time the process used in it (every thread's; judge changes by the CPU
  column on a shared machine), medians of ``--repeats`` probed starts;
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
    METRICS_ON,
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


#: One row of a probed start: its label, wall seconds and CPU seconds (None: not one process's).
Row = tuple[str, float, float | None]


def breakdown(marks: dict[str, Any], exec_at: float, answered_at: float) -> list[Row]:
    """The probed start as consecutive steps, wall and CPU seconds; nested steps count in their
    parent. The CPU is every thread's of the process (the actors' and gRPC's too)."""
    rows: list[Row] = [("interpreter start", marks["entry"] - exec_at, marks["entry_cpu"])]
    rows.append(
        (
            "imports (to the configuration step)",
            marks["imported"] - marks["entry"],
            marks["imported_cpu"] - marks["entry_cpu"],
        )
    )
    spans = {label: tuple(times) for label, *times in marks["spans"]}
    last, last_cpu = marks["imported"], marks["imported_cpu"]
    for label, _, _ in STEPS:
        if label not in spans:
            continue
        begin, end, cpu_begin, cpu_end = spans[label]
        if label.startswith("supervisor"):
            rows.append(
                ("  (of which supervisor start, all actors)", end - begin, cpu_end - cpu_begin)
            )
            continue
        if begin > last:
            rows.append(("  between steps", begin - last, max(cpu_begin - last_cpu, 0.0)))
        rows.append((label, end - begin, cpu_end - cpu_begin))
        if end > last:
            last, last_cpu = end, cpu_end
    # Negative when the bench's call was answered while the server still checked itself.
    rows.append(
        ("server start returned -> answer (<0: during its GetInfo)", answered_at - last, None)
    )
    return rows


def median_rows(runs: list[list[Row]]) -> list[Row]:
    """Each row's median over probed starts (a row is named by its label and its rank among the
    rows of that label, as "between steps" repeats)."""
    by_key: dict[tuple[str, int], list[Row]] = defaultdict(list)
    order: list[tuple[str, int]] = []
    for rows in runs:
        seen: dict[str, int] = defaultdict(int)
        for row in rows:
            key = (row[0], seen[row[0]])
            seen[row[0]] += 1
            if key not in by_key:
                order.append(key)
            by_key[key].append(row)
    medians: list[Row] = []
    for key in order:
        rows = by_key[key]
        cpus = [cpu for _, _, cpu in rows if cpu is not None]
        medians.append(
            (key[0], median([wall for _, wall, _ in rows]), median(cpus) if cpus else None)
        )
    return medians


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
    # Each restart is measured with the metrics and health endpoint off (the figure's
    # traditional row) and on, as a default ``qrmd run`` on a real node serves it.
    metrics_on = [*python, "-m", "qrmd.cli", *qrmd_run_args(directory, METRICS_ON)[0]]
    variants = {
        "metrics off": daemon,
        "metrics on (the default)": [*metrics_on, "--durability", "always"],
    }
    for tree in trees:  # the bytecode of every tree's modules, the metrics stack's too
        for argv in variants.values():
            if tree != trees[0] or argv is not daemon:
                stop(start(argv, socket, with_writes, tree)[0], signal.SIGTERM)
    keys = [(variant, tree) for variant in variants for tree in trees]
    kill_s: dict[tuple[str, Path], list[float]] = {key: [] for key in keys}
    term_s: dict[tuple[str, Path], list[float]] = {key: [] for key in keys}
    cpu_s: dict[tuple[str, Path], list[float]] = {key: [] for key in keys}
    base_s: list[float] = []
    bare_s: list[float] = []
    for _ in range(repeats):
        for key in keys:
            argv, tree = variants[key[0]], key[1]
            process, _, _ = start(argv, socket, cwd=tree)
            stop(process, signal.SIGKILL)
            process, _, seconds = start(argv, socket, cwd=tree)
            kill_s[key].append(seconds)
            cpu_s[key].append(cpu_seconds(process.pid))
            stop(process, signal.SIGTERM)
            process, _, seconds = start(argv, socket, cwd=tree)
            term_s[key].append(seconds)
            cpu_s[key].append(cpu_seconds(process.pid))
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
    for variant, tree in keys:
        print(f"  qrmd of {tree}, {variant}:")
        for label, values in (("after SIGKILL", kill_s), ("after SIGTERM", term_s)):
            figure = median(values[variant, tree])
            against = ""
            if tree != trees[0]:
                mine = median(values[variant, trees[0]])
                against = f"; {trees[0].name} takes {mine / figure:.2f}x of this"
            print(
                f"    restart to serving {label}: {figure:.3f} s vs empty grpc server {base:.3f} s"
                f" = {figure / base:.2f}x (target <= 2x){against}"
            )
        print(f"    CPU time used until serving (both kinds): {median(cpu_s[variant, tree]):.3f} s")
    print(f"  (a bare interpreter, python -c pass: {median(bare_s):.3f} s)")
    marks_path = f"{directory}/marks.json"
    probe = str(ROOT / "bench" / "startup_probe.py")
    probed = [*python, probe, marks_path, *qrmd_run, "--durability", "always"]
    for label, how in (("after SIGKILL", signal.SIGKILL), ("after SIGTERM", signal.SIGTERM)):
        runs: list[list[Row]] = []
        total_s: list[float] = []
        for _ in range(repeats):
            process, _, _ = start(daemon, socket)
            stop(process, how)
            process, exec_at, seconds = start(probed, socket)
            stop(process, signal.SIGTERM)
            with open(marks_path) as handle:
                marks = json.load(handle)
            runs.append(breakdown(marks, exec_at, exec_at + seconds))
            total_s.append(seconds)
        print(
            f"where the time goes, probed starts {label} (medians of {repeats}, "
            f"{median(total_s):.3f} s in all):"
        )
        print(f"  {'step':<56} {'wall':>8}    {'CPU':>8}")
        for step, wall_s, cpu_s_ in median_rows(runs):
            cpu = f"{cpu_s_ * 1000:8.1f} ms" if cpu_s_ is not None else ""
            print(f"  {step:<56} {wall_s * 1000:8.1f} ms {cpu}")


def print_import_shares(python: list[str]) -> None:
    print("import self time by top-level package (python -X importtime inflates it):")
    shares = import_shares(python)
    total = sum(seconds for _, seconds in shares)
    for package, seconds in shares[:20]:
        print(f"  {package:<28} {seconds * 1000:7.1f} ms {seconds / total:6.1%}")
    print(f"  {'all':<28} {total * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
