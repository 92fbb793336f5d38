"""Crash loop: SIGKILL a real ``qrmd run`` under kubelet-like load, 500 times, and count what
was lost. It must print ``lost 0`` and ``phantom 0``.

Run from the repository root::

    PYTHONPATH=. .venv/bin/python bench/bench_crash.py               # 500 kills (~15 min)
    PYTHONPATH=. .venv/bin/python bench/bench_crash.py --kills 20    # a quick look

Each cycle starts the daemon on the same state directory (durability ``always``), checks its
allocation listing against everything the clients were told so far, then runs the load — two
client threads, as kubelet and a retrying kubelet would, each allocating new shared pods and
removing acknowledged ones — for a random 0.1-0.6 s, and SIGKILLs it mid-load.

Every answer is kept per pod: an acknowledged Allocate must be there after the restart (unless
an acknowledged RemovePod followed), a refused one or an acknowledged removal must not; a call
left without an answer by the kill (or by the daemon's "no answer in time") is in doubt and
may go either way — the listing then says which, as kubelet's retry would find out.

Printed: kills, acknowledged operations, refused and in-doubt ones, **lost** (acknowledged but
missing after a restart) and **phantom** (refused or removed but present), and the restart
time.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.daemon_process import PluginClient, QrmdProcess, shared_request
from wire.gen import resourceplugin_pb2 as rp

PRESENT, ABSENT, UNKNOWN = "present", "absent", "unknown"


@dataclass
class Model:
    """What each pod must be after a restart, from what the clients were told."""

    expect: dict[str, str] = field(default_factory=dict)
    acknowledged: int = 0
    refused: int = 0
    in_doubt: int = 0
    lost: list[str] = field(default_factory=list)
    phantom: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def outcome(self, pod: str, op: str, result: str) -> None:
        with self.lock:
            if result == "ack":
                self.acknowledged += 1
                self.expect[pod] = PRESENT if op == "allocate" else ABSENT
            elif result == "refused":
                self.refused += 1
                if op == "allocate":
                    self.expect[pod] = ABSENT  # a removal refused leaves the pod as it was
            else:
                self.in_doubt += 1
                self.expect[pod] = UNKNOWN

    def removable(self, rng: random.Random) -> str | None:
        with self.lock:
            present = [p for p, e in self.expect.items() if e == PRESENT]
        return rng.choice(present) if present else None

    def check(self, listed: set[str]) -> None:
        """Compare with a restarted daemon's listing; settle what was in doubt."""
        with self.lock:
            for pod, expected in self.expect.items():
                if expected == PRESENT and pod not in listed:
                    self.lost.append(pod)
                elif expected == ABSENT and pod in listed:
                    self.phantom.append(pod)
            self.phantom.extend(sorted(listed - self.expect.keys()))
            for pod in self.expect:
                self.expect[pod] = PRESENT if pod in listed else ABSENT


class Load:
    """Client threads allocating and removing pods until stopped."""

    def __init__(self, socket_path: str, model: Model, cycle: int, seed: int) -> None:
        self.model = model
        self._socket_path = socket_path
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(cycle, c, seed), daemon=True)
            for c in range(2)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _client(self, cycle: int, c: int, seed: int) -> None:
        rng = random.Random(seed * 7919 + cycle * 31 + c)
        client = PluginClient(Path(self._socket_path))
        n = 0
        try:
            while not self._stop.is_set():
                pod = self.model.removable(rng) if rng.random() < 0.3 else None
                if pod is None:
                    pod, n = f"c{cycle}-t{c}-{n}", n + 1
                    self._call("allocate", pod, client)
                else:
                    self._call("remove", pod, client)
        finally:
            client.close()

    def _call(self, op: str, pod: str, client: PluginClient) -> None:
        try:
            if op == "allocate":
                client.plugin.Allocate(shared_request(pod, 0.1), timeout=2)
            else:
                client.plugin.RemovePod(rp.RemovePodRequest(pod_uid=pod), timeout=2)
        except grpc.RpcError as err:
            details = err.details() or ""
            answered = details.startswith(("Allocate: ", "RemovePod: "))
            if answered and "no answer from the allocator" not in details:
                self.model.outcome(pod, op, "refused")
            else:
                self.model.outcome(pod, op, "doubt")
                self._stop.wait(0.05)
        else:
            self.model.outcome(pod, op, "ack")


def listed_pods(socket_path: str) -> set[str]:
    client = PluginClient(Path(socket_path))
    try:
        return set(client.allocations())
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=500, help="SIGKILLs (default 500)")
    parser.add_argument("--seed", type=int, default=12, help="random seed (default 12)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="qbc", dir="/tmp"))  # short: a socket path
    model = Model()
    restarts: list[float] = []
    started = time.monotonic()
    try:
        for kill in range(args.kills + 1):
            proc = QrmdProcess(work / "state", [work / "k"])
            began = time.monotonic()
            proc.start()
            restarts.append(time.monotonic() - began)
            socket_path = str(proc.socket_paths[0])
            model.check(listed_pods(socket_path))
            if kill == args.kills:
                proc.close()
                break
            load = Load(socket_path, model, kill, args.seed)
            load.start()
            time.sleep(rng.uniform(0.1, 0.6))  # the moment of the kill, at random
            proc.kill()
            load.stop()
            proc.log_path.unlink(missing_ok=True)
            if (kill + 1) % 50 == 0:
                print(
                    f"  {kill + 1} kills: {model.acknowledged} acknowledged, "
                    f"lost {len(model.lost)}, phantom {len(model.phantom)}",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"kills                     {args.kills}")
    print(f"acknowledged operations   {model.acknowledged}")
    print(f"refused                   {model.refused}")
    print(f"in doubt (no answer)      {model.in_doubt}")
    print(f"lost                      {len(model.lost)}")
    print(f"phantom                   {len(model.phantom)}")
    print(
        f"restart to serving        median {statistics.median(restarts):.2f} s, "
        f"max {max(restarts):.2f} s; {time.monotonic() - started:.0f} s in all"
    )
    if model.lost or model.phantom:
        print(f"LOST {model.lost[:10]} PHANTOM {model.phantom[:10]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
