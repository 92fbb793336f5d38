"""A setting ``qrmd run`` refuses is one error line on stderr and exit status 2: no log line
before it, nothing written. Each case is a real ``qrmd run`` process (its logging is the one an
operator sees), under a known open-file limit.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.integration.daemon_process import REPO, SYNTH_16_2_4


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        pytest.param(
            ["--reserved-cpu-cores", "200"],
            f"qrmd run: error: --reserved-cpu-cores 200: --topology {SYNTH_16_2_4} has 16 CPUs; "
            "reserve at most 15 (the reclaim pool needs one)",
            id="a reserve larger than the node names the flag and the most it can reserve",
        ),
        pytest.param(
            ["--reserved-cpu-cores", "16"],
            f"qrmd run: error: --reserved-cpu-cores 16: --topology {SYNTH_16_2_4} has 16 CPUs; "
            "reserve at most 15 (the reclaim pool needs one)",
            id="a reserve of every CPU names the flag and the most it can reserve",
        ),
        pytest.param(
            ["--max-connections", "5000"],
            "qrmd run: error: --max-connections 5000 × 1 sockets + 256 descriptors for the rest "
            "of the daemon = 5256, more than the open-file limit 4096 (hard limit 4096); lower "
            "--max-connections or raise `ulimit -Hn` for qrmd",
            id="a connection cap past the open-file limit names the flag and both numbers",
        ),
    ],
)
def test_a_refused_setting_is_one_line_and_writes_nothing(flags: list[str], line: str) -> None:
    with tempfile.TemporaryDirectory(prefix="qrmd-usage-", dir="/tmp") as root:
        state = Path(root) / "state"
        done = subprocess.run(
            [
                "prlimit", "--nofile=4096:4096", "--",
                sys.executable, "-m", "qrmd.cli", "run",
                "--topology", SYNTH_16_2_4,
                "--state-dir", str(state),
                "--socket-dir", str(Path(root) / "k"),
                "--metrics-address", "off",
                *flags,
            ],
            check=False, capture_output=True, text=True, cwd=REPO, timeout=60,
        )  # fmt: skip
        assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")
        assert not state.exists()
