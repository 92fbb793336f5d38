"""kubelet's latency with a healthy and with a sick sys-advisor (issue: "a sick advisor never
stalls or fails kubelet").

Run: ``PYTHONPATH=. python bench/bench_advisor.py [--blocks N] [--per-block N]``.

Five real ``qrmd run --enable-cpu-advisor`` processes run at once, each on a
``synthetic:cpus=96,sockets=2,numas=4`` node with 20 shared pods admitted, each dialling its own
simulated sys-advisor (``qrmd.sim.advisor``, in this process, a result every second):

* **healthy** — answers everything;
* **stalled** — keeps its stream open and sends nothing; AddContainer/RemovePod hang;
* **drop** — ends its stream after every result (every second);
* **garbage** — sends results that §11.6 refuses (a reserve of the wrong size);
* **unavailable** — answers AddContainer and RemovePod with UNAVAILABLE.

The faults are set once every daemon's link is watching; the first block is a warm-up and is
not counted (it holds the one call per sick advisor that waits for
``--cpu-advisor-call-timeout`` before qrmd stops calling it). Then each block measures
``--per-block`` samples of every mode in turn, the modes shuffled per block, so machine noise
hits all modes alike. A sample: ``Allocate`` of a new shared container (qrmd commits it, then
calls AddContainer while its link watches), timed; ``GetTopologyHints`` of a shared container,
timed; ``RemovePod`` of it again, untimed, so the pod count holds. Durability ``none``: the
bench measures qrmd and the advisor, not this machine's fsync.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from qrmd.sim.advisor import Fault, LoadModel, SimNode, SysAdvisorSimulator
from wire.gen import resourceplugin_pb2 as rp
from wire.gen import resourceplugin_pb2_grpc as rp_grpc

TOPOLOGY = "synthetic:cpus=96,sockets=2,numas=4"
NODE = SimNode({0: 24, 1: 24, 2: 24, 3: 24})
BASE_PODS = 20
CALL_TIMEOUT = "2s"
MODES = {
    "healthy": Fault.HEALTHY,
    "stalled": Fault.STALL,
    "drop": Fault.DROP_STREAM,
    "garbage": Fault.INVALID,
    "unavailable": Fault.UNAVAILABLE,
}
QOS = "katalyst.kubewharf.io/qos_level"


def shared(pod: str) -> rp.ResourceRequest:
    return rp.ResourceRequest(
        pod_uid=pod, pod_namespace="bench", pod_name=pod, container_name="app",
        container_type=rp.MAIN, container_index=0, resource_name="cpu",
        resource_requests={"cpu": 1.0}, annotations={QOS: "shared_cores"},
        labels={QOS: "shared_cores"},
    )  # fmt: skip


@dataclass
class Daemon:
    """One ``qrmd run`` and its simulated advisor."""

    mode: str
    directory: Path
    port: int
    sim: SysAdvisorSimulator = field(init=False)
    proc: subprocess.Popen[bytes] = field(init=False)
    stub: rp_grpc.ResourcePluginStub = field(init=False)
    allocate_s: list[float] = field(default_factory=list)
    hints_s: list[float] = field(default_factory=list)
    failures: int = 0
    serial: int = 0

    def start(self) -> None:
        advisor, plugin = self.directory / "adv.sock", self.directory / "plug.sock"
        self.sim = SysAdvisorSimulator(str(advisor), str(plugin), NODE, LoadModel(), 1.0)
        self.sim.start()
        argv = [
            sys.executable, "-m", "qrmd", "run", "--topology", TOPOLOGY,
            "--reserved-cpu-cores", "2", "--state-dir", str(self.directory / "state"),
            "--socket-dir", str(self.directory / "kubelet"), "--durability", "none",
            "--metrics-address", f"127.0.0.1:{self.port}", "--log-level", "warning",
            "--enable-cpu-advisor", "--cpu-advisor-socket", str(advisor),
            "--cpu-plugin-socket", str(plugin), "--cpu-advisor-call-timeout", CALL_TIMEOUT,
        ]  # fmt: skip
        log = open(self.directory / "qrmd.log", "wb")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=dict(os.environ))
        socket = self.directory / "kubelet" / "qrm_cpu_plugin_dynamic.sock"
        wait(socket.exists, 30, f"{self.mode}: qrmd's socket")
        channel = grpc.insecure_channel(f"unix://{socket}")
        self.stub = rp_grpc.ResourcePluginStub(channel)

    def link_state(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith("qrmd_advisor_link_state{") and line.endswith(" 1.0"):
                    return line.split('"')[1]
        return ""

    def sample(self, record: bool) -> None:
        self.serial += 1
        request = shared(f"{self.mode}-{self.serial}")
        try:
            started = time.perf_counter()
            self.stub.Allocate(request, timeout=10)
            allocated = time.perf_counter()
            self.stub.GetTopologyHints(request, timeout=10)
            hinted = time.perf_counter()
            self.stub.RemovePod(rp.RemovePodRequest(pod_uid=request.pod_uid), timeout=10)
        except grpc.RpcError:
            self.failures += 1
            return
        if record:
            self.allocate_s.append(allocated - started)
            self.hints_s.append(hinted - allocated)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.sim.stop()


def wait(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def pct(samples: list[float], p: float) -> float:
    return statistics.quantiles(samples, n=1000)[int(p * 10) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=401, help="blocks, the first a warm-up")
    parser.add_argument("--per-block", type=int, default=10, help="samples per mode and block")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="qbench", dir="/tmp"))
    daemons = [Daemon(mode, root / mode, 19400 + i) for i, mode in enumerate(MODES)]
    try:
        for daemon in daemons:
            daemon.directory.mkdir()
            daemon.start()
        for daemon in daemons:
            wait(lambda d=daemon: d.link_state() == "watching", 30, f"{daemon.mode}: watching")
            for index in range(BASE_PODS):
                daemon.stub.Allocate(shared(f"base-{index}"), timeout=10)
            daemon.sim.set_fault(MODES[daemon.mode], invalid_kind="reserve_size")
        order = list(daemons)
        for block in range(args.blocks):
            random.shuffle(order)
            for daemon in order:
                for _ in range(args.per_block):
                    daemon.sample(record=block > 0)
        report(daemons, args)
    finally:
        for daemon in daemons:
            daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


def report(daemons: list[Daemon], args: argparse.Namespace) -> None:
    healthy = daemons[0]
    base_alloc, base_hints = pct(healthy.allocate_s, 99), pct(healthy.hints_s, 99)
    print(
        f"{args.blocks - 1} blocks x {args.per_block} samples per mode (after a warm-up block), "
        f"{BASE_PODS} shared pods, {TOPOLOGY}, call timeout {CALL_TIMEOUT}, durability none"
    )
    header = (
        "| advisor | samples | Allocate p50 ms | Allocate p99 ms | p99 / healthy | "
        "Hints p50 ms | Hints p99 ms | p99 / healthy | Allocate max ms | failed calls |"
    )
    print(header)
    print("|---" * 10 + "|")
    for d in daemons:
        a99, h99 = pct(d.allocate_s, 99), pct(d.hints_s, 99)
        print(
            f"| {d.mode} | {len(d.allocate_s)} | {pct(d.allocate_s, 50):.2f} | {a99:.2f} | "
            f"{a99 / base_alloc:.2f} | {pct(d.hints_s, 50):.2f} | {h99:.2f} | "
            f"{h99 / base_hints:.2f} | {max(d.allocate_s) * 1000:.1f} | {d.failures} |"
        )


if __name__ == "__main__":
    main()
