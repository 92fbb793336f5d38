"""The ``qrmd run`` process the demo drives: started, killed with SIGKILL, restarted, stopped.

The demo runs the real daemon as a child process, exactly as an operator would (the same
flags, a journal with ``--durability always``), so that killing it is a real crash: nothing
of the daemon survives but what it wrote to its state directory. Its log goes to a file next
to the state directory; a daemon that exits on its own is reported with the last lines of it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from policy.cpu.reference import V0_5_47
from qrmd.sim.demo.advisor_phase import AdvisorOptions

__all__ = [
    "BalancerOptions",
    "DaemonError",
    "DaemonExitedError",
    "DaemonOptions",
    "DaemonProcess",
    "PodSourceOptions",
    "pid_is_alive",
    "wait_for_socket",
]

STOP_TIMEOUT_S = 10.0


class DaemonError(Exception):
    """The daemon process could not be started, kept running or stopped; one line says why."""


class DaemonExitedError(DaemonError):
    """The daemon process ended when it should be running, or did not stop when asked."""


@dataclass(frozen=True, slots=True)
class BalancerOptions:
    """The memory balancer's ``qrmd run`` flags: its inputs are files the demo writes."""

    sync_period: str  # --qos-aware-sync-period, a DURATION
    metrics_file: Path  # --numa-metrics-source file:PATH
    memory_cgroup_root: Path  # --memory-cgroup-root (pod cgroups by the cgroupfs driver)
    plugin_registration_dir: Path  # where numa_memory_balancer.sock is served

    def argv(self) -> list[str]:
        """The flags (a dry run: no ``--memory-balance-execute``)."""
        return [
            "--enable-memory-balancer",
            "--qos-aware-sync-period",
            self.sync_period,
            "--numa-metrics-source",
            f"file:{self.metrics_file}",
            "--memory-cgroup-root",
            str(self.memory_cgroup_root),
            "--cgroup-driver",
            "cgroupfs",
            "--plugin-registration-dir",
            str(self.plugin_registration_dir),
        ]


@dataclass(frozen=True, slots=True)
class CPUPressureOptions:
    """The CPU pressure eviction flags: the suppression plugin, no load plugin (its loads would
    come from a simulator here)."""

    min_tolerance_duration: str  # --eviction-suppression-min-tolerance-duration, a DURATION
    plugin_registration_dir: Path  # where cpu-pressure-suppression-plugin.sock is served

    def argv(self) -> list[str]:
        """The flags."""
        return [
            "--enable-cpu-pressure-eviction",
            "--eviction-suppression-enable",
            "--eviction-suppression-min-tolerance-duration",
            self.min_tolerance_duration,
            "--cpu-load-metrics-source",
            "simulated",
            "--plugin-registration-dir",
            str(self.plugin_registration_dir),
        ]


@dataclass(frozen=True, slots=True)
class PodSourceOptions:
    """The pod source's ``qrmd run`` flags: the kubelet simulator's ``/pods`` on loopback,
    and the checkers' periods shortened so the demo sees a residual pod go within seconds."""

    kubelet_port: int  # --kubelet-read-only-port (the simulator's /pods)
    cpuset_cgroup_root: Path  # --cpuset-cgroup-root (the container cgroups the demo writes)
    residual_check_period: str = "500ms"
    residual_max_age: str = "2s"
    cpuset_check_period: str = "1s"

    def argv(self) -> list[str]:
        """The flags."""
        return [
            "--pod-source",
            "kubelet",
            "--kubelet-read-only-port",
            str(self.kubelet_port),
            "--residual-check-period",
            self.residual_check_period,
            "--residual-max-age",
            self.residual_max_age,
            "--cpuset-check-period",
            self.cpuset_check_period,
            "--cpuset-cgroup-root",
            str(self.cpuset_cgroup_root),
        ]


@dataclass(frozen=True, slots=True)
class DaemonOptions:
    """The ``qrmd run`` settings the demo uses."""

    state_dir: Path
    socket_dir: Path
    topology: str
    reserved_cpu_cores: int
    transition_period: str  # a DURATION, e.g. "3s"
    metrics_address: str  # HOST:PORT or "off"
    log_level: str = "info"
    balancer: BalancerOptions | None = None
    pod_source: PodSourceOptions | None = None
    cpu_pressure: CPUPressureOptions | None = None
    advisor: AdvisorOptions | None = None
    #: ``--reference-version``; None leaves the flag out (the daemon's default, v0.5.3).
    reference_version: str | None = None

    def argv(self) -> list[str]:
        """The ``qrmd run`` command line, run with this interpreter."""
        return [
            sys.executable,
            "-m",
            "qrmd",
            "run",
            "--state-dir",
            str(self.state_dir),
            "--topology",
            self.topology,
            "--reserved-cpu-cores",
            str(self.reserved_cpu_cores),
            "--socket-dir",
            str(self.socket_dir),
            "--transition-period",
            self.transition_period,
            "--durability",
            "always",
            "--metrics-address",
            self.metrics_address,
            "--log-level",
            self.log_level,
            *(self.balancer.argv() if self.balancer is not None else ()),
            *(self.pod_source.argv() if self.pod_source is not None else ()),
            *(self.cpu_pressure.argv() if self.cpu_pressure is not None else ()),
            *(self.advisor.argv() if self.advisor is not None else ()),
            *(
                ("--reference-version", self.reference_version)
                if self.reference_version is not None
                else ()
            ),
            # At v0.5.47 the suppression plugin measures the reclaim pool's supply: the demo's
            # all-idle figures make it the pool's size, as v0.5.3 divides by, whatever this
            # machine is doing.
            *(
                ("--reclaim-metrics-source", "simulated")
                if self.cpu_pressure is not None and self.reference_version == V0_5_47
                else ()
            ),
        ]


