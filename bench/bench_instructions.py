"""What one Allocate + RemovePod costs in machine instructions, against an empty servicer.

Run: ``PYTHONPATH=. python bench/bench_instructions.py [--loops N] [--pods N]`` (needs
``valgrind``: ``apt-get install valgrind``).

The wall-clock and CPU-time rows of ``bench/bench_wire.py`` swing by 10-30 % between runs of
the same code on a shared virtual machine; an instruction count does not (two runs agree within
about 0.5 %), so it is the measure for telling a few per cent apart. Each side runs twice under
``valgrind --tool=cachegrind --cache-sim=no``, once with no measured loop and once with
``--loops``, in a process of its own; the difference divided by the loops is the cost of one
loop, set-up and warm-up cancelled:

* **qrmd**: the in-process daemon of ``bench_wire`` (Allocator, StateStore, PluginServer over a
  real unix socket, durability ``always``) on a node of ``--pods`` pooled shared pods; a loop is
  an Allocate of a new shared pod and its RemovePod from a client in the same process.
* **baseline**: an empty servicer answering qrmd's very replies over the same kind of socket,
  appending and fsyncing 300 B per Allocate and per RemovePod, driven by the same client.

Both counts include the client, gRPC and protobuf; the ratio is the whole process's, and the
difference is qrmd's own work per loop. Instructions are not time (a cache miss costs more
than an add), so this complements the timed rows rather than replacing them. With thousands of
pods the StateStore's background checkpoint may land inside the measured loops (as it does on a
node, once per so many records): the default of 50 pods is the steady comparison.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
WARM_UP_LOOPS = 20
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def _freeze() -> None:
    """Set-up's heap out of the collector's reach (as ``qrmd run`` does once it serves):
    otherwise collections walking it land in the measured loops, in proportion to the pods."""
    gc.collect()
    gc.freeze()


def _loop_qrmd(loops: int, pods: int) -> None:
    import bench_wire  # noqa: PLC0415 (the child process only)
    from bench_grpc import shared_message  # noqa: PLC0415

    from wire.gen import resourceplugin_pb2 as pb  # noqa: PLC0415

    node = bench_wire.ServedNode(pods, pooled=True)
    _freeze()
    try:
        for _ in range(WARM_UP_LOOPS + loops):
            pod = node.new_pod()
            node.allocate(shared_message(pod), timeout=30)
            node.remove(pb.RemovePodRequest(pod_uid=pod), timeout=30)
    finally:
        node.close()


def _loop_baseline(loops: int, pods: int) -> None:
    import bench_wire  # noqa: PLC0415 (the child process only)
    from bench_grpc import shared_message, stub  # noqa: PLC0415

    from wire.gen import resourceplugin_pb2 as pb  # noqa: PLC0415

    # qrmd's very replies, from a small node: a reply does not grow with the pods, and a
    # big node's background work (its checkpoint) would run into the measured loops.
    node = bench_wire.ServedNode(min(pods, 50), pooled=True)
    pod = node.new_pod()
    replies = {
        "Allocate": (pb.ResourceRequest, node.allocate(shared_message(pod), timeout=30)),
        "RemovePod": (pb.RemovePodRequest, node.remove(pb.RemovePodRequest(pod_uid=pod))),
    }
    node.close()
    del node
    _freeze()
    directory = tempfile.mkdtemp(dir="/tmp", prefix="qi")
    try:
        with bench_wire.baseline_server(replies, directory, ("Allocate", "RemovePod")) as channel:
            allocate = stub(channel, "Allocate", pb.ResourceAllocationResponse)
            remove = stub(channel, "RemovePod", pb.RemovePodResponse)
            for serial in range(WARM_UP_LOOPS + loops):
                pod = f"baseline-{serial}"
                allocate(shared_message(pod), timeout=30)
                remove(pb.RemovePodRequest(pod_uid=pod), timeout=30)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _instructions(side: str, loops: int, pods: int) -> int:
    """Instructions of a child process running ``side`` for ``loops`` measured loops."""
    command = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        side,
        "--loops",
        str(loops),
        "--pods",
        str(pods),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _REFS.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"bench_instructions: {side} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=200, help="measured loops (default 200)")
    parser.add_argument("--pods", type=int, default=50, help="pooled pods on the node (50)")
    parser.add_argument("--child", choices=("qrmd", "baseline"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path[:0] = [str(BENCH), os.getcwd()]
    if args.child == "qrmd":
        _loop_qrmd(args.loops, args.pods)
        return
    if args.child == "baseline":
        _loop_baseline(args.loops, args.pods)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench_instructions: needs valgrind (apt-get install valgrind)")
    per_loop = {}
    for side in ("qrmd", "baseline"):
        extra = _instructions(side, args.loops, args.pods) - _instructions(side, 0, args.pods)
        per_loop[side] = extra / args.loops
    ratio = per_loop["qrmd"] / per_loop["baseline"]
    print(
        f"Allocate + RemovePod, {args.pods} pooled pods, durability always "
        f"(instructions per loop, {args.loops} loops, valgrind cachegrind):"
    )
    print(
        f"  qrmd {per_loop['qrmd'] / 1e6:.3f} M   baseline (empty servicer + 2 fsyncs) "
        f"{per_loop['baseline'] / 1e6:.3f} M   ratio {ratio:.2f}x   "
        f"qrmd's own {(per_loop['qrmd'] - per_loop['baseline']) / 1e6:.3f} M"
    )


if __name__ == "__main__":
    main()
