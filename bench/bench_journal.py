"""Journal benchmark: commit rate, replay rate, recovery time, and a SIGKILL crash loop.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_journal.py            # everything (~4-5 min)
    PYTHONPATH=. .venv/bin/python bench/bench_journal.py --quick    # smaller sizes, 60 kills

Each figure is printed next to its baseline: commits/s with durability ``always`` and ``none``
against a raw ``os.write`` (+ ``os.fsync``) loop writing the same frame bytes; replay records/s
against a raw ``msgpack.Unpacker`` pass over the same record payloads; recovery (``Journal.open``)
time for 10k and 1M records replayed from empty; then a crash loop that SIGKILLs the crash-test
writer (``tests/journal/crash_writer.py``) at random moments and checks after every kill that no
acknowledged record was lost. (The commit cost with 50 vs 5,000 pods in the state needs the
StateStore and is measured in ``bench/bench_store.py``.)
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from journal import Journal, read_records
from journal.framing import encode_frame
from journal.records import Record, encode_record
from tests.journal.test_crash import check_after_kill, run_and_kill

NODE = "bench-node"
TOPOLOGY = "synthetic:cpus=96,sockets=2,numas=4"


def cause_of(n: int) -> dict[str, Any]:
    """An Allocate request as received: roughly the size of a real one."""
    return {
        "rpc": "Allocate",
        "request": {
            "pod_uid": f"6f1c2a4e-{n:04d}-4c1b-9a57-2d4c5e6f7a8b",
            "pod_namespace": "default",
            "pod_name": f"web-{n}",
            "container_name": "main",
            "container_type": "MAIN",
            "container_index": 0,
            "resource_name": "cpu",
            "resource_requests": {"cpu": 4.0},
            "labels": {"app": "web", "katalyst.kubewharf.io/qos_level": "dedicated_cores"},
            "annotations": {"katalyst.kubewharf.io/memory_enhancement": '{"numa_binding":"true"}'},
        },
    }


def events_of(n: int) -> list[Any]:
    return [
        {
            "kind": "container_allocated",
            "pod_uid": f"6f1c2a4e-{n:04d}-4c1b-9a57-2d4c5e6f7a8b",
            "container": "main",
            "qos_level": "dedicated_cores",
            "cpuset": "4-7",
            "numa_cpus": {0: "4-7"},
            "init_timestamp": "2026-11-29 23:00:00.000000000 +0000 UTC",
        },
        {"kind": "pool_set", "pool": "share", "cpuset": "0-3,8-47"},
    ]


def frames(count: int) -> list[bytes]:
    return [
        encode_frame(encode_record(Record(n, 1.7e9 + n, 100.0 + n, cause_of(n), events_of(n))))
        for n in range(1, count + 1)
    ]


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f}/s"


def journal_commits(directory: Path, count: int, durability: str) -> tuple[float, float]:
    journal, _ = Journal.open(
        str(directory), node_name=NODE, topology_fingerprint=TOPOLOGY, durability=durability
    )  # type: ignore[arg-type]
    with journal:
        started = time.perf_counter()
        for n in range(1, count + 1):
            journal.append(cause_of(n), events_of(n))
        elapsed = time.perf_counter() - started
        return elapsed, journal.stats.fsync.mean_s


def raw_writes(path: Path, data: list[bytes], fsync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        started = time.perf_counter()
        for frame in data:
            os.write(fd, frame)
            if fsync:
                os.fsync(fd)
        return time.perf_counter() - started
    finally:
        os.close(fd)


def bench_commits(scratch: Path, synced: int, unsynced: int) -> None:
    print(f"commits (record of {len(frames(1)[0])} bytes)")
    data = frames(max(synced, unsynced))
    for durability, count in (("always", synced), ("none", unsynced)):
        directory = scratch / f"commits-{durability}"
        elapsed, mean_fsync = journal_commits(directory, count, durability)
        raw = raw_writes(scratch / f"raw-{durability}", data[:count], fsync=durability == "always")
        baseline = "os.write+os.fsync" if durability == "always" else "os.write"
        extra = f"  (mean fsync {mean_fsync * 1e3:.2f} ms)" if durability == "always" else ""
        print(f"  durability {durability:<6} {count:>9,} commits {rate(count, elapsed)}{extra}")
        print(f"  raw {baseline:<17} {count:>9,} writes  {rate(count, raw)}")
        shutil.rmtree(directory)


def write_journal(directory: Path, count: int) -> None:
    journal, _ = Journal.open(
        str(directory), node_name=NODE, topology_fingerprint=TOPOLOGY, durability="none"
    )
    with journal:
        for n in range(1, count + 1):
            journal.append(cause_of(n), events_of(n))


def bench_replay(scratch: Path, count: int) -> None:
    directory = scratch / "replay"
    write_journal(directory, count)
    started = time.perf_counter()
    replayed = sum(1 for _ in read_records(str(directory)))
    journal_s = time.perf_counter() - started
    raw = scratch / "raw.msgpack"
    with raw.open("wb") as handle:
        for record in read_records(str(directory)):
            handle.write(encode_record(record))
    started = time.perf_counter()
    with raw.open("rb") as handle:
        unpacked = sum(1 for _ in msgpack.Unpacker(handle, raw=False, strict_map_key=False))
    raw_s = time.perf_counter() - started
    assert replayed == unpacked == count
    print("replay (checksums, framing, record checks)")
    print(f"  read_records          {count:>9,} records {rate(count, journal_s)}")
    print(f"  raw msgpack.Unpacker  {count:>9,} records {rate(count, raw_s)}")
    shutil.rmtree(directory)


def bench_recovery(scratch: Path, sizes: list[int]) -> None:
    print("recovery (Journal.open, replay from empty, no checkpoint)")
    for count in sizes:
        directory = scratch / f"recovery-{count}"
        started = time.perf_counter()
        write_journal(directory, count)
        write_s = time.perf_counter() - started
        size = sum(p.stat().st_size for p in directory.glob("*.seg"))
        started = time.perf_counter()
        journal, recovery = Journal.open(
            str(directory), node_name=NODE, topology_fingerprint=TOPOLOGY
        )
        open_s = time.perf_counter() - started
        journal.close()
        assert len(recovery.records) == count
        print(
            f"  {count:>9,} records, {size / 2**20:7.1f} MiB: recovered in {open_s:6.2f} s "
            f"({rate(count, open_s).strip()}; written with durability none in {write_s:.1f} s)"
        )
        del recovery
        shutil.rmtree(directory)


def bench_crash_loop(scratch: Path, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    directory = scratch / "crash"
    recovered = acknowledged = 0
    killed_committing = 0
    started = time.perf_counter()
    for _ in range(kills):
        start, acks = run_and_kill(directory, rng)
        if start is not None and start != recovered:
            raise AssertionError(f"writer started at {start}, recovery had {recovered}")
        if acks:
            acknowledged = acks[-1]
            killed_committing += 1
        recovered = check_after_kill(directory, max(acknowledged, recovered))
        acknowledged = recovered
    elapsed = time.perf_counter() - started
    history = sum(1 for _ in read_records(str(directory)))
    assert history == recovered
    print("crash loop (SIGKILL at random moments, durability always)")
    print(
        f"  {kills} kills ({killed_committing} while committing) in {elapsed:.0f} s; "
        f"{recovered:,} records acknowledged and recovered; acknowledged records lost: 0"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and 60 kills")
    parser.add_argument("--kills", type=int, help="SIGKILLs in the crash loop (default 500)")
    parser.add_argument("--skip-big", action="store_true", help="skip the 1M-record recovery")
    parser.add_argument("--dir", help="scratch directory (default: a new temporary one)")
    args = parser.parse_args()
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench-journal-"))
    scratch.mkdir(parents=True, exist_ok=True)
    sizes = [10_000] if args.quick or args.skip_big else [10_000, 1_000_000]
    kills = args.kills if args.kills is not None else (60 if args.quick else 500)
    try:
        bench_commits(scratch, synced=500 if args.quick else 3000, unsynced=20_000)
        bench_replay(scratch, 20_000 if args.quick else 100_000)
        bench_recovery(scratch, sizes)
        bench_crash_loop(scratch, kills, seed=1129)
    finally:
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