class DaemonProcess:
    """One ``qrmd run`` child process at a time, its output appended to ``log_path``.

    Args:
        options: the daemon's settings.
        log_path: where its stdout and stderr go (appended across restarts).
    """

    def __init__(self, options: DaemonOptions, log_path: Path) -> None:
        self.options = options
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The running daemon's PID, or None."""
        return self._process.pid if self._process is not None else None

    @property
    def argv(self) -> Sequence[str]:
        """The command line the daemon runs with."""
        return self.options.argv()

    def start(self) -> int:
        """Start the daemon (its own session, so a Ctrl-C of the demo is ours to forward).

        Returns:
            Its PID.

        Raises:
            DaemonError: a daemon is already running, a directory cannot be created, or the
                process cannot be started.
        """
        if self._process is not None and self._process.poll() is None:
            raise DaemonError(f"a qrmd run process is already running (pid {self.pid})")
        directories = [self.options.state_dir, self.options.socket_dir]
        if self.options.balancer is not None:
            directories.append(self.options.balancer.plugin_registration_dir)
        for directory in directories:
            try:
                # Owner only, as the daemon wants its journal directory (it would otherwise
                # tighten it, with a warning, about a directory the demo made).
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise DaemonError(f"cannot create directory {directory}: {exc.strerror}") from None
        try:
            with open(self.log_path, "ab") as log:
                log.write(f"$ {' '.join(self.argv)}\n".encode())
                log.flush()
                self._process = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as exc:
            raise DaemonError(f"cannot start qrmd run: {exc.strerror}") from None
        return self._process.pid

    def check_alive(self) -> None:
        """Raise if the daemon has exited.

        Raises:
            DaemonExitedError: with its exit status and the last lines of its log.
        """
        if self._process is None:
            raise DaemonExitedError("qrmd run is not started")
        status = self._process.poll()
        if status is not None:
            raise DaemonExitedError(
                f"qrmd run exited with status {status}: {self.log_tail() or '(no output)'}"
            )

    def kill(self) -> int:
        """SIGKILL the daemon and reap it: a crash, nothing is flushed or cleaned up.

        Returns:
            The PID that was killed.

        Raises:
            DaemonExitedError: no daemon is running.
        """
        self.check_alive()
        assert self._process is not None
        pid = self._process.pid
        self._process.send_signal(signal.SIGKILL)
        self._process.wait()
        self._process = None
        return pid

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM the daemon and wait for its clean exit.

        Returns:
            Its exit status.

        Raises:
            DaemonExitedError: it did not exit within ``timeout_s`` (it is then killed).
        """
        if self._process is None:
            return 0
        process, self._process = self._process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise DaemonExitedError(
                f"qrmd run (pid {process.pid}) did not stop within {timeout_s:g} s of SIGTERM; "
                "killed it"
            ) from None

    def abandon(self) -> int | None:
        """Leave the daemon running (``--keep``); forget it without stopping it."""
        pid = self.pid
        self._process = None
        return pid

    def log_tail(self, lines: int = 3) -> str:
        """The last ``lines`` lines of the daemon's log, joined with `` | ``."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        # The command lines this class writes before each start are not the daemon's words.
        said = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("$ ")]
        return " | ".join(said[-lines:])

    def log_lines_matching(self, needle: str) -> list[str]:
        """The daemon log's lines that contain ``needle``."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if needle in line]


def wait_for_socket(path: Path, daemon: DaemonProcess, timeout_s: float) -> None:
    """Wait until ``path`` is a socket the daemon created, failing fast if the daemon dies.

    Raises:
        DaemonExitedError: the daemon exited first.
        TimeoutError: no socket within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        daemon.check_alive()
        if path.is_socket():
            return
        time.sleep(0.05)
    raise TimeoutError(f"qrmd run did not create {path} within {timeout_s:g} s")


def pid_is_alive(pid: int) -> bool:
    """Whether a process with this PID exists (for ``--keep`` instructions and tests)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
