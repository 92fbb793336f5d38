"""The demo's handle on the ``qrmd run`` process: a daemon that dies is reported in one line."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from qrmd.sim.demo.daemon_process import (
    CPUPressureOptions,
    DaemonError,
    DaemonExitedError,
    DaemonOptions,
    DaemonProcess,
)


@pytest.fixture
def work_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="qrmd-dp-", dir="/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def options(work_dir: Path, topology: str) -> DaemonOptions:
    return DaemonOptions(
        state_dir=work_dir / "state",
        socket_dir=work_dir / "sock",
        topology=topology,
        reserved_cpu_cores=0,
        transition_period="1s",
        metrics_address="off",
    )


def test_command_line_is_qrmd_run_with_the_demo_settings(work_dir: Path) -> None:
    argv = options(work_dir, "synthetic:cpus=16,sockets=2,numas=4").argv()
    assert argv[1:4] == ["-m", "qrmd", "run"]
    flags = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert flags == {
        "--state-dir": str(work_dir / "state"),
        "--topology": "synthetic:cpus=16,sockets=2,numas=4",
        "--reserved-cpu-cores": "0",
        "--socket-dir": str(work_dir / "sock"),
        "--transition-period": "1s",
        "--durability": "always",
        "--metrics-address": "off",
        "--log-level": "info",
    }


def test_a_reference_version_is_passed_to_qrmd_run_only_when_given(work_dir: Path) -> None:
    default = options(work_dir, "synthetic:cpus=16,sockets=2,numas=4")
    assert "--reference-version" not in default.argv()
    argv = dataclasses.replace(default, reference_version="v0.5.47").argv()
    assert argv[-2:] == ["--reference-version", "v0.5.47"]


@pytest.mark.parametrize(
    ("version", "want"),
    [
        pytest.param(None, [], id="at v0.5.3 the flag is not given (it is refused there)"),
        pytest.param("v0.5.47", ["--reclaim-metrics-source", "simulated"],
                     id="at v0.5.47 the suppression plugin reads the all-idle figures"),
    ],
)  # fmt: skip
def test_the_reclaim_metrics_source_follows_the_level_with_cpu_pressure_on(
    work_dir: Path, version: str | None, want: list[str]
) -> None:
    pressure = CPUPressureOptions("1s", work_dir / "ev")
    default = options(work_dir, "synthetic:cpus=16,sockets=2,numas=4")
    argv = dataclasses.replace(default, cpu_pressure=pressure, reference_version=version).argv()
    given = argv[argv.index("--reclaim-metrics-source") :][:2] if want else []
    assert given == want
    assert ("--reclaim-metrics-source" in argv) == bool(want)


def test_a_daemon_that_exits_is_reported_with_its_status_and_last_words(work_dir: Path) -> None:
    daemon = DaemonProcess(
        options(work_dir, "synthetic:cpus=15,sockets=2,numas=4"), work_dir / "log"
    )
    daemon.start()
    assert daemon._process is not None
    daemon._process.wait(30)
    with pytest.raises(DaemonExitedError, match=r"exited with status 2: .*invalid cpu number: 15"):
        daemon.check_alive()


def test_an_impossible_state_directory_is_one_line(work_dir: Path) -> None:
    (work_dir / "file").write_text("")
    daemon = DaemonProcess(
        DaemonOptions(work_dir / "file" / "state", work_dir, "sysfs", 0, "1s", "off"),
        work_dir / "log",
    )
    with pytest.raises(
        DaemonError, match=r"cannot create directory .*/file/state: Not a directory"
    ):
        daemon.start()
    assert daemon.pid is None


def test_stop_without_a_daemon_is_a_no_op(work_dir: Path) -> None:
    daemon = DaemonProcess(options(work_dir, "sysfs"), work_dir / "log")
    assert daemon.stop() == 0
    with pytest.raises(DaemonExitedError, match="not started"):
        daemon.check_alive()
